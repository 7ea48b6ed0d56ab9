"""The upkeep sessions: base-image (make the local stand-ins of [local_bases]) and clean (remove outputs)."""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor

from . import baseimage, dockercli, plan
from .command import Command
from .flow import Flow
from .runner import Runner
from .summary import ImageRef, Summary


def base_image(flow: Flow, summary: Summary) -> None:
    """Make every [local_bases] image that is not present yet (``--rebuild`` remakes them), all at once: each
    debootstrap mostly waits on the mirror and the disk, so two take little longer than one."""
    client = flow.images.client()
    todo = []
    for base in flow.matrix.local_bases.values():
        present = flow.runner.ask(lambda: dockercli.image_id(client, base.name))  # noqa: B023 (asked at once)
        if present and not flow.options.rebuild:
            stands = ", ".join(base.stands_for)
            flow.echo(f"{base.name} is present (stands in for {stands}); `nox -s base-image -- --rebuild` remakes it")
            summary.add(f"base {base.name}", "up to date")
            summary.images[base.name] = ImageRef(base.name, present)
            continue
        if shutil.which("debootstrap") is None:
            flow.runner.refuse(
                "debootstrap is not installed: `apt-get install debootstrap` (Debian/Ubuntu), "
                "or pull the public base image instead"
            )
        if hasattr(os, "geteuid") and os.geteuid() != 0:
            flow.runner.refuse("debootstrap needs root: run `sudo nox -s base-image`")
        todo.append(base)

    def make(base) -> None:
        # a runner of its own per base (a runner tracks one command at a time); the full output only when alone
        runner = Runner(flow.runner.log_dir, dry_run=flow.runner.dry_run, echo=flow.echo)
        mirror = baseimage.resolve_mirror(base)
        work = flow.repo / "build" / "base-image" / base.name.replace("/", "_").replace(":", "_")
        with summary.stage(f"base {base.name}", f"debootstrap {base.suite} from {mirror}") as stage:
            runner.remove(work)
            runner.make_dir(work)
            try:
                results = [
                    runner.run(cmd, passthrough=len(todo) == 1 and cmd.argv[0] == "debootstrap")
                    for cmd in baseimage.plan(base, mirror, work / "rootfs", client.exe)
                ]
            finally:
                runner.remove(work)
            if all(r.planned for r in results):
                stage.status = "planned"
            else:
                summary.images[base.name] = ImageRef(base.name, dockercli.image_id(client, base.name) or "?")

    with ThreadPoolExecutor(max_workers=max(1, len(todo))) as pool:
        for done in [pool.submit(make, base) for base in todo]:
            done.result()  # the first failure stops the session, after every base has finished


def clean(flow: Flow, summary: Summary, *, everything: bool = False) -> None:
    """Remove build/, reports/, the wheels of every matrix variant and torch-fl's images; ``everything`` also the
    local base images and BuildKit's build cache."""
    wheels = (flow.repo / "wheels" / c.wheel_dir for c in flow.matrix.toolchains.values())
    for path in [flow.repo / "build", flow.repo / "reports", *wheels]:
        if path.exists():
            flow.echo(f"remove {path.relative_to(flow.repo)}")
            flow.runner.remove(path)
    try:
        client = flow.images.client()  # a real run checks the daemon here
    except dockercli.DockerError as exc:
        flow.echo(f"docker images not cleaned: {exc}")
        summary.add("clean", "ran", note="files only")
        return
    images = dockercli.image_refs(client, "--filter", f"label={plan.LABEL_PREFIX}.role")
    if everything:
        images += [b.name for b in flow.matrix.local_bases.values() if dockercli.image_id(client, b.name)]
    commands = [Command("remove images", (client.exe, "rmi", "-f", *images), log_name="clean.log")] * bool(images)
    if everything:
        prune = (client.exe, "builder", "prune", "-af")
        commands.append(Command("prune the BuildKit cache", prune, log_name="clean-cache.log"))
    for cmd in commands:
        flow.runner.run(cmd, check=False)
    # a dry run's answer is PLANNED, which is false
    summary.add("clean", flow.runner.ask(lambda: "ran") or "planned", note=f"{len(images)} images")
