"""The qualification's parent process: lists what the provider claims, collects samples, and runs workers.

The parent never touches the device. Workers (worker.py) take the operators a few at a time; one that dies
(a device fault, a signal) or stops making progress (a hang) is replaced, the operator it was on gets a crash or
timeout verdict with the sample it was running, and the run goes on with the next operator. An operator whose
sample of some input class crashed runs again in a fresh worker (up to CRASH_RERUNS times) that counts that
sample as a crash and calls no other sample of its dtype in all of its classes, so the rest still get verdicts
and a crash that an input class explains (a broadcast, say) becomes "pass except" that class, as wrong values do.
Everything workers report lands in ``<out>/events.jsonl``, so a run cut short (``--budget``, a node's time limit,
^C) keeps what it measured, and running the same command again resumes where it stopped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .._env import OP_PREFIX
from . import extend, report
from .progress import Clock, progress
from .worker import EXIT_CRASH, EXIT_NATIVE_FAULT

if TYPE_CHECKING:
    from ..providers import Provider

BUDGET_GRACE = 30.0  # seconds past the budget that running workers get to finish their operator
CRASH_RERUNS = 3  # fresh workers an operator gets after crashes; past them its verdict is the crash
NATIVE_CONF = "# written by torch_fl.qualify: every operator native but the one under test\ndefault = native\n"


@dataclass
class Plan:
    provider: str
    out: Path
    samples: Path
    ops: Sequence[str] | None = None  # None: every operator the provider claims
    first: Sequence[str] = ()  # operators run before the others, so that a run cut short has finished them
    dtypes: Sequence[str] = ()
    imports: Sequence[str] = ()
    workers: int = 1
    chunk: int = 6
    timeout: float = 120.0  # seconds one operator may run, beyond its tuning, before it counts as hung
    tuning: float = 900.0  # seconds the first provider calls of an operator's samples may take (autotuning)
    tune_for: float | None = None  # seconds of tuning after which an operator's further samples are left out
    budget: float | None = None  # seconds for the whole run; unfinished operators stay pending
    speed: bool = True
    opinfo_per_op: int = 4
    index: int | None = None  # run this one sample of each operator (a reproduction)
    extend: Path | None = None  # an earlier report of this key: its finished operators are carried (extend.py)
    retime: bool = False  # with extend: an operator timed by an older method runs again (extend.timed_now)
    again: Sequence[str] = ()  # with extend: operators that run again even where the report finished them
    echo: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr, flush=True))


def _env(plan: Plan) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(OP_PREFIX)}
    conf = plan.out / "native.conf"
    conf.write_text(NATIVE_CONF)
    env["FLAGOS_BACKEND_CONFIG"] = str(conf)
    env.pop("FLAGOS_CONF", None)
    env.pop("FLAGOS_LOG", None)
    return env


def _child(plan: Plan, code: str, *args: str) -> dict:
    """Run a short job of this package in a child (it imports torch_fl; the parent stays off the device)."""
    res = subprocess.run(
        [sys.executable, "-c", code, *args], env=_env(plan), capture_output=True, text=True, check=False
    )
    if res.returncode != 0:
        raise RuntimeError(f"torch_fl.qualify: a child job failed (exit {res.returncode}):\n{res.stderr[-4000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


_CLAIMS = """
import importlib, json, sys
mods = json.loads(sys.argv[1])
for m in mods: importlib.import_module(m)
import torch, torch_fl
from torch_fl import providers
providers.load_entry_points()
p = providers.providers().get(sys.argv[2])
if p is None:
    sys.exit(f"no provider named {sys.argv[2]!r}; registered: {', '.join(sorted(providers.providers()))}. "
             f"A provider comes from a package's {providers.ENTRY_POINT_GROUP!r} entry point or from a module "
             "that --import names")
why = p.unavailable_reason()
if why:
    sys.exit(f"provider {sys.argv[2]!r} cannot run here: {why}")
from torch_fl.qualify.runner import qualifiable
ops = qualifiable(p)
print(json.dumps({"ops": ops, "version": p.version(), "torch": torch.__version__,
                  "accelerator": torch_fl.accelerator(), "torch_fl": torch_fl.__version__}))
"""

_OPINFO = """
import importlib, json, sys
spec = json.loads(sys.argv[1])
for m in spec["imports"]: importlib.import_module(m)
import torch_fl
from pathlib import Path
from torch_fl.qualify import opinfo
vendor = "cuda" if torch_fl.accelerator() in ("cuda", "dcu") else "cpu"
counts = opinfo.record_opinfo(
    Path(spec["samples"]), "flagos", vendor, spec["ops"], spec["dtypes"], spec["per_op"], spec["named_only"]
)
print(json.dumps(counts))
"""


def qualifiable(provider: Provider) -> list[str]:
    """The operators of ``provider``'s claim that a route can send to it: known to torch and not decomposed above
    the device, where the router never sees them. A run qualifies these and the workload recording records them."""
    import torch_fl

    return sorted(op for op in provider.ops() if op in torch_fl.known_ops() and torch_fl.reaches_router(op))


def claims(plan: Plan) -> dict:
    return _child(plan, _CLAIMS, json.dumps(list(plan.imports)), plan.provider)


def read_events(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # the last line of a worker killed mid-write
    return out


def finished(events: list[dict]) -> set[str]:
    """Operators with a final outcome: done, or ended by a crash, a timeout or a native fault."""
    return {e["op"] for e in events if e["event"] in ("done", "crash", "timeout", "native-fault", "carried")}


def run(plan: Plan) -> dict:
    """Qualify ``plan.provider``; returns the meta record. Resumes from ``<out>/events.jsonl``."""
    started = time.monotonic()
    plan.out.mkdir(parents=True, exist_ok=True)
    meta_path = plan.out / "meta.json"
    meta = claims(plan)
    meta.update(provider=plan.provider, dtypes=list(plan.dtypes), imports=list(plan.imports), samples=str(plan.samples))
    claimed = meta["ops"]
    if plan.ops:
        unknown = sorted(set(plan.ops) - set(claimed))
        if unknown:
            raise ValueError(
                f"provider {plan.provider!r} does not claim {', '.join(unknown)} (or they never reach the router); "
                f"it claims {len(claimed)} operators: `python -m torch_fl qualify --provider {plan.provider} --list`"
            )
    wanted = list(plan.ops or claimed)
    if stray := sorted(set(plan.first) - set(claimed)):  # an order, not a selection: nothing else to run
        plan.echo(
            f"qualify: --first names {len(stray)} operator(s) that never reach provider {plan.provider!r} "
            f"through the router, passed over: {', '.join(stray)} (`--list` prints the {len(claimed)} it does)"
        )
    meta["qualified_ops"] = wanted
    meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    events_path = plan.out / "events.jsonl"
    done = finished(read_events(events_path))
    if plan.extend is not None:
        base = extend.read(plan.extend, report.key(meta))
        carried = extend.carried(base, wanted, plan.dtypes, plan.retime, again=plan.again)
        n = extend.seed(events_path, base, carried, done)
        # the final entries it runs again (--retime, --again, new input classes) stand in the report until this run
        # ends them
        final = extend.carried(base, wanted, plan.dtypes, renew=False)
        if renewed := {op: r for op, r in final.items() if op not in carried}:
            seeded = done | {e["op"] for e in read_events(events_path) if e["event"] == "standing"}
            extend.seed(events_path, base, renewed, seeded, "standing")
        if classes := extend.new_classes(base):
            plan.echo(f"qualify: input classes new since {plan.extend}: {', '.join(classes)}; the operators a crash "
                      f"shaped run again")  # fmt: skip
        plan.echo(f"qualify: {n} operators carried from {plan.extend}" if n else f"qualify: extends {plan.extend}")
        done = finished(read_events(events_path))
    ahead = set(plan.first)  # a stable sort: the named operators first, each group in the claimed order
    pending = sorted((op for op in wanted if op not in done), key=lambda op: op not in ahead)
    _record_opinfo(plan, claimed, pending, resumed=bool(done))
    plan.echo(
        f"qualify: {len(wanted)} operators, {len(wanted) - len(pending)} already done, {len(pending)} to run "
        f"with {plan.workers} worker(s)"
    )
    _Pool(plan, events_path, started).drain(pending)
    return meta


def _record_opinfo(plan: Plan, claimed: list[str], pending: list[str], resumed: bool) -> None:
    """OpInfo's samples of the operators still to run, unless the samples directory holds them. A fresh run
    records the whole database for every claimed operator; a resumed one (a new machine with the run's events)
    only the OpInfos named after its pending operators, which takes seconds instead of minutes."""
    from .generate import twin

    stamp = plan.samples / ".opinfo-recorded"
    recorded = set(json.loads(stamp.read_text()).get("ops", claimed)) if stamp.is_file() else set()

    def with_twins(ops: list[str]) -> list[str]:  # an out= or in-place operator borrows its twin's samples
        return list(dict.fromkeys([*ops, *filter(None, map(twin, ops))]))

    missing = [op for op in with_twins(pending) if op not in recorded]
    if not missing:
        return
    ops = missing if resumed else with_twins(claimed)
    how = "the OpInfos named after them" if resumed else "the whole database"
    plan.echo(f"qualify: recording OpInfo samples of {len(ops)} operators into {plan.samples} ({how})")
    spec = {
        "imports": list(plan.imports),
        "samples": str(plan.samples),
        "ops": ops,
        "dtypes": list(plan.dtypes),
        "per_op": plan.opinfo_per_op,
        "named_only": resumed,
    }
    counts = _child(plan, _OPINFO, json.dumps(spec))
    stamp.write_text(json.dumps({**counts, "ops": sorted(recorded | set(ops))}) + "\n")
    plan.echo(f"qualify: {counts['samples']} OpInfo samples run ({counts['errors']} (OpInfo, dtype) pairs refused)")


class _Pool:
    def __init__(self, plan: Plan, events: Path, started: float) -> None:
        self.plan, self.events, self.started = plan, events, started
        self.env = _env(plan)
        self.running: list[tuple[subprocess.Popen, list[str], Path, Path]] = []
        self.crashed: dict[str, list[dict]] = {}  # op -> the samples that crashed its workers in this run

    def _over_budget(self, grace: float = 0.0) -> bool:
        return self.plan.budget is not None and time.monotonic() - self.started > self.plan.budget + grace

    def _stop_all(self) -> None:
        """The budget and its grace are spent: stop the workers; what they finished is kept, the rest is pending."""
        for entry in list(self.running):
            proc, _, own, _ = entry
            proc.kill()
            proc.wait()
            self._collect(own, [])
            self._finish(entry)
        self.plan.echo("qualify: the budget is spent; unfinished operators stay pending (run again to resume)")

    def _start(self, ops: list[str]) -> None:
        fd, spec_path = tempfile.mkstemp(dir=self.plan.out, prefix=".worker-", suffix=".json")
        os.close(fd)
        own = Path(spec_path).with_suffix(".jsonl")
        spec = {
            "provider": self.plan.provider,
            "samples": str(self.plan.samples),
            "ops": ops,
            "events": str(own),
            "lock": str(self.plan.out),  # the device lock's files (device_lock.py)
            "imports": list(self.plan.imports),
            "speed": self.plan.speed and self.plan.index is None,
            "index": self.plan.index,
            "dtypes": list(self.plan.dtypes),
            "tune_for": self.plan.tune_for,
            "crashed": {op: self.crashed[op] for op in ops if op in self.crashed},
        }
        Path(spec_path).write_text(json.dumps(spec))
        log = open(Path(spec_path).with_suffix(".log"), "w")  # noqa: SIM115  (closed when the worker ends)
        proc = subprocess.Popen(
            [sys.executable, "-m", "torch_fl.qualify.worker", spec_path], env=self.env, stdout=log, stderr=log
        )
        log.close()
        self.running.append((proc, ops, own, Path(spec_path)))

    def _collect(self, own: Path, extra: list[dict]) -> None:
        lines = [json.dumps(e) for e in read_events(own) + extra]
        if lines:
            with open(self.events, "a", encoding="utf-8") as fh:
                fh.write("\n".join(lines) + "\n")
        own.unlink(missing_ok=True)

    def drain(self, pending: list[str]) -> None:
        queue = list(pending)
        clock = Clock(self.plan.timeout, self.plan.tuning)
        try:
            while queue or self.running:
                while queue and len(self.running) < self.plan.workers and not self._over_budget():
                    n = 1 if queue[0] in self.crashed else self._chunk(len(queue))  # a crash's rerun runs alone
                    take, queue = queue[:n], queue[n:]
                    self._start(take)
                if not self.running:
                    break  # the budget is spent: what is left stays pending for the next run
                if self._over_budget(grace=BUDGET_GRACE):
                    self._stop_all()
                    break
                time.sleep(0.2)
                for entry in list(self.running):
                    proc, ops, own, spec = entry
                    now = progress(read_events(own))
                    current, sample = now.current, now.sample
                    rc = proc.poll()
                    if rc is None:
                        if current is not None:
                            hung = clock.hung((spec.name, current), now)  # a rerun's worker starts afresh
                            if hung:
                                proc.kill()
                                proc.wait()
                                self._end(entry, queue, current, sample, "timeout", detail=hung)
                        continue
                    if rc == 0:
                        self._collect(own, [])
                        self._finish(entry)
                    else:
                        self._end(entry, queue, current, sample, "crash", rc)
        finally:
            for proc, *_ in self.running:
                proc.kill()

    def _chunk(self, queued: int) -> int:
        """Operators per worker: the plan's chunk, or fewer where the queue would leave workers idle (a resumed
        run's few operators, autotuned ones among them, spread over every worker)."""
        return max(1, min(self.plan.chunk, -(-queued // self.plan.workers)))

    def _finish(self, entry: tuple) -> None:
        proc, ops, own, spec = entry
        self.running.remove(entry)
        spec.unlink(missing_ok=True)

    def _end(
        self,
        entry: tuple,
        queue: list[str],
        current: str | None,
        sample: dict | None,
        how: str,
        rc: int | None = None,
        detail: str = "",
    ) -> None:
        """A worker died or hung: record the operator it was on, and put the rest of its chunk back."""
        proc, ops, own, spec = entry
        events = read_events(own)
        extra: list[dict] = []
        already = any(e["event"] in ("crash", "native-fault") and e["op"] == current for e in events)
        if current is not None and not already:
            log = spec.with_suffix(".log")
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.is_file() else []
            extra.append(
                {
                    "event": how,
                    "op": current,
                    "index": sample["index"] if sample else None,
                    "dtype": sample["dtype"] if sample else None,
                    "detail": (
                        detail
                        if how == "timeout"
                        else f"the worker died (exit {rc}{', a device fault' if rc == EXIT_CRASH else ''})"
                        + (f": {tail[0][:300]}" if tail else "")
                    ),
                }
            )
        if rc == EXIT_NATIVE_FAULT:
            self.plan.echo(f"qualify: {current}: the native reference faulted the device; no verdict for it")
        self._collect(own, extra)
        self._finish(entry)
        done = finished(events) | ({current} if current else set())
        queue[:0] = [op for op in ops if op not in done]
        if current is not None:
            self.plan.echo(f"qualify: {current}: {how}")
        if how == "crash" and rc != EXIT_NATIVE_FAULT and current is not None:
            self._rerun_past_crash(current, events + extra, sample, queue)

    def _rerun_past_crash(self, op: str, events: list[dict], sample: dict | None, queue: list[str]) -> None:
        """Queue ``op`` first again, alone, for a worker that skips the sample it crashed on (its crash event is
        in the log; the rerun's verdict replaces it). Only where the crash came before the operator's verdict (not
        in its timing), an input class could explain it (the sample falls in one), and its reruns are not spent."""
        if any(e["event"] == "verdict" and e.get("op") == op for e in events):
            return
        crashes = [e for e in events if e["event"] == "crash" and e.get("op") == op and e.get("index") is not None]
        crash = crashes[-1] if crashes else None
        if crash is None or sample is None or sample.get("index") != crash["index"] or not sample.get("classes"):
            return
        seen = self.crashed.setdefault(op, [])
        if len(seen) >= CRASH_RERUNS or any(c["index"] == crash["index"] for c in seen):
            return
        seen.append({**{k: crash.get(k) for k in ("index", "dtype", "detail")}, "classes": sample["classes"]})
        queue.insert(0, op)
        self.plan.echo(f"qualify: {op}: again without sample {crash['index']} (rerun {len(seen)} of {CRASH_RERUNS})")
