"""The profile diff's arithmetic: two arms' per-op profiles (profile_ops.py) compared op by op and kernel by kernel,
and the lines that summarise it. The zoo's run (zoo.py), its reports (zoo_report.py) and ``python -m harness.profdiff``
(profdiff.py, which says what the diff measures) share it."""

from __future__ import annotations

from typing import Any

REPORT_OPS = 30  # rows of the op table in the markdown; the json keeps every op
TIMED_KERNELS = 20  # kernels both sides launch, kept by the gap in their device time
STEPS = 3


def diff(flagos: dict[str, Any], plain: dict[str, Any]) -> dict[str, Any]:
    """Two arms' profile_ops tables compared; ``flagos`` is the side whose extra work is looked for."""
    device = bool(flagos.get("device") and plain.get("device"))
    rows = []
    zero = [0.0, 0.0, 0.0, 0.0]
    for op in sorted(set(flagos["ops"]) | set(plain["ops"])):
        f, p = flagos["ops"].get(op, zero), plain["ops"].get(op, zero)
        row = {"op": op}
        for i, key in enumerate(("calls", "host_us", "device_us", "kernels")):
            row[key] = [p[i], f[i], f[i] - p[i]]
        rows.append(row)
    # the device's time where it is recorded; else the calls, since an extra call is work whatever its host time,
    # and the host time of one op differs from process to process by more than the router costs
    keys = ("device_us", "kernels", "host_us") if device else ("calls", "host_us")
    rows.sort(key=lambda r: (*(-abs(r[k][2]) for k in keys), r["op"]))
    fk, pk = flagos["kernels"], plain["kernels"]
    only = {
        side: [
            {"kernel": k, "launches": mine[k]["launches"], "ops": mine[k]["ops"]}
            for k in sorted(mine, key=lambda k: -mine[k]["launches"])
            if k not in other
        ]
        for side, mine, other in (("flagos", fk, pk), ("plain", pk, fk))
    }
    counts = [
        {"kernel": k, "launches": [pk[k]["launches"], fk[k]["launches"]], "ops": fk[k]["ops"]}
        for k in sorted(set(fk) & set(pk), key=lambda k: -abs(fk[k]["launches"] - pk[k]["launches"]))
        if fk[k]["launches"] != pk[k]["launches"]
    ]
    # the same kernel, launched as often, can still take longer on one side (another layout, a cold cache)
    timed = [
        {"kernel": k, "device_us": [pk[k]["device_us"], fk[k]["device_us"]], "ops": fk[k]["ops"]}
        for k in set(fk) & set(pk)
        if device and "device_us" in fk[k] and "device_us" in pk[k]
    ]
    timed.sort(key=lambda k: (-abs(k["device_us"][1] - k["device_us"][0]), k["kernel"]))
    totals = {}
    for key in ("calls", "host_us", "device_us", "kernels"):
        p_sum, f_sum = sum(r[key][0] for r in rows), sum(r[key][1] for r in rows)
        totals[key] = [p_sum, f_sum, f_sum - p_sum]
    return {
        "device_time": device,
        "sorted_by": keys[0],
        "totals": totals,
        "ops": rows,
        "only_flagos": only["flagos"],
        "only_plain": only["plain"],
        "launch_counts_differ": counts,
        "kernel_time_differs": timed[:TIMED_KERNELS],
    }


def entry(model: str, profiles: dict[str, dict[str, Any]], plain: str) -> dict[str, Any]:
    """One workload's part of profdiff.json: flagos against plain and, where it ran, plain again against plain."""
    out = {"model": model, "steps": profiles[plain]["steps"], "diff": diff(profiles["flagos"], profiles[plain])}
    again = profiles.get(f"{plain}-again")
    if again is not None:
        control = diff(again, profiles[plain])
        keep = ("totals", "only_flagos", "only_plain", "launch_counts_differ", "kernel_time_differs")
        out["control"] = {k: control[k] for k in keep}
    return out


def summary_line(item: dict[str, Any], plain: str) -> str:
    d = item["diff"]
    t = d["totals"]
    line = (
        f"profdiff {item['model']}: per step, ATen calls {t['calls'][0]:.0f} {plain} / {t['calls'][1]:.0f} flagos, "
        f"host µs {t['host_us'][0]:.0f} / {t['host_us'][1]:.0f}"
    )
    if d["device_time"]:
        line += f", device µs {t['device_us'][0]:.0f} / {t['device_us'][1]:.0f}"
        line += f", kernels {t['kernels'][0]:.0f} / {t['kernels'][1]:.0f}"
    line += f"; kernels only on flagos {len(d['only_flagos'])}, only on {plain} {len(d['only_plain'])}"
    line += f", launch counts differing {len(d['launch_counts_differ'])}"
    control = item.get("control")
    if control:
        line += f" (A/A: {len(control['only_flagos']) + len(control['only_plain'])} kernels of one side only"
        line += f", {len(control['launch_counts_differ'])} counts differing)"
    return line
