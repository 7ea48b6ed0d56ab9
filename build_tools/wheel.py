"""The wheel steps of a row: stage its build context (the build as far as its cache key), build and repair the wheel
in docker, and check the repaired wheel before it takes a place under wheels/."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from . import context, env, git, hostpython, locks, outputs, plan, wheelcheck
from .flow import Flow
from .matrix import Toolchain
from .runner import UserError
from .summary import ImageRef
from .wheel_names import torch_source

BUILD_REPORTS = ("auditwheel-show.txt", "build-info.json")


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
    sources: str  # the digest cache.built_wheel compares
    wheel_dir: Path
    source_date_epoch: str  # the checkout's HEAD commit time (git.source_date_epoch)
    python_source: str  # where the test image's Python comes from ("" where the image brings its own)
    record: dict  # what the row's last build left (state.State): its key, wheel and hash
    locks: dict[str, str]  # the lock files by build arg (locks.lock_args)
    wheel: Path = Path()  # the row's one wheel, which serves every Python of its `pythons`
    info: wheelcheck.WheelInfo | None = None

    @property
    def builder_tag(self) -> str:
        return plan.image_tag(self.toolchain.name, "builder", self.key)

    @contextmanager
    def inputs(self, flow: Flow, key: str) -> Iterator[plan.BuildInputs]:
        """The build's inputs for cache key ``key``, with the pip.conf secret in place while the block runs."""
        with flow.pipconf(self.host, self.torch_args) as conf:
            yield plan.BuildInputs(
                context=self.staged.root,
                dockerfile=flow.repo / self.toolchain.dockerfile,
                builder_image=self.builder_base.ref,
                test_image=self.test_base.ref,
                pipconf=conf,
                host=self.host,
                key=key,
                source_date_epoch=self.source_date_epoch,
                python_source=self.python_source,
                locks=self.locks,
            )


def check_locks(flow: Flow, toolchain: Toolchain) -> None:
    locks_of = locks.locks_of(toolchain, flow.repo, str(flow.matrix.path), flow.matrix.suites(toolchain))
    stale = [p for lock in locks_of for p in locks.check(lock, flow.repo)]
    if stale:
        flow.runner.refuse("the locks of the images disagree with their requirements:\n  " + "\n  ".join(stale))


def prepare(flow: Flow, toolchain: Toolchain) -> Built:
    """Check the locks, stage the build context and resolve the base images: the build as far as its cache key.
    What the steps need of the locks is read here, once, and handed down to staging and to the plan."""
    check_locks(flow, toolchain)
    shared = locks.shared_install(flow.matrix, toolchain, flow.repo)
    lock_args = locks.lock_args(toolchain)
    host = flow.options.host
    for line in [*(f"warning: {w}" for w in host.warnings), *host.describe()]:
        flow.echo(line)
    builder_base = flow.images.resolve_base(toolchain.builder_image, toolchain.image_hint)
    test_base = flow.images.resolve_base(toolchain.test_image, toolchain.image_hint)
    staged = stage_context(flow, toolchain, host, shared)
    wheel_dir = flow.repo / "wheels" / toolchain.wheel_dir
    outputs.sweep_temporaries(wheel_dir.parent)  # what an interrupted export left beside the wheels
    torch_args, note = torch_source(toolchain, staged.wheels)
    flow.echo(note)
    if toolchain.collectives:
        flow.echo(f"collectives: {toolchain.collectives}")
    # Not the staged host Pythons: the builder uses none of them, and `install-<row> -- --all-pythons` stages more
    # of them than `build-<row>` does.
    digests = (staged.src_digest, staged.scripts_digest, staged.wheelhouse_digest, staged.dockerfile_digest)
    key = context.combine("build", toolchain.fingerprint(), *digests, builder_base.id, *torch_args)
    return Built(
        toolchain,
        staged,
        host,
        torch_args,
        builder_base,
        test_base,
        key,
        staged.sources,
        wheel_dir,
        source_date_epoch=git.source_date_epoch(flow.repo),
        python_source="" if toolchain.torch.from_image else flow.matrix.python(toolchain.python).source,
        record=(record := flow.state.read(toolchain.name)),
        locks=lock_args,
        wheel=wheel_dir / record.get("wheel", "?"),
    )


def image_pythons(toolchain: Toolchain, *, all_pythons: bool = False) -> tuple[str, ...]:
    """The Pythons the test and node images of ``toolchain`` run: its test's and install checks' (with
    ``all_pythons``, every one its wheel serves); none for a row whose image brings its own interpreter. No builder
    needs one: the wheel serves every Python of the row from one build."""
    if toolchain.torch.from_image:
        return ()
    checked = toolchain.served_pythons if all_pythons else toolchain.checked_pythons
    return tuple(sorted({toolchain.python, *checked}, key=lambda v: tuple(map(int, v.split(".")))))


def stage_context(flow: Flow, toolchain: Toolchain, host: env.HostEnv, shared: str) -> context.Staged:
    """Stage the build context of ``toolchain`` with ``shared`` as its shared lock (locks.shared_install)."""
    needed = image_pythons(toolchain, all_pythons=flow.options.all_pythons)
    host_pythons = {v: hostpython.find(v) for v in needed if flow.matrix.python(v).from_host}
    return context.stage_build(flow.repo, toolchain, flow.matrix.build, host.find_links_dirs, shared, host_pythons)


def build(flow: Flow, built: Built) -> Path | None:
    """Build and repair in docker, export the repaired wheel, check it and move it into the wheel directory; None
    when it is planned."""
    export = flow.runner.scratch_dir(built.wheel_dir)
    try:
        with built.inputs(flow, built.key) as inputs:
            cmds = plan.plan_build(flow.images.client().exe, built.toolchain, inputs, export)
            results = [flow.runner.run(cmd) for cmd in cmds]
        if results[-1].planned:
            return None
        return check(flow, built.toolchain, export, built.wheel_dir)
    finally:
        flow.runner.remove(export)


def check(flow: Flow, toolchain: Toolchain, export: Path, wheel_dir: Path) -> Path:
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
