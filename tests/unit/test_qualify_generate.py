"""torch_fl/qualify/generate.py without a device: samples made from a schema, plain and laid out, and those an
out= or in-place overload borrows from its functional twin. The host's kernels stand in for native's."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch_fl.qualify import generate  # noqa: E402
from torch_fl.qualify.calls import Sample, resolve_op  # noqa: E402


def first_accepted(op: str, dtype: str) -> Sample:
    """The first candidate the host's kernel runs, as the worker keeps the first that native runs."""
    func, errors = resolve_op(op), []
    for candidate in generate.candidates(func, op, dtype):
        try:
            func(*candidate.args, **candidate.kwargs)
        except Exception as exc:  # noqa: BLE001
            errors.append(str(exc).splitlines()[0])
            continue
        return candidate
    raise AssertionError(f"no candidate of {op} runs: {errors}")


def test_a_schema_gives_samples_of_the_dtype_with_indices_in_range() -> None:
    func = torch.ops.aten.index_select.default
    made = list(generate.candidates(func, "index_select", "bfloat16"))
    assert [s.args[0].shape for s in made][: len(generate.SHAPES)] == [torch.Size(shape) for shape in generate.SHAPES]
    first = made[0]
    assert first.dtype == "bfloat16" and first.args[1] == 0 and first.args[2].dtype == torch.int64
    assert int(first.args[2].max()) < first.args[0].shape[0]
    again = next(generate.candidates(func, "index_select", "bfloat16"))
    assert torch.equal(again.args[0], first.args[0])  # seeded by op and dtype: an index reproduces its sample
    factory = next(generate.candidates(torch.ops.aten.full.default, "full", "int32"))
    assert factory.kwargs["dtype"] == torch.int32 and factory.dtype == "int32"


def test_an_argument_no_value_can_be_made_for_is_the_reason() -> None:
    func = torch.ops.aten.div.Tensor_mode  # rounding_mode is an optional str: None is plausible
    assert next(generate.candidates(func, "div.Tensor_mode", "float32")).kwargs == {"rounding_mode": None}
    with pytest.raises(generate.NoSample, match="'equation' is a str"):
        next(generate.candidates(torch.ops.aten.einsum.default, "einsum", "float32"))


def test_plain_candidates_come_first_and_stay_as_they_were() -> None:
    made = list(generate.candidates(torch.ops.aten.index_select.default, "index_select", "float32"))
    assert [tuple(s.args[0].shape) for s in made] == [*generate.SHAPES, generate.SQUARE, (2, 3, 8, 8)]
    pad = list(generate.candidates(torch.ops.aten.replication_pad3d.default, "replication_pad3d", "float32"))
    assert [tuple(s.args[0].shape) for s in pad] == [*generate.SHAPES, generate.SQUARE, (2, 3, 8, 8, 8)]


@pytest.mark.parametrize(
    ("op", "check"),
    [
        ("reflection_pad2d", lambda s: s.args[1] == [1, 1, 1, 1]),
        ("replication_pad3d", lambda s: s.args[0].dim() == 5 and s.args[1] == [1] * 6),
        ("_upsample_bicubic2d_aa_backward", lambda s: s.args[1] == [8, 8] and s.args[2] == [2, 3, 8, 8]),
        ("avg_pool2d_backward", lambda s: s.args[2:5] == ([1, 1], [1, 1], [0, 0])),
        ("upsample_nearest3d", lambda s: s.args[1] == [8, 8, 8]),
        ("_index_put_impl_", lambda s: s.args[2].shape == s.args[0].shape[1:]),
        ("addmm.out", lambda s: tuple(s.args[1].shape) == generate.SQUARE),
        ("clamp_.Tensor", lambda s: isinstance(s.kwargs.get("min"), torch.Tensor)),
        ("clamp", lambda s: s.kwargs.get("min") == 0.5),
        ("glu_backward", lambda s: s.args[0].shape == (4, 8) and s.args[1].shape == (8, 8) and s.args[2] == 0),
        ("scatter_.reduce", lambda s: s.kwargs["reduce"] == "add"),
        ("nll_loss2d_backward", lambda s: s.args[0].dim() == 0 and s.args[2].shape == (2, 8, 8)),
        ("native_group_norm_backward", lambda s: s.args[2].shape == (2, 1) and s.args[5:8] == (2, 3, 64)),
    ],
)
def test_a_laid_out_candidate_reaches_operators_the_plain_ones_miss(op: str, check: Any) -> None:
    sample = first_accepted(op, "float32")
    assert sample.dtype == "float32" and check(sample), sample


def test_the_spatial_rank_comes_from_the_name_or_the_window_lists() -> None:
    assert generate.spatial_rank(resolve_op("upsample_nearest3d"), "upsample_nearest3d") == 3
    assert generate.spatial_rank(resolve_op("_upsample_bicubic2d_aa"), "_upsample_bicubic2d_aa") == 2
    assert generate.spatial_rank(resolve_op("im2col"), "im2col") == 2  # kernel_size is an int[2]
    assert generate.spatial_rank(resolve_op("atan2"), "atan2") == 0


def test_out_and_in_place_overloads_have_functional_twins() -> None:
    assert [generate.twin(op) for op in ("addmm.out", "clamp_.Tensor", "ceil_", "ceil.out")] == [
        "addmm", "clamp.Tensor", "ceil", "ceil"
    ]  # fmt: skip
    assert [generate.twin(op) for op in ("addmm", "_index_put_impl_", "add.Tensor")] == [None, None, None]


def test_an_out_overload_borrows_its_twins_samples_with_outs_at_the_results_shapes() -> None:
    mat, vec = torch.randn(3, 5), torch.randn(5)
    stored = {
        "addmv": [
            Sample("addmv", (torch.randn(3), mat, vec), {}, "model:m", "float32"),
            Sample("addmv", (torch.randn(3, dtype=torch.bfloat16),), {}, "model:m", "bfloat16"),  # another dtype
        ]
    }
    asked: list[str] = []

    def samples(op: str) -> list[Sample]:
        asked.append(op)
        return stored.get(op, [])

    def run(func: Any, sample: Sample) -> list[torch.Tensor]:
        return [func(*sample.args, **sample.kwargs)]

    func = resolve_op("addmv.out")
    (made,) = generate.borrowed(func, "addmv.out", "float32", samples, run)
    assert asked == ["addmv"] and made.source == "generated from addmv" and made.dtype == "float32"
    assert made.kwargs["out"].shape == (3,) and made.kwargs["out"].dtype == torch.float32
    torch.testing.assert_close(func(*made.args, **made.kwargs), torch.addmv(*made.args))
    refused = list(generate.borrowed(func, "addmv.out", "float32", samples, lambda f, s: None))
    assert refused == []  # native refuses the twin's sample: nothing to borrow
    inplace = resolve_op("clamp_.Tensor")
    stored["clamp.Tensor"] = [Sample("clamp.Tensor", (torch.randn(4), torch.zeros(4)), {}, "opinfo:clamp", "float32")]
    (same,) = generate.borrowed(inplace, "clamp_.Tensor", "float32", samples, run)
    assert same.args is stored["clamp.Tensor"][0].args and same.kwargs == {}
