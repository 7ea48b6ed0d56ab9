"""A timed pair's figures and checks: medians and quartiles over the lockstep rounds, the ratio and whether its A/A
lets it be judged, the losses or tokens compared, and the line the zoo prints (zoo.py runs the pairs)."""

from __future__ import annotations

import statistics
from typing import Any

from . import zoo_models

AA_BAND = (0.98, 1.02)  # a ratio is judged only where its A/A lies inside, quartiles no further apart than it
TOLERANCE = {"bfloat16": 2e-2, "float16": 1e-2}  # relative difference of the checked losses, by autocast dtype
# The bars for flagos / plain (time; decode-reduce-overhead: tokens/s plain / flagos, so lower is better
# everywhere) and peak memory; reported beside the ratios.
BARS = {"train-eager": 1.02, "train-compiled": 1.02, "decode-eager": 1.03, "decode-reduce-overhead": 1.0 / 0.98}
MEMORY_BAR = 1.01


def decode_tokens(mode: str) -> int | None:
    from . import decode

    return decode.TOKENS if mode.startswith("decode") else None


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return values[0], values[0], values[0]
    q = statistics.quantiles(values, n=4)
    return q[0], statistics.median(values), q[2]


def timed_entry(
    mode: str, names: list[str], replies: dict[str, Any], rounds: list[dict[str, list[float]]], decode_tokens
) -> dict[str, Any]:
    med = [{a: statistics.median(t) for a, t in r.items()} for r in rounds]
    plain, flagos = names[1], names[0]
    entry: dict[str, Any] = {"status": "ok", "rounds": len(med), "ms": {}, "ms_quartiles": {}, "setup_s": {}}
    for a in names:
        q1, m, q3 = _quartiles([r[a] for r in med])
        entry["ms"][a], entry["ms_quartiles"][a] = m, [q1, q3]
        entry["setup_s"][a] = replies[a]["setup_s"]
    if decode_tokens:
        entry["tokens_per_s"] = {a: decode_tokens * 1e3 / entry["ms"][a] for a in names}
    q1, m, q3 = _quartiles([r[flagos] / r[plain] for r in med])
    entry["ratio"], entry["ratio_quartiles"] = m, [q1, q3]
    entry.update(_aa(names, med))
    entry["peak_gib"] = {a: replies[a].get("peak_gib") for a in names}
    peaks = entry["peak_gib"]
    entry["memory_ratio"] = peaks[flagos] / peaks[plain] if peaks[flagos] and peaks[plain] else None
    entry["bar"] = BARS[mode]
    # every timed step, per arm and round: what the medians and quartiles above are taken from
    entry["turns_ms"] = {a: [[round(t, 3) for t in r[a]] for r in rounds] for a in names}
    entry["params_m"] = replies[flagos].get("params_m")
    for key in ("experts", "graphs"):
        if key in replies[flagos]:
            entry[key] = replies[flagos][key]
    return entry


def _aa(names: list[str], med: list[dict[str, float]]) -> dict[str, Any]:
    """The A/A (plain again / plain, per round) with its quartiles, and whether the pair's ratio is judged."""
    if len(names) < 3:
        return {"judged": False, "not_judged": "no A/A arm"}
    q1, aa, q3 = _quartiles([r[names[2]] / r[names[1]] for r in med])
    # a median inside the band from rounds that disagree by more than the band is luck, not a noise floor
    judged = AA_BAND[0] <= aa <= AA_BAND[1] and q3 - q1 <= AA_BAND[1] - AA_BAND[0]
    return {"aa": aa, "aa_quartiles": [q1, q3], "judged": judged} | ({} if judged else {"not_judged": "A/A too wide"})


def check(arch: zoo_models.Arch, mode: str, names: list[str], replies: dict[str, Any]) -> dict[str, Any]:
    """flagos against plain: the checked training losses within the dtype's tolerance, or identical tokens."""
    flagos, plain = names[0], names[1]
    if mode.startswith("train"):
        values = {a: replies[a]["losses"] for a in names}
        rel = [abs(f - p) / max(abs(p), 1e-6) for f, p in zip(values[flagos], values[plain], strict=True)]
        tol = TOLERANCE[arch.dtype]
        out = {"what": "losses", "values": values, "max_rel": max(rel), "tolerance": tol, "ok": max(rel) <= tol}
        if len(names) > 2:
            out["aa_max_rel"] = max(
                abs(a - p) / max(abs(p), 1e-6) for a, p in zip(values[names[2]], values[plain], strict=True)
            )
        out["detail"] = f"losses differ by {max(rel):.2e} relative (tolerance {tol:g})"
        return out
    tokens = {a: replies[a]["tokens"] for a in names}
    where = next((i for i, (f, p) in enumerate(zip(tokens[flagos], tokens[plain], strict=True)) if f != p), None)
    detail = "tokens identical" if where is None else f"tokens differ from position {where}"
    out = {"what": "tokens", "ok": where is None, "detail": detail, "first_difference": where}
    graphs = replies[flagos].get("graphs")
    if graphs is not None and not graphs["replaying"]:  # compiled code timed under the name of graphs (decode.py)
        out.update(ok=False, detail=f"{detail}; flagos replayed no graph ({'; '.join(graphs['skipped'])})")
    return out


def pair_line(what: str, entry: dict[str, Any], names: list[str], elapsed: float) -> str:
    flagos, plain = names[0], names[1]
    ms = entry["ms"]
    line = f"  {what} ({elapsed:.0f} s): {plain} {ms[plain]:.2f} ms, flagos {ms[flagos]:.2f} ms, "
    aa = ""
    if "aa" in entry:
        q = entry["aa_quartiles"]
        aa = f"A/A {entry['aa']:.3f} ({q[0]:.3f}–{q[1]:.3f})"
    if entry["judged"]:
        line += f"flagos/{plain} {entry['ratio']:.3f} ({aa})"
    else:  # the raw ratio stays in zoo.json and, named as such, here
        line += f"not judged: {entry['not_judged']} ({aa or 'no control'}; raw flagos/{plain} {entry['ratio']:.3f})"
    if entry["memory_ratio"] is not None:
        line += f", peak memory {entry['memory_ratio']:.3f}x"
    return line + f"; {entry['check']['detail']}"
