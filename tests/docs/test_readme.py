"""The README's examples run as written, on the CPU emulation, against the installed wheel.

Every ```python block of the README runs in a fresh interpreter; a block whose preceding text says `torchrun
--nproc-per-node N` runs under torchrun with N ranks, as the README tells the reader to. Lines of ```bash blocks
that start with `python -m torch_fl` run too (the rest of those blocks installs or builds, which `nox -s
install-cpu` and the toolchain sessions check). `nox -s tests` points TORCH_FL_README at the checkout's README.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

FENCE = re.compile(r"^```(?P<lang>\w*)\n(?P<body>.*?)^```$", re.M | re.S)
TORCHRUN = re.compile(r"torchrun --nproc-per-node (\d+)")


@dataclass(frozen=True)
class Block:
    line: int  # where the block opens in the README
    lang: str
    body: str
    ranks: int  # 0: a plain interpreter; N: torchrun with N ranks


def readme() -> Path:
    path = os.environ.get("TORCH_FL_README")
    if not path:
        raise RuntimeError("TORCH_FL_README is not set: run this suite through `nox -s tests`, or set it to README.md")
    return Path(path)


def blocks(text: str) -> list[Block]:
    out, last_end = [], 0
    for m in FENCE.finditer(text):
        before = text[last_end : m.start()]
        ranks = TORCHRUN.search(before)
        out.append(Block(text.count("\n", 0, m.start()) + 1, m["lang"], m["body"], int(ranks[1]) if ranks else 0))
        last_end = m.end()
    return out


def _cases() -> list[tuple[str, list[str]]]:
    """(id, argv) per runnable piece of the README."""
    cases = []
    for b in blocks(readme().read_text(encoding="utf-8")):
        if b.lang == "python":
            cases.append((f"python-line{b.line}", ["@python", b.body, str(b.ranks)]))
        elif b.lang == "bash":
            for i, line in enumerate(b.body.splitlines()):
                cmd = line.split("#", 1)[0].strip()
                if cmd.startswith("python -m torch_fl"):
                    cases.append((f"bash-line{b.line + 1 + i}", shlex.split(cmd)))
    return cases


def test_the_readme_has_examples_to_run() -> None:
    kinds = [argv[0] for _, argv in _cases()]
    assert kinds.count("@python") >= 2 and any(k == "python" for k in kinds), kinds


@pytest.mark.parametrize("argv", [c[1] for c in _cases()], ids=[c[0] for c in _cases()])
def test_readme_example_runs(argv: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "FLAGOS_ACCELERATOR": "cpu"}
    if argv[0] == "@python":
        script = tmp_path / "example.py"
        script.write_text(argv[1], encoding="utf-8")
        ranks = int(argv[2])
        cmd = [sys.executable, str(script)]
        if ranks:
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}"]
            cmd.append(str(script))
    else:
        cmd = [sys.executable, *argv[1:]]
    res = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"{' '.join(cmd)} exited {res.returncode}:\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
    # c10d's warning at destroy_process_group when a group has no default backend: each rank printed it once
    no_backend = [line for line in res.stderr.splitlines() if "No backend of type" in line]
    assert not no_backend, "\n".join(no_backend)
    if argv[0] == "@python" and "print(" in argv[1]:
        assert "flagos" in res.stdout, res.stdout  # what the examples print names the device they ran on
