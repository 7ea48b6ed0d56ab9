"""The harness's measurement processes: ``python -m harness.worker '<json spec>'`` (from build_tools/bench) prints one
``BENCH-RESULT <json>`` line, as the node check's child.py does, whose helpers and modes it shares.

Modes (the spec's ``mode``), beside child.py's ``probe`` and ``case``:

- ``paired``: one A/B case, plain vendor tensors and each flagos arm (a route, the replay on or off) in alternating
  batches in this process.
- ``overhead``: every dispatch-overhead op, plain and flagos in alternating batches in this process.
- ``step_lockstep``: the training step of one arm (workloads.build_step), set up and warmed up, then timed a few
  steps at a time whenever the parent asks (lockstep.py): the parent keeps one such process per arm alive and
  takes turns between them, and may ask it to profile a few steps.

A plain arm never imports the torch_fl package: child.py and its cases.py are loaded from the installed
package's folder, found without importing it, and harness/__init__.py imports nothing.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

from . import lockstep, workloads


def _node_check_dir() -> str:
    """The installed torch_fl/bench folder, located without running torch_fl's __init__."""
    found = importlib.util.find_spec("torch_fl")
    if found is None or not found.submodule_search_locations:
        raise SystemExit("bench harness: torch_fl is not installed in this Python")
    return os.path.join(list(found.submodule_search_locations)[0], "bench")


sys.path.insert(0, _node_check_dir())
import cases  # noqa: E402  (torch_fl/bench/cases.py, by its folder)
import child  # noqa: E402  (torch_fl/bench/child.py, by its folder)

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
    route, replay = workloads.PAIRED_ARMS[arm]
    _set_route(torch_fl, op, route)
    torch_fl.replay.configure(enabled=replay)  # after the reload, which re-applies the environment's setting


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _paired_arm_reason(torch_fl: Any, op: str, arm: str) -> str | None:
    """Why ``arm`` cannot take ``op`` in this process (its route does not load, or resolves to another), or None."""
    route, _ = workloads.PAIRED_ARMS[arm]
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
    return (lambda: op(*args, **kwargs)), child.synchronizer(torch, device)


Select = Callable[[str], tuple[Callable[[], Any], Callable[[], None]]]


def _rounds(select: Select, names: list[str], pairs: int, repeat: int) -> dict[str, list[float]]:
    """``pairs`` rounds of one batch per arm, the order rotated every round (P A B, A B P, B P A, ...)."""
    us: dict[str, list[float]] = {name: [] for name in names}
    for pair in range(pairs):
        shift = pair % len(names)
        for name in names[shift:] + names[:shift]:
            call, sync = select(name)
            us[name].append(child.batch_us(call, repeat, sync))
    return us


def run_paired(spec: dict[str, Any]) -> dict[str, Any]:
    """Plain vendor tensors and every flagos arm of ``spec["arms"]``, timed in alternating batches in this process.

    The rotated order (``_rounds``) lets a drift within the process weigh on all arms alike; each batch's ratio to
    the plain batch of its round is kept. torch_fl is loaded, but calls on plain vendor tensors never reach it. The
    flagos arms share one set of flagos tensors and switch the op's route (and the replay) before each batch; an
    arm whose route this process cannot take is returned with its reason, untimed."""
    torch = child.import_torch(spec)
    import torch_fl

    case = cases.find_cases([spec["case"]])[0]
    op = child.op_overload(torch, case.op)
    plain = _device_call(torch, case, op, torch.device(spec["plain_device"]))
    flagos = _device_call(torch, case, op, torch.device(spec["device"]))
    arms = list(spec.get("arms", workloads.DEFAULT_PAIRED_ARMS))
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
        logged[name] = child.logged_routes(call)  # after the warm-up: a replayed call, where the replay takes this key
        if workloads.PAIRED_ARMS[name][1] and [case.op, "flaggems/replay"] not in logged[name]:
            reasons[name] = _replay_refusal(torch_fl, case.op)  # None: the parent finds the route wrong and stops
    measured = ["plain", *(a for a in arms if reasons[a] is None)]
    us = _rounds(select, measured, spec["pairs"], spec["repeat"])
    want = select("plain")[0]().to("cpu")
    for name in measured[1:]:
        if not torch.allclose(select(name)[0]().to("cpu"), want, rtol=1e-5, atol=1e-6):
            raise SystemExit(f"{case.name}: flagos {name} and plain results differ")
    results: dict[str, Any] = {arm: {"reason": reasons[arm]} for arm in arms if reasons[arm] is not None}
    for arm in measured[1:]:
        results[arm] = {
            "us": us[arm],
            "ratios": [a / p for a, p in zip(us[arm], us["plain"], strict=True)],
            "logged": logged[arm],
        }
    return {"plain_us": us["plain"], "arms": {arm: results[arm] for arm in arms}}


# ---- mode: overhead ---------------------------------------------------------------------------------


def _overhead_one(torch: Any, item: workloads.OverheadOp, spec: dict[str, Any]) -> dict[str, Any]:
    from torch_fl import _core as _C

    calls = {}
    for name, device in (("plain", torch.device(spec["plain_device"])), ("flagos", torch.device(spec["device"]))):
        torch.manual_seed(0)
        state = item.setup(device)
        calls[name] = ((lambda state=state: item.call(state)), child.synchronizer(torch, device))
    # the same flagos tensors with every vendor alias built anew per call: what the router cost before aliases
    # were reused across calls (csrc/dispatch/alias_pool.h), measured beside it
    calls["flagos-fresh"] = calls["flagos"]
    logged = child.logged_routes(calls["flagos"][0])
    for call, _ in calls.values():
        for _ in range(spec["warmup"]):
            call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    order = list(calls)
    for pair in range(workloads.OVERHEAD_PAIRS):
        for name in order[pair % 3 :] + order[: pair % 3]:  # rotated, so no arm always runs first
            call, sync = calls[name]
            _C.set_alias_reuse(name != "flagos-fresh")
            try:
                times[name].append(child.batch_us(call, spec["repeat"], sync))
            finally:
                _C.set_alias_reuse(True)
    return {
        "plain_us": times["plain"],
        "flagos_us": times["flagos"],
        "flagos_fresh_us": times["flagos-fresh"],
        "logged": logged,
    }


def run_overhead(spec: dict[str, Any]) -> dict[str, Any]:
    """Every overhead op on plain vendor tensors and on flagos tensors, in alternating batches in this process."""
    torch = child.import_torch(spec)
    return {"ops": {item.name: _overhead_one(torch, item, spec) for item in workloads.OVERHEAD_OPS}}


# ---- mode: step -------------------------------------------------------------------------------------------------


def run_step_lockstep(spec: dict[str, Any]) -> dict[str, Any]:
    """Set the step up, warm it up, then serve the parent's turns (lockstep.serve) until it says quit."""
    torch = child.import_torch(spec)
    device = torch.device(spec["device"])
    sync = child.synchronizer(torch, device)
    step = workloads.build_step(device, spec["d_model"])
    logged = child.logged_routes(step) if child.flagos_arm(spec) else []
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


MODES: dict[str, child.Mode] = {
    **child.MODES,
    "paired": run_paired,
    "overhead": run_overhead,
    "step_lockstep": run_step_lockstep,
}

if __name__ == "__main__":
    sys.exit(child.main(sys.argv, MODES))
