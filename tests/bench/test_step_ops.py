"""build_tools/node/step_ops.py (the eager step's op stream replayed in one process) runs end to end on the emulation
and prints its table: what it reports, never how fast anything was."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "build_tools" / "node" / "step_ops.py"


def step_ops(cwd: Path, args: list[str], *, timeout: int) -> subprocess.CompletedProcess:
    """step_ops.py with ``args``, its output captured; the exit status is the test's to check."""
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False
    )


def test_the_step_op_stream_is_recorded_and_replayed_on_every_arm(tmp_path):
    proc = step_ops(tmp_path, ["--d-model", "32", "--rounds", "1", "--top", "500"], timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    head = re.search(
        r"d_model 32: (\d+) ATen calls per step, plain device cpu; .*flagos (\d+), flagos, reuse off "
        r"(\d+), plain (\d+), flagos, compact (\d+); flagos - plain [+-]\d+, "
        r"flagos compact - plain [+-]\d+ µs per replay",
        proc.stdout,
    )
    assert head, proc.stdout
    calls = int(head.group(1))
    assert calls > 200, proc.stdout  # forward, backward and AdamW of two encoder layers
    rows = [line.split()[0] for line in proc.stdout.splitlines() if line.startswith("  aten.")]
    # the backward kernels and the optimizer's list ops were recorded, not only the forward
    assert "aten.native_layer_norm_backward.default" in rows, rows
    assert any(name.startswith("aten._foreach_") for name in rows), rows
    total = re.search(r"all ops \(sums of per-call medians\)\s+(\d+)((?:\s+[+-]?[\d.]+){5})$", proc.stdout, re.M)
    assert total and int(total.group(1)) == calls, proc.stdout
    plain, flagos, _, _, compact_gap = (float(v) for v in total.group(2).split())
    assert plain > 0 and flagos > 0, proc.stdout  # every arm, the compact flagos copies too, was replayed
    assert compact_gap > -plain, proc.stdout


def test_bad_d_model_names_the_option(tmp_path):
    proc = step_ops(tmp_path, ["--d-model", "big"], timeout=60)
    assert proc.returncode == 2 and "--d-model" in proc.stderr and "'big'" in proc.stderr, proc.stderr


def test_counters_split_the_routed_calls_by_phase(tmp_path):
    proc = step_ops(tmp_path, ["--d-model", "32", "--rounds", "1", "--top", "500", "--counters", "1"], timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "router phases, µs per replay (mean of 1 replays with the counters on)" in proc.stdout, proc.stdout
    rows = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if line.startswith("    ") and len(parts) == 8 and parts[1] in ("fast", "boxed", "copy"):
            rows[(parts[0], parts[1])] = int(parts[2]), [float(v) for v in parts[3:]]
    # the matmuls and the optimizer's list ops took the unboxed entry, each call counted once per replay
    assert rows[("mm", "fast")][0] > 0, rows
    assert any(op.startswith("_foreach_") and path == "fast" for op, path in rows), rows
    for (op, path), (_, (arguments, kernel, results, release, retag)) in rows.items():
        assert kernel > 0 and arguments >= 0 and results >= 0 and release >= 0, (op, path)
        assert abs(retag - (arguments + results + release)) < 0.2, (op, path)
    total = re.search(r"all routed calls\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", proc.stdout)
    assert total and float(total.group(2)) > 0, proc.stdout


def test_negative_counters_are_refused(tmp_path):
    proc = step_ops(tmp_path, ["--counters", "-1"], timeout=60)
    assert proc.returncode == 2 and "--counters" in proc.stderr, proc.stderr
