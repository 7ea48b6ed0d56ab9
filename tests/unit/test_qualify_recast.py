"""torch_fl/qualify/generate.py ``recast`` and ``top_up``: a floating dtype with too few samples outside every
input class gets plain ones cast from another floating dtype's, so a failure confined to a class can leave it
served except that class."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch_fl.qualify.calls import Sample  # noqa: E402
from torch_fl.qualify.generate import recast, top_up  # noqa: E402


def sample(*args: object, dtype: str = "float32", source: str = "model:m") -> Sample:
    return Sample("mul.Tensor", args, {}, source, dtype)


def test_plain_samples_of_another_floating_dtype_are_cast() -> None:
    x, index = torch.randn(4, 8), torch.tensor([0, 2])
    stored = [
        sample(x, x.clone()),
        sample(x, x.clone()),  # the same call shape: made once
        sample(x, x[:, :1]),  # broadcast: a class, left out
        sample(x.t(), x.t().clone()),  # strided: left out
        sample(torch.randn(2), index),  # mixed (an index beside its data): left out
        sample(torch.randn(8, dtype=torch.float16), dtype="float16"),  # the target's own
        sample(torch.tensor([1, 2]), torch.tensor([3, 4]), dtype="int64"),  # not floating
    ]
    made = list(recast(stored, "float16"))
    assert [m.describe() for m in made] == ["mul.Tensor(float16[4, 8], float16[4, 8])"]
    assert made[0].dtype == "float16" and made[0].source == "model:m, cast from float32"
    assert torch.equal(made[0].args[0], x.to(torch.float16))
    assert list(recast(stored, "int64")) == [] and list(recast(stored, "bool")) == []


def test_a_dtype_is_topped_up_to_the_finer_verdict_s_count_where_native_takes_the_samples() -> None:
    shapes = [(4, 8), (8,), (2, 3), (5,)]
    stored = [sample(torch.randn(s), torch.randn(s)) for s in shapes]
    bf16 = [  # one plain sample, the rest broadcast: a crash on broadcasts would fail the dtype whole
        sample(torch.randn(4, 8, dtype=torch.bfloat16), torch.randn(4, 8, dtype=torch.bfloat16), dtype="bfloat16"),
        sample(torch.randn(4, 8, dtype=torch.bfloat16), torch.randn(4, 1, dtype=torch.bfloat16), dtype="bfloat16"),
    ]
    samples = stored + bf16
    refused = {"mul.Tensor(bfloat16[8], bfloat16[8])"}  # native refuses one: the next one is taken instead
    taken: list[int] = []

    def add(i: int, s: Sample) -> bool:
        taken.append(i)
        return s.describe() not in refused

    top_up(samples, judged=list(samples), dtypes=["float32", "bfloat16", "float16"], add=add)
    made = [s.describe() for s in samples[len(stored) + len(bf16) :]]
    # bfloat16: one plain, so two more taken, past the shape it has and one native refuses; float32 has four;
    # float16 has none judged
    assert made == [
        "mul.Tensor(bfloat16[8], bfloat16[8])",
        "mul.Tensor(bfloat16[2, 3], bfloat16[2, 3])",
        "mul.Tensor(bfloat16[5], bfloat16[5])",
    ]
    assert taken == [6, 7, 8]
