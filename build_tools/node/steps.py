"""The node's steps, defined once: each is a ``Command`` a mode hands its executor. Where a step is the images'
too, it runs the same script (docker/scripts/build_wheel.py and repair_wheel.py build and repair the wheel of the
index mode as the builder stage does); the suites run from a copy of tests/ and the programs from their folders,
both outside the checkout's root, so that ``import torch_fl`` is the installed wheel."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..command import Command
from .knobs import Knobs

SITE = Path("/tmp/torch-fl-site")  # where the carried wheels and, outside index, torch-fl are installed
TESTS = Path("/tmp/torch-fl-tests")  # the copy of tests/ the suites run from
WHEEL = Path("/tmp/torch-fl-wheel")  # the native build's wheel
NODE_LOCK = "docker/cuda/locks/cuda-node-py312.txt"  # the build backend of a node build (build_tools/locks.py)
ALL_NATIVE = Path("/tmp/all-native.conf")


@dataclass
class Node:
    """One mode's run: the checkout, OUT, the interpreter, the knobs and the environment its commands get."""

    mode: str
    repo: Path
    out: Path
    knobs: Knobs
    py: str
    environ: Mapping[str, str] = field(default_factory=dict)  # the launcher's environment
    env: dict[str, str] = field(default_factory=dict)  # added to every command's environment
    started: float = 0.0  # time.time() at the start: the flaggems mode's budget counts from it
    label: str = ""  # index: the variant label the node's torch line wants (+pt211cu130)

    @property
    def workers(self) -> str:
        """The suites' pytest workers: SUITE_WORKERS, else 8 (none in index mode); 0 runs them in one process."""
        return self.knobs.SUITE_WORKERS or ("" if self.mode == "index" else "8")

    @property
    def bench_args(self) -> str:
        return self.knobs.BENCH_ARGS or ("--short" if self.mode == "index" else "")

    @property
    def programs(self) -> Path:
        return self.repo / "build_tools" / "node"

    @property
    def harness_home(self) -> Path:
        return self.repo / "build_tools" / "bench"

    def command(self, title: str, *argv: str | os.PathLike, cwd: Path | str = "", **env: str) -> Command:
        return Command(title, tuple(map(str, argv)), {**self.env, **env}, cwd=str(cwd))

    def python(self, title: str, *args: str | os.PathLike, cwd: Path | str = "/tmp", **env: str) -> Command:
        return self.command(title, self.py, *args, cwd=cwd, **env)

    def program(self, name: str, *args: str | os.PathLike, **env: str) -> Command:
        """A node program of build_tools/node, by its path, from /tmp."""
        return self.python(name, self.programs / name, *args, **env)

    def suite(self, *args: str | os.PathLike, **env: str) -> Command:
        """pytest in the tests' copy, under its configuration."""
        argv = ("-m", "pytest", "-c", "pyproject.toml", "-q", "-p", "no:cacheprovider", *args)
        return self.python("pytest " + " ".join(map(str, args)), *argv, cwd=TESTS, **env)

    def harness(self, module: str, *args: str, **env: str) -> Command:
        """The bench harness (or one of its modules) from its folder."""
        return self.python(f"python -m {module}", "-m", module, *args, cwd=self.harness_home, **env)


def install_backend(node: Node) -> Command:
    """The build backend of a node build, by hash, from the carried wheels."""
    argv = ("-m", "pip", "install", "-q", "--no-index", "--find-links", ".whl", "--require-hashes", "--no-deps")
    return node.python(
        "install the build backend", *argv, "--no-compile", "--no-cache-dir", "--target", SITE, "-r", NODE_LOCK,
        cwd=node.repo,
    )  # fmt: skip


def install_carried(node: Node, wheels: list[Path]) -> Command:
    argv = ("-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir", "--upgrade")
    return node.python("install the carried wheels", *argv, "--target", SITE, *wheels, cwd=node.repo)


def build_native(node: Node) -> Command:
    """The wheel against the node's torch: a fresh CMake cache (it would keep an earlier compiler), file by file
    rather than in unity batches, since the node's cores make that cheap and each source compiles on its own."""
    settings = (
        "--config-settings=build-dir=/tmp/torch-fl-build",
        "--config-settings=cmake.define.CMAKE_UNITY_BUILD=OFF",
    )
    argv = ("-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps", *settings, "-w", WHEEL, ".")
    return node.python("build the wheel", *argv, cwd=node.repo)


def install_wheel(node: Node) -> Command:
    wheels = sorted(WHEEL.glob("*.whl")) or [WHEEL / "torch_fl-*.whl"]  # the second: what a dry run shows
    argv = ("-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", SITE)
    return node.python("install the wheel", *argv, *wheels, cwd=node.repo)


def build_script(node: Node, dist: Path, variant: str, cores: int) -> Command:
    """The builder stage's build (docker/scripts/build_wheel.py), here."""
    env = {"VARIANT": variant, "BUILD_ENV": f"CMAKE_BUILD_PARALLEL_LEVEL={cores}"}
    return node.python("build the wheel", "docker/scripts/build_wheel.py", ".", dist, cwd=node.repo, **env)


def repair_script(node: Node, dist: Path, repaired: Path, excludes: str) -> Command:
    """The builder stage's repair (docker/scripts/repair_wheel.py), here."""
    env = {"AUDITWHEEL_EXCLUDE": excludes}
    return node.python("repair the wheel", "docker/scripts/repair_wheel.py", dist, repaired, cwd=node.repo, **env)


SMOKE = """import torch, torch_fl
x = torch.randn(1000, 1000).to("flagos")
y = (x @ x.T).relu().sum()
ref = (x.cpu() @ x.cpu().T).relu().sum()
print("smoke: device", x.device, "result", float(y), "reference", float(ref))
assert torch.allclose(y.cpu(), ref, rtol=1e-3), (y, ref)
print("memory_allocated", torch.flagos.memory_allocated())
"""
ADD = """import torch, torch_fl
a = torch.randn(101, 3, 320); b = torch.randn(101, 3, 320)
out = a.to('flagos') + b.to('flagos'); torch.flagos.synchronize()
assert torch.allclose(out.cpu(), a + b), 'mismatch'
print('add ok on route {route}')
"""


def checks(node: Node, *, check: bool, matmul: bool) -> list[Command]:
    """Every mode's first checks: torch_fl info, a matmul on flagos, add.Tensor on each route of ROUTES."""
    out = [node.python("torch_fl info", "-m", "torch_fl", "info", *(["--check"] if check else []))]
    if matmul:
        out.append(node.python("smoke", "-c", SMOKE))
    for route in node.knobs.ROUTES.split():
        env = {"FLAGOS_OP_add__Tensor": route, "FLAGOS_LOG": "dispatch"}
        out.append(node.python(f"add on {route}", "-c", ADD.format(route=route), **env))
    return out
