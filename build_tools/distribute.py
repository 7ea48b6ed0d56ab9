"""The flows behind ``nox -s index``, ``nox -s publish -- DEST`` and ``nox -s install-<toolchain>``, as
docs/cluster.md describes them. install-<toolchain> does what a cluster node does, in containers without network:
pip must pick the wheel of the container's torch line and leave torch as it was (docker/scripts/install_smoke.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import context, dockercli, env, flow, index, locks, matrix, plan, wheel
from .command import Command
from .matrix import Matrix, PythonSource, Toolchain
from .matrix_rules import INSTALL_WAYS
from .options import Options
from .product import variants
from .summary import ImageRef, Summary
from .wheel_names import torch_source

# the bare node image is the `install` target of the Debian rows' Dockerfile, whose test images start from it
NODE_DOCKERFILE = Path("docker") / "Dockerfile"
NODE_TARGET = "install"
INDEX_IN_CONTAINER = "/index"
HOWS = INSTALL_WAYS


def variant_dirs(matrix: Matrix) -> dict[str, str]:
    """wheels/ directory name -> variant pattern, over every row (rows of one variant share a directory)."""
    return {c.wheel_dir: c.variant for c in matrix.toolchains.values()}


def line_rows(matrix: Matrix, toolchain: Toolchain) -> list[Toolchain]:
    """The rows whose wheels share ``toolchain``'s directory: one per torch line of that variant."""
    return [c for c in matrix.toolchains.values() if c.wheel_dir == toolchain.wheel_dir]


def index_all(f: flow.Flow, summary: Summary) -> list[index.Result]:
    wheels = f.repo / "wheels"
    results = []
    for name, pattern in sorted(variant_dirs(f.matrix).items()):
        d = wheels / name
        if not any(d.glob(index.WHEEL_GLOB)):
            continue
        with summary.stage(f"index {name}") as stage:
            try:
                res = index.build(d, pattern)
            except index.IndexBuildError as exc:
                raise flow.UserError(str(exc)) from None
            stage.status = "ran" if res.changed else "up to date"
            stage.note = ", ".join(x.filename for x in res.dists)
        for line, page in res.pages.items():
            n = sum(1 for x in res.dists if x.line == line)
            f.echo(f"wheels/{name}/{page.name}/simple/: {n} wheel(s) ({'written' if res.changed else 'unchanged'})")
        results.append(res)
    if not results:
        raise flow.UserError("no wheels under wheels/<variant>/ to index: run `nox -s build-<toolchain>` first")
    return results


def publish_all(f: flow.Flow, summary: Summary, posargs: Sequence[str]) -> list[Path]:
    if len(posargs) != 1 or posargs[0].startswith("-"):
        raise flow.UserError("usage: nox -s publish -- DEST   (a directory or a mounted share; one argument)")
    dest = Path(posargs[0]).expanduser().resolve()
    if dest == (f.repo / "wheels").resolve() or (f.repo / "wheels").resolve() in dest.parents:
        raise flow.UserError(f"publish DEST {dest} is inside wheels/: name a directory outside it")
    lines = {res.wheel_dir: list(res.pages) for res in index_all(f, summary)}
    out = []
    for pattern, d in index.published_variants(f.repo / "wheels", variant_dirs(f.matrix)):
        t0 = time.monotonic()
        final = index.publish(d, dest)
        summary.add(f"publish {d.name}", "ran", time.monotonic() - t0, str(final))
        for line in lines.get(d, []):
            page, pip = variants.page_path(d.name, line), variants.pip_line(dest.as_uri(), d.name, line)
            f.echo(f"published {page} ({pattern}); a node of that line: {pip}")
        out.append(final)
    return out


@dataclass(frozen=True)
class NodeImage:
    tag: str
    command: Command


def plan_node_image(docker: str, toolchain: Toolchain, inp: plan.BuildInputs, python: PythonSource) -> NodeImage:
    """``docker build`` of the bare node image (``python`` and the row's torch) from the staged context."""
    tag = plan.image_tag(toolchain.name, f"node{python.tag}", inp.key)
    lock = plan.vendor_path(toolchain, locks.lock_path(toolchain, "install", python.version))
    args = (
        "--target",
        NODE_TARGET,
        "--build-arg",
        f"TEST_IMAGE={inp.test_image}",
        "--build-arg",
        f"INSTALL_LOCK={lock}",
        "--build-arg",
        f"PYTHON_VERSION={python.version}",
        "--build-arg",
        f"PYTHON_SOURCE={python.source}",
    )
    argv = (*plan.docker_build(docker, inp.dockerfile), *args, *inp.host.proxy_flags("--build-arg"), *plan.secrets(inp))
    argv += (*plan.labels(toolchain, "node", inp.key), "-t", tag, str(inp.context))
    title = f"install {toolchain.name}: the bare node image of Python {python.version}, {tag}"
    return NodeImage(tag, plan.build_command(title, argv, f"{toolchain.name}/docker-build-node-{python.tag}.log"))


def plan_install_run(
    docker: str, toolchain: Toolchain, image: str, wheel_dir: Path, how: str, expect: str, python: str = ""
) -> Command:
    """``docker run`` of one install check: no network (an HTTP index is served on the container's loopback), the
    variant's directory read-only at /index, the row's test environment."""
    if how not in HOWS:
        raise ValueError(f"how={how!r}: one of {', '.join(HOWS)}")
    argv = [docker, "run", "--rm", "--network", "none", "-v", f"{wheel_dir}:{INDEX_IN_CONTAINER}:ro"]
    argv += [a for k, v in sorted(toolchain.test_env.items()) for a in ("-e", f"{k}={v}")]
    # a GPU row's node image runs the smoke on the always-built CPU emulation runtime (no GPU needed to install)
    argv += ["-e", "FLAGOS_ACCELERATOR=cpu"] if toolchain.test_env.get("FLAGOS_ACCELERATOR", "cpu") != "cpu" else []
    argv += [image, "python", "/opt/torch-fl/install_smoke.py", "--how", how]
    argv += ["--index", INDEX_IN_CONTAINER, "--expect", expect]
    log = f"{toolchain.name}/install-{how}{'-' + python if python else ''}.log"
    return Command(f"install {toolchain.name}{' ' + python if python else ''}: {how}", tuple(argv), log_name=log)


def require_index(f: flow.Flow, toolchain: Toolchain) -> list[index.Dist]:
    """The variant's wheels with a current index, the row's own among them; else the command to run."""
    d = f.repo / "wheels" / toolchain.wheel_dir
    name = f.state.read(toolchain.name).get("wheel")
    if not name or not (d / name).is_file():
        raise flow.UserError(
            f"wheels/{toolchain.wheel_dir} has no wheel of row {toolchain.name}: run `nox -s build-{toolchain.name}`"
        )
    try:
        dists = index.collect(d, toolchain.variant)
    except index.IndexBuildError as exc:
        raise flow.UserError(str(exc)) from None
    if problems := index.check_index(d, dists):
        raise flow.UserError(
            f"wheels/{toolchain.wheel_dir}/torch-<line>/ pages are missing or stale ({problems[0]}): run `nox -s index`"
        )
    return dists


def offered(f: flow.Flow, toolchain: Toolchain, rows: list[Toolchain]) -> list[index.Dist]:
    dists = require_index(f, toolchain)
    labels = sorted(x.label for x in dists)
    f.echo(f"wheels/{toolchain.wheel_dir} offers {', '.join(labels)} ({len(rows)} torch line(s) in the matrix)")
    # pip must choose: a page of one line would pass whatever pip did with the others
    if len(rows) > 1 and len({x.line for x in dists}) < 2:
        others = ", ".join(f"build-{r.name}" for r in rows if r is not toolchain)
        raise flow.UserError(f"wheels/{toolchain.wheel_dir} holds one torch line ({labels}): run one of {others}")
    return dists


def install(f: flow.Flow, name: str, summary: Summary) -> None:
    """The install checks of ``name``: on each of its install Pythons (``--all-pythons``: each of its ``pythons``),
    a bare node image (that Python and the row's torch) installs torch-fl from the index in every way of the row,
    as a node does."""
    toolchain = f.toolchain(name)
    rows = line_rows(f.matrix, toolchain)
    host = f.host()
    staged = wheel.stage_context(f, toolchain, host, locks.shared_install(f.matrix, toolchain, f.repo))
    torch_args, note = torch_source(toolchain, staged.wheels)
    f.echo(note)
    dists = f.runner.ask(
        lambda: offered(f, toolchain, rows),
        unasked="a real run needs the wheels of every torch line and a current index (nox -s index)",
    )
    failed: list[str] = []
    for version in toolchain.served_pythons if f.options.all_pythons else toolchain.checked_pythons:
        python = f.matrix.python(version)
        failed += _install_on(f, toolchain, python, staged, torch_args, host, dists, summary)
    if failed:
        raise flow.UserError(f"install-{name} failed: " + "; ".join(failed))


def _install_on(
    f: flow.Flow,
    toolchain: Toolchain,
    python: PythonSource,
    staged: context.Staged,
    torch_args: list[str],
    host: env.HostEnv,
    dists: list[index.Dist] | None,
    summary: Summary,
) -> list[str]:
    """The install checks on one Python; the failed ones."""
    wheel_dir = f.repo / "wheels" / toolchain.wheel_dir
    base = f.images.resolve_base(python.image, toolchain.image_hint)
    client = f.images.client()
    digests = (
        staged.wheelhouse_digest,
        staged.scripts_digest,
        staged.pythons_digest,
        context.file_sha256(f.repo / NODE_DOCKERFILE),
    )
    key = context.combine("node", toolchain.fingerprint(), python.version, *digests, base.id, *torch_args)
    t0 = time.monotonic()
    with f.pipconf(host, torch_args) as pipconf:
        inp = plan.BuildInputs(
            context=staged.root,
            dockerfile=f.repo / NODE_DOCKERFILE,
            builder_image=base.ref,
            test_image=base.ref,
            pipconf=pipconf,
            host=host,
            key=key,
        )
        node = plan_node_image(client.exe, toolchain, inp, python)
        built = f.runner.run(node.command)
    if built.planned:
        for how in toolchain.install_ways:
            expect = "<pt line of its torch>"
            f.runner.run(plan_install_run(client.exe, toolchain, node.tag, wheel_dir, how, expect, python.version))
        summary.add(f"install checks {python.version}", "planned")
        return []
    what = f"{base.ref} + Python {python.version} + {toolchain.torch.requirement}"
    summary.add(f"node image {python.version}", "ran", time.monotonic() - t0, what)
    summary.images[f"node {python.version}"] = ImageRef(node.tag, dockercli.image_id(client, node.tag) or "?")
    f.images.prune_old(plan.image_repo(toolchain.name, f"node{python.tag}"), node.tag)
    ask = "import torch; print(torch.__version__, torch.version.cuda or '')"
    probe = dockercli.run_quiet([client.exe, "run", "--rm", "--network", "none", node.tag, "python", "-c", ask])
    if probe.returncode != 0:
        raise flow.UserError(f"the node image's torch does not import: {probe.stderr.strip()[-400:]}")
    torch_version, cuda = (probe.stdout.split() + [""])[:2]
    expect = _expected_label(torch_version, cuda or None, toolchain)
    if expect not in {x.label for x in dists or ()}:
        raise flow.UserError(
            f"the node has torch {torch_version} but wheels/{toolchain.wheel_dir} has no +{expect} wheel"
        )
    page = variants.line_page(variants.torch_line(torch_version))
    on_page = sorted(x.filename for x in dists or () if variants.line_page(x.line) == page)
    f.echo(
        f"node torch {torch_version}, Python {python.version}: {toolchain.wheel_dir}/{page}/ offers "
        f"{', '.join(on_page)}"
    )
    f.echo(
        f"pip must choose +{expect} for {python.tag} and leave torch {torch_version} as it is "
        f"({', '.join(toolchain.install_ways)})"
    )
    failed = []
    for how in toolchain.install_ways:
        t1 = time.monotonic()
        cmd = plan_install_run(client.exe, toolchain, node.tag, wheel_dir, how, expect, python.version)
        res = f.runner.run(cmd, check=False, passthrough=True)
        ok = res.returncode == 0
        summary.add(
            f"install {python.version} ({how})",
            "ran" if ok else "failed",
            time.monotonic() - t1,
            f"chose +{expect}; {_wrong_line_outcome(res.log)}" if ok else f"expected +{expect}",
        )
        if not ok:
            failed.append(f"{python.version} {how} (exit {res.returncode}, log {res.log})")
    if f.options.all_pythons:  # a release check visits every Python once: keep the disk for the next node image
        f.images.remove(node.tag)
    return failed


def _wrong_line_outcome(log: Path | None) -> str:
    """What install_smoke.py's last line says of the wheel of another torch line (refused, or none to force in)."""
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines() if log and log.is_file() else []
    said = [ln.partition("; ")[2] for ln in lines if ln.startswith("install-smoke: OK ")]
    return said[-1] if said and said[-1] else "wrong line: not reported"


def _expected_label(torch_version: str, cuda: str | None, toolchain: Toolchain) -> str:
    """The label of the wheel the node must get: its torch line and the row's toolchain."""
    tag = variants.toolchain_from_torch(torch_version, cuda) if toolchain.variant_from_image else toolchain.variant
    return variants.make(torch_version, tag).label


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m build_tools.distribute index|publish DEST`` (the nox sessions run it in a venv that has
    dumb-pypi, build_tools/requirements-index.txt)."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("index", "publish"):
        print("usage: python -m build_tools.distribute index | publish DEST", file=sys.stderr)
        return 2
    repo = Path(__file__).resolve().parents[1]
    try:
        m = matrix.load(repo / matrix.DEFAULT_PATH)
    except matrix.MatrixError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    f = flow.Flow(repo, m, Options(environ=os.environ))
    summary = Summary(args[0])
    try:
        index_all(f, summary) if args[0] == "index" else publish_all(f, summary, args[1:])
    except flow.ERRORS as exc:
        summary.show()
        print(f"error: {exc}", file=sys.stderr)
        return 1
    summary.show()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
