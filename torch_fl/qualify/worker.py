"""One qualification worker: runs its operators' samples on native and on the provider, in this process.

    python -m torch_fl.qualify.worker SPEC.json

SPEC names the samples directory, the provider, the operators, the events file and the modules to import first
(modules that register providers). The parent (runner.py) starts it with a conf whose default is native, so
every operator but the one under test keeps the native route. Each event is one JSON line, flushed at once, so
what a worker measured survives the worker: a device fault or a hang kills it, and the parent reads how far it
got. After a device fault the process's device context is unusable, so the worker exits at once.
"""

from __future__ import annotations

import importlib
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

EXIT_CRASH = 70  # the provider faulted the device: the parent records a crash and goes on in a new worker
EXIT_NATIVE_FAULT = 71  # the native reference faulted: no verdict for the operator


class Events:
    def __init__(self, path: str) -> None:
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115  (held for the worker's life)

    def __call__(self, event: str, **fields: Any) -> None:
        self._file.write(json.dumps({"event": event, **fields}) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    for module in spec.get("imports", []):
        importlib.import_module(module)
    import torch_fl
    from torch_fl import providers

    providers.load_entry_points()  # a provider that an installed package declares is qualified like any other

    emit = Events(spec["events"])
    worker = _Worker(torch_fl, spec, emit)
    for op in spec["ops"]:
        emit("start", op=op)
        worker.qualify(op)
        emit("done", op=op)
    return 0


class _Worker:
    def __init__(self, torch_fl: Any, spec: dict, emit: Events) -> None:
        from . import calls

        self.torch_fl = torch_fl
        self.provider = spec["provider"]
        self.store = calls.SampleStore(Path(spec["samples"]))
        self.speed = spec.get("speed", True)
        self.rounds = int(spec.get("rounds", 5))
        self.emit = emit
        self.only = spec.get("index")  # one sample (a reproduction), or None for all

    # -- routes --------------------------------------------------------------------------------------------
    def route(self, op: str, provider: bool) -> None:
        from .._env import op_variable

        var = op_variable(op)
        if provider:
            os.environ[var] = self.provider
        else:
            os.environ.pop(var, None)
        self.torch_fl.reload_routes()

    def sync(self) -> None:
        self.torch_fl.flagos.synchronize()

    def provider_calls(self, op: str) -> int:
        rows = self.torch_fl._core.router_counters()
        return sum(calls for name, path, calls, _ in rows if name == op and path == "provider")

    # -- one operator ----------------------------------------------------------------------------------------
    def qualify(self, op: str) -> None:
        from . import calls, verdict

        samples = self.store.load(op)
        func = calls.resolve_op(op)
        references: list[tuple[int, list[Any]]] = []
        for i, sample in enumerate(samples):
            if self.only is not None and i != self.only:
                continue
            try:
                args, kwargs = calls.moved((sample.args, sample.kwargs), "flagos")
                out = func(*args, **kwargs)
                self.sync()
                references.append((i, verdict.host(verdict.results(func, args, kwargs, out))))
            except Exception as exc:  # noqa: BLE001  (native refuses the sample: it qualifies nothing)
                if verdict.is_device_fault(str(exc)):
                    self.emit("native-fault", op=op, index=i, detail=str(exc).splitlines()[0])
                    os._exit(EXIT_NATIVE_FAULT)
        self.route(op, provider=True)
        resolved = self.torch_fl.route(op)
        if resolved.route != self.provider:
            why = "; ".join(f"{r}: {reason}" for r, reason in resolved.skipped) or resolved.origin
            self.route(op, provider=False)
            self.emit("verdict", op=op, dtypes={}, unsupported=f"the route resolver passed the provider over ({why})")
            return
        per_dtype: dict[str, list[str]] = defaultdict(list)
        failures: dict[str, dict] = {}
        bitwise: dict[str, bool] = defaultdict(lambda: True)
        passing: list[int] = []
        self.torch_fl._core.set_router_counters(True)
        for i, reference in references:
            sample = samples[i]
            self.emit("sample", op=op, index=i, dtype=sample.dtype, sample=sample.describe()[:400])
            self.torch_fl._core.reset_router_counters()
            # three times, on fresh inputs each time: for a provider that replays, the first two calls of a key are
            # recorded while the provider runs them and the third runs from the plan in C++, as every later call of
            # a training run does
            outcome = None
            for attempt in ("call 1", "call 2", "call 3"):
                try:
                    args, kwargs = calls.moved((sample.args, sample.kwargs), "flagos")
                    out = func(*args, **kwargs)
                    self.sync()
                    got = verdict.host(verdict.results(func, args, kwargs, out))
                except Exception as exc:  # noqa: BLE001
                    outcome = verdict.classify_error(exc, attempt)
                    if outcome.verdict == verdict.CRASH:
                        self.emit("crash", op=op, index=i, dtype=sample.dtype, detail=outcome.detail)
                        os._exit(EXIT_CRASH)
                    break
                if self.provider_calls(op) == 0:
                    break  # the call never reached the provider (a fast path or a decomposition took it)
                outcome = verdict.compare(reference, got, attempt)
                if outcome.verdict != verdict.PASS:
                    break
            if outcome is None:
                continue
            per_dtype[sample.dtype].append(outcome.verdict)
            bitwise[sample.dtype] &= outcome.bitwise
            if outcome.verdict == verdict.PASS:
                passing.append(i)
            elif sample.dtype not in failures:
                failures[sample.dtype] = {
                    "verdict": outcome.verdict,
                    "index": i,
                    "sample": sample.describe()[:400],
                    "source": sample.source,
                    "detail": outcome.detail[:400],
                }
        self.torch_fl._core.set_router_counters(False)
        self.route(op, provider=False)
        dtypes = {
            d: {
                "verdict": verdict.worst(v),
                "samples": len(v),
                "bitwise": bitwise[d] and verdict.worst(v) == "pass",
                **({"failure": failures[d]} if d in failures else {}),
            }
            for d, v in sorted(per_dtype.items())
        }
        self.emit("verdict", op=op, dtypes=dtypes)
        if self.speed and dtypes and all(d["verdict"] == verdict.PASS for d in dtypes.values()):
            self.time(op, func, [samples[i] for i in passing])

    # -- speed -----------------------------------------------------------------------------------------------
    def time(self, op: str, func: Any, passing: list[Any]) -> None:
        """Provider against native on up to two samples, real workloads' first (the largest of each), as
        in-process pairs: three arms (native, provider, native again: the A/A), rotated each round."""
        from . import calls

        def size(s: Any) -> int:
            from torch.utils._pytree import tree_flatten

            return sum(x.numel() for x in tree_flatten((s.args, s.kwargs))[0] if hasattr(x, "numel"))

        real = sorted((s for s in passing if not s.source.startswith("opinfo:")), key=size, reverse=True)
        chosen = (real or sorted(passing, key=size, reverse=True))[:2]
        for sample in chosen:
            args, kwargs = calls.moved((sample.args, sample.kwargs), "flagos")
            arms = ("native", "provider", "native again")
            times: dict[str, list[float]] = {a: [] for a in arms}
            reps = self._reps(func, args, kwargs)
            for r in range(self.rounds):
                for arm in arms[r % 3 :] + arms[: r % 3]:
                    self.route(op, provider=arm == "provider")
                    func(*args, **kwargs)  # warm: the replay records its plan here
                    self.sync()
                    start = time.perf_counter()
                    for _ in range(reps):
                        func(*args, **kwargs)
                    self.sync()
                    times[arm].append((time.perf_counter() - start) / reps)
            self.route(op, provider=False)
            native = statistics.median(times["native"])
            self.emit(
                "speed",
                op=op,
                sample=sample.describe()[:300],
                source=sample.source,
                native_us=native * 1e6,
                ratio=statistics.median(times["provider"]) / native,
                aa=statistics.median(times["native again"]) / native,
                reps=reps,
                rounds=self.rounds,
            )

    def _reps(self, func: Any, args: tuple, kwargs: dict) -> int:
        """Calls per timed stretch: enough for about 2 ms, at most 200."""
        self.sync()
        start = time.perf_counter()
        for _ in range(3):
            func(*args, **kwargs)
        self.sync()
        per_call = max((time.perf_counter() - start) / 3, 1e-6)
        return max(3, min(200, int(2e-3 / per_call)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
