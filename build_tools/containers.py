"""The flows that run one container in the test image (test-, bench- and qualify-<toolchain>): each makes the
test image first (flow.test_image), then runs its container and reads the reports back (``Container``)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import dockercli, env, git, gpu, hostdev, outputs, plan
from . import flow as flows
from .command import Command
from .flow import BUILD_REPORTS, Flow
from .matrix import Toolchain
from .runner import Result, UserError
from .summary import Summary, parse_junit


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


def _run_in_test_image(flow: Flow, name: str, summary: Summary, how: Container) -> tuple[Result, str, bool]:
    """The test image, one container run and its reports swapped in whole: (run, status, published)."""
    require_gpus(flow, name, f"{how.session}-{name}")
    if how.in_place:
        flow.runner.make_dir(how.final)
    built, tag = flows.test_image(flow, name, summary)
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


BENCH_DIR = "bench"


def test(flow: Flow, name: str, summary: Summary) -> None:
    """Run the suites in the test image; reports to reports/<toolchain>/."""
    final = flow.repo / "reports" / name

    def command(site: plan.Site) -> Command:
        suites = flow.matrix.suites(site.toolchain)
        return plan.plan_test_run(site, bench=flow.options.bench, pytest_args=flow.options.tool_args, suites=suites)

    def collect(tmp: Path, res: Result) -> str:
        junit = tmp / "junit.xml"
        summary.tests = parse_junit(junit) if junit.is_file() else None
        summary.bench = sorted(p.name for p in tmp.glob("bench*"))
        return "ran" if res.returncode == 0 and summary.tests and summary.tests.ok else "failed"

    def finish(tmp: Path) -> None:
        for report in BUILD_REPORTS:
            src = flow.state.reports(name) / report
            if src.is_file():
                shutil.copyfile(src, tmp / report)
        (tmp / "summary.md").write_text(summary.markdown(), encoding="utf-8")

    how = Container("test", "run suites", final, command, collect, finish, keep=(BENCH_DIR,))
    res, status, _ = _run_in_test_image(flow, name, summary, how)
    if status == "failed":
        what = summary.tests.line() if summary.tests else "no JUnit report was written"
        raise UserError(
            f"test-{name} failed: {what} (container exit {res.returncode}); "
            f"reports in {final.relative_to(flow.repo)}, log {res.log}"
        )


def bench(flow: Flow, name: str, summary: Summary) -> None:
    """Run the full benchmark (``python -m harness``, given the tool arguments) in the test image; reports to
    reports/<toolchain>/bench/, swapped in whole."""
    final = flow.repo / "reports" / name / BENCH_DIR

    def command(site: plan.Site) -> Command:
        return plan.plan_bench_run(site, bench_args=flow.options.tool_args, commit=git.head_commit(flow.repo))

    def collect(tmp: Path, res: Result) -> str:
        summary.bench = sorted(p.name for p in tmp.iterdir())
        return "ran" if res.returncode == 0 else "failed"

    # the benchmark writes its reports only after measuring; a --max-ratio gate failure still has them
    how = Container("bench", "run benchmark", final, command, collect, publish_empty=False)
    res, _, published = _run_in_test_image(flow, name, summary, how)
    if res.returncode != 0:
        where = f"reports in {final.relative_to(flow.repo)}" if published else "no reports written"
        raise UserError(
            f"bench-{name} failed: python -m {plan.BENCH_MODULE} exited {res.returncode} ({where}); log {res.log}"
        )


QUALIFY_DIR = "qualify"


def qualify(flow: Flow, name: str, summary: Summary) -> None:
    """Qualify a provider (default flaggems) in the test image, given the tool arguments; the run directory
    reports/<toolchain>/qualify/ is written in place, so a rerun resumes it."""
    run_dir = flow.repo / "reports" / name / QUALIFY_DIR
    args = list(flow.options.tool_args)
    provider = args[args.index("--provider") + 1] if "--provider" in args[:-1] else "flaggems"
    args = [a for i, a in enumerate(args) if a != "--provider" and (i == 0 or args[i - 1] != "--provider")]

    def command(site: plan.Site) -> Command:
        return plan.plan_qualify_run(site, provider=provider, qualify_args=args)

    def collect(tmp: Path, res: Result) -> str:
        return "ran" if res.returncode in (0, 3) else "failed"  # 3: operators left pending

    # written in place, never swapped: the scratch directory stays empty and is not published
    how = Container("qualify", "run qualification", run_dir, command, collect, publish_empty=False, in_place=True)
    res, _, _ = _run_in_test_image(flow, name, summary, how)
    if res.returncode == 3:
        flow.echo(f"qualify-{name}: operators left pending; run the session again to resume ({run_dir})")
    elif res.returncode != 0:
        raise UserError(f"qualify-{name} failed: exit {res.returncode}; log {res.log}")
