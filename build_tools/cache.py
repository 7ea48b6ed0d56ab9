"""The caches around the steps: a step runs only when what it makes is missing or was made from other inputs.

The wheel's record is build/state/<row>.json (its key, file and hash); an image's is its ``org.torch-fl.key``
label. ``--rebuild`` skips both lookups; a dry run finds nothing, so it plans every step.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from . import context, dockercli, plan, wheelcheck
from .flow import Flow
from .matrix import BuildSpec, Toolchain
from .runner import Result, UserError
from .state import State
from .summary import ImageRef, Summary
from .wheel import Built


def wheel(flow: Flow, built: Built, summary: Summary, make: Callable[[Flow, Built], Path | None]) -> Built:
    """The wheel of ``built``: the last build's where its inputs are unchanged, else the one ``make`` builds (None
    while planned)."""
    name, record = built.toolchain.name, built.record
    if last := flow.runner.ask(lambda: _up_to_date(built, record, flow.options.rebuild)):
        built.wheel, built.info = last, wheelcheck.inspect(last)
        new: dict[str, str] = {}  # the record stands; only the sources digest is renewed
        summary.add("build wheel", "up to date", 0.0, "inputs unchanged since the last build")
        flow.echo(f"wheel up to date: {last.relative_to(flow.repo)} (build inputs unchanged)")
    else:
        with summary.stage("build wheel", f"docker build (builder {built.builder_base.ref})") as stage:
            if (made := make(flow, built)) is None:
                stage.status, stage.note = "planned", ""
                return built
            built.wheel, built.info = made, wheelcheck.inspect(made)
            for old in _replaced(built, record, made):
                old.unlink()
                flow.echo(f"removed {old.relative_to(flow.repo)}: replaced by {made.name}")
            new = dict(key=built.key, wheel=made.name, sha256=built.info.sha256, builder_image=built.builder_tag)
        flow.images.prune_old(plan.image_repo(name, "builder"), built.builder_tag)
        flow.echo(f"wheel: {made.relative_to(flow.repo)}  tag {built.info.tag}  sha256 {built.info.sha256}")
    flow.state.write(name, replace=bool(new), sources=built.sources, **new)  # a new build's record keeps nothing
    summary.wheel, summary.wheel_path = built.info, built.wheel.relative_to(flow.repo)
    if iid := flow.images.image_id(built.builder_tag):
        summary.images["builder"] = ImageRef(built.builder_tag, iid)
    return built


def _up_to_date(built: Built, record: dict, rebuild: bool) -> Path | None:
    """The wheel the last build of these inputs left, when it is still the file it wrote."""
    if rebuild or record.get("key") != built.key:
        return None
    found = built.wheel_dir / record.get("wheel", "?")
    if not found.is_file() or context.file_sha256(found) != record.get("sha256"):
        return None
    return found


def _replaced(built: Built, record: dict, made: Path) -> list[Path]:
    """The wheels the row's last build recorded (its own, and those of one CPython each that a record of the
    per-Python layout lists under ``others``) that are still the files it wrote and not ``made``. A new wheel
    replaces them: a line's page offers one wheel, and pip prefers a wheel of one CPython (``cp311-cp311``) left
    beside it over the abi3 one."""
    recorded = {record.get("wheel", ""): record.get("sha256"), **record.get("others", {})}
    return [
        built.wheel_dir / name
        for name, sha in recorded.items()
        if name
        and name != made.name
        and (built.wheel_dir / name).is_file()
        and context.file_sha256(built.wheel_dir / name) == sha
    ]


def built_wheel(repo: Path, toolchain: Toolchain, spec: BuildSpec) -> Path:
    """The repaired wheel that build-<toolchain> last made, when it was made from the checkout's build inputs and
    this row as they are now; else a ``UserError`` naming the session that makes it."""
    name = toolchain.name
    state = State(repo / "build" / "state").read(name)
    found = repo / "wheels" / toolchain.wheel_dir / state.get("wheel", "")
    fix = f"run `nox -s test-{name}` first: it builds, repairs and tests the wheel that this session installs"
    if not state.get("wheel") or not found.is_file():
        raise UserError(f"build/state/{name}.json names no repaired wheel under wheels/{toolchain.wheel_dir}/; {fix}")
    if context.file_sha256(found) != state.get("sha256"):
        raise UserError(f"{found.relative_to(repo)} is not the file build-{name} wrote (its sha256 differs); {fix}")
    if state.get("sources") != context.sources_digest(repo, toolchain, spec):
        raise UserError(
            f"{found.relative_to(repo)} was built from other sources or another {name} row than the checkout's; {fix}"
        )
    return found


def image(flow: Flow, tag: str, key: str, make: Callable[[], Result]) -> str:
    """The image ``tag``: reused where docker holds it built from ``key`` (its label) and no ``--rebuild`` was
    asked, else made by ``make`` and its older tags removed. Returns the stage's status: reused, planned or ran."""
    client = flow.images.client()
    info = flow.runner.ask(lambda: dockercli.inspect_image(client, tag))
    made_from = dockercli.image_labels(info).get(f"{plan.LABEL_PREFIX}.key") if info else None
    if made_from == key and not flow.options.rebuild:
        flow.echo(f"test image up to date: {tag}")
        return "reused"
    if make().planned:
        return "planned"
    flow.images.prune_old(tag.rsplit(":", 1)[0], tag)
    return "ran"
