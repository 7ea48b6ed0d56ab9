"""One markdown table from the count files of several OpInfo runs (``--opinfo-counts``).

    python tests/opinfo/counts.py reports/opinfo/native.json reports/opinfo/cpu.json

Rows are dtypes; each run (accelerator, conf) gets a pass / xfail / fail column (skips, if any, in brackets).
Exits non-zero when a file is missing or any run has a failure, so it can gate a script.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    runs = []
    for p in paths:
        try:
            runs.append(json.loads(Path(p).read_text()))
        except (OSError, ValueError) as exc:
            print(f"counts.py: cannot read {p}: {exc}", file=sys.stderr)
            return 2
    dtypes = sorted({d for r in runs for d in r["counts"]})
    heads = [f"{r['accelerator']} / default={r['conf']} (samples {r['samples'] or 'all'})" for r in runs]
    print("| dtype | " + " | ".join(f"{h}: pass / xfail / fail" for h in heads) + " |")
    print("|---" * (len(runs) + 1) + "|")
    failed = 0
    total = [[0, 0, 0, 0] for _ in runs]
    for d in dtypes:
        cells = []
        for i, r in enumerate(runs):
            a = r["counts"].get(d, {}).get("all", {})
            n = [a.get(k, 0) for k in ("pass", "xfail", "fail", "skip")]
            total[i] = [x + y for x, y in zip(total[i], n, strict=True)]
            failed += n[2]
            cells.append(f"{n[0]} / {n[1]} / {n[2]}" + (f" ({n[3]} skipped)" if n[3] else ""))
        print(f"| {d} | " + " | ".join(cells) + " |")
    print(
        "| **all** | "
        + " | ".join(f"{t[0]} / {t[1]} / {t[2]}" + (f" ({t[3]} skipped)" if t[3] else "") for t in total)
        + " |"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
