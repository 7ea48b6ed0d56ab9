"""What the DTK image holds, read inside the dcu builder and test images (run under with-dtk).

    python3 dtk_info.py check --python 3.10      the image's Python, its HIP (DAS) torch, DTK and RCCL; exit 1 if unfit
    python3 dtk_info.py variant --family 'dtk*'  the wheel's variant label, read from the image (e.g. dtk2504)

Where the label comes from, in order: docs/dcu.md. Python 3.10 compatible (DTK images ship 3.10).
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

VERSION_FILES = (".info/version", ".info/version-dev", ".info/dtk_version")


class DtkError(RuntimeError):
    """The image is not a usable DTK image; the message is the one line to show."""


def dtk_version(root: Path) -> str | None:
    """The DTK version string from the first version file under ``root`` ("25.04.1"), or None."""
    for rel in VERSION_FILES:
        try:
            text = (root / rel).read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            continue
        if m := re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text):
            return m.group(0)
    return None


def label_from_dtk(version: str) -> str:
    """ "25.04" / "25.04.1" / "25.4" -> "dtk2504" (major and minor; patch releases share a label)."""
    if not (m := re.match(r"(\d+)\.(\d+)", version)):
        raise DtkError(f"cannot read a DTK version from {version!r}")
    return f"dtk{int(m.group(1)):02d}{int(m.group(2)):02d}"


def label_from_torch(torch_version: str) -> str | None:
    """ "2.4.1+das.opt1.dtk2504" -> "dtk2504"; None when the local version names no DTK."""
    local = torch_version.partition("+")[2]
    m = re.search(r"dtk(\d+)", local)
    return f"dtk{m.group(1)}" if m else None


def resolve_variant(
    family: str, *, override: str = "", dtk: str | None, torch_version: str | None, warn=print
) -> tuple[str, str]:
    """(label, where it came from). ``family`` is the matrix's glob ("dtk*"); the label must match it."""
    if override:
        label, source = override, "TORCH_FL_VARIANT"
    else:
        from_dtk = label_from_dtk(dtk) if dtk else None
        from_torch = label_from_torch(torch_version) if torch_version else None
        if from_dtk and from_torch and from_dtk != from_torch:
            warn(
                f"dtk_info: warning: the image's DTK is {dtk} ({from_dtk}) but torch {torch_version} names "
                f"{from_torch}; using {from_dtk} (set TORCH_FL_VARIANT to choose)"
            )
        if from_dtk:
            label, source = from_dtk, f"DTK version {dtk}"
        elif from_torch:
            label, source = from_torch, f"torch {torch_version}"
        else:
            raise DtkError(
                "cannot read the DTK version: no version file under the DTK root (ROCM_PATH) and torch "
                f"{torch_version or '(not importable)'} names no dtk<NNNN>; set TORCH_FL_VARIANT=dtk<NNNN>"
            )
    if not re.fullmatch(r"[a-z0-9]+", label):
        raise DtkError(f"variant {label!r} ({source}) is not a valid local version label")
    if family and not fnmatch.fnmatchcase(label, family):
        raise DtkError(f"variant {label} ({source}) does not match the matrix's variant {family!r}")
    return label, source


def explicit_variant(environ: Mapping[str, str]) -> str:
    """TORCH_FL_VARIANT from the environment, or from BUILD_ENV ("K=V K=V", the matrix row's build_env)."""
    for item in environ.get("BUILD_ENV", "").split():
        key, _, value = item.partition("=")
        if key == "TORCH_FL_VARIANT" and value:
            return value
    return environ.get("TORCH_FL_VARIANT", "")


def torch_info() -> dict[str, str | None]:
    """torch's version and HIP version (``torch.version.hip``) in this interpreter; empty values without torch."""
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - any import failure is reported as text
        return {"version": None, "hip": None, "error": f"{type(exc).__name__}: {exc}"}
    return {"version": torch.__version__, "hip": getattr(torch.version, "hip", None), "error": None}


def check(python: str, root: Path) -> list[str]:
    """Problems that make this image unfit for the dcu toolchain; prints what it found."""
    problems: list[str] = []
    have = "{}.{}".format(*sys.version_info[:2])
    if python and have != python:
        problems.append(f"image python {have} != matrix python {python} ({sys.executable})")
    version = dtk_version(root)
    print(f"dtk_info: DTK root {root}, version {version or 'unknown'}")
    if not root.is_dir():
        problems.append(f"no DTK at {root}: BUILDER_IMAGE/TEST_IMAGE must be a DTK image (source /opt/dtk/env.sh)")
    rccl = root / "rccl"
    print(f"dtk_info: RCCL {'at ' + str(rccl) if rccl.is_dir() else 'not found under ' + str(root)}")
    t = torch_info()
    print(f"dtk_info: python {sys.executable} {have}, torch {t['version']}, torch.version.hip {t['hip']}")
    if t["version"] is None:
        problems.append(f"{sys.executable} cannot import torch ({t['error']}): the DTK image's DAS torch is missing")
    elif not t["hip"]:
        problems.append(
            f"torch {t['version']} in {sys.executable} is not a HIP (DTK/ROCm) build (torch.version.hip is empty)"
        )
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="is this a usable DTK image for the dcu toolchain")
    c.add_argument("--python", default="", help="the matrix's X.Y")
    v = sub.add_parser("variant", help="print the wheel's variant label read from the image")
    v.add_argument("--family", default="dtk*", help="the matrix's variant family (a glob)")
    args = ap.parse_args(argv)
    root = Path(next((os.environ[k] for k in ("ROCM_PATH", "DTK_HOME", "ROCM_HOME") if os.environ.get(k)), "/opt/dtk"))
    try:
        if args.cmd == "check":
            problems = check(args.python, root)
            for p in problems:
                print(f"dtk_info: {p}", file=sys.stderr)
            return 1 if problems else 0
        # a family is a glob ("dtk*"); a plain label (a matrix that types the variant in) is used as it is
        family = args.family if any(ch in args.family for ch in "*?[") else ""
        override = explicit_variant(os.environ) or ("" if family else args.family)
        label, source = resolve_variant(
            family,
            override=override,
            dtk=dtk_version(root),
            torch_version=None if override else torch_info()["version"],
            warn=lambda m: print(m, file=sys.stderr),
        )
        print(f"dtk_info: variant {label} (from {source})", file=sys.stderr)
        print(label)
        return 0
    except DtkError as exc:
        print(f"dtk_info: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
