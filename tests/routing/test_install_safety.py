"""Installing the wheel never changes a process that does not ask for flagos.

torch imports every ``torch.backends`` entry point at ``import torch``. torch_fl's does nothing unless
FLAGOS_AUTOLOAD=1; ``import torch_fl`` is the opt-in. Registering flagos makes it PyTorch's one accelerator, so a
process that never opted in must look exactly like plain torch: no rename, no accelerator, the same training.
"""

from __future__ import annotations

TRAIN = """
import json, sys, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
data = torch.utils.data.TensorDataset(torch.randn(32, 8), torch.randn(32, 2))
for x, y in torch.utils.data.DataLoader(data, batch_size=8, pin_memory=True):
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
report("state", {
    "params": [p.detach().flatten().tolist() for p in model.parameters()],
    "torch_fl_loaded": "torch_fl" in sys.modules,
    "backend_name": torch._C._get_privateuse1_backend_name(),
    "accelerator": str(torch.accelerator.current_accelerator()),
})
"""


def test_import_torch_alone_does_not_load_torch_fl(run_child) -> None:
    code = """
        import sys, torch
        report("loaded", "torch_fl" in sys.modules)
        report("backend_name", torch._C._get_privateuse1_backend_name())
        report("accelerator", str(torch.accelerator.current_accelerator()))
        """
    installed = run_child(code)
    without = run_child(code, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})  # plain torch: None, or cuda on a GPU
    assert installed.data["loaded"] is False
    assert installed.data["backend_name"] == "privateuseone"
    assert installed.data == without.data


def test_cpu_training_with_the_wheel_installed_equals_training_without_it(run_child) -> None:
    installed = run_child(TRAIN)
    without = run_child(TRAIN, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})  # torch never looks at the wheel
    assert installed.data["state"]["torch_fl_loaded"] is False
    assert installed.data["state"] == without.data["state"]
    assert installed.stderr == without.stderr


def test_bad_flagos_variables_do_not_break_import_torch(run_child) -> None:
    env = {"FLAGOS_ACCELERATOR": "bogus", "FLAGOS_OP_add__Tensor": "nowhere", "FLAGOS_LOG": "everything"}
    child = run_child("import torch\nreport('ok', float(torch.ones(2).sum()))", env=env)
    assert child.data == {"ok": 2.0}
    assert child.stderr == ""


def test_autoload_opt_in_registers_flagos_at_import_torch(run_child) -> None:
    child = run_child(
        """
        import sys, torch
        report("loaded", "torch_fl" in sys.modules)
        report("sum", float(torch.ones(3, device="flagos").sum().cpu()))
        """,
        env={"FLAGOS_AUTOLOAD": "1"},
    )
    assert child.data == {"loaded": True, "sum": 3.0}


def test_autoload_with_a_bad_configuration_warns_and_leaves_torch_working(run_child) -> None:
    child = run_child(
        """
        import torch
        report("ok", float(torch.ones(2).sum()))
        report("backend_name", torch._C._get_privateuse1_backend_name())
        """,
        env={"FLAGOS_AUTOLOAD": "1", "FLAGOS_OP_add__Tensor": "nowhere"},
    )
    assert child.data == {"ok": 2.0, "backend_name": "privateuseone"}  # nothing half-registered
    assert "torch_fl could not be loaded" in child.stderr
    assert "FLAGOS_OP_add__Tensor" in child.stderr
    assert len(child.stderr.splitlines()) <= 4, child.stderr  # a warning, not a traceback


def test_autoload_names_its_valid_values(run_child) -> None:
    child = run_child("import sys, torch\nreport('loaded', 'torch_fl' in sys.modules)", env={"FLAGOS_AUTOLOAD": "yes"})
    assert child.data == {"loaded": False}
    assert "FLAGOS_AUTOLOAD='yes' is not one of 0, 1" in child.stderr


def test_a_failed_import_registers_nothing_and_a_corrected_one_works(run_child) -> None:
    child = run_child(
        """
        import os, torch
        try:
            import torch_fl
        except Exception as exc:
            report("error", type(exc).__name__)
        report("backend_after_error", torch._C._get_privateuse1_backend_name())
        del os.environ["FLAGOS_OP_add__Tensor"]
        import torch_fl
        report("sum", float((torch.ones(2, device="flagos") + 1).sum().cpu()))
        """,
        env={"FLAGOS_OP_add__Tensor": "nowhere"},
    )
    assert child.data == {"error": "ConfigError", "backend_after_error": "privateuseone", "sum": 4.0}


def test_what_the_opt_in_changes_for_the_rest_of_the_process(run_child) -> None:
    """Documented in the README: after `import torch_fl`, flagos is torch's accelerator."""
    child = run_child(
        """
        import torch, torch_fl
        report("accelerator", str(torch.accelerator.current_accelerator()))
        report("device_module", torch.get_device_module().__name__)
        report("pin_memory", torch.randn(2).pin_memory().is_pinned())
        """
    )
    assert child.data == {"accelerator": "flagos", "device_module": "torch_fl.flagos", "pin_memory": True}


def test_a_flagos_checkpoint_without_torch_fl_names_the_way_out(run_child, tmp_path) -> None:
    ckpt = tmp_path / "flagos.pt"
    run_child(f"import torch, torch_fl\ntorch.save({{'w': torch.arange(3.0, device='flagos')}}, {str(ckpt)!r})")
    child = run_child(
        f"""
        import sys, torch
        try:
            torch.load({str(ckpt)!r})
        except RuntimeError as exc:
            report("error", str(exc))
        report("host", torch.load({str(ckpt)!r}, map_location="cpu")["w"].tolist())
        report("loaded", "torch_fl" in sys.modules)
        """
    )
    assert "`import torch_fl` before torch.load" in child.data["error"]
    assert "map_location='cpu'" in child.data["error"]
    assert child.data["host"] == [0.0, 1.0, 2.0] and child.data["loaded"] is False
    after = run_child(f"import torch, torch_fl\nreport('w', str(torch.load({str(ckpt)!r})['w'].device))")
    assert after.data == {"w": "flagos:0"}  # once loaded, torch's own restore takes the flagos location
