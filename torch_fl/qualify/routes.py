"""The routes a qualification report allows, as conf blocks: one source for the conf a node's qualification
writes (``<out>/qualified.conf``) and for the committed confs (build_tools/generate_confs.py loads this file by
path, so it imports nothing but the standard library).

A provider route serves the dtypes its operator passed in and no other: each line names them
(``mul.Tensor = flaggems[bfloat16, float32], native``), and the router sends a call of any other dtype native.
A dtype that passed except on an input class (``pass except strided``) adds the class's requirement to the list
(``flaggems[bfloat16, float32, contiguous]``): one list per route, so its other dtypes are held to it too."""

from __future__ import annotations

from typing import Any

NATIVE = "native"
# A tuned conf trusts a provider/native time only when native against native (the A/A) came out within this of 1.
AA_BAND = 0.10


# The qualified conf leaves native an operator whose provider kernel took more than this times native's time at
# one of its timed real samples, beyond the A/A's noise: correct, but a route that slows every model down.
SLOW = 1.5


def slow_sample(r: dict[str, Any], bar: float = SLOW) -> dict[str, Any] | None:
    """The operator's timed sample (speed.py's: its largest and its smallest real one) whose provider/native time
    is furthest over ``bar`` (0: no bar) by more than its A/A's own distance from 1 (an A/A of 1.2 asks for
    1.2 times the bar); None where no sample is. Each sample counts: a kernel slow only where the device hides the
    host's cost, or only where it does not, slows a model all the same."""
    speed = r.get("speed")
    if not bar or not speed:
        return None
    over = [s for s in speed.get("samples") or [speed] if s["ratio"] > bar * max(s["aa"], 1.0 / s["aa"])]
    return max(over, key=lambda s: s["ratio"], default=None)


def too_slow(r: dict[str, Any], bar: float = SLOW) -> bool:
    return slow_sample(r, bar) is not None


def faster(r: dict[str, Any]) -> bool:
    """The operator passed and its provider/native time is at most 1 with a trustworthy A/A beside it."""
    speed = r.get("speed")
    return bool(speed) and speed["ratio"] <= 1.0 and abs(speed["aa"] - 1.0) <= AA_BAND


Block = tuple[tuple[str, ...], tuple[str, ...], str]  # (ops, chain, reason)
PASS = "pass"
PASS_EXCEPT = "pass except"  # verdict.py's: passed outside the input classes its entry's ``except`` names
NO_DTYPE = ("none", "any")  # a report's keys for samples without a dtype: no dtype list can name them
# torch_fl/_chain.py's, in the order a list writes them (this file imports nothing of the package)
REQUIREMENTS = ("contiguous", "no_0dim", "same_shape", "same_dtype")


def passed(r: dict[str, Any]) -> tuple[str, ...]:
    """The dtypes an operator passed in (also those it passed except on an input class), sorted: the dtypes its
    provider route serves. Each dtype stands on its own samples: a dtype that crashed (its crash explained by an
    input class in the others, runner.py's rerun past it) leaves the others served. A crash or a timeout that ends
    the operator's run leaves only the dtype it hit in the report (report.py), so nothing of that run counts."""
    return tuple(
        sorted(d for d, v in r.get("dtypes", {}).items() if v["verdict"] in (PASS, PASS_EXCEPT) and d not in NO_DTYPE)
    )


def required(r: dict[str, Any], served: tuple[str, ...]) -> tuple[str, ...]:
    """The input requirements the route of dtypes ``served`` takes: every one a served dtype needs."""
    words = {w for d in served for w in r["dtypes"][d].get("requires", ())}
    return tuple(w for w in REQUIREMENTS if w in words)


def _excepted(r: dict[str, Any], served: tuple[str, ...]) -> str:
    """Which dtypes pass except on which input classes, with each one's first failure: why the route requires."""
    parts = []
    for d in served:
        v = r["dtypes"][d]
        if v.get("except"):
            f = v.get("failure", {})
            parts.append(
                f"{d} passes {v.get('served', '?')} of {v['samples']} samples, all but those {' or '.join(v['except'])}"
                f" (first failure: {f.get('verdict', '?')}: {f.get('sample', '?')}: {f.get('detail', '')})"
            )
    return "; ".join(parts)


def _failure_reason(r: dict[str, Any]) -> str:
    f = r.get("failure")
    if f:
        return f"{r['verdict']} ({f['dtype']}): {f['sample']}: {f['detail']}. Reproduce: {f['repro']}"
    if r["verdict"] == "pending":
        return "pending: the qualification run ended before it reached this operator (a rerun resumes it)"
    return f"{r['verdict']}: {r.get('detail') or 'no sample of the qualification reached the provider'}"


def _left_out(r: dict[str, Any], served: tuple[str, ...]) -> str:
    """Why the dtypes a route leaves out go native: each failing dtype's verdict, the first failure in full."""
    others = sorted((d, v["verdict"]) for d, v in r.get("dtypes", {}).items() if d not in served)
    listed = ", ".join(f"{d}: {v}" for d, v in others)
    return f"other dtypes native ({listed}); first failure: {_failure_reason(r)}"


def blocks(
    report: dict[str, Any], tuned: bool = False, pinned: frozenset[str] = frozenset(), slow_bar: float = SLOW
) -> list[Block]:
    """The provider for every operator in the dtypes it passed (never where it costs over ``slow_bar`` times
    native at its real shapes; ``tuned``, only where it is no slower than native), written as a dtype list, native
    for its other dtypes; every other claimed operator stays native with its verdict and reproduction as the
    reason. ``pinned`` operators are left out (a hand-written block of the vendor decides them)."""
    provider = report["provider"]
    where = f"{provider} {report.get('provider_version') or ''} on {report['vendor']}, torch {report['torch_line']}"
    clean: dict[tuple[str, ...], list[str]] = {}  # dtype list -> operators that failed in no dtype
    partial: list[Block] = []
    slower: list[str] = []
    out: list[Block] = []
    for op, r in sorted(report["ops"].items()):
        if op in pinned:
            continue
        served = passed(r)
        if not served:
            out.append(((op,), (NATIVE,), _failure_reason(r)))
        elif tuned and not faster(r):
            slower.append(op)
        elif slow := slow_sample(r, slow_bar):
            at = f" at {slow['sample']}" if "sample" in slow else ""
            reason = (
                f"Correct ({where}) but {slow['ratio']:.2f}x native's time{at} (A/A {slow['aa']:.2f}), over the "
                f"{slow_bar:g}x a qualified route may cost."
            )
            out.append(((op,), (NATIVE,), reason))
        elif required(r, served):
            needs = required(r, served)
            chain = (f"{provider}[{', '.join((*served, *needs))}]", NATIVE)
            others = f"; {_left_out(r, served)}" if len(served) < len(r["dtypes"]) else ""
            reason = (
                f"Qualified ({where}) in {', '.join(served)} for {', '.join(needs)} inputs only (the others go "
                f"native): {_excepted(r, served)}{others}"
            )
            partial.append(((op,), chain, reason))
        elif len(served) == len(r["dtypes"]):
            clean.setdefault(served, []).append(op)
        else:
            chain = (f"{provider}[{', '.join(served)}]", NATIVE)
            partial.append(((op,), chain, f"Qualified ({where}) in {', '.join(served)} only; {_left_out(r, served)}"))
    head: list[Block] = []
    for served, ops in sorted(clean.items(), key=lambda item: (-len(item[1]), item[0])):
        what = "and no slower than native at its real shapes" if tuned else "in each dtype it serves"
        head.append(
            (
                tuple(ops),
                (f"{provider}[{', '.join(served)}]", NATIVE),
                f"Qualified ({where}): each passes its samples {what}; other dtypes, and every call while "
                f"{provider} is unusable, go native.",
            )
        )
    if slower:
        head.append(
            (
                tuple(slower),
                (NATIVE,),
                f"Correct, but not measured faster than native ({where}): slower, "
                f"or its A/A control was further than {AA_BAND:g} from 1.",
            )
        )
    return head + partial + out


def render(report: dict[str, Any], tuned: bool = False, slow_bar: float = SLOW) -> str:
    """A whole conf: ``default = native`` and the blocks, with the provider version it was qualified for."""
    lines = [
        f"# written by python -m torch_fl qualify ({report['key']}){', tuned' if tuned else ''}",
        f"qualified {report['provider']} {report.get('provider_version') or 'unversioned'}",
        "default = native",
    ]
    for ops, chain, reason in blocks(report, tuned, slow_bar=slow_bar):
        lines.append("")
        lines += [f"# {line}" for line in reason.splitlines()]
        lines += [f"{op} = {', '.join(chain)}" for op in ops]
    return "\n".join(lines) + "\n"
