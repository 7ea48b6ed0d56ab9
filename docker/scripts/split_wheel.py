"""Split a repaired wheel that holds torch_fl._C for several CPythons into one wheel per Python (repair_wheel.py).

One build compiles the core once and torch_fl._C once per Python into one wheel, which auditwheel repairs once;
each Python's wheel then keeps every file but the other Pythons' modules and is tagged cpXY-cpXY-<platforms>.
``wheel unpack`` and ``wheel pack`` rewrite the RECORD.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

_MODULE_RE = re.compile(r"^_C\.cpython-(?P<tag>\d+)-[^/]*\.so$")
_TAG_RE = re.compile(r"^Tag: [^-\s]+-[^-\s]+-(\S+)$", re.M)


def per_python(wheel: Path, pythons: list[str], dist: Path) -> list[Path]:
    """The wheels of ``pythons`` (``"3.12"``) made from ``wheel`` into ``dist``; ``wheel`` itself is consumed (the
    wheel of its own Python may take its name)."""
    wanted = {"".join(p.split(".")) for p in pythons}
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "wheel", "unpack", "-d", tmp, str(wheel)], check=True)
        (tree,) = Path(tmp).iterdir()
        modules = {m["tag"]: path for path in (tree / "torch_fl").iterdir() if (m := _MODULE_RE.match(path.name))}
        if missing := sorted(wanted - set(modules)):
            raise SystemExit(f"split_wheel: {wheel.name} has no torch_fl._C for cp{', cp'.join(missing)}")
        wheel.unlink()
        (info,) = tree.glob("*.dist-info")
        meta = (info / "WHEEL").read_text()
        platforms = list(dict.fromkeys(_TAG_RE.findall(meta)))  # auditwheel writes one Tag line per platform
        head = re.sub(r"^Tag: .*\n", "", meta, flags=re.M).rstrip("\n")  # the headers end at the first blank line
        out: list[Path] = []
        for tag in sorted(wanted, key=int):
            aside = [path for other, path in modules.items() if other != tag]
            for path in aside:
                path.rename(Path(tmp) / path.name)  # out of the tree for this wheel, back for the next
            (info / "WHEEL").write_text(head + "".join(f"\nTag: cp{tag}-cp{tag}-{p}" for p in platforms) + "\n")
            before = set(dist.glob("*.whl"))
            subprocess.run([sys.executable, "-m", "wheel", "pack", "-d", str(dist), str(tree)], check=True)
            out += sorted(set(dist.glob("*.whl")) - before)
            for path in aside:
                (Path(tmp) / path.name).rename(path)
    return out
