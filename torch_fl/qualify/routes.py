"""The routes a qualification report allows, as conf blocks: one source for the conf a node's qualification
writes (``<out>/qualified.conf``) and for the committed confs (build_tools/generate_confs.py loads this file by
path, so it imports nothing but the standard library)."""

from __future__ import annotations

from typing import Any

NATIVE = "native"
# A tuned conf trusts a provider/native time only when native against native (the A/A) came out within this of 1.
AA_BAND = 0.10


def faster(r: dict[str, Any]) -> bool:
    """The operator passed and its provider/native time is at most 1 with a trustworthy A/A beside it."""
    speed = r.get("speed")
    return bool(speed) and speed["ratio"] <= 1.0 and abs(speed["aa"] - 1.0) <= AA_BAND


Block = tuple[tuple[str, ...], tuple[str, ...], str]  # (ops, chain, reason)


def _failure_reason(r: dict[str, Any]) -> str:
    f = r.get("failure")
    if f:
        return f"{r['verdict']} ({f['dtype']}): {f['sample']}: {f['detail']}. Reproduce: {f['repro']}"
    if r["verdict"] == "pending":
        return "pending: the qualification run ended before it reached this operator (a rerun resumes it)"
    return f"{r['verdict']}: {r.get('detail') or 'no sample of the qualification reached the provider'}"


def blocks(report: dict[str, Any], tuned: bool = False, pinned: frozenset[str] = frozenset()) -> list[Block]:
    """The provider for every operator that passed in every dtype (and, ``tuned``, is no slower than native at
    its real shapes); every other claimed operator stays native with its verdict and reproduction as the reason.
    ``pinned`` operators are left out (a hand-written block of the vendor decides them)."""
    provider = report["provider"]
    where = f"{provider} {report.get('provider_version') or ''} on {report['vendor']}, torch {report['torch_line']}"
    passing, slower, out = [], [], []
    for op, r in sorted(report["ops"].items()):
        if op in pinned:
            continue
        if r["verdict"] == "pass":
            if tuned and not faster(r):
                slower.append(op)
            else:
                passing.append(op)
        else:
            out.append(((op,), (NATIVE,), _failure_reason(r)))
    head: list[Block] = []
    if passing:
        what = "and no slower than native at its real shapes" if tuned else "in every dtype it was given"
        head.append(
            (
                tuple(passing),
                (provider, NATIVE),
                f"Qualified ({where}): each passes its samples {what}; native when {provider} is unusable.",
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
    return head + out


def render(report: dict[str, Any], tuned: bool = False) -> str:
    """A whole conf: ``default = native`` and the blocks, with the provider version it was qualified for."""
    lines = [
        f"# written by python -m torch_fl qualify ({report['key']}){', tuned' if tuned else ''}",
        f"qualified {report['provider']} {report.get('provider_version') or 'unversioned'}",
        "default = native",
    ]
    for ops, chain, reason in blocks(report, tuned):
        lines.append("")
        lines += [f"# {line}" for line in reason.splitlines()]
        lines += [f"{op} = {', '.join(chain)}" for op in ops]
    return "\n".join(lines) + "\n"
