"""auditwheel-repair the freshly built wheel inside the builder image (run by the Dockerfile's `build` stage): the
row's one wheel, tagged cp3X-abi3 for every CPython it serves (build_wheel.py); auditwheel sets its platform tag
and keeps the Python and ABI tags, which this script checks.

usage: python repair_wheel.py DIST_DIR OUT_DIR

The platform tag comes from this image's glibc (auditwheel may still pick an older policy). AUDITWHEEL_EXCLUDE's
soname globs are never grafted: the user's torch install brings them; torch/lib is on auditwheel's library path so
they resolve; the core library (libtorch_fl_core.so) ships in the wheel itself, where torch loads it. Writes
OUT_DIR/<repaired wheel>, OUT_DIR/auditwheel-show.txt and OUT_DIR/build-info.json.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from packaging.utils import parse_wheel_filename


def manylinux_tag(libc: str | None = None, machine: str | None = None) -> str:
    """``manylinux_2_36_x86_64`` from ``os.confstr('CS_GNU_LIBC_VERSION')`` ("glibc 2.36") and the machine."""
    libc = libc if libc is not None else (os.confstr("CS_GNU_LIBC_VERSION") or "")
    if not (m := re.match(r"glibc (\d+)\.(\d+)", libc)):
        raise SystemExit(f"repair_wheel: cannot read the glibc version of this image ({libc!r})")
    machine = machine or platform.machine()
    return f"manylinux_{m.group(1)}_{m.group(2)}_{machine}"


def torch_lib_dir() -> str | None:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    lib = Path(list(spec.submodule_search_locations)[0]) / "lib"
    return str(lib) if lib.is_dir() else None


# Mangled-name prefixes of torch's C++ namespaces (c10, at, torch, caffe2): the symbols an extension takes from torch.
_TORCH_SYMBOL = ("_ZN3c10", "_ZNK3c10", "_ZN2at", "_ZNK2at", "_ZN5torch", "_ZNK5torch", "_ZN6caffe2", "_ZNK6caffe2")


def _dynamic_symbols(path: Path) -> tuple[set[str], set[str], list[str]]:
    """(defined, undefined strong, DT_NEEDED) dynamic symbols of one ELF file."""
    from elftools.elf.elffile import ELFFile

    defined, undefined = set(), set()
    with path.open("rb") as fh:
        elf = ELFFile(fh)
        dynsym = elf.get_section_by_name(".dynsym")
        for sym in dynsym.iter_symbols() if dynsym else ():
            if sym["st_shndx"] == "SHN_UNDEF":
                if sym["st_info"]["bind"] == "STB_GLOBAL" and sym.name:
                    undefined.add(sym.name)
            elif sym["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK"):
                defined.add(sym.name)
        dynamic = elf.get_section_by_name(".dynamic")
        needed = [t.needed for t in dynamic.iter_tags("DT_NEEDED")] if dynamic else []
    return defined, undefined, needed


def check_torch_symbols(wheel: Path, torch_lib: str) -> None:
    """Fail when a shared library of ``wheel`` needs a torch symbol that this image's torch does not export:
    objects of another torch line (a stale incremental build) link fine, then fail at import on a node. Symbol
    tables, not loading: builders may lack the vendor libraries torch's own libraries need."""
    lib = Path(torch_lib)
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as zf:
        modules = [n for n in zf.namelist() if n.endswith(".so") and ".libs/" not in n]
        zf.extractall(tmp, members=modules)
        for name in modules:
            _, undefined, needed = _dynamic_symbols(Path(tmp) / name)
            provided: set[str] = set()
            for dep in needed:
                if (lib / dep).is_file():
                    provided |= _dynamic_symbols(lib / dep)[0]
            missing = sorted(s for s in undefined if s.startswith(_TORCH_SYMBOL) and s not in provided)
            if missing:
                raise SystemExit(
                    f"repair_wheel: {name} needs {len(missing)} torch symbol(s) that this image's torch does not "
                    f"export (first: {missing[0]}): it was compiled against another torch. If an incremental "
                    "build reused another toolchain's objects, clear the BuildKit cache (`docker builder prune "
                    "--filter type=exec.cachemount`) and build again"
                )
    print(f"repair_wheel: every torch symbol of {', '.join(modules)} is exported by this image's torch", flush=True)


def run(cmd: list[str], env: dict[str, str]) -> str:
    print("repair_wheel: " + " ".join(cmd), flush=True)
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    sys.stdout.write(res.stdout)
    sys.stderr.write(res.stderr)
    if res.returncode != 0:
        raise SystemExit(f"repair_wheel: {cmd[0]} {cmd[1]} failed (exit {res.returncode})")
    return res.stdout + res.stderr


# the wheel's own core library, which torch loads from the package: never grafted
CORE_LIBRARY = "libtorch_fl_core.so"


def repair(wheel: Path, out: Path, excludes: list[str], plat: str, lib: str, env: dict[str, str]) -> tuple[Path, str]:
    """The repaired wheel in ``out`` and the report of auditwheel show before and after."""
    auditwheel = [sys.executable, "-m", "auditwheel"]
    shown = run([*auditwheel, "show", str(wheel)], env)
    cmd = [*auditwheel, "repair", "--plat", plat, "-w", str(out)]
    for pattern in [*excludes, CORE_LIBRARY]:
        cmd += ["--exclude", pattern]
    run([*cmd, str(wheel)], env)
    repaired = sorted(out.glob("*.whl"))
    if len(repaired) != 1:
        raise SystemExit(f"repair_wheel: auditwheel produced {[w.name for w in repaired]} from {wheel.name}")
    if interpreter_tags(repaired[0].name) != interpreter_tags(wheel.name):
        raise SystemExit(
            f"repair_wheel: auditwheel turned {wheel.name} into {repaired[0].name}: the Python and ABI tags must "
            "stay as scikit-build-core set them (check the auditwheel release in the builder lock)"
        )
    check_torch_symbols(repaired[0], lib)
    shown_repaired = run([*auditwheel, "show", str(repaired[0])], env)
    report = (
        f"$ auditwheel show {wheel.name}  (as built)\n{shown}\n"
        f"$ auditwheel show {repaired[0].name}  (repaired)\n{shown_repaired}"
    )
    return repaired[0], report


def interpreter_tags(filename: str) -> set[str]:
    """The Python-ABI pairs of a wheel file name (``{"cp310-abi3"}``), whatever its platforms."""
    return {f"{t.interpreter}-{t.abi}" for t in parse_wheel_filename(filename)[3]}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    dist, out = Path(argv[0]), Path(argv[1])
    wheels = sorted(dist.glob("*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"repair_wheel: expected one wheel in {dist}, found {[w.name for w in wheels]}")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    excludes = os.environ.get("AUDITWHEEL_EXCLUDE", "").split()
    plat = manylinux_tag()
    if not (lib := torch_lib_dir()):
        raise SystemExit("repair_wheel: torch/lib is missing from this builder image")
    env = dict(os.environ)
    env["AUDITWHEEL_LD_LIBRARY_PATH"] = ":".join(p for p in (lib, env.get("AUDITWHEEL_LD_LIBRARY_PATH")) if p)
    with tempfile.TemporaryDirectory() as tmp:
        repaired, report = repair(wheels[0], Path(tmp), excludes, plat, lib, env)
        with zipfile.ZipFile(repaired) as zf:
            grafted = sorted(n for n in zf.namelist() if ".libs/" in n)
        made = out / repaired.name
        shutil.move(str(repaired), made)
    (out / "auditwheel-show.txt").write_text(report)
    info = {
        "wheel": made.name,
        "built_wheel": wheels[0].name,
        "requested_plat": plat,
        "glibc": os.confstr("CS_GNU_LIBC_VERSION"),
        "builder_python": platform.python_version(),
        "excludes": excludes,
        "grafted": grafted,
        "torch_lib_dir": lib,
    }
    (out / "build-info.json").write_text(json.dumps(info, indent=2) + "\n")
    print(f"repair_wheel: {made.name} (requested {plat}; grafted: {grafted or 'nothing'})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
