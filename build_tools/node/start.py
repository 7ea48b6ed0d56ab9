"""Every mode's start: the carried wheels and the build backend on the path, a compiler, the wheel built against
the node's torch (or, in index mode, installed from the wheel index as a cluster node does: index.py), the checks
that torch_fl loads and routes, and the copy of tests/ the suites run from."""

from __future__ import annotations

import re
from pathlib import Path

from . import index, steps
from .executor import Executor, environ_with
from .steps import ALL_NATIVE, SITE, TESTS, WHEEL, Node


def carried_wheels(node: Node) -> list[Path]:
    """The wheels .whl/ carries (and build/node-wheels/, the index mode's tools), each file name once."""
    folders = ["build/node-wheels", ".whl"] if node.mode == "index" else [".whl"]
    seen: dict[str, Path] = {}
    for folder in folders:
        for wheel in sorted((node.repo / folder).glob("*.whl")):
            seen.setdefault(wheel.name, wheel)
    return list(seen.values())


def locked_names(node: Node) -> set[str]:
    text = (node.repo / steps.NODE_LOCK).read_text(encoding="utf-8")
    return {m.group(1).lower().replace("-", "_") for m in re.finditer(r"^([A-Za-z0-9._-]+)==", text, re.M)}


def compiler(node: Node, ex: Executor) -> str:
    """A g++ with a shared libstdc++ (CMakeLists.txt says why); images for nvcc may put one without it first."""
    for cxx in filter(None, (node.knobs.CXX, "g++", "/usr/bin/g++", "c++")):
        lib = ex.output(node.command("libstdc++ of " + cxx, cxx, "-print-file-name=libstdc++.so"))
        if lib.startswith("/"):
            if node.knobs.CXX and cxx != node.knobs.CXX:
                ex.note(f"CXX={node.knobs.CXX} has no shared libstdc++: using {cxx}")
            return cxx
    return ""


def begin(node: Node, ex: Executor) -> int:
    """Prepare the node for ``node.mode``; a non-zero status stops the mode."""
    ex.remove(SITE, Path("/tmp/torch-fl-index"), Path("/tmp/torch-fl-node"))
    ex.write(node.out / "node.txt", "")
    wheels = carried_wheels(node)
    if node.mode != "index":
        # the build backend by hash from the node lock (the cuda builder's pins, build_tools/locks.py)
        if ex.run(steps.install_backend(node)):
            ex.note(f"the build backend of {steps.NODE_LOCK} is not in .whl/: pip download --no-deps -r "
                    f"{steps.NODE_LOCK} -d .whl")  # fmt: skip
            return 1
        locked = locked_names(node)
        wheels = [w for w in wheels if w.name.split("-")[0].lower().replace("-", "_") not in locked]
    if wheels:
        ex.run(steps.install_carried(node, wheels))
    paths = environ_with(node.environ, PYTHONPATH=[SITE], PATH=[SITE / "bin"])
    node.env.update(PYTHONPATH=paths["PYTHONPATH"], PATH=paths["PATH"], PYTHONUNBUFFERED="1")
    if cxx := compiler(node, ex):
        node.env["CXX"] = cxx
    if node.mode == "index":
        if rc := index.install(node, ex):
            return rc
    elif rc := build(node, ex):
        return rc
    node.env["FLAGOS_ACCELERATOR"] = node.knobs.FLAGOS_ACCELERATOR
    if node.mode == "index" and (rc := index.check_installed(node, ex)):
        return rc
    for cmd in steps.checks(node, check=node.mode == "index", matmul=node.mode != "index"):
        ex.run(cmd, log="node.txt", append=True)
    if node.mode != "smoke":
        ex.remove(TESTS)
        ex.copy(node.repo / "tests", TESTS)
        ex.copy(node.repo / "pyproject.toml", TESTS / "pyproject.toml")
        ex.write(ALL_NATIVE, "default = native\n")
    return 0


def build(node: Node, ex: Executor) -> int:
    """The wheel against the node's torch, or the one an earlier call built (REUSE_BUILD=1); then installed."""
    if node.knobs.REUSE_BUILD == "1" and any(WHEEL.glob("*.whl")):
        ex.note(f"build: reusing {' '.join(w.name for w in WHEEL.glob('*.whl'))}")
    else:
        ex.remove(WHEEL, Path("/tmp/torch-fl-build"))
        if ex.run(steps.build_native(node), log="build.log", show=False):
            log = node.out / "build.log"
            print("\n".join(log.read_text(errors="replace").splitlines()[-40:]) if log.is_file() else "")
            ex.note(f"build failed: full log in {log}")
            return 1
    return ex.run(steps.install_wheel(node))
