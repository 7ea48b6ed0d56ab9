"""The flows behind the nox sessions build-<vendor>, test-<vendor> and bench-<vendor> (base-image and clean: upkeep.py).

Each flow takes a ``Flow`` (repository, matrix, where to print, and the runner, images and state it works
through) and records its stages in a ``Summary``. Whether anything really runs is the runner's business alone
(runner.py: a dry run prints); the flows read results back only where a real run has them. Errors a newcomer can
hit are raised as one-line exceptions (``UserError`` and friends); the nox session turns them into
``session.error``.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from . import context, dockercli, env, gpu, hostdev, locks, outputs, plan, wheelcheck
from .images import Images
from .matrix import BuildSpec, Matrix, MatrixError, Toolchain
from .runner import Result, Runner, StepFailed, UserError
from .state import State
from .summary import Summary, parse_junit

__all__ = ["ERRORS", "Flow", "UserError", "bench", "build", "built_wheel", "test", "test_image"]

ERRORS = (
    UserError,
    dockercli.DockerError,
    StepFailed,
    MatrixError,
    env.EnvError,
    FileNotFoundError,
    wheelcheck.WheelError,
)


@dataclass
class Flow:
    repo: Path
    matrix: Matrix
    options: plan.Options
    echo: Callable[[str], None] = print
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))

    def __post_init__(self) -> None:
        # options.dry_run goes to the runner and nowhere else
        self.runner = Runner(self.repo / "build" / "logs", dry_run=self.options.dry_run, echo=self.echo)
        self.images = Images(self.runner, self.matrix, self.environ, self.echo)
        self.state = State(self.repo / "build" / "state")

    def chain(self, vendor: str) -> Toolchain:
        chain = self.matrix.vendor(vendor)
        if not (self.repo / chain.dockerfile).is_file():
            self.runner.refuse(
                f"{chain.dockerfile} does not exist yet: the {vendor} row of {self.matrix.path} is data only "
                f"(write the Dockerfile to enable build-{vendor}/test-{vendor})"
            )
        return chain

    def host(self) -> env.HostEnv:
        host = env.from_environ(self.environ)
        for w in host.warnings:
            self.echo("warning: " + w)
        return host

    @contextmanager
    def pipconf(self, host: env.HostEnv, extra_index_urls: list[str]) -> Iterator[Path]:
        """The pip.conf BuildKit secret (runner.secret_file: private, outside the repository, removed after)."""
        text = env.pip_conf(host, extra_index_urls=extra_index_urls)
        shown = "\n".join("    " + env.redact(line) for line in text.splitlines())
        with self.runner.secret_file(
            "pip.conf", text, "pip.conf passed as the BuildKit secret 'pipconf' (credentials redacted here):\n" + shown
        ) as path:
            yield path


# ------------------------------------------------------------------------------------------------------ build
@dataclass
class Built:
    chain: Toolchain
    wheel: Path
    info: wheelcheck.WheelInfo | None
    staged: context.Staged
    host: env.HostEnv
    torch_args: list[str]
    extra_index: list[str]
    builder_base: tuple[str, str]
    test_base: tuple[str, str]

    def inputs(self, flow: Flow, pipconf: Path, key: str) -> plan.BuildInputs:
        return plan.BuildInputs(
            context=self.staged.root,
            dockerfile=flow.repo / self.chain.dockerfile,
            builder_image=self.builder_base[0],
            test_image=self.test_base[0],
            torch_pip_args=self.torch_args,
            pipconf=pipconf,
            host=self.host,
            key=key,
            source_date_epoch=source_date_epoch(flow.repo),
        )


def _staged_wheel_names(staged: context.Staged) -> list[str]:
    return sorted(p.name for p in (staged.root / "wheelhouse").glob("*/*") if p.is_file())


def _keep_image(flow: Flow, summary: Summary, role: str, tag: str) -> None:
    iid = flow.images.image_id(tag)
    if iid:
        summary.images[role] = (tag, iid)


def build(flow: Flow, vendor: str, summary: Summary) -> Built:
    """Build and repair the wheel of ``vendor`` into wheels/<variant>/ unless it is up to date."""
    chain = flow.chain(vendor)
    stale = [
        p for lock in locks.locks_of(chain, flow.repo, str(flow.matrix.path), flow.matrix.suites(chain))
        for p in locks.check(lock, flow.repo)
    ]
    if stale:
        flow.runner.refuse("the locks of the images disagree with their requirements:\n  " + "\n  ".join(stale))
    host = flow.host()
    for line in host.describe():
        flow.echo(line)
    t0 = time.monotonic()
    builder_base = flow.images.resolve_base(chain.builder_image, chain.image_hint)
    test_base = flow.images.resolve_base(chain.test_image, chain.image_hint)
    staged = context.stage_build(flow.repo, chain, flow.matrix.build, host.find_links_dirs)
    sources = context.sources_digest(flow.repo, chain, flow.matrix.build)  # what built_wheel compares
    torch_args, torch_note = plan.torch_source(chain, _staged_wheel_names(staged))
    flow.echo(torch_note)
    if chain.collectives:
        flow.echo(f"collectives: {chain.collectives}")
    extra_index = [a for a in torch_args if a.startswith("http")]
    key = context.combine(
        "build",
        chain.fingerprint(),
        staged.src_digest,
        staged.scripts_digest,
        staged.wheelhouse_digest,
        staged.dockerfile_digest,
        builder_base[1],
        *torch_args,
    )
    summary.add("stage build context", "ran", time.monotonic() - t0, str(staged.root.relative_to(flow.repo)))
    wheel_dir = flow.repo / "wheels" / chain.wheel_dir
    outputs.sweep_temporaries(wheel_dir.parent)
    state = flow.state.read(vendor)
    built = Built(
        chain, wheel_dir / state.get("wheel", "?"), None, staged, host, torch_args, extra_index, builder_base, test_base
    )
    client = flow.images.client()
    builder_tag = plan.image_tag(vendor, "builder", key)

    # a dry run plans the whole build: the key of a planned build is never recorded
    if not flow.options.rebuild and state.get("key") == key and not flow.runner.planning:
        wheel = wheel_dir / state.get("wheel", "")
        if wheel.is_file() and context.file_sha256(wheel) == state.get("sha256"):
            built.wheel, built.info = wheel, wheelcheck.inspect(wheel)
            if state.get("sources") != sources:  # a state written before it recorded its sources
                flow.state.write(vendor, sources=sources)
            summary.add("build wheel", "up to date", 0.0, "inputs unchanged since the last build")
            summary.wheel, summary.wheel_path = built.info, wheel.relative_to(flow.repo)
            _keep_image(flow, summary, "builder", builder_tag)
            flow.echo(f"wheel up to date: {wheel.relative_to(flow.repo)} (build inputs unchanged)")
            return built

    export = flow.runner.scratch_dir(wheel_dir)
    t1 = time.monotonic()
    try:
        with flow.pipconf(host, extra_index) as pipconf:
            cmds = plan.plan_build(client.exe, chain, built.inputs(flow, pipconf, key), export)
            results = [flow.runner.run(cmd) for cmd in cmds]
        if results[-1].planned:
            summary.add("build wheel", "planned")
            return built
        final = _accept_wheel(flow, chain, export, wheel_dir)
    except BaseException:
        summary.add("build wheel", "failed", time.monotonic() - t1)
        raise
    finally:
        flow.runner.remove(export)
    info = wheelcheck.inspect(final)
    flow.state.write(
        vendor,
        key=key,
        wheel=final.name,
        sha256=info.sha256,
        builder_image=builder_tag,
        sources=sources,
    )
    built.wheel, built.info = final, info
    summary.add("build wheel", "ran", time.monotonic() - t1, f"docker build (builder {builder_base[0]})")
    summary.wheel, summary.wheel_path = info, final.relative_to(flow.repo)
    _keep_image(flow, summary, "builder", builder_tag)
    flow.images.prune_old(plan.image_repo(vendor, "builder"), builder_tag)
    flow.echo(f"wheel: {final.relative_to(flow.repo)}  tag {info.tag}  sha256 {info.sha256}")
    return built


def _accept_wheel(flow: Flow, chain: Toolchain, export: Path, wheel_dir: Path) -> Path:
    """Check the one exported wheel and move it into ``wheel_dir`` (with the build's reports into build/state)."""
    wheels = sorted(export.glob("*.whl"))
    if len(wheels) != 1:
        raise UserError(f"the build exported {[w.name for w in wheels]} instead of one wheel ({export})")
    info = wheelcheck.inspect(wheels[0])
    bad = wheelcheck.problems(
        info, variant=chain.variant, python_tag=chain.python_tag, excludes=chain.auditwheel_exclude
    )
    if bad:
        raise UserError(f"repaired wheel {info.path.name} is not acceptable: " + "; ".join(bad))
    wheel_dir.mkdir(parents=True, exist_ok=True)
    final = wheel_dir / wheels[0].name
    os.replace(wheels[0], final)  # same filesystem: atomic, never a half wheel
    for name in BUILD_REPORTS:
        if (export / name).is_file():
            outputs.atomic_copy(export / name, flow.state.reports(chain.vendor) / name)
    return final


BUILD_REPORTS = ("auditwheel-show.txt", "build-info.json")


def built_wheel(repo: Path, chain: Toolchain, spec: BuildSpec) -> Path:
    """The repaired wheel of ``chain`` that build-<vendor> (or test-<vendor>) last made, when it was made from the
    checkout's build inputs ``spec`` and this row as they are now. Otherwise a ``UserError`` that names the session
    making it: a host session that installs this wheel never tests another build, nor skips because there is none."""
    vendor = chain.vendor
    state = State(repo / "build" / "state").read(vendor)
    wheel = repo / "wheels" / chain.wheel_dir / state.get("wheel", "")
    fix = f"run `nox -s test-{vendor}` first: it builds, repairs and tests the wheel that this session installs"
    if not state.get("wheel") or not wheel.is_file():
        raise UserError(f"build/state/{vendor}.json names no repaired wheel under wheels/{chain.wheel_dir}/; {fix}")
    if context.file_sha256(wheel) != state.get("sha256"):
        raise UserError(f"{wheel.relative_to(repo)} is not the file build-{vendor} wrote (its sha256 differs); {fix}")
    if state.get("sources") != context.sources_digest(repo, chain, spec):
        raise UserError(
            f"{wheel.relative_to(repo)} was built from other sources or another {vendor} row than the checkout's; {fix}"
        )
    return wheel


# ------------------------------------------------------------------------------------------------------- test
def require_gpus(flow: Flow, vendor: str, session: str) -> None:
    """Stop at once when the row's test container needs NVIDIA GPUs (``--gpus``) that this host cannot give it.

    Rows without ``--gpus`` are not checked (nothing is probed). A dry run reports what a real run would do.
    """
    chain = flow.matrix.vendor(vendor)
    if not gpu.needs_nvidia(chain.docker_run_flags):
        return
    client = flow.images.client()
    runtimes = dockercli.runtime_names(client) if flow.images.daemon_usable() else None
    devices = gpu.device_nodes()
    hook = gpu.find_hook()
    problem = gpu.problem(session, devices=devices, runtimes=runtimes, hook=hook, build_session=f"build-{vendor}")
    if problem is None:
        flow.echo(gpu.describe(devices, runtimes, hook))
    else:
        flow.runner.refuse(problem)


def require_devices(flow: Flow, vendor: str, session: str) -> None:
    """Stop at once when the row passes device nodes (``--device=/dev/kfd``) that this docker host lacks."""
    chain = flow.matrix.vendor(vendor)
    problem = hostdev.problem(session, hostdev.missing_devices(chain.docker_run_flags), f"build-{vendor}")
    if problem is not None:
        flow.runner.refuse(problem)


def host_run_flags(flow: Flow, chain: Toolchain) -> list[str]:
    """Optional mounts present on this host and the groups of the passed device nodes (build_tools/hostdev.py)."""
    for mount in chain.docker_run_optional_mounts:
        if not os.path.exists(mount.split(":", 1)[0]):
            flow.echo(f"optional mount {mount} not added: {mount.split(':', 1)[0]} does not exist on this host")
    return hostdev.run_flags(chain.docker_run_flags, chain.docker_run_optional_mounts)


def test_image(flow: Flow, vendor: str, summary: Summary) -> tuple[Built, str]:
    """Build (if needed) and make the test image (if needed); returns the build and the test image's tag."""
    built = build(flow, vendor, summary)
    chain = built.chain
    client = flow.images.client()
    t0 = time.monotonic()
    tests_digest, dist_digest = "dry-run", "dry-run"  # a planned build has no wheel to stage yet
    if built.wheel.is_file() or not flow.runner.planning:
        tests_digest, dist_digest = context.stage_tests(flow.repo, vendor, flow.matrix.build, built.wheel)
    key = context.combine(
        "test",
        chain.fingerprint(),
        built.staged.scripts_digest,
        built.staged.wheelhouse_digest,
        built.staged.dockerfile_digest,
        tests_digest,
        dist_digest,
        built.test_base[1],
        *built.torch_args,
    )
    tag = plan.image_tag(vendor, "test", key)
    info = None if flow.runner.planning else dockercli.inspect_image(client, tag)
    if info and not flow.options.rebuild and dockercli.image_labels(info).get(f"{plan.LABEL_PREFIX}.key") == key:
        summary.add("test image", "reused", time.monotonic() - t0, "wheel, tests and toolchain unchanged")
        flow.echo(f"test image up to date: {tag}")
    else:
        t1 = time.monotonic()
        try:
            with flow.pipconf(built.host, built.extra_index) as pipconf:
                res = flow.runner.run(plan.plan_test_image(client.exe, chain, built.inputs(flow, pipconf, key)))
        except BaseException:
            summary.add("test image", "failed", time.monotonic() - t1)
            raise
        done = "planned" if res.planned else "ran"
        summary.add("test image", done, time.monotonic() - t1, f"FROM {built.test_base[0]}")
        if res.planned:
            return built, tag
        flow.images.prune_old(plan.image_repo(vendor, "test"), tag)
    summary.images["test"] = (tag, dockercli.image_id(client, tag) or "?")
    flow.images.check_history([ref for ref, _ in summary.images.values()], built.host, summary)
    return built, tag


@dataclass(frozen=True)
class Container:
    """One run in the test image: its session, summary row and report directory, how to plan it and read it back."""

    stage: str  # the summary's row: "run suites", "run benchmark"
    final: Path  # the report directory it replaces, whole
    command: Callable[[Built, str, Path], plan.Command]
    collect: Callable[[Path, Result], str]  # reads the filled directory: "ran" or "failed"
    finish: Callable[[Path], None] = lambda tmp: None  # adds to the filled directory before the swap
    keep: tuple[str, ...] = ()  # subdirectories of ``final`` written by another session that survive the swap
    publish_empty: bool = True  # swap in a directory the run left empty


def _run_in_test_image(flow: Flow, vendor: str, summary: Summary, how: Container) -> tuple[Result, str, bool]:
    """The tail test-* and bench-* share: the test image, one container run and its reports swapped in whole.
    Returns the run, its status and whether its reports were published."""
    built, tag = test_image(flow, vendor, summary)
    tmp = flow.runner.scratch_dir(how.final)
    t0 = time.monotonic()
    try:
        res = flow.runner.run(how.command(built, tag, tmp), check=False, passthrough=True)
        if res.planned:
            summary.add(how.stage, "planned")
            return res, "planned", False
        status = how.collect(tmp, res)
        summary.add(how.stage, status, time.monotonic() - t0, f"exit {res.returncode}; log {res.log}")
        published = how.publish_empty or any(tmp.iterdir())
        if published:
            summary.reports = how.final.relative_to(flow.repo)
            how.finish(tmp)
            outputs.keep_subdirs(how.final, tmp, list(how.keep))
            outputs.publish_dir(tmp, how.final)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return res, status, published


BENCH_DIR = "bench"


def test(flow: Flow, vendor: str, summary: Summary) -> None:
    """Build (if needed), make the test image (if needed), run the suites; reports to reports/<vendor>/."""
    require_gpus(flow, vendor, f"test-{vendor}")
    require_devices(flow, vendor, f"test-{vendor}")
    final = flow.repo / "reports" / vendor

    def command(built: Built, tag: str, tmp: Path) -> plan.Command:
        return plan.plan_test_run(
            flow.images.client().exe,
            built.chain,
            tag,
            tmp,
            built.host,
            bench=flow.options.bench,
            pytest_args=flow.options.pytest_args,
            user=env.current_user(),
            suites=flow.matrix.suites(built.chain),
            host_flags=host_run_flags(flow, built.chain),
        )

    def collect(tmp: Path, res: Result) -> str:
        junit = tmp / "junit.xml"
        summary.tests = parse_junit(junit) if junit.is_file() else None
        summary.bench = sorted(p.name for p in tmp.glob("bench*"))
        return "ran" if res.returncode == 0 and summary.tests and summary.tests.ok else "failed"

    def finish(tmp: Path) -> None:
        for name in BUILD_REPORTS:
            src = flow.state.reports(vendor) / name
            if src.is_file():
                shutil.copyfile(src, tmp / name)
        (tmp / "summary.md").write_text(summary.markdown(), encoding="utf-8")

    how = Container("run suites", final, command, collect, finish, keep=(BENCH_DIR,))
    res, status, _ = _run_in_test_image(flow, vendor, summary, how)
    if status == "failed":
        what = summary.tests.line() if summary.tests else "no JUnit report was written"
        raise UserError(
            f"test-{vendor} failed: {what} (container exit {res.returncode}); "
            f"reports in {final.relative_to(flow.repo)}, log {res.log}"
        )


def bench(flow: Flow, vendor: str, summary: Summary) -> None:
    """Build (if needed), make the test image (if needed), run the full benchmark in it.

    Reports (bench.json, bench.md, bench.png) go to reports/<vendor>/bench/, swapped in whole; arguments after
    the separator go to the benchmark, ``python -m torch_fl.bench`` (``nox -s bench-cpu -- -- --short``,
    ``-- --rebuild -- --cases a,b``).
    """
    require_gpus(flow, vendor, f"bench-{vendor}")
    require_devices(flow, vendor, f"bench-{vendor}")
    final = flow.repo / "reports" / vendor / BENCH_DIR

    def command(built: Built, tag: str, tmp: Path) -> plan.Command:
        return plan.plan_bench_run(
            flow.images.client().exe,
            built.chain,
            tag,
            tmp,
            built.host,
            bench_args=flow.options.pytest_args,
            user=env.current_user(),
            commit=_git_head(flow.repo),
            host_flags=host_run_flags(flow, built.chain),
        )

    def collect(tmp: Path, res: Result) -> str:
        summary.bench = sorted(p.name for p in tmp.iterdir())
        return "ran" if res.returncode == 0 else "failed"

    # the benchmark writes its reports only after measuring; a --max-ratio gate failure still has them
    how = Container("run benchmark", final, command, collect, publish_empty=False)
    res, _, published = _run_in_test_image(flow, vendor, summary, how)
    if res.returncode != 0:
        where = f"reports in {final.relative_to(flow.repo)}" if published else "no reports written"
        raise UserError(
            f"bench-{vendor} failed: python -m {plan.BENCH_MODULE} exited {res.returncode} ({where}); log {res.log}"
        )


QUALIFY_DIR = "qualify"


def qualify(flow: Flow, vendor: str, summary: Summary) -> None:
    """Build (if needed), make the test image (if needed), qualify a provider in it (torch_fl/qualify).

    The run directory is reports/<vendor>/qualify/, written in place (a rerun resumes it); arguments after the
    separator go to ``python -m torch_fl qualify`` (default ``--provider flaggems``).
    """
    require_gpus(flow, vendor, f"qualify-{vendor}")
    require_devices(flow, vendor, f"qualify-{vendor}")
    run_dir = flow.repo / "reports" / vendor / QUALIFY_DIR
    args = list(flow.options.pytest_args)
    provider = args[args.index("--provider") + 1] if "--provider" in args[:-1] else "flaggems"
    args = [a for i, a in enumerate(args) if a != "--provider" and (i == 0 or args[i - 1] != "--provider")]
    flow.runner.make_dir(run_dir)

    def command(built: Built, tag: str, tmp: Path) -> plan.Command:
        return plan.plan_qualify_run(
            flow.images.client().exe,
            built.chain,
            tag,
            run_dir,
            built.host,
            provider=provider,
            qualify_args=args,
            user=env.current_user(),
            host_flags=host_run_flags(flow, built.chain),
        )

    def collect(tmp: Path, res: Result) -> str:
        return "ran" if res.returncode in (0, 3) else "failed"  # 3: operators left pending

    # written in place, never swapped: the scratch directory stays empty and is not published
    how = Container("run qualification", run_dir, command, collect, publish_empty=False)
    res, _, _ = _run_in_test_image(flow, vendor, summary, how)
    if res.returncode == 3:
        flow.echo(f"qualify-{vendor}: operators left pending; run the session again to resume ({run_dir})")
    elif res.returncode != 0:
        raise UserError(f"qualify-{vendor} failed: exit {res.returncode}; log {res.log}")


# 1980-01-01, the earliest time a zip entry can carry: the epoch of a checkout without git history.
ZIP_EPOCH = "315532800"


def source_date_epoch(repo: Path) -> str:
    """SOURCE_DATE_EPOCH of a build: the time of the checkout's HEAD commit, so that two builds of one commit from
    the same locked inputs write the same timestamps into the wheel."""
    res = dockercli.run_quiet(["git", "-C", str(repo), "log", "-1", "--format=%ct"])
    value = res.stdout.strip() if res.returncode == 0 else ""
    return value if value.isdigit() and int(value) > int(ZIP_EPOCH) else ZIP_EPOCH


def _git_head(repo: Path) -> str:
    """HEAD of the checkout (with ``-dirty`` when tracked files differ), for the benchmark report; "" outside git."""
    head = dockercli.run_quiet(["git", "-C", str(repo), "rev-parse", "HEAD"])
    if head.returncode != 0 or not head.stdout.strip():
        return ""
    dirty = dockercli.run_quiet(["git", "-C", str(repo), "diff", "--quiet", "HEAD", "--"]).returncode == 1
    return head.stdout.strip() + ("-dirty" if dirty else "")
