"""One measurement process: ``python <path>/child.py '<json spec>'`` prints one ``BENCH-RESULT <json>`` line.

Modes (the spec's ``mode``):

- ``probe``: what this machine and install are (versions, vendor, conf) and which arms can run.
- ``case``: one A/B case on one arm: warm-up, one synchronized batch, µs per call.
- ``paired``: one A/B case, plain vendor tensors and each flagos arm (a route, the replay on or off) in alternating
  batches in this process.
- ``overhead``: every dispatch-overhead op, plain and flagos in alternating batches in this process.
- ``step_lockstep``: the training step of one arm (cases.build_step), set up and warmed up, then timed a few
  steps at a time whenever the parent asks (lockstep.py): the parent keeps one such process per arm alive and
  takes turns between them, and may ask it to profile a few steps.

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
# a plain arm must run without it, and the CPU is pinned (main) before torch starts. Python puts this file's
# folder first on sys.path, so its one sibling is found there.
import cases
import lockstep

RESULT_MARK = "BENCH-RESULT "
LOG_MARK = "[flagos dispatch] "


# ---- helpers shared by the modes ----------------------------------------------------------------


def _flagos_arm(spec: dict[str, Any]) -> bool:
    return not cases.is_plain(spec.get("arm", ""))


def _import_torch(spec: dict[str, Any]) -> Any:
    import torch

    if spec.get("threads", 0) > 0:
        torch.set_num_threads(spec["threads"])
    if _flagos_arm(spec):
        import torch_fl  # noqa: F401  (registers the flagos device)
    return torch


def _synchronizer(torch: Any, device: Any) -> Callable[[], None]:
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


def _logged_routes(call: Callable[[], Any]) -> list[list[str]]:
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


def _batch_us(call: Callable[[], Any], repeat: int, sync: Callable[[], None]) -> float:
    sync()
    started = time.perf_counter()
    for _ in range(repeat):
        call()
    sync()
    return (time.perf_counter() - started) * 1e6 / repeat


# ---- mode: case -------------------------------------------------------------------------------------


def _op_overload(torch: Any, op: str) -> Any:
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
    torch = _import_torch(spec)
    case = cases.find_cases([spec["case"]])[0]
    device = torch.device(spec["device"])
    op = _op_overload(torch, case.op)
    torch.manual_seed(0)
    args, kwargs = case.build(device)
    sync = _synchronizer(torch, device)

    def call() -> Any:
        return op(*args, **kwargs)

    logged = _logged_routes(call) if _flagos_arm(spec) else []
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


# ---- mode: paired ---------------------------------------------------------------------------------

# A plan needs two recordings that agree, so the third call of a key is the first one replayed: with less warm-up
# the flaggems/replay arm's logged call would still be a recording.
PAIRED_MIN_WARMUP = 3
# Untimed calls of an arm right before each of its batches: a reload of the routes or a replay switch may leave a
# slow first call, and the batch is to time the arm, not the switch. Plain gets them too, so every batch starts alike.
SETTLE_CALLS = 3


def _set_route(torch_fl: Any, op: str, route: str) -> None:
    """Force ``op`` onto ``route`` (FLAGOS_OP_<op>, then a reload); on a failed reload the variable is put back."""
    var = cases.override_var(op)
    before = os.environ.get(var)
    if before == route:  # every change of the variable was reloaded: the table has it already
        return
    os.environ[var] = route
    try:
        torch_fl.reload_routes()
    except Exception:  # the reload raises before it publishes: the table is as it was, and so must the variable be
        if before is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = before
        raise


def _switch_arm(torch_fl: Any, op: str, arm: str) -> None:
    route, replay = cases.PAIRED_ARMS[arm]
    _set_route(torch_fl, op, route)
    torch_fl.replay.configure(enabled=replay)  # after the reload, which re-applies the environment's setting


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _paired_arm_reason(torch_fl: Any, op: str, arm: str) -> str | None:
    """Why ``arm`` cannot take ``op`` in this process (its route does not load, or resolves to another), or None."""
    route, _ = cases.PAIRED_ARMS[arm]
    try:
        _switch_arm(torch_fl, op, arm)
    except torch_fl.RouteError as exc:
        problems = "; ".join(map(_one_line, exc.problems))  # without the error's header line
        return f"{cases.override_var(op)}={route} does not load: {problems}"
    resolved = torch_fl.route(op)
    if resolved.route != route:
        skipped = "; ".join(f"{name}: {why}" for name, why in resolved.skipped)
        return f"{op} resolves to {resolved.route}, not {route}" + (f" ({_one_line(skipped)})" if skipped else "")
    return None


def _replay_refusal(torch_fl: Any, op: str) -> str | None:
    """The replay cache's reasons when it refused ``op``'s calls here (they then run FlagGems' Python path)."""
    for row in torch_fl.replay.stats():
        if row["op"] == op and (row["refused_keys"] or row["unkeyed_calls"]):
            reasons = ", ".join(f"{n} x {why}" for why, n in dict(row["reasons"]).items()) or "no reason recorded"
            return f"the replay cache refuses {op} here ({reasons}); its calls take FlagGems' Python path"
    return None


def _device_call(torch: Any, case: cases.Case, op: Any, device: Any) -> tuple[Callable[[], Any], Callable[[], None]]:
    torch.manual_seed(0)
    args, kwargs = case.build(device)
    return (lambda: op(*args, **kwargs)), _synchronizer(torch, device)


Select = Callable[[str], tuple[Callable[[], Any], Callable[[], None]]]


def _rounds(select: Select, names: list[str], pairs: int, repeat: int) -> dict[str, list[float]]:
    """``pairs`` rounds of one batch per arm, the order rotated every round (P A B, A B P, B P A, ...)."""
    us: dict[str, list[float]] = {name: [] for name in names}
    for pair in range(pairs):
        shift = pair % len(names)
        for name in names[shift:] + names[:shift]:
            call, sync = select(name)
            us[name].append(_batch_us(call, repeat, sync))
    return us


def run_paired(spec: dict[str, Any]) -> dict[str, Any]:
    """Plain vendor tensors and every flagos arm of ``spec["arms"]``, timed in alternating batches in this process.

    The rotated order (``_rounds``) lets a drift within the process weigh on all arms alike; each batch's ratio to
    the plain batch of its round is kept. torch_fl is loaded, but calls on plain vendor tensors never reach it. The
    flagos arms share one set of flagos tensors and switch the op's route (and the replay) before each batch; an
    arm whose route this process cannot take is returned with its reason, untimed."""
    torch = _import_torch(spec)
    import torch_fl

    case = cases.find_cases([spec["case"]])[0]
    op = _op_overload(torch, case.op)
    plain = _device_call(torch, case, op, torch.device(spec["plain_device"]))
    flagos = _device_call(torch, case, op, torch.device(spec["device"]))
    arms = list(spec.get("arms", cases.DEFAULT_PAIRED_ARMS))
    reasons = {arm: _paired_arm_reason(torch_fl, case.op, arm) for arm in arms}

    def select(name: str) -> tuple[Callable[[], Any], Callable[[], None]]:
        """Switch to arm ``name`` and settle it; its call and synchronizer."""
        if name != "plain":
            _switch_arm(torch_fl, case.op, name)
        call, sync = plain if name == "plain" else flagos
        for _ in range(SETTLE_CALLS):
            call()
        return call, sync

    logged = {}
    for name in ["plain", *(a for a in arms if reasons[a] is None)]:
        call, _ = select(name)
        for _ in range(max(spec["warmup"], PAIRED_MIN_WARMUP)):
            call()
        if name == "plain":
            continue
        logged[name] = _logged_routes(call)  # after the warm-up: a replayed call, where the replay takes this key
        if cases.PAIRED_ARMS[name][1] and [case.op, "flaggems/replay"] not in logged[name]:
            reasons[name] = _replay_refusal(torch_fl, case.op)  # None: the parent finds the route wrong and stops
    measured = ["plain", *(a for a in arms if reasons[a] is None)]
    us = _rounds(select, measured, spec["pairs"], spec["repeat"])
    want = select("plain")[0]().to("cpu")
    for name in measured[1:]:
        if not torch.allclose(select(name)[0]().to("cpu"), want, rtol=1e-5, atol=1e-6):
            raise SystemExit(f"{case.name}: flagos {name} and plain results differ")
    results: dict[str, Any] = {arm: {"reason": reasons[arm]} for arm in arms if reasons[arm] is not None}
    for arm in measured[1:]:
        results[arm] = {"us": us[arm], "ratios": [a / p for a, p in zip(us[arm], us["plain"], strict=True)],
                        "logged": logged[arm]}
    return {"plain_us": us["plain"], "arms": {arm: results[arm] for arm in arms}}


# ---- mode: overhead ---------------------------------------------------------------------------------


def _overhead_one(torch: Any, item: cases.OverheadOp, spec: dict[str, Any]) -> dict[str, Any]:
    from torch_fl import _C

    calls = {}
    for name, device in (("plain", torch.device(spec["plain_device"])), ("flagos", torch.device(spec["device"]))):
        torch.manual_seed(0)
        state = item.setup(device)
        calls[name] = ((lambda state=state: item.call(state)), _synchronizer(torch, device))
    # the same flagos tensors with every vendor alias built anew per call: what the router cost before aliases
    # were reused across calls (csrc/dispatch/retag.cpp), measured beside it
    calls["flagos-fresh"] = calls["flagos"]
    logged = _logged_routes(calls["flagos"][0])
    for call, _ in calls.values():
        for _ in range(spec["warmup"]):
            call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    order = list(calls)
    for pair in range(cases.OVERHEAD_PAIRS):
        for name in order[pair % 3:] + order[:pair % 3]:  # rotated, so no arm always runs first
            call, sync = calls[name]
            _C.set_alias_reuse(name != "flagos-fresh")
            try:
                times[name].append(_batch_us(call, spec["repeat"], sync))
            finally:
                _C.set_alias_reuse(True)
    return {"plain_us": times["plain"], "flagos_us": times["flagos"], "flagos_fresh_us": times["flagos-fresh"],
            "logged": logged}


def run_overhead(spec: dict[str, Any]) -> dict[str, Any]:
    """Every overhead op on plain vendor tensors and on flagos tensors, in alternating batches in this process."""
    torch = _import_torch(spec)
    return {"ops": {item.name: _overhead_one(torch, item, spec) for item in cases.OVERHEAD_OPS}}


# ---- mode: step -------------------------------------------------------------------------------------------------


def run_step_lockstep(spec: dict[str, Any]) -> dict[str, Any]:
    """Set the step up, warm it up, then serve the parent's turns (lockstep.serve) until it says quit."""
    torch = _import_torch(spec)
    device = torch.device(spec["device"])
    sync = _synchronizer(torch, device)
    step = cases.build_step(device, spec["d_model"])
    logged = _logged_routes(step) if _flagos_arm(spec) else []
    for _ in range(spec["warmup"]):
        step()
    sync()

    def profile(steps: int) -> dict[str, Any]:
        """``steps`` steps under torch's profiler, host activity only: per op, calls and self host µs per step."""
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as profiler

        sync()
        with profiler(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(steps):
                step()
            sync()
        return {"ops": {e.key: [e.count / steps, e.self_cpu_time_total / steps] for e in prof.key_averages()}}

    lockstep.pin_all_threads(spec.get("time_cpu"))  # set up unpinned beside the other arms, timed on one CPU
    lockstep.serve(step, sync, {"logged": logged}, requests={"profile": profile})
    return {}


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


def _plain_reason(torch: Any, vendor: str) -> str | None:
    if cases.PLAIN_DEVICE[vendor] == "cuda" and not torch.cuda.is_available():
        return "torch sees no GPU (torch.cuda.is_available() is False)"
    return None


def _device_name(torch: Any, vendor: str) -> str:
    if cases.PLAIN_DEVICE[vendor] == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"CPU emulation on {_cpu_model()}" if vendor == "cpu" else _cpu_model()


def run_probe(spec: dict[str, Any]) -> dict[str, Any]:
    torch = _import_torch(spec)
    import torch_fl

    vendor = torch_fl.accelerator()
    ops = sorted({c.op for c in cases.CASES})
    reasons = {route: {op: _route_reason(torch_fl, route, op) for op in ops} for route in spec["routes"]}
    reasons[cases.PLAIN] = {op: _plain_reason(torch, vendor) for op in ops}
    environment = {
        "vendor": vendor,
        "device": f"{cases.FLAGOS_DEVICE} ({_device_name(torch, vendor)})",
        "plain_device": cases.PLAIN_DEVICE[vendor],
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


MODES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "probe": run_probe,
    "case": run_case,
    "paired": run_paired,
    "overhead": run_overhead,
    "step_lockstep": run_step_lockstep,
}


def main(argv: list[str]) -> int:
    spec = json.loads(argv[1])
    if spec.get("cpu") is not None:  # before torch starts its threads: they inherit the mask
        os.sched_setaffinity(0, {spec["cpu"]})
    result = MODES[spec["mode"]](spec)
    sys.stdout.write(RESULT_MARK + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
