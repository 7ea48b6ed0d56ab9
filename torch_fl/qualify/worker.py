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
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from itertools import zip_longest
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
        from .device_lock import DeviceLock

        self.torch_fl = torch_fl
        self.provider = spec["provider"]
        self.store = calls.SampleStore(Path(spec["samples"]))
        self.speed = spec.get("speed", True)
        self.rounds = int(spec.get("rounds", 5))
        self.emit = emit
        # checks share the device with other workers; a timing has it alone (device_lock.py)
        self.device = DeviceLock(Path(spec["lock"]), lambda event, seconds=None: self._waited(event, seconds))
        self.op = ""
        self.only = spec.get("index")  # one sample (a reproduction), or None for all
        self.dtypes = spec.get("dtypes", [])  # the run's dtypes: samples are made for those no stored one reached
        # seconds of autotuning after which an operator's further samples are left out (each dtype keeps one)
        self.tune_for = spec.get("tune_for")
        self.tuned = 0.0  # this operator's autotuning so far: its samples' first provider calls
        self.refusal = ""  # native's last refusal of a sample
        # op -> {index: crash}: samples that crashed an earlier worker; counted as crashes, never called again
        self.crashed = {op: {c["index"]: c for c in cs} for op, cs in spec.get("crashed", {}).items()}

    def _waited(self, event: str, seconds: float | None) -> None:
        self.emit(event, op=self.op, **({} if seconds is None else {"seconds": seconds}))

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

    # -- native --------------------------------------------------------------------------------------------
    def native(self, op: str, func: Any, sample: Any, index: int) -> list[Any] | None:
        """Native's results of ``sample`` on the host, or None where native refuses it (it qualifies nothing)."""
        from . import calls, verdict

        try:
            with self.device.shared():
                args, kwargs = calls.moved((sample.args, sample.kwargs), "flagos")
                out = func(*args, **kwargs)
                self.sync()
                return verdict.host(verdict.results(func, args, kwargs, out))
        except Exception as exc:  # noqa: BLE001
            if verdict.is_device_fault(str(exc)):
                self.emit("native-fault", op=op, index=index, detail=str(exc).splitlines()[0])
                os._exit(EXIT_NATIVE_FAULT)
            self.refusal = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            return None

    def references(self, op: str, func: Any, samples: list[Any]) -> tuple[dict[int, Any], dict[str, str]]:
        """Native's results per sample index (``RANDOM`` for a random operator's samples), after samples generated
        from the schema for each dtype of the run that no stored sample reached; and, per dtype still without a
        sample, why none can be made."""
        import torch

        from . import distribution, generate

        refs: dict[int, Any] = {}
        random = distribution.tagged(func)

        def add(i: int, sample: Any) -> bool:
            if random:  # seeded twice: a tagged operator whose results agree is compared by value
                torch.manual_seed(distribution.SEEDS[0])
                first = self.native(op, func, sample, i)
                torch.manual_seed(distribution.SEEDS[1])
                second = self.native(op, func, sample, i)
                if first is None or second is None:
                    return False
                differs = distribution.differs(([], first), ([], second))
                refs[i] = RANDOM if differs else first
                return True
            got = self.native(op, func, sample, i)
            if got is not None:
                refs[i] = got
            return got is not None

        for i, sample in enumerate(samples):
            add(i, sample)
        reached = {samples[i].dtype for i in refs}
        unsampled: dict[str, str] = {}
        for dtype in self.dtypes:
            if dtype not in reached and (why := self.sample_for(op, func, dtype, samples, add)):
                unsampled[dtype] = why
        generate.top_up(samples, [samples[i] for i in refs], self.dtypes, add)
        if self.only is not None:  # a reproduction: every sample was made as in the full run, one of them runs
            refs = {i: r for i, r in refs.items() if i == self.only}
        return refs, unsampled

    def sample_for(self, op: str, func: Any, dtype: str, samples: list[Any], add: Callable[[int, Any], bool]) -> str:
        """Adds a sample of ``dtype`` that native accepts to ``samples``: one borrowed from the operator's
        functional twin, else one made from its schema. Returns why none could be made ("" when one was)."""
        from . import generate

        def twin_results(twin: Any, sample: Any) -> list[Any] | None:  # the shapes of an out= overload's outs
            return self.native(op, twin, sample, len(samples))

        for candidate in generate.borrowed(func, op, dtype, self.store.load, twin_results):
            samples.append(candidate)
            if add(len(samples) - 1, candidate):
                return ""
        why = "native refuses every sample made from its schema"
        try:
            for candidate in generate.candidates(func, op, dtype):
                samples.append(candidate)
                if candidate.dtype != dtype:
                    why = f"a sample made from its schema counts as {candidate.dtype} (its first tensor's dtype)"
                elif add(len(samples) - 1, candidate):
                    return ""
                elif not why.endswith(")") or "not implemented for" in self.refusal:
                    # the first refusal, unless a later one says native has no kernel for the dtype at all
                    why = f"native refuses every sample made from its schema ({self.refusal[:200]})"
        except generate.NoSample as exc:
            return str(exc)
        return why

    # -- the provider ----------------------------------------------------------------------------------------
    def first_call(self, op: str, index: int, call: Any) -> Any:
        """A sample's first provider call: it may autotune, so the parent counts its time against the tuning
        budget, not the hang timeout (runner.py), and the report keeps it as tuning time."""
        self.emit("tune", op=op, index=index)
        start = time.perf_counter()
        try:
            return call()
        finally:
            seconds = time.perf_counter() - start
            self.tuned += seconds
            self.emit("tuned", op=op, index=index, seconds=seconds)

    def by_value(self, op: str, func: Any, sample: Any, index: int, reference: list[Any]) -> Any:
        """Three provider calls, on fresh inputs each time: for a provider that replays, the first two calls of a
        key are recorded while the provider runs them and the third runs from the plan in C++, as every later
        call of a training run does. None when no call reached the provider."""
        from . import calls, verdict

        outcome = None
        for attempt in ("call 1", "call 2", "call 3"):

            def call() -> list[Any]:
                args, kwargs = calls.moved((sample.args, sample.kwargs), "flagos")
                out = func(*args, **kwargs)
                self.sync()
                return verdict.host(verdict.results(func, args, kwargs, out))

            try:
                with self.device.shared():  # taken outside first_call, so a wait never counts as tuning
                    got = self.first_call(op, index, call) if attempt == "call 1" else call()
            except Exception as exc:  # noqa: BLE001
                return self.refused(op, sample, index, exc, attempt)
            if self.provider_calls(op) == 0:
                return outcome  # the call never reached the provider (a fast path or a decomposition took it)
            outcome = verdict.compare(reference, got, attempt)
            if outcome.verdict != verdict.PASS:
                break
        return outcome

    def by_distribution(self, op: str, func: Any, sample: Any, index: int) -> Any:
        """A random operator's sample: native's draws against the provider's (distribution.py)."""
        from . import calls, distribution, verdict

        def call() -> distribution.Draw:
            args, kwargs = calls.moved((sample.args, sample.kwargs), "flagos")
            values = verdict.results(func, args, kwargs, func(*args, **kwargs))
            self.sync()
            return distribution.meta(values), verdict.host(values)

        self.route(op, provider=False)
        with self.device.shared():
            native = distribution.draw(call, distribution.SEEDS[0])
        self.route(op, provider=True)
        try:
            with self.device.shared():
                first = lambda: self.first_call(op, index, call)  # noqa: E731
                provider = distribution.draw(call, distribution.SEEDS[1], first=first)
        except Exception as exc:  # noqa: BLE001
            return self.refused(op, sample, index, exc, "a draw")
        if self.provider_calls(op) == 0:
            return None
        return distribution.judge(sample, func, native, provider)

    def refused(self, op: str, sample: Any, index: int, exc: BaseException, attempt: str) -> Any:
        from . import verdict

        outcome = verdict.classify_error(exc, attempt)
        if outcome.verdict == verdict.CRASH:
            self.emit("crash", op=op, index=index, dtype=sample.dtype, detail=outcome.detail)
            os._exit(EXIT_CRASH)
        return outcome

    # -- one operator ----------------------------------------------------------------------------------------
    def qualify(self, op: str) -> None:
        from . import calls, speed, verdict

        self.op = op
        samples = self.store.load(op)
        func = calls.resolve_op(op)
        references, unsampled = self.references(op, func, samples)
        self.route(op, provider=True)
        resolved = self.torch_fl.route(op)
        if resolved.route != self.provider:
            why = "; ".join(f"{r}: {reason}" for r, reason in resolved.skipped) or resolved.origin
            self.route(op, provider=False)
            self.emit("verdict", op=op, dtypes={}, unsupported=f"the route resolver passed the provider over ({why})")
            return
        per_dtype: dict[str, list[tuple[str, tuple[str, ...]]]] = defaultdict(list)  # (verdict, input classes)
        failures: dict[str, dict] = {}
        bitwise: dict[str, bool] = defaultdict(lambda: True)
        judged: dict[str, str] = {}
        passing: list[int] = []
        crashed = self.crashed.get(op, {})
        cut: dict[str, int] = defaultdict(int)  # dtype -> samples left out once the tuning was spent
        self.tuned = 0.0
        self.torch_fl._core.set_router_counters(True)
        for i in interleaved(references, samples):
            reference, sample = references[i], samples[i]
            if self.tune_for is not None and self.tuned >= self.tune_for and per_dtype.get(sample.dtype):
                cut[sample.dtype] += 1
                continue
            classes = calls.input_classes(sample.args, sample.kwargs)
            like = None if i in crashed else self.like_a_crash(crashed, classes)
            if like is not None and like.get("dtype") == sample.dtype:
                continue  # its dtype already counts that crash, in these classes
            described = sample.describe()[:400]
            self.emit(
                "sample", op=op, index=i, dtype=sample.dtype, sample=described, classes=classes, source=sample.source
            )
            self.torch_fl._core.reset_router_counters()
            if i in crashed:
                outcome = verdict.Outcome(verdict.CRASH, crashed[i].get("detail") or "it crashed a worker")
            elif like is not None:  # counted as that crash, never called: one route's requirements hold every dtype
                outcome = verdict.Outcome(
                    verdict.CRASH, f"not called: a {like.get('dtype')} sample in its input classes crashed a worker"
                )
            elif reference is RANDOM:
                outcome = self.by_distribution(op, func, sample, i)
                judged[sample.dtype] = "distribution"
            else:
                outcome = self.by_value(op, func, sample, i, reference)
            if outcome is None:
                continue
            per_dtype[sample.dtype].append((outcome.verdict, classes))
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
                    **({"classes": list(classes)} if classes else {}),
                }
        self.torch_fl._core.set_router_counters(False)
        self.route(op, provider=False)
        dtypes = {d: self.dtype_verdict(v, bitwise[d], failures.get(d), judged.get(d)) for d, v in per_dtype.items()}
        for d, n in cut.items():
            if d in dtypes:
                dtypes[d]["cut"] = n  # judged on its first samples; these many more were not run (--tune-for)
        dtypes = dict(sorted(dtypes.items()))
        self.emit("verdict", op=op, dtypes=dtypes, no_sample=unsampled)
        if self.speed and passing:
            passed = [samples[i] for i in passing]
            route = lambda provider: self.route(op, provider)  # noqa: E731
            with self.device.alone():
                records = speed.measure(op, func, passed, route, self.sync, self.rounds)
            for record in records:
                self.emit("speed", op=op, alone=True, **record)

    @staticmethod
    def like_a_crash(crashed: dict[int, dict], classes: tuple[str, ...]) -> dict | None:
        """A sample that crashed an earlier worker and whose every input class this sample falls in, or None. Such
        a sample is not called: whatever classes explain that crash cover it too, so the conf never serves it, and
        calling it could crash this worker as well. One of the crashed sample's own dtype is left out; one of
        another dtype counts as that crash, so that its dtype is held to the same classes (a route's requirements
        hold all its dtypes anyway) and one rerun serves every dtype."""
        return next((c for c in crashed.values() if set(c.get("classes", ())) <= set(classes)), None)

    @staticmethod
    def dtype_verdict(
        outcomes: list[tuple[str, tuple[str, ...]]], bitwise: bool, failure: dict | None, by: str | None
    ) -> dict[str, Any]:
        """One dtype's entry of the report: its verdict over its samples' outcomes, finer where every failure falls
        in an input class (verdict.finer): then ``except`` names the classes, ``requires`` the conf words that keep
        them native (torch_fl/_chain.py), and ``served`` how many samples passed outside them."""
        from .._chain import REQUIREMENT_OF
        from . import verdict

        judged, excepted = verdict.finer(outcomes)
        entry: dict[str, Any] = {
            "verdict": judged,
            "samples": len(outcomes),
            "bitwise": bitwise and judged == verdict.PASS,
        }
        if excepted:
            entry["except"] = list(excepted)
            entry["requires"] = [REQUIREMENT_OF[c] for c in excepted]
            entry["served"] = sum(1 for _, classes in outcomes if not set(classes) & set(excepted))
        if failure is not None:
            entry["failure"] = failure
        if by is not None:
            entry["by"] = by
        return entry


RANDOM = object()  # a reference that is not values: the sample's operator is random, judged by distribution


def interleaved(references: dict[int, Any], samples: list[Any]) -> list[int]:
    """The indices of the samples with a reference, the dtypes taking turns (each dtype's in index order): an
    operator whose tuning runs out (--tune-for) has then run about as many samples of each dtype."""
    by_dtype: dict[str, list[int]] = defaultdict(list)
    for i in sorted(references):
        by_dtype[samples[i].dtype].append(i)
    return [i for turn in zip_longest(*by_dtype.values()) for i in turn if i is not None]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
