"""The replay cache under CPU emulation: a provider whose kernels are host functions launched through
torch_fl.replay.launch is recorded, replayed from C++, refused where a replay would not be faithful, verified and
bounded, as the flaggems route is on a GPU (csrc/replay, torch_fl/replay)."""

from __future__ import annotations

import pytest

# A "module function" under emulation: void(const uint32_t grid[3], void** params), here a ctypes callback:
# out[i, j] = a[i, j] + alpha * b[i, j] over float32 with every tensor's strides as parameters.
PROVIDERS = r"""
import ctypes, os, torch, torch_fl

F32 = ctypes.c_float
KERNEL_T = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_void_p))

def _param(params, i, ctype):
    return ctype.from_address(params[i]).value

@KERNEL_T
def add_kernel(grid, params):
    a, b, out = (_param(params, i, ctypes.c_uint64) for i in range(3))
    n0, n1, sa0, sa1, sb0, sb1, so0, so1 = (_param(params, i, ctypes.c_int64) for i in range(3, 11))
    alpha = _param(params, 11, F32)
    for i in range(n0):
        for j in range(n1):
            x = F32.from_address(a + 4 * (i * sa0 + j * sa1)).value
            y = F32.from_address(b + 4 * (i * sb0 + j * sb1)).value
            F32.from_address(out + 4 * (i * so0 + j * so1)).value = x + alpha * y

ADD = ctypes.cast(add_kernel, ctypes.c_void_p).value
SIG = ["*fp32", "*fp32", "*fp32"] + ["i64"] * 8 + ["fp32", "i64"]   # the last one the kernel ignores
python_calls = []

def launch_add(a, b, out, alpha, tag=0):
    b = b.expand(out.shape)          # broadcasting through a view: nothing to record but its strides
    torch_fl.replay.launch(ADD, (1, 1, 1), (1, 1, 1), SIG,
        [a, b, out, out.shape[0], out.shape[1], *a.stride(), *b.stride(), *out.stride(), alpha, tag])

def add(a, b, alpha=1):
    python_calls.append("add")
    out = torch.empty(torch.broadcast_shapes(a.shape, b.shape), dtype=a.dtype, device=a.device)
    launch_add(a, b, out, float(alpha) * SCALE[0])
    return out

def add_(a, b, alpha=1):
    python_calls.append("add_")
    launch_add(a, b, a, float(alpha))
    return a

def add_out(a, b, alpha=1, out=None):
    python_calls.append("add.out")
    launch_add(a, b, out, float(alpha))
    return out

SCALE = [1.0]  # host state the key cannot see: only the verify mode notices when it changes

# Not replayable, each for its own reason.
def reads_host(a, b, alpha=1):
    python_calls.append("reads_host")
    out = torch.empty_like(a)
    launch_add(a, b, out, float(alpha) if float(b.sum()) == float(b.sum()) else 0.0)   # a host read of data
    return out

KEPT = {}
def keeps_buffer(a, b, alpha=1):
    python_calls.append("keeps_buffer")
    if tuple(a.shape) not in KEPT:
        KEPT[tuple(a.shape)] = torch.empty_like(a)
    scratch = KEPT[tuple(a.shape)]   # memory kept between calls
    launch_add(a, b, scratch, float(alpha))
    return scratch

COUNTER = [0]
def random_param(a, b, alpha=1):
    python_calls.append("random_param")
    COUNTER[0] += 1                   # like a philox offset: a launch parameter that changes on every call
    out = torch.empty_like(a)
    launch_add(a, b, out, float(alpha), tag=COUNTER[0])
    return out

def foreach_add(xs, ys, alpha=1):
    python_calls.append("foreach_add")
    outs = [torch.empty_like(x) for x in xs]
    for x, y, o in zip(xs, ys, outs):
        launch_add(x, y, o, 1.0)
    return outs                      # one Tensor[] result: not something a plan returns

# Copies a plan replays through torch's own copy: a permuted argument made contiguous (as a reduction over several
# dimensions does), an argument cloned, and an in-place result written back into the argument with copy_.
def add_via_copies(a, b, alpha=1):
    python_calls.append("add_via_copies")
    a_t = a.t().contiguous()          # a transposed copy of the argument: an allocation, then a copy into it
    out = torch.empty(torch.broadcast_shapes(a.shape, b.shape), dtype=a.dtype, device=a.device)
    launch_add(a_t.t(), b.clone(), out, float(alpha))
    return out

def add_back(a, b, alpha=1):
    python_calls.append("add_back")
    scratch = torch.empty_like(a)
    launch_add(a, b, scratch, float(alpha))
    a.copy_(scratch)                  # the in-place result goes back into the argument
    return a

def copies_kept(a, b, alpha=1):
    python_calls.append("copies_kept")
    if tuple(a.shape) not in KEPT:
        KEPT[tuple(a.shape)] = torch.zeros_like(a)
    out = KEPT[tuple(a.shape)].clone()   # a copy of memory kept between calls: its contents are not the key's
    launch_add(a, b, out, float(alpha))
    return out

torch_fl.register_provider("emu", {"add.Tensor": add, "add_.Tensor": add_, "add.out": add_out,
                                   "_foreach_add.List": foreach_add}, replay=True)
torch_fl.register_provider("emu_py", {"add.Tensor": add}, replay=False)
torch_fl.register_provider("emu_host", {"add.Tensor": reads_host}, replay=True)
torch_fl.register_provider("emu_kept", {"add.Tensor": keeps_buffer}, replay=True)
torch_fl.register_provider("emu_random", {"add.Tensor": random_param}, replay=True)
torch_fl.register_provider("emu_copy", {"add.Tensor": add_via_copies, "add_.Tensor": add_back}, replay=True)
torch_fl.register_provider("emu_copy_kept", {"add.Tensor": copies_kept}, replay=True)

def reload(**overrides):
    for key in [k for k in os.environ if k.startswith("FLAGOS_OP_")]:
        del os.environ[key]
    os.environ.update(overrides)
    torch_fl.reload_routes()
    torch_fl.replay.clear()

gen = torch.Generator().manual_seed(0)
def pair(shape=(4, 3), other=None):
    return torch.randn(shape, generator=gen), torch.randn(other or shape, generator=gen)

def stats_of(op):
    return next((s for s in torch_fl.replay.stats() if s["op"] == op), None)

def calls(label, fn, inputs, *, inplace=False):
    # fn on flagos copies of `inputs`, checked against the same fn on the host
    mark(label)
    del python_calls[:]
    dev = [x.to("flagos") for x in inputs]
    out = fn(*dev)
    mark(label + ":after")
    want = fn(*[x.clone() for x in inputs])
    got = (dev[0] if inplace else out).cpu()
    report(label, {"equal": bool(torch.equal(got, want)), "python_calls": list(python_calls),
                   "same": (out is dev[0]) if inplace else None})
"""

CHECKS = r"""
os.environ["FLAGOS_LOG"] = "dispatch"
reload(FLAGOS_OP_add__Tensor="emu", FLAGOS_OP_add___Tensor="emu", FLAGOS_OP_add__out="emu",
       FLAGOS_OP__foreach_add__List="emu")
for i in range(4):
    calls(f"add{i}", lambda x, y: x + y, pair())
calls("add_scaled", lambda x, y: torch.add(x, y, alpha=2.5), pair())     # another scalar: another key
calls("add_noncontig", lambda x, y: x.t() + y.t(), pair((3, 4)))          # other strides: another key
calls("add_broadcast", lambda x, y: x + y, pair((4, 3), (1, 3)))
calls("add_broadcast_again", lambda x, y: x + y, pair((4, 3), (1, 3)))
calls("add_broadcast_third", lambda x, y: x + y, pair((4, 3), (1, 3)))
for i in range(3):
    calls(f"inplace{i}", lambda x, y: x.add_(y), pair(), inplace=True)
for i in range(3):
    calls(f"out{i}", lambda x, y, o=None: torch.add(x, y, out=torch.empty(4, 3, device=x.device)), pair())
x = torch.randn(4, 3, generator=gen).to("flagos")
for i in range(3):
    mark(f"aliased{i}")
    got = torch.add(x, x)                                                  # x + x is not x + y: its own key
    mark(f"aliased{i}:after")
    report(f"aliased{i}", {"equal": bool(torch.equal(got.cpu(), x.cpu() * 2)), "python_calls": [], "same": None})
for i in range(3):
    calls(f"foreach{i}", lambda x, y: torch._foreach_add([x, x], [y, y])[1], pair())
report("stats_foreach", stats_of("_foreach_add.List"))
report("stats_add", stats_of("add.Tensor"))
report("stats_add_", stats_of("add_.Tensor"))
report("stats_out", stats_of("add.out"))

reload(FLAGOS_OP_add__Tensor="emu_py")
for i in range(3):
    calls(f"not_replayable_provider{i}", lambda x, y: x + y, pair())
report("stats_py", stats_of("add.Tensor"))

reload(FLAGOS_OP_add__Tensor="emu_copy", FLAGOS_OP_add___Tensor="emu_copy")
for i in range(3):
    calls(f"copies{i}", lambda x, y: x + y, pair((4, 3), (1, 3)))
    calls(f"copies_strided{i}", lambda x, y: x.t() + y.t(), pair((3, 4)))
    calls(f"copies_back{i}", lambda x, y: x.add_(y, alpha=0.5), pair(), inplace=True)
report("stats_copies", stats_of("add.Tensor"))

for name in ("emu_host", "emu_kept", "emu_random", "emu_copy_kept"):
    reload(FLAGOS_OP_add__Tensor=name)
    for i in range(5):
        calls(f"{name}{i}", lambda x, y: x + y, pair())
    report(f"stats_{name}", stats_of("add.Tensor"))

reload(FLAGOS_OP_add__Tensor="emu")
torch_fl.replay.configure(enabled=False)
for i in range(3):
    calls(f"disabled{i}", lambda x, y: x + y, pair())
torch_fl.replay.configure(enabled=True, capacity=2)
for n, shape in enumerate(((2, 2), (3, 3), (4, 4), (2, 2))):
    for i in range(3):
        calls(f"bounded{n}_{i}", lambda x, y: x + y, pair(shape))
report("stats_bounded", stats_of("add.Tensor"))
report("settings", torch_fl.replay.settings())
"""

REPLAYED = "emu/replay"


@pytest.fixture(scope="module")
def child(module_child):
    # NLL (below) needs no environment of its own: it runs last in the same child
    return module_child(PROVIDERS + CHECKS + NLL)


def test_every_result_equals_the_host(child):
    bad = {k: v for k, v in child.data.items() if isinstance(v, dict) and v.get("equal") is False}
    assert not bad, bad


def test_first_two_calls_record_then_replay(child):
    # two recordings that agree make the plan; the third call of the key is replayed without Python
    assert child.routes_of("add.Tensor", "add0") == ["emu"]
    assert child.routes_of("add.Tensor", "add1") == ["emu"]
    assert child.routes_of("add.Tensor", "add2") == [REPLAYED]
    assert child.routes_of("add.Tensor", "add3") == [REPLAYED]
    assert child.data["add2"]["python_calls"] == [] and child.data["add1"]["python_calls"] == ["add"]


@pytest.mark.parametrize("label", ["add_scaled", "add_noncontig", "add_broadcast", "aliased0"])
def test_new_scalars_strides_and_aliasing_get_new_keys(child, label):
    assert child.routes_of("add.Tensor", label) == ["emu"], child.describe()


def test_broadcast_and_aliased_keys_replay_too(child):
    assert child.routes_of("add.Tensor", "add_broadcast_third") == [REPLAYED]
    assert child.routes_of("add.Tensor", "aliased2") == [REPLAYED]


def test_in_place_and_out_forms_replay_into_the_callers_tensor(child):
    assert child.routes_of("add_.Tensor", "inplace2") == [REPLAYED]
    assert child.data["inplace2"]["same"] is True
    assert child.routes_of("add.out", "out2") == [REPLAYED]


def test_stats_count_hits_and_keys(child):
    s = child.data["stats_add"]
    assert s["hits"] >= 2 + 1 + 1  # add2, add3, add_broadcast_third, aliased2
    assert s["ready_keys"] == 3  # add, broadcast, aliased (scaled and noncontig recorded once: pending)
    assert s["pending_keys"] == 2 and s["refused_keys"] == 0
    assert child.data["stats_add_"]["hits"] == 1 and child.data["stats_out"]["hits"] == 1


def test_a_provider_without_replay_stays_in_python(child):
    for i in range(3):
        assert child.routes_of("add.Tensor", f"not_replayable_provider{i}") == ["emu_py"]
    assert child.data["stats_py"] is None


@pytest.mark.parametrize(
    "provider, reason",
    [
        ("emu_host", "it runs aten::sum besides its kernels"),
        ("emu_kept", "a kernel uses memory that is neither an argument nor allocated by the call"),
        ("emu_random", "the launches differ from call to call"),
        ("emu_copy_kept", "it copies from memory that is neither an argument nor allocated by the call"),
    ],
)
def test_what_would_not_replay_faithfully_is_refused(child, provider, reason):
    for i in range(5):
        assert child.routes_of("add.Tensor", f"{provider}{i}") == [provider], child.describe()
        assert child.data[f"{provider}{i}"]["python_calls"], "a refused key keeps calling the provider"
    s = child.data[f"stats_{provider}"]
    assert s["hits"] == 0 and s["refused_keys"] == 1
    assert any(why.startswith(reason) for why in s["reasons"]), s["reasons"]


@pytest.mark.parametrize("label, op", [("copies", "add.Tensor"), ("copies_strided", "add.Tensor"),
                                       ("copies_back", "add_.Tensor")])  # fmt: skip
def test_copies_into_arguments_and_allocations_replay(child, label, op):
    assert [child.routes_of(op, f"{label}{i}") for i in range(3)] == [["emu_copy"]] * 2 + [["emu_copy/replay"]]
    assert child.data[f"{label}2"]["python_calls"] == [] and child.data[f"{label}2"]["equal"] is True
    if label == "copies_back":
        assert child.data[f"{label}2"]["same"] is True
    s = child.data["stats_copies"]
    assert s["hits"] == 2 and s["ready_keys"] == 2 and s["refused_keys"] == 0, str(s)


def test_a_list_result_is_refused(child):
    assert [child.routes_of("_foreach_add.List", f"foreach{i}") for i in range(3)] == [["emu"]] * 3
    s = child.data["stats_foreach"]
    assert s["refused_keys"] == 1 and s["hits"] == 0
    assert any(why.startswith("a result is a list") for why in s["reasons"]), s["reasons"]


def test_switched_off_at_run_time(child):
    assert all(child.routes_of("add.Tensor", f"disabled{i}") == ["emu"] for i in range(3))


def test_cache_is_bounded(child):
    s = child.data["stats_bounded"]
    assert child.data["settings"]["capacity"] == 2
    assert s["evictions"] >= 2 and s["ready_keys"] + s["pending_keys"] + s["refused_keys"] <= 2
    # (2, 2) came back after being evicted: recorded again before it replays
    assert [child.routes_of("add.Tensor", f"bounded3_{i}") for i in range(3)] == [["emu"], ["emu"], [REPLAYED]]


VERIFY = r"""
os.environ["FLAGOS_LOG"] = "dispatch"
reload(FLAGOS_OP_add__Tensor="emu")
for i in range(3):
    calls(f"verified{i}", lambda x, y: x + y, pair())
report("stats", stats_of("add.Tensor"))
SCALE[0] = 2.0           # the provider now computes something else than its plan
try:
    calls("stale", lambda x, y: x + y, pair())
    report("stale_error", None)
except RuntimeError as exc:
    report("stale_error", str(exc))
"""


def test_verify_mode_checks_every_replay_against_the_provider(module_child):
    child = module_child(PROVIDERS + VERIFY, env={"FLAGOS_FLAGGEMS_VERIFY": "1"})
    assert child.routes_of("add.Tensor", "verified2") == [REPLAYED]
    assert child.data["verified2"]["equal"] and child.data["verified2"]["python_calls"] == ["add"]
    assert child.data["stats"]["verified"] == 1
    error = child.data["stale_error"]
    assert error and "FLAGOS_FLAGGEMS_VERIFY" in error and "add.Tensor" in error and "result 0" in error


def test_environment_switches_it_off(module_child):
    child = module_child(
        PROVIDERS
        + "reload(FLAGOS_OP_add__Tensor='emu')\n"
        + "\n".join(f"calls('off{i}', lambda x, y: x + y, pair())" for i in range(3)),
        env={"FLAGOS_FLAGGEMS_REPLAY": "0", "FLAGOS_LOG": "dispatch,replay"},
    )
    assert all(child.routes_of("add.Tensor", f"off{i}") == ["emu"] for i in range(3))
    assert any("no provider call went through the replay cache" in line for line in child.lines("[flagos replay]"))


def test_bad_settings_name_the_variable(run_child):
    child = run_child(
        "import torch_fl", env={"FLAGOS_FLAGGEMS_VERIFY": "yes", "FLAGOS_REPLAY_CACHE_SIZE": "0"}, expect_ok=False
    )
    assert "FLAGOS_FLAGGEMS_VERIFY='yes' is not 0 or 1" in child.stderr
    assert "FLAGOS_REPLAY_CACHE_SIZE='0' is out of range" in child.stderr


# nll_loss_backward's weight is a Tensor? argument; autograd passes an absent weight as an undefined tensor, which a
# Python provider receives as None. The kernel reads total_weight, the argument after it: a replay that numbered the
# undefined weight as a slot would hand the kernel the wrong tensor.
NLL = r"""
import torch.nn.functional as F

@KERNEL_T
def nll_backward_kernel(grid, params):
    g, target, total, out = (_param(params, i, ctypes.c_uint64) for i in range(4))
    n, c, ignore = (_param(params, i, ctypes.c_int64) for i in range(4, 7))
    scale = -F32.from_address(g).value / F32.from_address(total).value
    for i in range(n):
        t = ctypes.c_int64.from_address(target + 8 * i).value
        if t != ignore:
            F32.from_address(out + 4 * (i * c + t)).value = scale

NLL_BACKWARD = ctypes.cast(nll_backward_kernel, ctypes.c_void_p).value

def nll_loss_backward(grad_output, x, target, weight, reduction, ignore_index, total_weight):
    python_calls.append(f"nll_loss_backward weight={weight!r}")
    out = torch.zeros_like(x)
    torch_fl.replay.launch(NLL_BACKWARD, (1, 1, 1), (1, 1, 1), ["*fp32", "*i64", "*fp32", "*fp32", "i64", "i64", "i64"],
        [grad_output, target, total_weight, out, x.shape[0], x.shape[1], ignore_index])
    return out

torch_fl.register_provider("emu_nll", {"nll_loss_backward": nll_loss_backward}, replay=True)
os.environ["FLAGOS_LOG"] = "dispatch"
reload(FLAGOS_OP_nll_loss_backward="emu_nll")
for i in range(4):
    logits, target = torch.randn(5, 3, generator=gen), torch.randint(0, 3, (5,), generator=gen)
    x = logits.to("flagos").requires_grad_()
    mark(f"nll{i}")
    F.nll_loss(x, target.to("flagos")).backward()
    mark(f"nll{i}:after")
    ref = logits.clone().requires_grad_()
    F.nll_loss(ref, target).backward()
    report(f"nll{i}", {"equal": bool(torch.equal(x.grad.cpu(), ref.grad)), "python_calls": list(python_calls)})
    del python_calls[:]
report("stats_nll", stats_of("nll_loss_backward"))
"""


def test_an_absent_optional_tensor_from_autograd_replays(child):
    assert [child.routes_of("nll_loss_backward", f"nll{i}") for i in range(4)] == [
        ["emu_nll"],
        ["emu_nll"],
        ["emu_nll/replay"],
        ["emu_nll/replay"],
    ], child.describe()
    assert all(child.data[f"nll{i}"]["equal"] for i in range(4)), child.data
    assert child.data["nll0"]["python_calls"] == ["nll_loss_backward weight=None"]
    assert child.data["stats_nll"]["hits"] == 2 and child.data["stats_nll"]["refused_keys"] == 0
