"""The build flow behind ``nox -s build-<toolchain>`` and the test image that containers.py runs.

A flow records its stages in a ``Summary``; errors a newcomer can hit are one-line exceptions (``ERRORS``) that the
nox session turns into ``session.error``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from . import context, dockercli, env, git, hostpython, locks, outputs, plan, wheel_names, wheelcheck
from .images import Images
from .matrix import BuildSpec, Matrix, MatrixError, Toolchain
from .options import Options
from .runner import Runner, StepFailed, UserError
from .state import State
from .summary import ImageRef, Summary

ERRORS = (
    UserError,
    StepFailed,
    dockercli.DockerError,
    MatrixError,
    env.EnvError,
    FileNotFoundError,
    wheelcheck.WheelError,
    hostpython.HostPythonError,
)


@dataclass
class Flow:
    repo: Path
    matrix: Matrix
    options: Options
    echo: Callable[[str], None] = print

    def __post_init__(self) -> None:
        # options.dry_run goes to the runner and nowhere else
        self.runner = Runner(self.repo / "build" / "logs", dry_run=self.options.dry_run, echo=self.echo)
        self.images = Images(self.runner, self.matrix, self.options.environ, self.echo)
        self.state = State(self.repo / "build" / "state")

    def toolchain(self, name: str) -> Toolchain:
        toolchain = self.matrix.toolchain(name)
        if not (self.repo / toolchain.dockerfile).is_file():
            self.runner.refuse(
                f"{toolchain.dockerfile} does not exist yet: the {name} row of {self.matrix.path} is data only "
                f"(write the Dockerfile to enable build-{name}/test-{name})"
            )
        return toolchain

    def host(self) -> env.HostEnv:
        host = self.options.host
        for w in host.warnings:
            self.echo("warning: " + w)
        return host

    def pipconf(self, host: env.HostEnv, torch_args: list[str]) -> AbstractContextManager[Path]:
        """The pip.conf BuildKit secret, with the torch index of ``torch_args`` (runner.secret_file)."""
        text = env.pip_conf(host, extra_index_urls=[a for a in torch_args if a.startswith("http")])
        shown = "\n".join("    " + env.redact(line) for line in text.splitlines())
        title = "pip.conf passed as the BuildKit secret 'pipconf' (credentials redacted here):\n"
        return self.runner.secret_file("pip.conf", text, title + shown)

    def image_pythons(self, toolchain: Toolchain) -> tuple[str, ...]:
        """The Pythons the test and node images of ``toolchain`` run: its test's and install checks' (with
        ``--all-pythons``, every one its wheel serves); none for a row whose image brings its own interpreter. No
        builder needs one: the wheel serves every Python of the row from one build."""
        if toolchain.torch.from_image:
            return ()
        checked = toolchain.served_pythons if self.options.all_pythons else toolchain.checked_pythons
        return tuple(sorted({toolchain.python, *checked}, key=lambda v: tuple(map(int, v.split(".")))))

    def stage(self, toolchain: Toolchain, host: env.HostEnv) -> tuple[context.Staged, list[str]]:
        """Stage the build context of ``toolchain``; returns it with the pip args of the torch its images install."""
        shared = locks.shared_install(self.matrix, toolchain, self.repo)
        needed = self.image_pythons(toolchain)
        host_pythons = {v: hostpython.find(v) for v in needed if self.matrix.python(v).from_host}
        staged = context.stage_build(
            self.repo, toolchain, self.matrix.build, host.find_links_dirs, shared, host_pythons
        )
        wheels = sorted(p.name for p in (staged.root / "wheelhouse").glob("*/*") if p.is_file())
        torch_args, note = wheel_names.torch_source(toolchain, wheels)
        self.echo(note)
        return staged, torch_args


@dataclass
class Built:
    """One toolchain's build as far as its cache key; ``wheel`` is the last build's until a new one is taken."""

    toolchain: Toolchain
    staged: context.Staged
    host: env.HostEnv
    torch_args: list[str]
    builder_base: ImageRef
    test_base: ImageRef
    key: str
    sources: str  # the digest built_wheel compares
    wheel_dir: Path
    wheel: Path = Path()  # the row's one wheel, which serves every Python of its `pythons`
    info: wheelcheck.WheelInfo | None = None

    @property
    def builder_tag(self) -> str:
        return plan.image_tag(self.toolchain.name, "builder", self.key)

    @contextmanager
    def inputs(self, flow: Flow, key: str) -> Iterator[plan.BuildInputs]:
        """The build's inputs for cache key ``key``, with the pip.conf secret in place while the block runs."""
        toolchain = self.toolchain
        source = "" if toolchain.torch.from_image else flow.matrix.python(toolchain.python).source
        with flow.pipconf(self.host, self.torch_args) as conf:
            yield plan.BuildInputs(
                context=self.staged.root,
                dockerfile=flow.repo / self.toolchain.dockerfile,
                builder_image=self.builder_base.ref,
                test_image=self.test_base.ref,
                pipconf=conf,
                host=self.host,
                key=key,
                source_date_epoch=git.source_date_epoch(flow.repo),
                python_source=source,
            )


def build(flow: Flow, name: str, summary: Summary, *, test_deps: bool = False) -> Built:
    """Build and repair the wheel of ``name`` unless it is up to date; with ``test_deps``, the test image's
    dependency layers build alongside (downloading keeps about one core busy, the compile both)."""
    toolchain = flow.toolchain(name)
    _check_locks(flow, toolchain)
    with summary.stage("stage build context") as stage:
        built = _stage(flow, toolchain)
        stage.note = str(built.staged.root.relative_to(flow.repo))
    if not test_deps:
        return _build(flow, built, summary)
    with built.inputs(flow, built.key) as inputs:
        deps = plan.plan_test_image(flow.images.client().exe, toolchain, inputs, deps=True)
        with flow.runner.alongside(deps):
            return _build(flow, built, summary)


def _build(flow: Flow, built: Built, summary: Summary) -> Built:
    name = built.toolchain.name
    if last := flow.runner.ask(lambda: _up_to_date(flow, built)):
        _take(flow, built, last)
        summary.add("build wheel", "up to date", 0.0, "inputs unchanged since the last build")
        flow.echo(f"wheel up to date: {last.relative_to(flow.repo)} (build inputs unchanged)")
    else:
        with summary.stage("build wheel", f"docker build (builder {built.builder_base.ref})") as stage:
            if (wheel := _build_wheel(flow, built)) is None:
                stage.status, stage.note = "planned", ""
                return built
            _take(flow, built, wheel, new=True)
        flow.images.prune_old(plan.image_repo(name, "builder"), built.builder_tag)
        flow.echo(f"wheel: {wheel.relative_to(flow.repo)}  tag {built.info.tag}  sha256 {built.info.sha256}")
    summary.wheel, summary.wheel_path = built.info, built.wheel.relative_to(flow.repo)
    if iid := flow.images.image_id(built.builder_tag):
        summary.images["builder"] = ImageRef(built.builder_tag, iid)
    return built


def _check_locks(flow: Flow, toolchain: Toolchain) -> None:
    locks_of = locks.locks_of(toolchain, flow.repo, str(flow.matrix.path), flow.matrix.suites(toolchain))
    stale = [p for lock in locks_of for p in locks.check(lock, flow.repo)]
    if stale:
        flow.runner.refuse("the locks of the images disagree with their requirements:\n  " + "\n  ".join(stale))


def _stage(flow: Flow, toolchain: Toolchain) -> Built:
    """Stage the build context and resolve the base images: the build as far as its cache key."""
    host = flow.host()
    for line in host.describe():
        flow.echo(line)
    builder_base = flow.images.resolve_base(toolchain.builder_image, toolchain.image_hint)
    test_base = flow.images.resolve_base(toolchain.test_image, toolchain.image_hint)
    staged, torch_args = flow.stage(toolchain, host)
    if toolchain.collectives:
        flow.echo(f"collectives: {toolchain.collectives}")
    # Not the staged host Pythons: the builder uses none of them, and `install-<row> -- --all-pythons` stages more
    # of them than `build-<row>` does.
    digests = (staged.src_digest, staged.scripts_digest, staged.wheelhouse_digest, staged.dockerfile_digest)
    key = context.combine("build", toolchain.fingerprint(), *digests, builder_base.id, *torch_args)
    sources = context.sources_digest(flow.repo, toolchain, flow.matrix.build)
    wheel_dir = flow.repo / "wheels" / toolchain.wheel_dir
    outputs.sweep_temporaries(wheel_dir.parent)
    last = wheel_dir / flow.state.read(toolchain.name).get("wheel", "?")
    return Built(toolchain, staged, host, torch_args, builder_base, test_base, key, sources, wheel_dir, last)


def _up_to_date(flow: Flow, built: Built) -> Path | None:
    """The wheel the last build of these inputs left, when it is still the file it wrote."""
    state = flow.state.read(built.toolchain.name)
    if flow.options.rebuild or state.get("key") != built.key:
        return None
    wheel = built.wheel_dir / state.get("wheel", "?")
    if not wheel.is_file() or context.file_sha256(wheel) != state.get("sha256"):
        return None
    return wheel


def _build_wheel(flow: Flow, built: Built) -> Path | None:
    """Build in docker, export the repaired wheel and move it into the wheel directory; None when it is planned."""
    export = flow.runner.scratch_dir(built.wheel_dir)
    try:
        with built.inputs(flow, built.key) as inputs:
            cmds = plan.plan_build(flow.images.client().exe, built.toolchain, inputs, export)
            results = [flow.runner.run(cmd) for cmd in cmds]
        if results[-1].planned:
            return None
        return _accept_wheel(flow, built.toolchain, export, built.wheel_dir)
    finally:
        flow.runner.remove(export)


def _take(flow: Flow, built: Built, wheel: Path, *, new: bool = False) -> None:
    """Make ``wheel`` the build's and record it (a ``new`` one with the key it was built from). A new wheel replaces
    the row's previous ones: a line's page offers one wheel, and pip prefers a wheel of one CPython (``cp311-cp311``)
    left beside it over the abi3 one."""
    built.wheel, built.info = wheel, wheelcheck.inspect(wheel)
    if new:
        _remove_replaced(flow, built, wheel)
    made = dict(key=built.key, wheel=wheel.name, sha256=built.info.sha256, builder_image=built.builder_tag)
    flow.state.write(built.toolchain.name, replace=new, sources=built.sources, **(made if new else {}))


def _remove_replaced(flow: Flow, built: Built, wheel: Path) -> None:
    """Remove the wheels the row's last build recorded (its own, and those of one CPython each that a record of the
    per-Python layout lists under ``others``) when they are still the files it wrote and not ``wheel``."""
    state = flow.state.read(built.toolchain.name)
    recorded = {state.get("wheel", ""): state.get("sha256"), **state.get("others", {})}
    for name, sha in recorded.items():
        old = built.wheel_dir / name
        if name and name != wheel.name and old.is_file() and context.file_sha256(old) == sha:
            old.unlink()
            flow.echo(f"removed {old.relative_to(flow.repo)}: replaced by {wheel.name}")


def _accept_wheel(flow: Flow, toolchain: Toolchain, export: Path, wheel_dir: Path) -> Path:
    """Check the exported wheel, the row's one, and move it into ``wheel_dir`` (with the build's reports into
    build/state); returns where it is now."""
    found = sorted(export.glob("*.whl"))
    if len(found) != 1:
        names = ", ".join(w.name for w in found) or "none"
        raise UserError(f"the build exported {len(found)} wheels ({names}), not the row's one: {export}")
    info = wheelcheck.inspect(found[0])
    bad = wheelcheck.problems(
        info, variant=toolchain.variant, wheel_tag=toolchain.wheel_tag, excludes=toolchain.auditwheel_exclude
    )
    if bad:
        raise UserError(f"repaired wheel {info.path.name} is not acceptable: " + "; ".join(bad))
    wheel_dir.mkdir(parents=True, exist_ok=True)
    final = wheel_dir / found[0].name
    os.replace(found[0], final)  # same filesystem: atomic, never a half wheel
    for name in BUILD_REPORTS:
        if (export / name).is_file():
            outputs.atomic_copy(export / name, flow.state.reports(toolchain.name) / name)
    return final


BUILD_REPORTS = ("auditwheel-show.txt", "build-info.json")


def built_wheel(repo: Path, toolchain: Toolchain, spec: BuildSpec) -> Path:
    """The repaired wheel that build-<toolchain> last made, when it was made from the checkout's build inputs and
    this row as they are now; else a ``UserError`` naming the session that makes it."""
    name = toolchain.name
    state = State(repo / "build" / "state").read(name)
    wheel = repo / "wheels" / toolchain.wheel_dir / state.get("wheel", "")
    fix = f"run `nox -s test-{name}` first: it builds, repairs and tests the wheel that this session installs"
    if not state.get("wheel") or not wheel.is_file():
        raise UserError(f"build/state/{name}.json names no repaired wheel under wheels/{toolchain.wheel_dir}/; {fix}")
    if context.file_sha256(wheel) != state.get("sha256"):
        raise UserError(f"{wheel.relative_to(repo)} is not the file build-{name} wrote (its sha256 differs); {fix}")
    if state.get("sources") != context.sources_digest(repo, toolchain, spec):
        raise UserError(
            f"{wheel.relative_to(repo)} was built from other sources or another {name} row than the checkout's; {fix}"
        )
    return wheel


def test_image(flow: Flow, name: str, summary: Summary) -> tuple[Built, str]:
    """Build (if needed) and make the test image (if needed); returns the build and the test image's tag."""
    built = build(flow, name, summary, test_deps=True)
    client = flow.images.client()
    with summary.stage("test image") as stage:
        tests_digest, dist_digest = "dry-run", "dry-run"  # a planned build has no wheel to stage yet
        if built.wheel.is_file():
            tests_digest, dist_digest = context.stage_tests(flow.repo, name, flow.matrix.build, built.wheel)
        staged = (built.staged.scripts_digest, built.staged.wheelhouse_digest, built.staged.dockerfile_digest)
        parts = (*staged, tests_digest, dist_digest, built.test_base.id, *built.torch_args)
        key = context.combine("test", built.toolchain.fingerprint(), *parts)
        tag = plan.image_tag(name, "test", key)
        info = flow.runner.ask(lambda: dockercli.inspect_image(client, tag))
        if info and not flow.options.rebuild and dockercli.image_labels(info).get(f"{plan.LABEL_PREFIX}.key") == key:
            stage.status, stage.note = "reused", "wheel, tests and toolchain unchanged"
            flow.echo(f"test image up to date: {tag}")
        else:
            with built.inputs(flow, key) as inputs:
                res = flow.runner.run(plan.plan_test_image(client.exe, built.toolchain, inputs))
            stage.note = f"FROM {built.test_base.ref}"
            if res.planned:
                stage.status = "planned"
                return built, tag
            flow.images.prune_old(plan.image_repo(name, "test"), tag)
    summary.images["test"] = ImageRef(tag, dockercli.image_id(client, tag) or "?")
    flow.images.check_history([image.ref for image in summary.images.values()], built.host, summary)
    return built, tag
