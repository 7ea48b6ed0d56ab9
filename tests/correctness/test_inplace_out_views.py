"""In-place ops, ``out=`` arguments (including ones that must be resized) and views that alias
flagos storage, each checked against the same steps on CPU tensors."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

DEVICE = "flagos"


def host_and_device(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        host = (torch.randn(shape, generator=g) * 3).to(dtype)
    else:
        host = torch.randint(-9, 10, shape, generator=g, dtype=dtype)
    return host, host.to(DEVICE)


# ---- in-place -------------------------------------------------------------------------------

INPLACE = {
    "add_": lambda a, b: a.add_(b),
    "add_broadcast": lambda a, b: a.add_(b[0]),
    "sub_alpha": lambda a, b: a.sub_(b, alpha=2),
    "mul_": lambda a, b: a.mul_(b),
    "mul_scalar": lambda a, b: a.mul_(3),
    "div_": lambda a, b: a.div_(b.abs() + 1),
    "clamp_": lambda a, b: a.clamp_(-2, 2),
    "relu_": lambda a, b: a.relu_(),
    "neg_": lambda a, b: a.neg_(),
    "abs_": lambda a, b: a.abs_(),
    "fill_": lambda a, b: a.fill_(7),
    "zero_": lambda a, b: a.zero_(),
    "copy_": lambda a, b: a.copy_(b),
    "copy_broadcast": lambda a, b: a.copy_(b[1]),
    "masked_fill_": lambda a, b: a.masked_fill_(b > 0, 5),
    "index_fill_": lambda a, b: a.index_fill_(1, torch.tensor([0, 2], device=a.device), -1),
    "index_add_": lambda a, b: a.index_add_(0, torch.tensor([2, 0], device=a.device), b[:2]),
    "scatter_": lambda a, b: a.scatter_(1, torch.tensor([[1], [0], [3], [2]], device=a.device), b[:, :1]),
    "index_put_": lambda a, b: a.index_put_((torch.tensor([1, 3], device=a.device),), b[0]),
    "setitem": lambda a, b: a.__setitem__((slice(None), 1), b[:, 2]),
    "sigmoid_": lambda a, b: a.sigmoid_(),
    "exp_": lambda a, b: a.exp_(),
    "addcmul_": lambda a, b: a.addcmul_(b, b, value=0.5),
    "t_add_": lambda a, b: a.t().add_(b.t()),
    "unsqueeze_": lambda a, b: a.unsqueeze_(0),
    "transpose_": lambda a, b: a.transpose_(0, 1),
}
FLOAT_ONLY = {"div_", "sigmoid_", "exp_", "addcmul_"}
EXACT = {"sigmoid_": False, "exp_": False, "addcmul_": False}  # GPUs fuse a*b+c (FMA)


INPLACE_PARAMS = [
    pytest.param(name, dtype, id=f"{name}-{dtype_id}")
    for name in sorted(INPLACE)
    for dtype, dtype_id in ((torch.float32, "f32"), (torch.float16, "f16"), (torch.int64, "i64"))
    if dtype.is_floating_point or name not in FLOAT_ONLY
]


@pytest.mark.parametrize("name, dtype", INPLACE_PARAMS)
def test_inplace(name, dtype, assert_same):
    fn = INPLACE[name]
    a_host, a_dev = host_and_device(4, 4, dtype=dtype, seed=1)
    b_host, b_dev = host_and_device(4, 4, dtype=dtype, seed=2)
    want = fn(a_host, b_host)
    ptr = a_dev.untyped_storage().data_ptr()
    got = fn(a_dev, b_dev)
    if name not in ("setitem", "t_add_"):
        assert got is a_dev, "an in-place op returns its own self"
    assert a_dev.untyped_storage().data_ptr() == ptr, "in-place ops keep the storage"
    exact = EXACT.get(name, True)
    assert_same(a_dev, a_host, exact=exact, path="self after the op")
    if got is not None:
        assert_same(got, want, exact=exact)


@pytest.mark.parametrize("view", ["columns", "transposed", "row"])
def test_inplace_on_view_writes_base(view, assert_same):
    pick = {
        "columns": lambda t: t[:, ::2],
        "transposed": lambda t: t.t()[1:],
        "row": lambda t: t.select(0, 2),
    }[view]
    base_host, base_dev = host_and_device(5, 6, seed=3)
    for base in (base_host, base_dev):
        v = pick(base)
        v.mul_(-2).add_(1)
    assert_same(base_dev, base_host, path="base after writing through the view")


# ---- out= -----------------------------------------------------------------------------------

OUT = {
    # name: (fn(out, *inputs), input shapes, out shape, out dtype or None for the input dtype)
    "add": (lambda o, a, b: torch.add(a, b, out=o), [(4, 5), (5,)], (4, 5), None),
    "mul": (lambda o, a, b: torch.mul(a, b, out=o), [(4, 5), (4, 5)], (4, 5), None),
    "exp": (lambda o, a: torch.exp(a, out=o), [(4, 5)], (4, 5), None),
    "clamp": (lambda o, a: torch.clamp(a, -1, 1, out=o), [(4, 5)], (4, 5), None),
    "where": (lambda o, a, b: torch.where(a > 0, a, b, out=o), [(4, 5), (4, 5)], (4, 5), None),
    "sum_dim": (lambda o, a: torch.sum(a, 1, out=o), [(4, 5)], (4,), None),
    "mean_dim": (lambda o, a: torch.mean(a, 0, out=o), [(4, 5)], (5,), None),
    "matmul": (lambda o, a, b: torch.matmul(a, b, out=o), [(3, 4), (4, 5)], (3, 5), None),
    "mm": (lambda o, a, b: torch.mm(a, b, out=o), [(3, 4), (4, 5)], (3, 5), None),
    "bmm": (lambda o, a, b: torch.bmm(a, b, out=o), [(2, 3, 4), (2, 4, 5)], (2, 3, 5), None),
    "cat": (lambda o, a, b: torch.cat([a, b], 0, out=o), [(2, 5), (3, 5)], (5, 5), None),
    "stack": (lambda o, a, b: torch.stack([a, b], 0, out=o), [(2, 5), (2, 5)], (2, 2, 5), None),
    "index_select": (
        lambda o, a: torch.index_select(a, 0, torch.tensor([3, 0, 0], device=a.device), out=o),
        [(4, 5)],
        (3, 5),
        None,
    ),
    "gt": (lambda o, a, b: torch.gt(a, b, out=o), [(4, 5), (5,)], (4, 5), torch.bool),
    "cumsum": (lambda o, a: torch.cumsum(a, 1, out=o), [(4, 5)], (4, 5), None),
}
OUT_EXACT = {
    "exp": False,
    "sum_dim": False,
    "mean_dim": False,
    "matmul": False,
    "mm": False,
    "bmm": False,
    "cumsum": False,
}


@pytest.mark.parametrize("size", ["right", "empty", "wrong"])
@pytest.mark.parametrize("name", sorted(OUT))
def test_out_argument(name, size, assert_same):
    fn, shapes, out_shape, out_dtype = OUT[name]
    inputs = [host_and_device(*s, seed=i) for i, s in enumerate(shapes)]
    dtype = out_dtype or torch.float32
    out_size = {"right": out_shape, "empty": (0,), "wrong": (2, 2)}[size]
    o_host = torch.full(out_size, -123, dtype=dtype) if dtype != torch.bool else torch.zeros(out_size, dtype=dtype)
    o_dev = o_host.to(DEVICE)
    ptr = o_dev.untyped_storage().data_ptr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # resizing a non-empty out= is deprecated, still done
        want = fn(o_host, *[h for h, _ in inputs])
        got = fn(o_dev, *[d for _, d in inputs])
    assert got is o_dev, "out= returns the out tensor itself"
    assert tuple(o_dev.shape) == out_shape
    exact = OUT_EXACT.get(name, True)
    assert_same(o_dev, o_host, exact=exact, path="out")
    assert_same(got, want, exact=exact)
    if size == "right":
        assert o_dev.untyped_storage().data_ptr() == ptr, "an out= of the right size is written in place"


# Ops with several out= tensors run in a child process: a crash there (seen on CUDA) fails these
# tests with the variant that crashed, instead of taking the whole session down.
TUPLE_OUT_CHILD = r"""
import json, os, sys, warnings
import torch, torch_fl

OPS = {
    "max_dim": (lambda a, o: torch.max(a, 1, out=o), (4,)),
    "min_dim": (lambda a, o: torch.min(a, 0, out=o), (5,)),
    "sort": (lambda a, o: torch.sort(a, 1, out=o), (4, 5)),
    "topk": (lambda a, o: torch.topk(a, 2, out=o), (4, 2)),
}
SIZES = {"right": None, "empty": (0,), "wrong": (7,)}
warnings.simplefilter("ignore", UserWarning)  # resizing a non-empty out= is deprecated, still done
a_host = torch.randn(4, 5, generator=torch.Generator().manual_seed(5))
for name, (fn, shape) in OPS.items():
    for size, wrong in SIZES.items():
        os.write(2, f"@@running {name}-{size}\n".encode())
        outs = {}
        for device in ("cpu", "flagos"):
            a = a_host.to(device)
            o = (torch.full(wrong or shape, -5.0, device=device),
                 torch.full(wrong or shape, -5, dtype=torch.long, device=device))
            r = fn(a, o)
            same = r[0] is o[0] and r[1] is o[1]
            outs[device] = [same, str(o[0].device), [t.cpu().tolist() for t in o], [list(t.shape) for t in o]]
        print(json.dumps({"case": f"{name}-{size}", "cpu": outs["cpu"], "flagos": outs["flagos"]}), flush=True)
"""
TUPLE_OUT_CASES = [
    f"{op}-{size}" for op in ("max_dim", "min_dim", "sort", "topk") for size in ("right", "empty", "wrong")
]


@pytest.fixture(scope="module")
def tuple_out_results(tmp_path_factory):
    proc = subprocess.run(
        [sys.executable, "-c", TUPLE_OUT_CHILD],
        cwd=tmp_path_factory.mktemp("tuple_out"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    results = {}
    for line in proc.stdout.splitlines():
        record = json.loads(line)
        results[record["case"]] = record
    running = [line.split()[1] for line in proc.stderr.splitlines() if line.startswith("@@running ")]
    crashed = running[-1] if proc.returncode != 0 and running else None
    return results, crashed, proc


@pytest.mark.parametrize("case", TUPLE_OUT_CASES)
def test_out_tuple(case, tuple_out_results):
    results, crashed, proc = tuple_out_results
    if case not in results:
        where = f"the child died (exit {proc.returncode}) running {crashed}" if crashed else "no result"
        pytest.fail(f"{case}: {where}\n{proc.stderr[-3000:]}")
    record = results[case]
    same, device, values, shapes = record["flagos"]
    assert same, "out= returns the out tensors themselves"
    assert device.startswith("flagos")
    assert shapes == record["cpu"][3]
    assert values == record["cpu"][2]


def test_out_on_view_of_flagos_tensor(assert_same):
    """out= into a column slice writes the base's memory, like on CPU."""
    base_host, base_dev = host_and_device(4, 6, seed=6)
    a_host, a_dev = host_and_device(4, 3, seed=7)
    for base, a in ((base_host, a_host), (base_dev, a_dev)):
        torch.mul(a, 2, out=base[:, ::2])
    assert_same(base_dev, base_host)


# ---- views ----------------------------------------------------------------------------------

VIEWS = {
    "view": lambda t: t.view(6, 4),
    "reshape": lambda t: t.reshape(2, 12),
    "flatten": lambda t: t.flatten(),
    "transpose": lambda t: t.transpose(0, 1),
    "t": lambda t: t.t(),
    "permute": lambda t: t.unsqueeze(0).permute(2, 0, 1),
    "narrow": lambda t: t.narrow(1, 2, 3),
    "select": lambda t: t.select(1, 3),
    "slice": lambda t: t[1:, ::2],
    "getitem_int": lambda t: t[2],
    "ellipsis_none": lambda t: t[..., None, 1:4],
    "diagonal": lambda t: t.diagonal(),
    "unsqueeze": lambda t: t.unsqueeze(1),
    "squeeze": lambda t: t[:1].squeeze(0),
    "unfold": lambda t: t.unfold(1, 2, 2),
    "as_strided": lambda t: t.as_strided((3, 2), (2, 5), 1),
    "movedim": lambda t: t.movedim(0, 1),
    "detach": lambda t: t.detach(),
    "view_dtype": lambda t: t.view(torch.int32),
    "split_first": lambda t: t.split(2, dim=1)[1],
    "chunk_last": lambda t: t.chunk(2, dim=0)[1],
    "unbind": lambda t: t.unbind(1)[2],
    "view_as": lambda t: t.view_as(torch.empty(3, 8)),
    "expand": lambda t: t[:, :1].expand(4, 3),
}
READ_ONLY = {"expand"}  # overlapping memory: no in-place writes


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_view_aliases_flagos_storage(name, assert_same):
    fn = VIEWS[name]
    base_host, base_dev = host_and_device(4, 6, seed=8)
    v_host, v_dev = fn(base_host), fn(base_dev)
    assert v_dev.device == base_dev.device
    assert v_dev.untyped_storage().data_ptr() == base_dev.untyped_storage().data_ptr(), "a view shares storage"
    assert v_dev._base is base_dev or v_dev._base is base_dev._base or name == "detach"
    assert (v_dev.stride(), v_dev.storage_offset()) == (v_host.stride(), v_host.storage_offset())
    assert_same(v_dev, v_host, path="view values")
    # a write into the base shows through the view
    base_host.mul_(2)
    base_dev.mul_(2)
    assert_same(v_dev, v_host, path="view after writing the base")
    if name not in READ_ONLY:
        # a write through the view shows in the base
        v_host.add_(100) if v_host.dtype != torch.int32 else v_host.add_(1 << 20)
        v_dev.add_(100) if v_dev.dtype != torch.int32 else v_dev.add_(1 << 20)
        assert_same(base_dev, base_host, path="base after writing through the view")


def test_view_of_view_and_setitem(assert_same):
    base_host, base_dev = host_and_device(6, 6, seed=9)
    for base in (base_host, base_dev):
        inner = base[1:5].t()[::2]
        inner[0] = 0
        inner[:, 1] = torch.arange(3, dtype=base.dtype, device=base.device)
    assert_same(base_dev, base_host)


def test_layer_of_views_through_functional(assert_same):
    """F.linear on a transposed weight view reads the right elements."""
    w_host, w_dev = host_and_device(3, 5, seed=10)
    x_host, x_dev = host_and_device(2, 3, seed=11)
    assert_same(F.linear(x_dev, w_dev.t()), F.linear(x_host, w_host.t()), exact=False)
