"""The frameworks people train with find flagos: HF Trainer (through accelerate) and Lightning.

Each training run is a process of its own (frameworks_run.py says why); the CPU run of the same framework is the
reference. Under the CPU emulation flagos runs torch's own CPU kernels on the same bytes, in the same order, so
losses and trained parameters must be bit-equal. On a GPU the flagos run is CUDA arithmetic, so there the losses
are compared with a float32 tolerance and the parameters are not compared (AdamW turns last-bit gradient
differences near zero into whole-step moves).

Both frameworks are in the test images (docker/<dir>/requirements-test.txt); a missing one fails, never skips.
"""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import vision_import

import torch_fl

vision_import.load()  # before the in-process Lightning imports below

RUNNER = Path(__file__).with_name("frameworks_run.py")
# what each `python -c` child runs first: the test image's torchvision needs vision_import before Lightning imports it
PRELUDE = f"import sys; sys.path.insert(0, {str(RUNNER.parent)!r}); import vision_import; vision_import.load()\n"
EMULATION = torch_fl.accelerator() == "cpu"
# what a Trainer without any setting does here differs on a torch that sees CUDA (docs/frameworks.md)
CUDA_VISIBLE = torch.cuda.is_available()
_results: dict[str, dict] = {}


def _require(*names: str) -> None:
    missing = [n for n in names if importlib.util.find_spec(n) is None]
    if missing:
        pytest.fail(
            f"{', '.join(missing)} not installed: the test images install it from docker/<dir>/requirements-test.txt "
            "(a stale image? rebuild it); elsewhere pip install 'torch-fl[hf,lightning]'"
        )


HF_RUNS = ("hf-cpu", "hf-flagos", "hf-flagos-bf16", "hf-env", "hf-env-bf16", "hf-unset")
PL_RUNS = ("pl-cpu", "pl-flagos", "pl-flagos-bf16")


def _outcome(run: str, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """What ``frameworks_run.py`` left for RUN: every run of its framework runs once per session, in one process."""
    if run not in _results:
        group = HF_RUNS if run in HF_RUNS else PL_RUNS
        out = tmp_path_factory.mktemp("runs")
        proc = subprocess.run(
            [sys.executable, str(RUNNER), str(out), *group], capture_output=True, text=True, timeout=600, check=False
        )
        if proc.returncode != 0:
            pytest.fail(f"{' '.join(group)} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
        _results.update({name: torch.load(out / f"{name}.pt", weights_only=False) for name in group})
    return _results[run]


def _run(run: str, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The result of a run that trained."""
    result = _outcome(run, tmp_path_factory)
    if "error" in result:
        pytest.fail(f"{run} failed:\n{result['error'][-4000:]}")
    return result


def _assert_trains_like(got: dict, reference: dict) -> None:
    if EMULATION:
        assert got["losses"] == reference["losses"]  # bit-equal: the same CPU kernels on the same bytes
        assert got["params"].keys() == reference["params"].keys()
        differ = [k for k, v in reference["params"].items() if not torch.equal(got["params"][k], v)]
        assert differ == [], f"trained parameters differ from the CPU's: {differ}"
    else:
        assert len(got["losses"]) == len(reference["losses"])
        for mine, ref in zip(got["losses"], reference["losses"], strict=True):
            assert math.isclose(mine, ref, rel_tol=1e-3, abs_tol=1e-5), (got["losses"], reference["losses"])


def _assert_on_flagos(got: dict) -> None:
    assert got["device"] == "flagos"  # the parameters the optimizer stepped
    assert got["input_device"] == "flagos"  # the batch the framework moved


# ---- HF Trainer -----------------------------------------------------------------------------------------------


def test_hf_trainer_with_flagos_arguments_trains_on_flagos_as_on_the_cpu(tmp_path_factory):
    _require("transformers", "accelerate")
    reference = _run("hf-cpu", tmp_path_factory)
    got = _run("hf-flagos", tmp_path_factory)
    assert reference["device"] == "cpu"
    _assert_on_flagos(got)
    assert got["args_device"] == "flagos:0"
    assert got["dtype"] == torch.float32
    _assert_trains_like(got, reference)
    assert len(set(got["losses"])) > 1  # the steps really stepped


def test_hf_trainer_with_flagos_arguments_trains_in_bf16(tmp_path_factory):
    _require("transformers", "accelerate")
    fp32 = _run("hf-flagos", tmp_path_factory)
    got = _run("hf-flagos-bf16", tmp_path_factory)
    _assert_on_flagos(got)
    assert got["dtype"] == torch.bfloat16  # accelerate's autocast is on, on flagos
    assert all(math.isfinite(x) for x in got["losses"])
    for mine, full in zip(got["losses"], fp32["losses"], strict=True):
        assert math.isclose(mine, full, rel_tol=2e-2)


@pytest.mark.skipif(CUDA_VISIBLE, reason="with CUDA visible, TrainingArguments takes cuda:0 before the setting")
def test_hf_trainer_with_the_accelerate_setting_trains_on_flagos(tmp_path_factory):
    _require("transformers", "accelerate")
    reference = _run("hf-cpu", tmp_path_factory)
    got = _run("hf-env", tmp_path_factory)  # ACCELERATE_TORCH_DEVICE=flagos
    _assert_on_flagos(got)
    _assert_trains_like(got, reference)
    bf16 = _run("hf-env-bf16", tmp_path_factory)  # and ACCELERATE_MIXED_PRECISION=bf16
    _assert_on_flagos(bf16)
    assert bf16["dtype"] == torch.bfloat16


def test_a_plain_trainer_without_the_setting_stops_at_the_first_mixed_device_op(tmp_path_factory):
    # accelerate puts the model on flagos (torch.accelerator names it), TrainingArguments keeps the batch on its
    # own device: the router refuses the mix and names the host tensor, where a silent CPU run would mislead
    _require("transformers", "accelerate")
    got = _outcome("hf-unset", tmp_path_factory)
    assert "error" in got, "a plain Trainer without the setting trained"
    if not CUDA_VISIBLE:  # with CUDA the batch is on cuda:0, and which check stops it first is the GPU's to say
        assert "Expected all tensors to be on the same device" in got["error"]
        assert "flagos" in got["error"].splitlines()[-1]


def test_the_hf_integration_without_transformers_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)
    monkeypatch.delitem(sys.modules, "torch_fl.integrations.hf", raising=False)
    with pytest.raises(ImportError, match=r"torch-fl\[hf\]"):
        importlib.import_module("torch_fl.integrations.hf")


# ---- Lightning ------------------------------------------------------------------------------------------------


def test_lightning_trainer_accelerator_flagos_trains_on_flagos_as_on_the_cpu(tmp_path_factory):
    _require("lightning")
    reference = _run("pl-cpu", tmp_path_factory)
    got = _run("pl-flagos", tmp_path_factory)
    assert reference["device"] == "cpu"
    _assert_on_flagos(got)
    assert got["root_device"] == "flagos:0"
    _assert_trains_like(got, reference)
    assert len(set(got["losses"])) > 1


def test_lightning_bf16_mixed_autocasts_on_flagos(tmp_path_factory):
    _require("lightning")
    got = _run("pl-flagos-bf16", tmp_path_factory)
    _assert_on_flagos(got)
    assert got["dtype"] == torch.bfloat16
    assert all(math.isfinite(x) for x in got["losses"])


_imports: dict[str, list[str]] = {}


def _import_order(first: str) -> list[str]:
    """A fresh process imports ``first``, then the other; its output lines (one process per order, per session).

    After ``import torch_fl`` alone, it prints the Lightning modules loaded by then."""
    if first not in _imports:
        second = "lightning" if first == "torch_fl" else "torch_fl"
        alone = "print(sorted(m for m in sys.modules if 'lightning' in m))" if first == "torch_fl" else ""
        script = PRELUDE + textwrap.dedent(
            f"""
            import {first}
            {alone}
            import {second}
            from lightning.pytorch.accelerators import AcceleratorRegistry
            import pytorch_lightning.accelerators as legacy
            import torch_fl.integrations.lightning as fl
            assert AcceleratorRegistry["flagos"]["accelerator"] is fl.accelerator_class("lightning")
            assert legacy.AcceleratorRegistry["flagos"]["accelerator"] is fl.accelerator_class("pytorch_lightning")
            print("registered")
            """
        )
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        _imports[first] = proc.stdout.strip().splitlines()
    return _imports[first]


@pytest.mark.parametrize("first", ["torch_fl", "lightning"])
def test_accelerator_flagos_is_registered_whichever_is_imported_first(first):
    _require("lightning", "pytorch_lightning")
    assert _import_order(first)[-1] == "registered"


def test_import_torch_fl_does_not_import_lightning():
    _require("lightning", "pytorch_lightning")
    # the torch_fl-first process's line from before its Lightning import (the vision prelude imports no Lightning)
    assert _import_order("torch_fl")[-2] == "[]"


@pytest.mark.parametrize(
    ("devices", "says"),
    [
        (99, "FLAGOS_EMU_DEVICES" if EMULATION else "ask for fewer"),
        (-2, "at least one"),
        ([0, 0], "each flagos index once"),
        ("two", "a count, a list of flagos indices"),
    ],
)
def test_lightning_refuses_bad_flagos_devices_by_name(devices, says):
    _require("lightning")
    import lightning
    from lightning.fabric.utilities.exceptions import MisconfigurationException

    with pytest.raises(MisconfigurationException, match="accelerator='flagos'") as info:
        lightning.Trainer(accelerator="flagos", devices=devices, logger=False)
    assert says in str(info.value)


def test_a_registration_that_fails_warns_and_leaves_the_lightning_import_working():
    _require("lightning")
    script = PRELUDE + textwrap.dedent(
        """
        import warnings
        import torch_fl
        import torch_fl.integrations.lightning as fl
        def broken(module):
            raise AttributeError("AcceleratorRegistry")
        fl.register = broken  # a Lightning release whose registry moved
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import lightning
        print([str(w.message) for w in caught if "accelerator='flagos'" in str(w.message)])
        print(lightning.Trainer.__name__)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    warned, trainer = proc.stdout.strip().splitlines()[-2:]
    assert "could not register" in warned and "AcceleratorRegistry" in warned
    assert trainer == "Trainer"


def test_flagos_arguments_put_accelerate_on_flagos_where_it_would_pick_another_device():
    # accelerate before 1.16 takes cuda whenever torch sees CUDA (the H200 node's 1.15 did), and the Trainer's
    # Accelerator then places the model there: here its default device is made the CPU to stand for that choice
    _require("transformers", "accelerate")
    script = PRELUDE + textwrap.dedent("""
        import tempfile, torch, torch_fl
        from accelerate.state import PartialState
        PartialState.default_device = property(lambda self: torch.device("cpu"))
        from accelerate import Accelerator
        from torch_fl.integrations.hf import FlagosTrainingArguments
        args = FlagosTrainingArguments(output_dir=tempfile.mkdtemp(), report_to=[])
        print(args.device, Accelerator().device)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.split() == ["flagos:0", "flagos:0"], proc.stdout
