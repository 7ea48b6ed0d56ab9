"""FLAGOS_EMU_MEMORY sets the memory of each emulated device: what mem_get_info, torch.accelerator.get_memory_info
and the device properties report, and where torch.OutOfMemoryError starts."""

from __future__ import annotations

CHECKS = """
import torch, torch_fl
report("info", [list(torch.flagos.mem_get_info()), list(torch.accelerator.get_memory_info(1))])
report("total", torch.flagos.get_device_properties(0).total_memory)
try:
    torch.empty(48 << 20, dtype=torch.uint8, device="flagos")
    report("oom", None)
except torch.OutOfMemoryError as exc:
    report("oom", str(exc))
kept = torch.empty(16 << 20, dtype=torch.uint8, device="flagos")
report("free", torch.flagos.mem_get_info()[0])
"""


def test_emulated_memory_size_comes_from_the_environment(run_child) -> None:
    child = run_child(CHECKS, {"FLAGOS_ACCELERATOR": "cpu", "FLAGOS_EMU_MEMORY": "32MiB"})
    mib = 1 << 20
    assert child.data["info"] == [[32 * mib, 32 * mib], [32 * mib, 32 * mib]], child.describe()
    assert child.data["total"] == 32 * mib
    assert "tried to allocate 48.00 MiB. The device has 32.00 MiB (FLAGOS_EMU_MEMORY)" in child.data["oom"]
    assert child.data["free"] == 16 * mib
