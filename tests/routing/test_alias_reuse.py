"""Vendor aliases reused across calls (csrc/dispatch/alias_pool.h) are indistinguishable from fresh ones.

The router gives each call's vendor aliases back to a pool of its thread, and the next call re-points them at its
own tensors. These checks change what a reused alias could get wrong between two calls (its layout, its storage,
its version counter, its address after a free, its dtype, storage shared between a list's tensors), share tensors
between threads, let a vendor kernel written in Python see an alias, and compare every result with the same
program on the host, with the reuse on and off."""

from __future__ import annotations

import pytest

CHECKS = r"""
import threading
import torch, torch_fl
from torch_fl import _core


def program(dev):
    out = {}
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 6, generator=g).to(dev)
    out["first"] = (x + 1).cpu().tolist()
    x.t_()  # same TensorImpl, new strides
    out["transposed"] = (x * 2).cpu().tolist()
    x.resize_(3, 4)  # same TensorImpl, new sizes (fits the storage)
    out["resized"] = (x + 1).cpu().tolist()
    x.resize_(5, 7)  # grows: new bytes behind the same storage
    x.fill_(0.5)
    out["grown"] = (x + x).cpu().tolist()
    y = torch.arange(6.0).to(dev)
    x.set_(y.untyped_storage(), 0, (2, 3), (3, 1))  # another storage entirely
    out["set"] = (x - 1).cpu().tolist()
    x.as_strided_((3,), (2,), 1)
    out["as_strided"] = (x * 3).cpu().tolist()

    v = torch.zeros(5).to(dev)
    versions = [v._version]
    for _ in range(3):
        v.add_(1)
        versions.append(v._version)
    w = v.detach()  # shares the counter
    w.mul_(2)
    versions.append(v._version)
    v.data = torch.ones(5).to(dev)  # a new counter behind the same Python tensor
    v.add_(1)
    versions += [v._version, w._version]
    out["versions"] = versions
    out["v"] = v.cpu().tolist()
    base = torch.zeros(6).to(dev)
    fresh = []
    for _ in range(20):  # a new tensor (and counter) over the same bytes, often at a freed one's address
        t = torch.empty(0, device=base.device).set_(base.untyped_storage(), 0, (6,), (1,))
        torch._foreach_add_([t], 1.0)  # counted through the vendor alias's counter (a host loop of add_)
        fresh.append(t._version)
        del t
    out["fresh_versions"] = fresh
    modes = []
    for i in range(20):  # the same, alternating with inference tensors, whose dispatch keys differ
        with torch.inference_mode(i % 2 == 1):
            t = torch.empty(0, device=base.device).set_(base.untyped_storage(), 0, (6,), (1,))
            torch._foreach_add_([t], 1.0)
            modes.append(None if t.is_inference() else t._version)
        del t
    out["inference_versions"] = modes
    out["base"] = base.cpu().tolist()

    a = torch.randn(4, requires_grad=True, generator=g).to(dev).detach().requires_grad_()
    s = a.sigmoid()
    s.add_(1)  # modifies what sigmoid's backward saved
    try:
        s.sum().backward()
        out["saved"] = "no error"
    except RuntimeError as e:
        out["saved"] = "modified by an inplace operation" in str(e)

    sums = []
    for i in range(300):  # freed and allocated again: addresses come back with other shapes and dtypes
        dtype = (torch.float32, torch.float64, torch.int32)[i % 3]
        t = (torch.arange(i % 7 + 1) * (i + 1)).to(dtype).to(dev)
        sums.append((t * 2 + t).sum().item())
        del t
    out["sums"] = sums

    c = torch.randn(3, 4, dtype=torch.complex64, generator=g).to(dev)
    for i in range(20):  # views of the same bytes and layout at a freed one's address, conjugated or not
        z = c.conj() if i % 2 else c.view_as(c)
        out.setdefault("conj", []).append(torch.view_as_real(z * 2).cpu().tolist())
        del z

    o = torch.empty(0).to(dev)
    for n in (3, 8, 2):
        torch.add(torch.ones(n).to(dev), torch.full((n,), float(n)).to(dev), out=o)  # out= resized each time
        out.setdefault("out", []).append(o.cpu().tolist())
    return out


def threads(dev):
    g = torch.Generator().manual_seed(1)
    w = torch.randn(8, 8, generator=g).to(dev)  # shared, read by every thread
    xs = [torch.randn(8, 3, generator=g).to(dev) for _ in range(4)]
    results = [None] * 4

    def work(i):
        acc = torch.zeros(8, 3).to(dev)
        for _ in range(200):
            acc = acc + w @ xs[i]
        results[i] = acc.cpu().tolist()

    pool = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return results


kept = []


def twice(x):
    kept.append((x, tuple(x.shape)))  # keeps its argument: it must never change under it
    return x * 2


lib = torch.library.Library("flagos_reuse_test", "DEF")
lib.define("twice(Tensor x) -> Tensor")
lib.impl("twice", twice, "CPU")  # a vendor kernel in Python: it sees the vendor alias itself


def python_kernel(dev):
    kept.clear()
    x = torch.arange(6.0).to(dev)
    results = []
    for i in range(50):
        results.append(torch.ops.flagos_reuse_test.twice(x).cpu().tolist())
        x.resize_((6,) if i % 2 else (2, 3))  # the same tensor, another layout on its next call
    if dev != "cpu":  # on the host the kernel keeps the caller's own tensor, which the resizes do change
        results.append(all(tuple(t.shape) == shape for t, shape in kept))
    return results


report("default_on", _core.alias_reuse())
for name, fn in (("program", program), ("threads", threads), ("python_kernel", python_kernel)):
    want = fn("cpu")
    got_on = fn("flagos")
    got_on_again = fn("flagos")  # every alias of the second run can come from the first
    _core.set_alias_reuse(False)
    got_off = fn("flagos")
    _core.set_alias_reuse(True)
    report(name, {"want": want, "on": got_on, "again": got_on_again, "off": got_off})
"""


@pytest.fixture(scope="module")
def checks(module_child):
    return module_child(CHECKS)


def test_reuse_is_on_by_default(checks):
    assert checks.data["default_on"] is True


@pytest.mark.parametrize("name", ["program", "threads", "python_kernel"])
def test_results_equal_the_host_with_reuse_on_and_off(checks, name):
    data = checks.data[name]
    for arm in ("on", "again", "off"):
        got = data[arm]
        if name == "python_kernel":  # its last entry: did every alias the kernel kept keep its shape
            got, kept_unchanged = got[:-1], got[-1]
            assert kept_unchanged is True, arm
        assert got == data["want"], (name, arm)


def test_versions_and_saved_tensor_checks_follow_the_callers_tensor(checks):
    data = checks.data["program"]
    # the program exercises what it means to: the host counts each write, and catches the modified saved tensor
    assert data["want"]["versions"][:5] == [0, 1, 2, 3, 4], data["want"]["versions"]
    assert data["want"]["saved"] is True
    assert len(set(data["want"]["fresh_versions"])) == 1 and data["want"]["fresh_versions"][0] > 0
    for arm in ("on", "again", "off"):
        assert data[arm]["versions"] == data["want"]["versions"], arm
        assert data[arm]["fresh_versions"] == data["want"]["fresh_versions"], arm
        assert data[arm]["inference_versions"] == data["want"]["inference_versions"], arm


def test_a_python_vendor_kernel_leaves_a_clean_exit(checks):
    # the aliases Python saw are never kept past their call, so nothing is left to release after the interpreter
    assert checks.rc == 0
    assert "Fatal Python error" not in checks.stderr and "Segmentation fault" not in checks.stderr


HEAP = r"""
import torch, torch_fl

def resident_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20

# a backward loop whose kernels allocate 4 MiB buffers on every step, beside the aliases the pool keeps
x = torch.randn(8, 16, 1024).to("flagos")
w = torch.randn(1024, 1024).to("flagos").requires_grad_(True)
marks = {}
for step in range(161):
    w.grad = None
    (x @ w).relu().sum().backward()
    if step in (20, 160):
        marks[step] = resident_mib()
report("grown_mib", marks[160] - marks[20])
"""


def test_reused_aliases_leave_the_host_heap_flat(module_child):
    # alias objects come from slabs of their own (csrc/dispatch/alias_objects.cpp): made with malloc, they split the
    # freed kernel buffers of the emulation's heap and it grew by about 4 MiB a step (600 MiB over these 140 steps)
    child = module_child(HEAP)
    assert child.data["grown_mib"] < 96, child.data


SHARED = r"""
import torch, torch_fl

def overlap_error(device):
    a = torch.arange(5.0).to(device)
    try:  # a list op's arguments sharing a storage: the vendor kernel must see one storage to refuse the overlap
        torch._foreach_add_([a[:4], a[1:]], [a[1:], a[:4]])
    except RuntimeError as e:
        return "single memory location" in str(e)
    return False

# pooled aliases carry earlier calls' tensors: a later call on other tensors, sizes and dtypes gets its own
def later(device):
    for n in (40, 3, 70):
        xs = [torch.full((i % 5 + 1,), float(i)).to(device) for i in range(n)]
        torch._foreach_mul_(xs, 2.0)
    ints = torch.arange(6, dtype=torch.int64).to(device).view(2, 3).t()
    return {"floats": [t.cpu().tolist() for t in xs], "ints": (ints * 3).cpu().tolist()}

# a pooled tensor alias keeps its own storage alias unless its call already has one of the caller's storage:
# calls on views of one storage (an attention's q, k and v) and on separate storages alternate, with out=
# arguments a vendor kernel resizes into memory of its own
def mixed(device):
    out = []
    buf = torch.arange(12.0).to(device)
    for i in range(30):
        q, k, v = buf.view(3, 4).unbind(0)
        out.append(torch.addcmul(q, k, v, value=0.5).cpu().tolist())
        ys = [torch.full((3,), float(i + j)).to(device) for j in range(4)]
        torch._foreach_add_(ys, [buf[:3], buf[3:6], buf[6:9], buf[9:]])
        out.append([y.cpu().tolist() for y in ys])
        o = torch.empty(0).to(device)
        torch.mul(q, k, out=o)
        out.append(o.cpu().tolist())
        buf.add_(1)
    return out

report("shared", {"cpu": overlap_error("cpu"), "flagos": overlap_error("flagos")})
report("later", {"cpu": later("cpu"), "flagos": later("flagos")})
report("mixed", {"cpu": mixed("cpu"), "flagos": mixed("flagos")})
"""


def test_pooled_aliases_keep_shared_storage_and_take_each_callers_layout(module_child):
    child = module_child(SHARED)
    assert child.data["shared"] == {"cpu": True, "flagos": True}
    assert child.data["later"]["flagos"] == child.data["later"]["cpu"]
    assert child.data["mixed"]["flagos"] == child.data["mixed"]["cpu"]
