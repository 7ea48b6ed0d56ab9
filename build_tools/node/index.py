"""The index mode's install: torch-fl pip-installed into a venv over the node's torch from the carried
wheels/<variant>/ index, as a cluster node installs it. Where the index lacks the node's wheel (or REBUILD=1), it
is built and repaired the builder stage's way (the same scripts) and a copy of the index takes it."""

from __future__ import annotations

import os
import time
from pathlib import Path

from . import steps
from .executor import Executor
from .steps import Node

DIST, REPAIRED, INDEX_COPY, VENV = (Path(p) for p in ("/tmp/torch-fl-dist", "/tmp/torch-fl-repaired",
                                                      "/tmp/torch-fl-index", "/tmp/torch-fl-node"))  # fmt: skip
PIP_LOG = Path("/tmp/torch-fl-pip.log")
# What this node needs: its torch line in the project's variant scheme, and the carried wheel of that line whose tags
# this Python takes (the cp3X-abi3 wheel serves every CPython from 3.X on), "-" where there is none. torch_fl's
# _variant.py is read by its folder: the checkout's package is never imported.
WANTS = """import sys, torch
from pathlib import Path
from packaging.tags import sys_tags
from packaging.utils import parse_wheel_filename
sys.path.append("torch_fl"); import _variant as v; want = v.make(torch.__version__, sys.argv[1]); here = set(sys_tags())
found = [w.name for w in sorted(Path(sys.argv[2]).glob(f"torch_fl-*+{want.label}-*.whl"))
         if parse_wheel_filename(w.name)[3] & here]
print(found[-1] if found else "-", want.label, v.line_page(want.line), "%d.%d" % want.line)"""
DESCRIBE = """import sys, torch
print("python", sys.version.split()[0], "torch", torch.__version__, "gpus", torch.cuda.device_count())"""
EXCLUDES = """import sys; from build_tools import matrix
print(*next(t for t in matrix.load().toolchains.values() if t.variant == sys.argv[1]).auditwheel_exclude)"""
REINDEX = """import sys; from pathlib import Path; from build_tools import index
r = index.build(Path(sys.argv[1]), sys.argv[2]); print("index:", ", ".join(d.filename for d in r.dists))"""
PURELIB = 'import sys, sysconfig; sys.prefix != sys.base_prefix and print(sysconfig.get_paths()["purelib"])'


def install(node: Node, ex: Executor) -> int:
    k, variant = node.knobs, node.knobs.VARIANT
    if k.REUSE_BUILD != "1":
        ex.remove(DIST, REPAIRED)
    index = node.repo / "wheels" / variant
    ask = {"cwd": node.repo, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    wants = ex.output(node.python("what the node wants", "-c", WANTS, variant, index, **ask)).split()
    fits, label, page, line = [*wants, "-", "?", "?", "?"][:4] if len(wants) != 4 else wants
    node.label = label
    pyver = ex.output(node.python("python version", "-c", 'import sys; print("%d.%d" % sys.version_info[:2])'))
    ex.note(f"node: {ex.output(node.python('node', '-c', DESCRIBE))}; wants +{label} for Python {pyver}")
    have_wheel = k.REBUILD != "1" and fits != "-"
    if have_wheel and (index / page / "simple" / "torch-fl" / "index.html").is_file():
        ex.note(f"index: the carried wheels/{variant} has {fits} on {page}/")
    else:
        if have_wheel:  # an index of another layout: the wheel is there, its line's page is not
            ex.note(f"index: the carried wheels/{variant} has {fits} but no {page}/ page; indexing a copy")
        elif rc := _build(node, ex, variant, label, pyver, index):
            return rc
        carried, index = index, INDEX_COPY / variant
        ex.copy(carried, index)
        if not have_wheel:
            for wheel in sorted(REPAIRED.glob("*.whl")) or [REPAIRED / "torch_fl-*.whl"]:
                ex.copy(wheel, index / wheel.name)
        ex.run(node.python("index the copy", "-c", REINDEX, index, variant, cwd=node.repo), log="node.txt", append=True)
    return _venv_install(node, ex, index, page, line)


def _build(node: Node, ex: Executor, variant: str, label: str, pyver: str, index: Path) -> int:
    carried = " ".join(w.name for w in sorted(index.glob("torch_fl-*.whl")))
    ex.note(f"index: the carried wheels/{variant} has no +{label} wheel for Python {pyver} ({carried}); "
            "building it as the builder does")  # fmt: skip
    if node.knobs.REUSE_BUILD == "1" and any(REPAIRED.glob("*.whl")):
        ex.note(f"build: reusing {' '.join(w.name for w in REPAIRED.glob('*.whl'))} (REUSE_BUILD=1)")
        return 0
    excludes = ex.output(node.python("auditwheel excludes", "-c", EXCLUDES, variant, cwd=node.repo))
    build = steps.build_script(node, DIST, variant, os.cpu_count() or 1)
    repair = steps.repair_script(node, DIST, REPAIRED, excludes)
    if ex.run(build, log="build.log", show=False) or ex.run(repair, log="build.log", append=True, show=False):
        log = node.out / "build.log"
        print("\n".join(log.read_text(errors="replace").splitlines()[-30:]) if log.is_file() else "")
        ex.note(f"build failed: {log}")
        return 1
    made = " ".join(w.name for w in REPAIRED.glob("*.whl"))
    ex.note(f"build + repair: {round(time.time() - node.started)} s: {made}")
    show = REPAIRED / "auditwheel-show.txt"
    lines = show.read_text().splitlines() if show.is_file() else []
    at = next((i for i, text in enumerate(lines) if "(repaired)" in text), None)
    for text in lines[at : at + 13] if at is not None else []:
        ex.note(text)
    return 0


def _venv_install(node: Node, ex: Executor, index: Path, page: str, line: str) -> int:
    """A venv over the system site-packages with torch, no torch-fl; the suites and bench run on it. A venv
    interpreter's site-packages (torch) come through a .pth file. Without pip, no setuptools shadows torch's; the
    node interpreter's pip fills it."""
    node_py = str(VENV / "bin" / "python")
    ex.run(node.python("venv", "-m", "venv", "--system-site-packages", "--without-pip", VENV))
    pip = [node.py, "-m", "pip", "--python", node_py]
    if ex.run(node.command("pip", *pip, "--version"), show=False):
        ex.remove(VENV)
        ex.run(node.python("venv", "-m", "venv", "--system-site-packages", VENV))
        pip = [node_py, "-m", "pip"]
    purelib = ex.output(
        node.command("purelib", node_py, "-c", 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    )
    ex.write(Path(purelib or VENV) / "torch-site.pth", ex.output(node.python("torch's site", "-c", PURELIB)) + "\n")
    url = f"file://{index}/{page}/simple/"
    ex.note(f'install: pip install "torch=={line}.*" torch-fl --index-url {url}')

    def pip_install(*extra: str) -> int:
        argv = (*pip, "install", "--no-cache-dir", *extra, "--index-url", url, f"torch=={line}.*", "torch-fl")
        cmd = node.command("pip install", *argv, cwd="/tmp", PIP_CONFIG_FILE="/dev/null")
        return ex.run(cmd, log=str(PIP_LOG), show=False)

    if pip_install():  # torch's own requirements, which an offline node may lack and the index cannot give
        ex.note("WARNING: the pip line failed on torch's own requirements; installing torch-fl with --no-deps")
        pip_install("--no-deps")
    for text in PIP_LOG.read_text().splitlines()[-2:] if PIP_LOG.is_file() else []:
        ex.note(text)
    node.py = node_py
    return 0


def check_installed(node: Node, ex: Executor) -> int:
    """The torch-fl that imports is the pip line's, in the venv."""
    version = 'from importlib.metadata import version; print(version("torch-fl"))'
    installed = ex.output(node.python("version", "-c", version))
    where = ex.output(node.python("where", "-c", "import torch_fl, os; print(os.path.dirname(torch_fl.__file__))"))
    ex.note(f"installed: torch-fl {installed} at {where}")
    if installed.endswith(f"+{node.label}") and where.startswith(f"{VENV}/"):
        return 0
    ex.note(f"FAIL: the node venv must hold torch-fl +{node.label} (another torch-fl on the path shadows it?)")
    return 1
