"""The stories of the sessions that build and test a row, each step in order:

    build-<row>    stage the build context · build and repair the wheel in docker · check it
    test-<row>     the same · the test image · run the suites in it · collect the reports
    bench-<row>    the same · the test image · run the benchmark in it · collect its reports
    qualify-<row>  the same · the test image · run the qualification in it (its run directory is the report)

The wheel and the test image are cached (cache.py): a step whose inputs are unchanged since it last ran is reused.
"""

from __future__ import annotations

import shutil
from contextlib import ExitStack
from functools import partial
from pathlib import Path

from . import cache, containers, git, plan, test_image, wheel
from .containers import Container
from .flow import Flow
from .runner import Result, UserError
from .summary import Summary, parse_junit
from .wheel import BUILD_REPORTS, Built

BENCH_DIR = "bench"
QUALIFY_DIR = "qualify"


def build(flow: Flow, name: str, summary: Summary, *, test_deps: bool = False) -> Built:
    """Build and repair the wheel of ``name`` and check it, unless the last build's is current; with ``test_deps``,
    the test image's dependency layers build alongside (downloading keeps about one core busy, the compile both)."""
    toolchain = flow.toolchain(name)
    with summary.stage("stage build context") as stage:
        built = wheel.prepare(flow, toolchain)
        stage.note = str(built.staged.root.relative_to(flow.repo))
    with ExitStack() as alongside:
        if test_deps:
            inputs = alongside.enter_context(built.inputs(flow, built.key))
            deps = plan.plan_test_image(flow.images.client().exe, toolchain, inputs, deps=True)
            alongside.enter_context(flow.runner.alongside(deps))
        return cache.wheel(flow, built, summary, wheel.build)


def _test_image(flow: Flow, name: str, summary: Summary, session: str) -> tuple[Built, str]:
    """The steps every run in the test image starts with: the host can give the container what it needs, the
    wheel, the test image."""
    containers.require_gpus(flow, name, f"{session}-{name}")
    built = build(flow, name, summary, test_deps=True)
    return built, test_image.make(flow, built, summary)


def test(flow: Flow, name: str, summary: Summary) -> None:
    """Run the suites in the test image; reports to reports/<toolchain>/."""
    final = flow.repo / "reports" / name
    suites = flow.matrix.suites(flow.matrix.toolchain(name))
    command = partial(plan.plan_test_run, bench=flow.options.bench, pytest_args=flow.options.tool_args, suites=suites)

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

    built, tag = _test_image(flow, name, summary, "test")
    how = Container("test", "run suites", final, command, collect, finish, keep=(BENCH_DIR,))
    res, status, _ = containers.run(flow, built, tag, summary, how)
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
    command = partial(plan.plan_bench_run, bench_args=flow.options.tool_args, commit=git.head_commit(flow.repo))

    def collect(tmp: Path, res: Result) -> str:
        summary.bench = sorted(p.name for p in tmp.iterdir())
        return "ran" if res.returncode == 0 else "failed"

    built, tag = _test_image(flow, name, summary, "bench")
    # the benchmark writes its reports only after measuring; a --max-ratio gate failure still has them
    how = Container("bench", "run benchmark", final, command, collect, publish_empty=False)
    res, _, published = containers.run(flow, built, tag, summary, how)
    if res.returncode != 0:
        where = f"reports in {final.relative_to(flow.repo)}" if published else "no reports written"
        raise UserError(
            f"bench-{name} failed: python -m {plan.BENCH_MODULE} exited {res.returncode} ({where}); log {res.log}"
        )


def qualify(flow: Flow, name: str, summary: Summary) -> None:
    """Qualify a provider (default flaggems) in the test image, given the tool arguments; the run directory
    reports/<toolchain>/qualify/ is written in place, so a rerun resumes it."""
    run_dir = flow.repo / "reports" / name / QUALIFY_DIR
    args = list(flow.options.tool_args)
    provider = args[args.index("--provider") + 1] if "--provider" in args[:-1] else "flaggems"
    args = [a for i, a in enumerate(args) if a != "--provider" and (i == 0 or args[i - 1] != "--provider")]

    command = partial(plan.plan_qualify_run, provider=provider, qualify_args=args)

    def collect(tmp: Path, res: Result) -> str:
        return "ran" if res.returncode in (0, 3) else "failed"  # 3: operators left pending

    built, tag = _test_image(flow, name, summary, "qualify")
    # written in place, never swapped: the scratch directory stays empty and is not published
    how = Container("qualify", "run qualification", run_dir, command, collect, publish_empty=False, in_place=True)
    res, _, _ = containers.run(flow, built, tag, summary, how)
    if res.returncode == 3:
        flow.echo(f"qualify-{name}: operators left pending; run the session again to resume ({run_dir})")
    elif res.returncode != 0:
        raise UserError(f"qualify-{name} failed: exit {res.returncode}; log {res.log}")
