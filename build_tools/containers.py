"""One run in the test image (test-, bench- and qualify-<toolchain>): what the host must give the container, the
container's ``docker run`` and its reports read back and swapped in (``Container``, ``run``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import dockercli, env, gpu, hostdev, outputs, plan
from .command import Command
from .flow import Flow
from .matrix import Toolchain
from .runner import Result
from .summary import Summary
from .wheel import Built


def require_gpus(flow: Flow, name: str, session: str) -> None:
    """Stop at once when the row's test container needs NVIDIA GPUs (``--gpus``) or device nodes
    (``--device=/dev/kfd``) that this host cannot give it."""
    flags = flow.matrix.toolchain(name).docker_run_flags
    if gpu.needs_nvidia(flags):
        client = flow.images.client()
        runtimes = dockercli.runtime_names(client) if flow.images.daemon_usable() else None
        devices, hook = gpu.device_nodes(), gpu.find_hook()
        problem = gpu.problem(session, devices=devices, runtimes=runtimes, hook=hook, build_session=f"build-{name}")
        if problem is None:
            flow.echo(gpu.describe(devices, runtimes, hook))
        else:
            flow.runner.refuse(problem)
    if problem := hostdev.problem(session, hostdev.missing_devices(flags), f"build-{name}"):
        flow.runner.refuse(problem)


def host_run_flags(flow: Flow, toolchain: Toolchain) -> list[str]:
    """Optional mounts present on this host and the groups of the passed device nodes (build_tools/hostdev.py)."""
    for mount in toolchain.docker_run_optional_mounts:
        if not os.path.exists(host_path := mount.split(":", 1)[0]):
            flow.echo(f"optional mount {mount} not added: {host_path} does not exist on this host")
    return hostdev.run_flags(toolchain.docker_run_flags, toolchain.docker_run_optional_mounts)


@dataclass(frozen=True)
class Container:
    """One run in the test image: its session, summary row and report directory, how to plan it and read it back."""

    session: str  # "test", "bench", "qualify": the session is <session>-<toolchain>
    stage: str  # the summary's row: "run suites", "run benchmark"
    final: Path  # the report directory it replaces, whole (or, ``in_place``, writes into)
    command: Callable[[plan.Site], Command]
    collect: Callable[[Path, Result], str]  # reads the filled directory: "ran" or "failed"
    finish: Callable[[Path], None] = lambda tmp: None  # adds to the filled directory before the swap
    keep: tuple[str, ...] = ()  # subdirectories of ``final`` written by another session that survive the swap
    publish_empty: bool = True  # swap in a directory the run left empty
    in_place: bool = False  # mount ``final`` itself rather than a scratch directory to swap in


def run(flow: Flow, built: Built, tag: str, summary: Summary, how: Container) -> tuple[Result, str, bool]:
    """One container of the test image ``tag`` and its reports, swapped in whole: (run, status, published)."""
    if how.in_place:
        flow.runner.make_dir(how.final)
    tmp = flow.runner.scratch_dir(how.final)
    mount = how.final if how.in_place else tmp
    user, flags = env.current_user(), host_run_flags(flow, built.toolchain)
    site = plan.Site(flow.images.client().exe, built.toolchain, tag, mount, built.host, user, flags)
    try:
        with summary.stage(how.stage) as stage:
            res = flow.runner.run(how.command(site), check=False, passthrough=True)
            stage.status = "planned" if res.planned else how.collect(tmp, res)
            if not res.planned:
                stage.note = f"exit {res.returncode}; log {res.log}"
        if published := not res.planned and (how.publish_empty or any(tmp.iterdir())):
            summary.reports = how.final.relative_to(flow.repo)
            how.finish(tmp)
            outputs.keep_subdirs(how.final, tmp, list(how.keep))
            outputs.publish_dir(tmp, how.final)
    finally:
        flow.runner.remove(tmp)  # gone already once published
    return res, stage.status, published
