"""The Inductor features torch gates on the device name ``cuda``, opened to flagos on a GPU vendor
(torch_fl/compile/_torch_compat/features.py).

On the emulation nothing is enabled, and each hook is called directly with fakes where a GPU would be needed:
torch's own gate says no for flagos, the hook says what it says for cuda, and every other device keeps torch's
answer. A torch line whose gate changed keeps that feature off, with a warning naming it, and the others on.
On a GPU vendor (FLAGOS_ACCELERATOR=cuda) every feature is enabled and shows in flagos' generated code.
"""

from __future__ import annotations

import inspect
import types
import warnings

import pytest
import torch
from torch._inductor.utils import get_current_backend

import torch_fl
from torch_fl.compile import _torch_compat
from torch_fl.compile._torch_compat import features

ON_GPU = torch_fl.accelerator() in ("cuda", "dcu")
FLAGOS = torch.device("flagos", 0)


@pytest.fixture(autouse=True)
def registered() -> None:
    torch_fl.compile.register()


def test_every_gate_is_where_the_hooks_expect_it() -> None:
    assert features.feature_problems() == {}


def test_a_feature_newer_than_this_torch_line_is_no_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch, "__version__", "2.11.0+cu130")
    assert "random_4x" not in features.available() and "random_4x" not in features.feature_problems()
    monkeypatch.setattr(torch, "__version__", "2.13.0+cpu")
    assert "random_4x" in features.available()


@pytest.mark.skipif(ON_GPU, reason="the emulation's own gating")
def test_the_emulation_enables_no_feature() -> None:
    assert _torch_compat.enabled_features() == []


class _Node:
    def __init__(self, device: torch.device, gpu: bool) -> None:
        self.device, self.gpu = device, gpu

    def get_device(self) -> torch.device:
        return self.device

    def is_gpu(self) -> bool:
        return self.gpu


def test_reduction_fusion_answers_for_flagos_as_for_cuda() -> None:
    from torch._inductor import scheduler

    if features.gate_of("reduction_fusion").name != "_is_gpu_triton_backend":
        pytest.skip(f"torch {torch.__version__} tests the name inside MixOrderReduction.can_fuse (the widened test)")
    torch_gate = features.original("reduction_fusion")
    hook = _torch_compat.hooked("reduction_fusion", "cuda")
    flagos, cuda = [_Node(FLAGOS, True)] * 2, [_Node(torch.device("cuda", 0), True)] * 2
    assert torch_gate(*flagos) is False
    assert hook(*flagos) is True and hook(*flagos) == torch_gate(*cuda)
    assert hook(_Node(FLAGOS, False), _Node(FLAGOS, False)) is False  # flagos is not a GPU on the emulation
    cpu = [_Node(torch.device("cpu"), False)] * 2
    assert hook(*cpu) == torch_gate(*cpu)
    assert scheduler._is_gpu_triton_backend is torch_gate or ON_GPU


def _tensor(device: str) -> types.SimpleNamespace:
    kind = torch.device(device).type
    return types.SimpleNamespace(device=torch.device(device), is_cuda=kind == "cuda", is_xpu=kind == "xpu")


def test_mm_padding_takes_flagos_matmuls() -> None:
    torch_gate = features.original("mm_padding")
    hook = _torch_compat.hooked("mm_padding", "cuda")
    assert torch_gate(_tensor("flagos:0"), _tensor("flagos:0")) is False
    assert hook(_tensor("flagos:0"), _tensor("flagos:0")) is True
    assert hook(_tensor("cuda:0"), _tensor("cuda:0")) is True
    assert hook(_tensor("cpu"), _tensor("cpu")) is False
    assert hook(_tensor("flagos:0"), _tensor("cpu")) is False


def test_mm_padding_times_a_flagos_addmm_on_its_matmul() -> None:
    """torch times a padded addmm with a bias only where the bias is cuda or xpu (None otherwise, which fails the
    compilation): the hook hands a flagos addmm to torch's timing as its matmul, and every other call as it is."""
    calls = []

    def torch_timing(match: object, mat1: object, mat2: object, op: object, input: object = None) -> bool:
        calls.append((op, input))
        return True

    hook = features._mm_padding_bias(torch_timing, "cuda")
    addmm, mm = torch.ops.aten.addmm, torch.ops.aten.mm
    bias, cuda_bias = _tensor("flagos:0"), _tensor("cuda:0")
    assert hook("match", "a", "b", addmm, bias) is True
    assert hook("match", "a", "b", addmm, cuda_bias) is True
    assert hook("match", "a", "b", mm) is True
    assert calls == [(mm, None), (addmm, cuda_bias), (mm, None)]
    assert features.gate_of("mm_padding_bias") is not None  # this torch line still builds the bias for cuda only


def _softmax_match(device: str) -> types.SimpleNamespace:
    value = types.SimpleNamespace(device=torch.device(device))
    return types.SimpleNamespace(kwargs={"x": types.SimpleNamespace(meta={"val": value})})


def test_online_softmax_takes_flagos_softmaxes() -> None:
    from torch._inductor import config

    torch_gate = features.original("online_softmax")
    hook = _torch_compat.hooked("online_softmax", "cuda")
    assert torch_gate(_softmax_match("flagos:0")) is False
    with config.patch({"online_softmax": True, "cuda_backend": "triton"}):
        assert hook(_softmax_match("flagos:0")) is True and torch_gate(_softmax_match("cuda:0")) is True
        assert hook(_softmax_match("cpu")) == torch_gate(_softmax_match("cpu"))
    with config.patch({"online_softmax": False}):
        assert hook(_softmax_match("flagos:0")) is False


def test_template_configs_are_the_vendors() -> None:
    from torch._inductor.choices import InductorChoices

    torch_gate = features.original("config_heuristics")
    hook = _torch_compat.hooked("config_heuristics", "cuda")
    choices = InductorChoices()
    assert type(hook(choices, "flagos")) is type(torch_gate(choices, "cuda"))
    assert type(torch_gate(choices, "flagos")) is not type(torch_gate(choices, "cuda"))
    assert type(hook(choices, "cpu")) is type(torch_gate(choices, "cpu"))


class _Graph:
    def __init__(self, device: torch.device) -> None:
        self.current_device = device

    def get_current_device_or_throw(self) -> torch.device:
        return self.current_device


@pytest.mark.parametrize("device", ["flagos:0", "cpu"])
def test_pdl_sees_the_vendor_device_while_it_decides(monkeypatch: pytest.MonkeyPatch, device: str) -> None:
    from torch._inductor import config
    from torch._inductor.virtualized import V

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))  # a Hopper, as the H200 is
    torch_gate = features.original("pdl")
    hook = _torch_compat.hooked("pdl", "cuda")
    graph = _Graph(torch.device(device))
    with config.patch({"triton.enable_pdl": True}), V.set_graph_handler(graph):
        assert torch_gate() is False
        assert hook() is (device == "flagos:0")
        with features.graph_device_as("cuda"):
            assert graph.current_device.type == ("cuda" if device == "flagos:0" else "cpu")
    assert graph.current_device == torch.device(device)  # the graph's device is flagos again after the decision


def _hold_every_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Re-set each gate through monkeypatch, so that whatever a test installs is undone after it."""
    for gates in features.FEATURES.values():
        for gate in gates:
            holder = features._holder(gate)
            if hasattr(holder, gate.name):
                monkeypatch.setattr(holder, gate.name, inspect.getattr_static(holder, gate.name))


def test_a_changed_gate_keeps_its_feature_off_and_the_others_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch._inductor import scheduler
    from torch._inductor.fx_passes import pad_mm

    _hold_every_gate(monkeypatch)

    def check_device(a: object, b: object) -> bool:  # a torch line that asks something else
        return False

    monkeypatch.setattr(pad_mm, "check_device", check_device)
    monkeypatch.delattr(scheduler, "_is_gpu_triton_backend", raising=False)
    monkeypatch.setattr(scheduler.MixOrderReduction, "can_fuse", classmethod(lambda cls, a, b: False))
    missing = features.feature_problems()
    assert set(missing) == {"mm_padding", "reduction_fusion"}
    assert "no longer tests 'is_cuda'" in missing["mm_padding"] and "is gone" in missing["reduction_fusion"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        enabled = _torch_compat.enable_vendor_features("cuda")
        again = _torch_compat.enable_vendor_features("cuda")
    assert again == enabled  # idempotent: hooks are not stacked
    assert enabled == [k for k in features.available() if k not in missing]
    assert _torch_compat.enabled_features() == enabled
    assert pad_mm.check_device is check_device
    text = " ".join(str(w.message) for w in caught)
    assert "mm_padding" in text and "reduction_fusion" in text and torch.__version__ in text
    pdl = inspect.getattr_static(features._holder(features.FEATURES["pdl"][0]), "_enable_pdl_codegen")
    assert isinstance(pdl, staticmethod) and pdl.__func__.__wrapped__ is features.original("pdl")


def test_a_name_test_inside_a_larger_function_is_widened_to_flagos() -> None:
    def gate(device_type: str) -> bool:
        return device_type in ("cuda", "xpu")

    widened = features._widened(gate, "cuda")
    assert [widened(d) for d in ("flagos", "cuda", "xpu", "cpu")] == [True, True, True, False]
    assert gate("flagos") is False  # torch's own is left as it was


def _inline_can_fuse(cls: type, node1: _Node, node2: _Node) -> bool:
    """MixOrderReduction.can_fuse's device test as torch lines before _is_gpu_triton_backend write it inline."""
    if not node1.is_gpu() or not node2.is_gpu():
        return False
    device_type = node1.get_device().type
    if device_type not in ("cuda", "xpu") or get_current_backend(device_type) != "triton":
        return False
    return True


def test_a_torch_line_without_the_helper_gets_can_fuse_widened(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch._inductor import scheduler

    _hold_every_gate(monkeypatch)
    monkeypatch.delattr(scheduler, "_is_gpu_triton_backend", raising=False)
    monkeypatch.setattr(scheduler.MixOrderReduction, "can_fuse", classmethod(_inline_can_fuse))
    assert "reduction_fusion" not in features.feature_problems()
    assert features.gate_of("reduction_fusion").name == "can_fuse"
    flagos = [_Node(FLAGOS, True)] * 2
    assert scheduler.MixOrderReduction.can_fuse(*flagos) is False
    assert "reduction_fusion" in _torch_compat.enable_vendor_features("cuda")
    assert scheduler.MixOrderReduction.can_fuse(*flagos) is True
    assert scheduler.MixOrderReduction.can_fuse(*[_Node(torch.device("cpu"), False)] * 2) is False


REGISTER_AS_GPU_VENDOR = """
import torch, torch_fl
from torch_fl.compile import _register, _torch_compat
class Runtime:                                        # the registration asks which vendor runs flagos
    accelerator = staticmethod(lambda: "cuda")
_register._core = Runtime
torch_fl.compile.register()
report("enabled", _torch_compat.enabled_features())
"""


def test_registration_on_a_gpu_vendor_enables_every_feature(run_child) -> None:
    child = run_child(REGISTER_AS_GPU_VENDOR)
    assert child.data["enabled"] == features.available(), child.describe()


@pytest.mark.skipif(not ON_GPU, reason="needs flagos on a GPU vendor (cuda_node.sh compile)")
def test_a_gpu_vendor_enables_every_feature_this_torch_has() -> None:
    missing = features.feature_problems()
    assert _torch_compat.enabled_features() == [k for k in features.available() if k not in missing]
    assert "reduction_fusion" not in missing and "mm_padding" not in missing, missing
    assert "mm_padding_bias" not in missing, missing


@pytest.mark.skipif(not ON_GPU, reason="needs flagos on a GPU vendor (cuda_node.sh compile)")
def test_flagos_graphs_fuse_reductions_of_mixed_order_on_a_gpu(fresh_dynamo: None) -> None:
    """A sum over rows and one over columns of the same input fuse into one kernel, as for cuda."""
    from torch._inductor import config, metrics
    from torch._inductor.utils import run_and_get_code

    if "reduction_fusion" not in _torch_compat.enabled_features():
        pytest.skip(f"torch {torch.__version__}: {features.feature_problems().get('reduction_fusion')}")
    x = torch.randn(32768, 768, device="flagos")  # the shape of torch's own test of the fusion
    metrics.reset()
    with config.patch({"split_reductions": False}):
        outs, _ = run_and_get_code(torch.compile(lambda t: (t.sum(0), t.sum(1))), x)
    torch.testing.assert_close(outs, (x.sum(0), x.sum(1)), rtol=1e-4, atol=1e-2)
    assert metrics.codegen_mix_order_reduction >= 1


@pytest.mark.skipif(not ON_GPU, reason="needs flagos on a GPU vendor (cuda_node.sh compile)")
def test_a_misaligned_linear_with_bias_compiles_and_trains_on_a_gpu(fresh_dynamo: None) -> None:
    """BERT's output layer (768 -> 30522, a size no tensor core tile divides) at a batch where the matmul is compute
    bound: Inductor times its padding, which took the flagos bias for None before the mm_padding_bias hook."""
    layer = torch.nn.Linear(768, 30522, device="flagos")
    x = torch.randn(4096, 768, device="flagos")

    def step(inputs: torch.Tensor) -> torch.Tensor:
        with torch.autocast("flagos", dtype=torch.bfloat16):
            loss = layer(inputs).float().square().mean()
        loss.backward()
        return loss

    loss = torch.compile(step)(x)
    reference = layer(x).float().square().mean()
    torch.testing.assert_close(loss, reference, rtol=2e-2, atol=2e-2)
    assert layer.weight.grad is not None and torch.isfinite(layer.weight.grad).all()


@pytest.mark.skipif(not ON_GPU, reason="needs flagos on a GPU vendor (cuda_node.sh compile)")
def test_flagos_matmuls_take_triton_templates_under_max_autotune_on_a_gpu(fresh_dynamo: None) -> None:
    """With Triton as the only matmul backend, a flagos mm compiles to a Triton template (no template applies on
    the emulation)."""
    from torch._inductor import config
    from torch._inductor.utils import run_and_get_code

    a, b = torch.randn(512, 512, device="flagos"), torch.randn(512, 512, device="flagos")
    with config.patch({"max_autotune_gemm_backends": "TRITON"}):
        out, codes = run_and_get_code(torch.compile(torch.mm, mode="max-autotune-no-cudagraphs"), a, b)
    torch.testing.assert_close(out, a @ b, rtol=2e-2, atol=2e-2)
    assert "triton_tem_" in "\n".join(codes)
