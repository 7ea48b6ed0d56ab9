"""torch_fl/qualify/distribution.py without a device: the Kolmogorov–Smirnov statistic and its p-value, and the
fixed points of random operators."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch_fl.qualify import distribution, verdict  # noqa: E402
from torch_fl.qualify.calls import Sample  # noqa: E402


def test_the_statistic_is_the_largest_gap_between_the_two_step_functions() -> None:
    # by hand: after 3.0 the first sample's function is 1 and the second's 1/2
    d, _ = distribution.ks_2samp(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.5, 2.5, 3.5, 4.5]))
    assert d == pytest.approx(0.5)
    same = torch.randn(500, generator=torch.Generator().manual_seed(0))
    assert distribution.ks_2samp(same, same) == (0.0, 1.0)


def test_the_p_value_tells_a_shift_from_chance() -> None:
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(4096, generator=g), torch.randn(4096, generator=g)
    assert distribution.ks_2samp(a, b)[1] > distribution.ALPHA
    assert distribution.ks_2samp(a, b + 0.2)[1] < 1e-10
    # the squared uniform values of a biased uniform_: in range, but not uniform
    u, v = torch.rand(4096, generator=g), torch.rand(4096, generator=g)
    assert distribution.ks_2samp(u, v * v)[1] < 1e-10


def draws(values: list[torch.Tensor]) -> list[distribution.Draw]:
    return [(distribution.meta([v]), [v]) for v in values]


def test_a_random_result_out_of_its_range_or_layout_fails_before_its_distribution() -> None:
    func = torch.ops.aten.uniform_.default
    sample = Sample("uniform_", (torch.empty(64),), {}, "generated", "float32")
    native = draws([torch.rand(64) for _ in range(8)])
    assert distribution.judge(sample, func, native, draws([torch.rand(64) for _ in range(8)])).verdict == "pass"
    shifted = distribution.judge(sample, func, native, draws([torch.rand(64) + 1 for _ in range(8)]))
    assert shifted.verdict == verdict.WRONG_VALUES and "outside [0, 1]" in shifted.detail
    strided = distribution.judge(sample, func, native, draws([torch.rand(128)[::2] for _ in range(8)]))
    assert strided.verdict == verdict.WRONG_METADATA and "strides" in strided.detail


def test_dropout_keeps_its_input_times_mask_times_the_scale() -> None:
    func = torch.ops.aten.native_dropout.default
    x = torch.randn(256)
    sample = Sample("native_dropout", (x, 0.5, True), {}, "generated", "float32")
    mask = torch.rand(256) > 0.5
    right = (distribution.meta([x * mask * 2, mask]), [x * mask * 2, mask])
    wrong = (distribution.meta([x * mask, mask]), [x * mask, mask])
    assert distribution.judge(sample, func, [right], [right]).verdict == "pass"
    assert "times its mask" in distribution.judge(sample, func, [right], [wrong]).detail
