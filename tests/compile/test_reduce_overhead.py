"""torch.compile(mode="reduce-overhead") on flagos: the hooks that hand flagos graphs to the graph runner
(torch_fl/compile/_torch_compat/cudagraphs.py), checked on every vendor against torch's own functions; the refusal
under the CPU emulation; and, on a GPU vendor (build_tools/node/cuda_node.sh compile runs this file there), compiled
functions replayed through flagos graphs end to end."""

from __future__ import annotations

import types

import pytest
import torch
from torch._dynamo.utils import counters
from torch._inductor import cudagraph_utils

import torch_fl
from torch_fl.compile import graph_runner
from torch_fl.compile._torch_compat import cudagraphs

ON_GPU = torch_fl.accelerator() in ("cuda", "dcu")
gpu_only = pytest.mark.skipif(
    not ON_GPU,
    reason="flagos graphs under reduce-overhead run on CUDA/DCU; this process "
    "runs the CPU emulation, where reduce-overhead is refused (tested below)",
)


def _skips() -> int:
    return counters["inductor"]["cudagraph_skips"]


# ---- the hooks, against torch's own functions (every vendor) ---------------------------------------------------


def test_this_torch_line_has_what_the_hooks_need():
    assert cudagraphs.problems() == []
    assert cudagraphs.skip_log_problems() == []


def _nodes(*names: str) -> list[torch.fx.Node]:
    graph = torch.fx.Graph()
    return [graph.placeholder(name) for name in names]


def test_a_graph_on_one_flagos_device_is_judged_as_one_on_the_vendor_device():
    torch_own = cudagraphs._torch_own(cudagraph_utils.check_multiple_devices_or_any_cpu_nodes)
    check = cudagraphs.devices_hook(torch_own, "cuda")
    a, b = _nodes("a", "b")
    flagos0, flagos1 = torch.device("flagos", 0), torch.device("flagos", 1)
    assert torch_own({flagos0: a}) is not None, "torch alone skips a flagos graph: what the hook is for"
    assert check({flagos0: a}) is None
    assert check({flagos0: a, torch.device("meta"): b}) is None
    mixed = check({flagos0: a, torch.device("cuda", 0): b})
    assert mixed is not None and "multiple devices" in mixed and "flagos" in mixed, "never one device with cuda"
    two = check({flagos0: a, flagos1: b})
    assert two is not None and "type='flagos', index=1" in two and "type='cuda'" not in two, "its own devices"
    with_cpu = check({flagos0: a, torch.device("cpu"): b})
    assert with_cpu is not None and "cpu device (b)" in with_cpu, "torch's own reason for a cpu node"


def test_the_runner_hook_takes_flagos_graphs_and_leaves_others_to_torch():
    made = []

    def torch_own(model, static_input_idxs=(), **kwargs):
        return lambda inputs: ("torch", model(inputs))

    def make_runner(model, static_input_idxs=(), **kwargs):
        made.append(kwargs)
        return lambda inputs: ("flagos", model(inputs))

    hook = cudagraphs.runner_hook(torch_own, make_runner)
    model = lambda inputs: len(inputs)  # noqa: E731
    kwargs = {"device_index": 0, "stack_traces": [], "is_backward": False, "is_inference": True}
    on_cpu = hook(model, (), **kwargs)
    assert [on_cpu([torch.ones(1)]) for _ in range(2)] == [("torch", 1)] * 2
    on_flagos = hook(model, (0,), mutated_input_idxs=(0,), **kwargs)
    assert [on_flagos([torch.ones(1).to("flagos"), 3]) for _ in range(2)] == [("flagos", 2)] * 2
    assert len(made) == 1 and made[0]["mutated_input_idxs"] == (0,), "one runner per graph, given torch's arguments"


def test_a_flagos_backward_never_asks_the_trees_manager():
    seen = []
    hook = cudagraphs.backward_hook(lambda graph, index: seen.append(graph))
    hook(types.SimpleNamespace(device_types={"flagos"}), None)
    cuda_graph = types.SimpleNamespace(device_types={"cuda"})
    hook(cuda_graph, None)
    assert seen == [cuda_graph]


def test_a_flagos_graphs_fail_reasons_are_counted_and_logged_as_cudas():
    def torch_own(example_inputs, compiled_graph, cudagraphs_on, *rest):
        cudagraphs_on.value = False  # torch disables, and for a graph without "cuda" says nothing

    hook = cudagraphs.post_compile_hook(torch_own)
    graph = types.SimpleNamespace(
        device_types={"flagos"},
        disabled_cudagraphs_reason=None,
        cudagraph_info=types.SimpleNamespace(cudagraph_fail_reasons=["non-Tensor inputs"]),
    )
    before = _skips()
    hook([], graph, _Boxed(True), {}, None)
    assert _skips() == before + 1
    hook([], types.SimpleNamespace(**{**vars(graph), "device_types": {"cuda"}}), _Boxed(True), {}, None)
    assert _skips() == before + 1, "cuda graphs keep torch's own handling"


class _Boxed:
    def __init__(self, value: bool) -> None:
        self.value = value

    def __bool__(self) -> bool:
        return self.value


def test_install_puts_every_hook_in_place_once(run_child):
    # in a child: the hooks change torch's functions for the whole process
    child = run_child(
        """
        from torch._inductor import compile_fx, cudagraph_utils, output_code
        from torch_fl.compile._torch_compat import cudagraphs
        for _ in range(2):
            assert cudagraphs.install("cuda", lambda *a, **k: None) == []
        hooked = [compile_fx.cudagraphify, cudagraph_utils.check_multiple_devices_or_any_cpu_nodes,
                  output_code.maybe_handle_backward_generation, output_code.cudagraph_post_compile,
                  output_code.CompiledFxGraph.__init__, output_code.CompiledFxGraph.post_compile]
        report("hooked", [getattr(h, "__flagos__", False) for h in hooked])
        report("once", [getattr(h.__wrapped__, "__flagos__", False) for h in hooked])
        report("installed", cudagraphs.installed())
        """
    )
    assert child.data == {"hooked": [True] * 6, "once": [False] * 6, "installed": True}


def test_inductor_hands_a_flagos_graph_to_the_runner_hook(run_child):
    # Inductor's own path from compile to cudagraphify, on the emulation with the hooks installed by hand and the
    # refusal lifted: the devices hook lets the graph through and the runner hook gets its static (the Linear's
    # parameters) and mutated inputs. The stand-in runner runs the code as is (an emulated graph cannot record
    # C++ kernels), and graph partitions are off (the emulation's C++ nodes are no GPU nodes, so none form).
    child = run_child(
        """
        import torch, torch_fl
        from torch._dynamo.utils import counters
        import torch._inductor.config as inductor_config
        torch_fl.compile.register()
        from torch_fl.compile import graphs
        from torch_fl.compile._torch_compat import cudagraphs
        seen = []
        def make_runner(model, static_input_idxs=(), **kwargs):
            seen.append([sorted(static_input_idxs), list(kwargs["mutated_input_idxs"])])
            return model
        assert cudagraphs.install("cuda", make_runner) == []
        graphs._missing = []
        inductor_config.graph_partition = False
        linear = torch.nn.Linear(8, 8).to("flagos")
        f = torch.compile(lambda x: linear(x).relu(), mode="reduce-overhead")
        x = torch.randn(4, 8).to("flagos")
        report("equal", all(torch.allclose(f(x).cpu(), linear(x).relu().cpu(), atol=1e-5) for _ in range(3)))
        g = torch.compile(lambda x: x.add_(1) * 2, mode="reduce-overhead")
        g(torch.zeros(3).to("flagos"))
        report("seen", seen)
        report("skips", counters["inductor"]["cudagraph_skips"])
        """
    )
    assert child.data == {"equal": True, "seen": [[[0, 1], []], [[], [0]]], "skips": 0}, child.describe()


# ---- the emulation: refused, saying where it runs ---------------------------------------------------------------


@pytest.mark.skipif(ON_GPU, reason="the refusal is the CPU emulation's")
def test_reduce_overhead_is_refused_on_the_emulation_saying_where_it_runs():
    compiled = torch.compile(lambda x: x.sin() * 2, mode="reduce-overhead")
    with pytest.raises(Exception, match="reduce-overhead") as info:
        compiled(torch.randn(4).to("flagos"))
    message = str(info.value)
    assert "CUDA or DCU" in message and "mode='default'" in message and "torch.flagos.graph" in message
    assert not cudagraphs.installed(), "the emulation installs no hook"


# ---- on a GPU vendor: compiled functions through flagos graphs ---------------------------------------------------


@gpu_only
def test_a_compiled_function_replays_its_graph(runners):
    f = lambda x, w: (x @ w).relu() + 1  # noqa: E731
    compiled = torch.compile(f, mode="reduce-overhead")
    w = torch.randn(32, 32).to("flagos")
    before = _skips()
    for _ in range(5):
        x = torch.randn(8, 32).to("flagos")
        torch.testing.assert_close(compiled(x, w), f(x, w), rtol=1e-4, atol=1e-4)
    assert _skips() == before, "no cudagraph skip for a flagos graph"
    assert any(isinstance(rec, graph_runner.Recording) for r in runners for rec in r.recordings.values())


@gpu_only
def test_a_static_cache_is_written_once_per_call(runners):
    cache = torch.zeros(8, 4).to("flagos")
    torch._dynamo.mark_static_address(cache)

    def step(token, position):
        cache.index_copy_(0, position, token)
        return cache.sum(0)

    compiled = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    for pos in range(6):
        total = compiled(torch.full((1, 4), float(pos + 1)).to("flagos"), torch.tensor([pos]).to("flagos"))
        torch.testing.assert_close(total.cpu(), torch.full((4,), float(sum(range(1, pos + 2)))))
    assert runners and runners[0].skipped is None


@gpu_only
def test_dynamic_shapes_record_per_size(runners):
    compiled = torch.compile(lambda x: x.exp().sum(0), mode="reduce-overhead", dynamic=True)
    for n in (4, 4, 4, 9, 9, 9):
        x = torch.randn(n, 16)
        torch.testing.assert_close(compiled(x.to("flagos")).cpu(), x.exp().sum(0), rtol=1e-5, atol=1e-5)
    assert sum(len(r.recordings) for r in runners) >= 2


@gpu_only
def test_a_mutated_input_skips_as_on_cuda(runners):
    compiled = torch.compile(lambda x: x.add_(1).mul(2), mode="reduce-overhead")
    x = torch.zeros(4).to("flagos")
    before = _skips()
    for i in range(3):
        torch.testing.assert_close(compiled(x).cpu(), torch.full((4,), 2.0 * (i + 1)))
    torch.testing.assert_close(x.cpu(), torch.full((4,), 3.0))
    assert _skips() > before


@gpu_only
def test_the_previous_output_is_unreadable_after_the_next_call():
    compiled = torch.compile(lambda x: x * 2, mode="reduce-overhead")
    outs = [compiled(torch.full((4,), float(i)).to("flagos")) for i in range(3)]  # warm-up, capture, replay
    kept = outs[-1].clone()
    latest = compiled(torch.full((4,), 3.0).to("flagos"))
    with pytest.raises(RuntimeError, match="Clone it"):
        outs[-1].cpu()
    torch.testing.assert_close(kept.cpu(), torch.full((4,), 4.0))
    torch.testing.assert_close(latest.cpu(), torch.full((4,), 6.0))


@gpu_only
def test_a_training_step_equals_eager(runners):
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 1)).to("flagos")
    graphed = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 1)).to("flagos")
    graphed.load_state_dict(eager.state_dict())
    compiled = torch.compile(graphed, mode="reduce-overhead")
    for _ in range(4):
        x = torch.randn(8, 16).to("flagos")
        eager(x).square().mean().backward()
        compiled(x).square().mean().backward()
    for p, q in zip(eager.parameters(), graphed.parameters(), strict=True):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5)
    assert sum(1 for r in runners if r.skipped is None) >= 2, "the forward and the backward graphs replay"
