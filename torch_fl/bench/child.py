"""One measurement process: ``python <path>/child.py '<json spec>'`` prints one ``BENCH-RESULT <json>`` line.

Modes (the spec's ``mode``):

- ``probe``: what this machine and install are (versions, accelerator, conf) and which arms can run.
- ``case``: one A/B case on one arm: warm-up, one synchronized batch, µs per call.

The benchmark harness of the tooling (build_tools/bench/harness/worker.py) adds its modes to ``MODES`` and calls
``main`` with them, so its processes share these helpers.

A plain arm of its own process never imports torch_fl (the parent also turns torch's device autoload off).
A flagos arm confirms its route from the dispatch log on one call made before the timed loop,
with the log switched on only for that call: the timed loop never pays for a stderr write.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import platform
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

# run.py starts this file by its path, never as torch_fl.bench.child, which would import the torch_fl package:
# a plain arm must run without it, and the CPU is pinned (main) before torch starts. This file's folder is on
# sys.path (first when started by path, added by the harness's worker), so its one sibling is found there.
import cases

RESULT_MARK = "BENCH-RESULT "
LOG_MARK = "[flagos dispatch] "


# ---- helpers shared by the modes ----------------------------------------------------------------


def flagos_arm(spec: dict[str, Any]) -> bool:
    return not cases.is_plain(spec.get("arm", ""))


def import_torch(spec: dict[str, Any]) -> Any:
    import torch

    if spec.get("threads", 0) > 0:
        torch.set_num_threads(spec["threads"])
    if flagos_arm(spec):
        import torch_fl  # noqa: F401  (registers the flagos device)
    return torch


def synchronizer(torch: Any, device: Any) -> Callable[[], None]:
    if device.type == "flagos":
        import torch_fl

        return lambda: torch_fl.flagos.synchronize(device)
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def _capture_stderr(fn: Callable[[], Any]) -> str:
    """Run ``fn`` with file descriptor 2 sent to a temporary file; return what was written there."""
    libc = ctypes.CDLL(None)
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            fn()
        finally:
            libc.fflush(None)
            os.dup2(saved, 2)
            os.close(saved)
        sink.seek(0)
        return sink.read().decode("utf-8", "replace")


def logged_routes(call: Callable[[], Any]) -> list[list[str]]:
    """[op, route] for each dispatch-log line one call of ``call`` writes."""
    import torch_fl

    def logged_call() -> None:
        torch_fl.set_dispatch_log(True)
        try:
            call()
        finally:
            torch_fl.set_dispatch_log(False)

    lines = _capture_stderr(logged_call).splitlines()
    found = []
    for line in lines:
        if line.startswith(LOG_MARK) and " -> " in line:
            op, route = line[len(LOG_MARK) :].split(" -> ", 1)
            found.append([op.strip(), route.strip()])
    return found


def batch_us(call: Callable[[], Any], repeat: int, sync: Callable[[], None]) -> float:
    sync()
    started = time.perf_counter()
    for _ in range(repeat):
        call()
    sync()
    return (time.perf_counter() - started) * 1e6 / repeat


# ---- mode: case -------------------------------------------------------------------------------------


def op_overload(torch: Any, op: str) -> Any:
    name, _, overload = op.partition(".")
    packet = getattr(torch.ops.aten, name)
    return getattr(packet, overload or "default")


def _check_output(torch: Any, case: cases.Case, out: Any, op: Any) -> None:
    torch.manual_seed(0)
    args, kwargs = case.build(torch.device("cpu"))
    expected = op(*args, **kwargs)
    got = out.to("cpu")
    if not torch.allclose(got, expected, rtol=1e-5, atol=1e-6):
        raise SystemExit(f"{case.name}: the output differs from the same op on the host")


def run_case(spec: dict[str, Any]) -> dict[str, Any]:
    torch = import_torch(spec)
    case = cases.find_cases([spec["case"]])[0]
    device = torch.device(spec["device"])
    op = op_overload(torch, case.op)
    torch.manual_seed(0)
    args, kwargs = case.build(device)
    sync = synchronizer(torch, device)

    def call() -> Any:
        return op(*args, **kwargs)

    logged = logged_routes(call) if flagos_arm(spec) else []
    for _ in range(spec["warmup"]):
        call()
    batches = []
    for _ in range(spec.get("batches", 1)):
        sync()
        started = time.perf_counter()
        for _ in range(spec["repeat"]):
            out = op(*args, **kwargs)  # inline, not through call(): the seed's loop, nothing added per call
        sync()
        batches.append((time.perf_counter() - started) * 1e6 / spec["repeat"])
    _check_output(torch, case, out, op)
    return {"us": statistics.median(batches), "batches": batches, "logged": logged}


# ---- mode: probe --------------------------------------------------------------------------------------


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _route_reason(torch_fl: Any, route: str, op: str) -> str | None:
    """Why ``route`` cannot serve ``op`` in this process, or None when it can."""
    if route in cases.BUILTIN_ROUTES:
        return None
    registry = importlib.import_module("torch_fl.providers")  # the package's attribute is the function
    registry.load_entry_points()
    provider = registry.providers().get(route)
    if provider is None:
        known = ", ".join([*cases.BUILTIN_ROUTES, *sorted(registry.providers())])
        return f"no route named {route!r} in this install (known: {known})"
    reason = provider.unavailable_reason()
    if reason is None and not provider.supports(op):
        reason = f"{route} has no kernel for {op}"
    return reason


def _plain_reason(torch: Any, accelerator: str) -> str | None:
    if cases.PLAIN_DEVICE[accelerator] == "cuda" and not torch.cuda.is_available():
        return "torch sees no GPU (torch.cuda.is_available() is False)"
    return None


def _device_name(torch: Any, accelerator: str) -> str:
    if cases.PLAIN_DEVICE[accelerator] == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"CPU emulation on {_cpu_model()}" if accelerator == "cpu" else _cpu_model()


def run_probe(spec: dict[str, Any]) -> dict[str, Any]:
    torch = import_torch(spec)
    import torch_fl

    accelerator = torch_fl.accelerator()
    ops = sorted({c.op for c in cases.CASES})
    reasons = {route: {op: _route_reason(torch_fl, route, op) for op in ops} for route in spec["routes"]}
    reasons[cases.PLAIN] = {op: _plain_reason(torch, accelerator) for op in ops}
    environment = {
        "vendor": accelerator,  # the report key of the accelerator
        "device": f"{cases.FLAGOS_DEVICE} ({_device_name(torch, accelerator)})",
        "plain_device": cases.PLAIN_DEVICE[accelerator],
        "torch": torch.__version__,
        "triton": _dist_version("triton") or _dist_version("pytorch-triton"),
        "flag_gems": _dist_version("flag_gems") or _dist_version("flag-gems"),
        "torch_fl": torch_fl.__version__,
        "torch_fl_path": str(Path(torch_fl.__file__).resolve().parent),
        "conf": torch_fl.conf_path(),
        "host": socket.gethostname(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average": [round(x, 2) for x in os.getloadavg()],  # other work on the machine moves the µs
    }
    return {"environment": environment, "unavailable": reasons}


Mode = Callable[[dict[str, Any]], dict[str, Any]]
MODES: dict[str, Mode] = {"probe": run_probe, "case": run_case}


def main(argv: list[str], modes: dict[str, Mode] = MODES) -> int:
    spec = json.loads(argv[1])
    if spec.get("cpu") is not None:  # before torch starts its threads: they inherit the mask
        os.sched_setaffinity(0, {spec["cpu"]})
    result = modes[spec["mode"]](spec)
    sys.stdout.write(RESULT_MARK + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
