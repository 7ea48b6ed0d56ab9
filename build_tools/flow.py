"""The flows behind the nox sessions: build-<vendor>, test-<vendor>, bench-<vendor>, base-image, clean.

Each flow takes a ``Flow`` (repository, matrix, options, where to print) and records its stages in a
``Summary``. Errors a newcomer can hit are raised as one-line exceptions (``UserError`` and friends); the nox
session turns them into ``session.error``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from . import baseimage, context, dockercli, env, gpu, hostdev, outputs, plan, wheelcheck
from .matrix import Matrix, MatrixError, Toolchain
from .runner import Runner, StepFailed
from .summary import Summary, parse_junit


class UserError(RuntimeError):
    """A one-line problem with its fix."""


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
        self.runner = Runner(self.repo / "build" / "logs", dry_run=self.options.dry_run, echo=self.echo)
        self._docker: dockercli.DockerClient | None = None
        self._bases: dict[str, tuple[str, str]] = {}

    # ------------------------------------------------------------------------------------------------ docker
    def docker(self) -> dockercli.DockerClient:
        if self._docker is None:
            try:
                client = dockercli.find_client(self.environ)
            except dockercli.DockerError:
                if not self.options.dry_run:
                    raise
                client = dockercli.DockerClient("docker", "?", "unknown", "dry run: no usable docker client here")
            if client.note:
                self.echo(client.note)
            if not self.options.dry_run:
                server = dockercli.check_daemon(client)
                self.echo(
                    f"docker: client {client.version} ({client.buildkit} BuildKit) at {client.exe}, daemon {server}"
                )
            self._docker = client
        return self._docker

    def _daemon_usable(self) -> bool:
        if not self.options.dry_run:
            return True
        client = self.docker()
        try:
            dockercli.check_daemon(client)
            return True
        except dockercli.DockerError:
            return False

    def resolve_base(self, image: str, hint: str = "") -> tuple[str, str]:
        """(image to build FROM, its id). Present locally > its local stand-in > pulled; else a clear error.

        With ``hint`` (the row's ``image_hint``: images behind a login or an unreachable registry) a missing
        image is not pulled: the build stops at once with one line naming the image and the hint.
        """
        if image in self._bases:
            return self._bases[image]
        client = self.docker()
        if not self._daemon_usable():
            self._bases[image] = (image, "unknown")
            return self._bases[image]
        iid = dockercli.image_id(client, image)
        stand_in = self.matrix.stand_in_for(image)
        if iid:
            found = (image, iid)
        elif stand_in and (sid := dockercli.image_id(client, stand_in.name)):
            self.echo(
                f"base image {image} is not present locally; using its stand-in {stand_in.name} "
                "(made by `nox -s base-image`)"
            )
            found = (stand_in.name, sid)
        elif hint and self.options.dry_run:
            self.echo(f"dry run: base image {image} is not present locally (a real run would stop here: {hint})")
            found = (image, "missing")
        elif hint:
            raise UserError(f"base image {image} is not present locally: {hint}")
        elif self.options.dry_run:
            hint = f"; `nox -s base-image` makes its stand-in {stand_in.name}" if stand_in else ""
            self.echo(f"dry run: base image {image} is not present locally (a real run would try to pull it{hint})")
            found = (image, "missing")
        else:
            self.echo(f"base image {image} is not present locally; trying `docker pull {image}`")
            res = self.runner.run(
                plan.Command(f"pull {image}", (client.exe, "pull", image), log_name="pull.log"), check=False
            )
            iid = dockercli.image_id(client, image)
            if res.returncode != 0 or not iid:
                fix = (
                    "make its local stand-in with `nox -s base-image` (debootstrap + docker import; needs root)"
                    if stand_in
                    else f"pull it on a connected host and move it here (`docker save {image} | docker load`)"
                )
                raise UserError(f"base image {image} is missing and cannot be pulled: {fix}")
            found = (image, iid)
        self._bases[image] = found
        return found

    # --------------------------------------------------------------------------------------------- helpers
    def chain(self, vendor: str) -> Toolchain:
        chain = self.matrix.vendor(vendor)
        dockerfile = self.repo / chain.dockerfile
        if not dockerfile.is_file():
            msg = (
                f"{chain.dockerfile} does not exist yet: the {vendor} row of {self.matrix.path} is data only "
                f"(write the Dockerfile to enable build-{vendor}/test-{vendor})"
            )
            if not self.options.dry_run:
                raise UserError(msg)
            self.echo("dry run: " + msg)
        return chain

    def host(self) -> env.HostEnv:
        host = env.from_environ(self.environ)
        for w in host.warnings:
            self.echo("warning: " + w)
        return host

    def state_path(self, vendor: str) -> Path:
        return self.repo / "build" / "state" / f"{vendor}.json"

    def read_state(self, vendor: str) -> dict:
        try:
            return json.loads(self.state_path(vendor).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def write_state(self, vendor: str, **values: object) -> None:
        state = {**self.read_state(vendor), **values}
        outputs.atomic_write_text(self.state_path(vendor), json.dumps(state, indent=2, sort_keys=True) + "\n")

    @contextmanager
    def pipconf(self, host: env.HostEnv, extra_index_urls: list[str]) -> Iterator[Path]:
        """The pip.conf secret in a private temporary directory outside the repository (removed afterwards)."""
        text = env.pip_conf(host, extra_index_urls=extra_index_urls)
        if self.options.dry_run:
            shown = "\n".join("    " + env.redact(line) for line in text.splitlines())
            self.echo("pip.conf passed as the BuildKit secret 'pipconf' (credentials redacted here):\n" + shown)
            yield Path("<private-tmp>/pip.conf")
            return
        d = Path(tempfile.mkdtemp(prefix="torch-fl-secrets-"))
        try:
            p = d / "pip.conf"
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(text)
            yield p
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def prune_old(self, repo_name: str, keep: str) -> None:
        """Remove the other tags of ``repo_name`` (older keys), so images do not pile up."""
        client = self.docker()
        res = dockercli.run_quiet([client.exe, "image", "ls", repo_name, "--format", "{{.Repository}}:{{.Tag}}"])
        old = [t for t in res.stdout.split() if t != keep and "<none>" not in t]
        if old:
            dockercli.run_quiet([client.exe, "rmi", *old])


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


def _staged_wheel_names(staged: context.Staged) -> list[str]:
    return sorted(p.name for p in (staged.root / "wheelhouse").glob("*/*") if p.is_file())


def build(flow: Flow, vendor: str, summary: Summary) -> Built:
    """Build and repair the wheel of ``vendor`` into wheels/<variant>/ unless it is up to date."""
    chain = flow.chain(vendor)
    host = flow.host()
    for line in host.describe():
        flow.echo(line)
    t0 = time.monotonic()
    builder_base = flow.resolve_base(chain.builder_image, chain.image_hint)
    test_base = flow.resolve_base(chain.test_image, chain.image_hint)
    staged = context.stage_build(flow.repo, chain, flow.matrix.build, host.find_links_dirs)
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
    state = flow.read_state(vendor)
    built = Built(
        chain, wheel_dir / state.get("wheel", "?"), None, staged, host, torch_args, extra_index, builder_base, test_base
    )
    client = flow.docker()
    builder_tag = plan.image_tag(vendor, "builder", key)

    if not flow.options.dry_run and not flow.options.rebuild and state.get("key") == key:
        wheel = wheel_dir / state.get("wheel", "")
        if wheel.is_file() and context.file_sha256(wheel) == state.get("sha256"):
            built.wheel, built.info = wheel, wheelcheck.inspect(wheel)
            summary.add("build wheel", "up to date", 0.0, "inputs unchanged since the last build")
            summary.wheel, summary.wheel_path = built.info, wheel.relative_to(flow.repo)
            iid = dockercli.image_id(client, builder_tag)
            if iid:
                summary.images["builder"] = (builder_tag, iid)
            flow.echo(f"wheel up to date: {wheel.relative_to(flow.repo)} (build inputs unchanged)")
            return built

    export = (
        outputs.temp_dir_beside(wheel_dir)
        if not flow.options.dry_run
        else wheel_dir.parent / f".{chain.wheel_dir}.tmp-XXXX"
    )
    t1 = time.monotonic()
    try:
        with flow.pipconf(host, extra_index) as pipconf:
            inputs = plan.BuildInputs(
                context=staged.root,
                dockerfile=flow.repo / chain.dockerfile,
                builder_image=builder_base[0],
                test_image=test_base[0],
                torch_pip_args=torch_args,
                pipconf=pipconf,
                host=host,
                key=key,
            )
            for cmd in plan.plan_build(client.exe, chain, inputs, export):
                flow.runner.run(cmd)
        if flow.options.dry_run:
            summary.add("build wheel", "planned")
            return built
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
        report_dir = flow.repo / "build" / "state" / vendor
        for name in ("auditwheel-show.txt", "build-info.json"):
            if (export / name).is_file():
                outputs.atomic_copy(export / name, report_dir / name)
    except BaseException:
        summary.add("build wheel", "failed", time.monotonic() - t1)
        raise
    finally:
        if not flow.options.dry_run:
            shutil.rmtree(export, ignore_errors=True)
    info = wheelcheck.inspect(final)
    flow.write_state(vendor, key=key, wheel=final.name, sha256=info.sha256, builder_image=builder_tag)
    built.wheel, built.info = final, info
    summary.add("build wheel", "ran", time.monotonic() - t1, f"docker build (builder {builder_base[0]})")
    summary.wheel, summary.wheel_path = info, final.relative_to(flow.repo)
    iid = dockercli.image_id(client, builder_tag)
    if iid:
        summary.images["builder"] = (builder_tag, iid)
    flow.prune_old(plan.image_repo(vendor, "builder"), builder_tag)
    flow.echo(f"wheel: {final.relative_to(flow.repo)}  tag {info.tag}  sha256 {info.sha256}")
    return built


# ------------------------------------------------------------------------------------------------------- test
def require_gpus(flow: Flow, vendor: str, session: str) -> None:
    """Stop at once when the row's test container needs NVIDIA GPUs (``--gpus``) that this host cannot give it.

    Rows without ``--gpus`` are not checked (nothing is probed). A dry run reports what a real run would do.
    """
    chain = flow.matrix.vendor(vendor)
    if not gpu.needs_nvidia(chain.docker_run_flags):
        return
    client = flow.docker()
    runtimes = dockercli.runtime_names(client) if flow._daemon_usable() else None
    devices = gpu.device_nodes()
    hook = gpu.find_hook()
    problem = gpu.problem(session, devices=devices, runtimes=runtimes, hook=hook, build_session=f"build-{vendor}")
    if problem is None:
        flow.echo(gpu.describe(devices, runtimes, hook))
    elif flow.options.dry_run:
        flow.echo(f"dry run: a real run would stop here: {problem}")
    else:
        raise UserError(problem)


def require_devices(flow: Flow, vendor: str, session: str) -> None:
    """Stop at once when the row passes device nodes (``--device=/dev/kfd``) that this docker host lacks."""
    chain = flow.matrix.vendor(vendor)
    problem = hostdev.problem(session, hostdev.missing_devices(chain.docker_run_flags), f"build-{vendor}")
    if problem is None:
        return
    if flow.options.dry_run:
        flow.echo(f"dry run: a real run would stop here: {problem}")
    else:
        raise UserError(problem)


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
    client = flow.docker()
    t0 = time.monotonic()
    if flow.options.dry_run:
        wheel = built.wheel if built.wheel.is_file() else None
        tests_digest, dist_digest = "dry-run", "dry-run"
        if wheel:
            tests_digest, dist_digest = context.stage_tests(flow.repo, vendor, flow.matrix.build, wheel)
    else:
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
    info = None if flow.options.dry_run else dockercli.inspect_image(client, tag)
    label = f"{plan.LABEL_PREFIX}.key"
    if info and not flow.options.rebuild and dockercli.image_labels(info).get(label) == key:
        summary.add("test image", "reused", time.monotonic() - t0, "wheel, tests and toolchain unchanged")
        flow.echo(f"test image up to date: {tag}")
    else:
        t1 = time.monotonic()
        try:
            with flow.pipconf(built.host, built.extra_index) as pipconf:
                inputs = plan.BuildInputs(
                    context=built.staged.root,
                    dockerfile=flow.repo / chain.dockerfile,
                    builder_image=built.builder_base[0],
                    test_image=built.test_base[0],
                    torch_pip_args=built.torch_args,
                    pipconf=pipconf,
                    host=built.host,
                    key=key,
                )
                flow.runner.run(plan.plan_test_image(client.exe, chain, inputs))
        except BaseException:
            summary.add("test image", "failed", time.monotonic() - t1)
            raise
        summary.add(
            "test image",
            "planned" if flow.options.dry_run else "ran",
            time.monotonic() - t1,
            f"FROM {built.test_base[0]}",
        )
        if not flow.options.dry_run:
            flow.prune_old(plan.image_repo(vendor, "test"), tag)
    if not flow.options.dry_run:
        summary.images["test"] = (tag, dockercli.image_id(client, tag) or "?")
        check_history(flow, [ref for ref, _ in summary.images.values()], built.host, summary)
    return built, tag


def test(flow: Flow, vendor: str, summary: Summary) -> None:
    """Build (if needed), make the test image (if needed), run the suites; reports to reports/<vendor>/."""
    require_gpus(flow, vendor, f"test-{vendor}")
    require_devices(flow, vendor, f"test-{vendor}")
    built, tag = test_image(flow, vendor, summary)
    chain = built.chain
    client = flow.docker()
    final = flow.repo / "reports" / vendor
    outputs.sweep_temporaries(final.parent)
    tmp = outputs.temp_dir_beside(final) if not flow.options.dry_run else final.parent / f".{vendor}.tmp-XXXX"
    cmd = plan.plan_test_run(
        client.exe,
        chain,
        tag,
        tmp,
        built.host,
        bench=flow.options.bench,
        pytest_args=flow.options.pytest_args,
        user=env.current_user(),
        suites=flow.matrix.build.test_suites,
        host_flags=host_run_flags(flow, chain),
        bench_script=flow.matrix.build.bench_script,
    )
    t2 = time.monotonic()
    try:
        res = flow.runner.run(cmd, check=False, passthrough=True)
        if flow.options.dry_run:
            summary.add("run suites", "planned")
            return
        junit = tmp / "junit.xml"
        counts = parse_junit(junit) if junit.is_file() else None
        summary.tests = counts
        summary.bench = sorted(p.name for p in tmp.glob("bench*"))
        status = "ran" if res.returncode == 0 and counts and counts.ok else "failed"
        summary.add("run suites", status, time.monotonic() - t2, f"exit {res.returncode}; log {res.log}")
        for name in ("auditwheel-show.txt", "build-info.json"):
            src = flow.repo / "build" / "state" / vendor / name
            if src.is_file():
                shutil.copyfile(src, tmp / name)
        summary.reports = final.relative_to(flow.repo)
        (tmp / "summary.md").write_text(summary.markdown(), encoding="utf-8")
        outputs.keep_subdirs(final, tmp, [BENCH_DIR])  # the full benchmark of bench-<vendor> survives
        outputs.publish_dir(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if status != "ran":
        what = counts.line() if counts else "no JUnit report was written"
        raise UserError(
            f"test-{vendor} failed: {what} (container exit {res.returncode}); "
            f"reports in {final.relative_to(flow.repo)}, log {res.log}"
        )


BENCH_DIR = "bench"


def bench(flow: Flow, vendor: str, summary: Summary) -> None:
    """Build (if needed), make the test image (if needed), run the full benchmark in it.

    Reports (bench.json, bench.md, bench.png) go to reports/<vendor>/bench/, swapped in whole; arguments after
    the separator go to the benchmark script (``nox -s bench-cpu -- -- --short``, ``-- --rebuild -- --cases a,b``).
    """
    require_gpus(flow, vendor, f"bench-{vendor}")
    require_devices(flow, vendor, f"bench-{vendor}")
    script = flow.matrix.build.bench_script
    if not script:
        raise UserError(f"{flow.matrix.path}: [build].bench_script is not set: nothing to run for bench-{vendor}")
    if not (flow.repo / "tests" / script).is_file():
        raise UserError(f"tests/{script} does not exist: the benchmark entry point ([build].bench_script) is missing")
    built, tag = test_image(flow, vendor, summary)
    client = flow.docker()
    final = flow.repo / "reports" / vendor / BENCH_DIR
    if not flow.options.dry_run:
        outputs.sweep_temporaries(final.parent)
    tmp = outputs.temp_dir_beside(final) if not flow.options.dry_run else final.parent / f".{BENCH_DIR}.tmp-XXXX"
    cmd = plan.plan_bench_run(
        client.exe,
        built.chain,
        tag,
        tmp,
        built.host,
        bench_args=flow.options.pytest_args,
        user=env.current_user(),
        bench_script=script,
        commit=_git_head(flow.repo),
        host_flags=host_run_flags(flow, built.chain),
    )
    t0 = time.monotonic()
    try:
        res = flow.runner.run(cmd, check=False, passthrough=True)
        if flow.options.dry_run:
            summary.add("run benchmark", "planned")
            return
        written = sorted(p.name for p in tmp.iterdir())
        summary.bench = written
        status = "ran" if res.returncode == 0 else "failed"
        summary.add("run benchmark", status, time.monotonic() - t0, f"exit {res.returncode}; log {res.log}")
        if written:  # run.py writes its reports only after measuring; a --max-ratio gate failure still has them
            summary.reports = final.relative_to(flow.repo)
            outputs.publish_dir(tmp, final)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if res.returncode != 0:
        where = f"reports in {final.relative_to(flow.repo)}" if written else "no reports written"
        raise UserError(f"bench-{vendor} failed: {script} exited {res.returncode} ({where}); log {res.log}")


def _git_head(repo: Path) -> str:
    """HEAD of the checkout (with ``-dirty`` when tracked files differ), for the benchmark report; "" outside git."""
    head = dockercli.run_quiet(["git", "-C", str(repo), "rev-parse", "HEAD"])
    if head.returncode != 0 or not head.stdout.strip():
        return ""
    dirty = dockercli.run_quiet(["git", "-C", str(repo), "diff", "--quiet", "HEAD", "--"]).returncode == 1
    return head.stdout.strip() + ("-dirty" if dirty else "")


def check_history(flow: Flow, images: list[str], host: env.HostEnv, summary: Summary) -> None:
    """Fail when ``docker history --no-trunc`` of an image shows a CA certificate, proxy value or index secret."""
    t0 = time.monotonic()
    client = flow.docker()
    markers = env.secret_markers(host, flow.environ)
    for ref in images:
        res = dockercli.run_quiet([client.exe, "history", "--no-trunc", ref])
        if res.returncode != 0:
            raise UserError(f"`docker history {ref}` failed: {res.stderr.strip()}")
        leaks = env.history_leaks(res.stdout, markers)
        if leaks:
            summary.add("history check", "failed", time.monotonic() - t0, ref)
            raise UserError(
                f"docker history of {ref} contains {', '.join(leaks)}: "
                "pass it as a BuildKit secret or a predefined proxy build arg, never as ARG/ENV/COPY"
            )
    summary.add(
        "history check",
        "ran",
        time.monotonic() - t0,
        f"{len(images)} images: no CA bundle, proxy value or index credential",
    )


# ------------------------------------------------------------------------------------------------- base image
def base_image(flow: Flow, summary: Summary) -> None:
    """Make every [local_bases] image that is not present yet (``--rebuild`` remakes them)."""
    client = flow.docker()
    for base in flow.matrix.local_bases.values():
        t0 = time.monotonic()
        if not flow.options.dry_run and not flow.options.rebuild and dockercli.image_id(client, base.name):
            flow.echo(
                f"{base.name} is present (stands in for {', '.join(base.stands_for)}); "
                "`nox -s base-image -- --rebuild` remakes it"
            )
            summary.add(f"base {base.name}", "up to date")
            summary.images[base.name] = (base.name, dockercli.image_id(client, base.name) or "?")
            continue
        if not flow.options.dry_run:
            if shutil.which("debootstrap") is None:
                raise UserError(
                    "debootstrap is not installed: `apt-get install debootstrap` (Debian/Ubuntu), "
                    "or pull the public base image instead"
                )
            if hasattr(os, "geteuid") and os.geteuid() != 0:
                raise UserError("debootstrap needs root: run `sudo nox -s base-image`")
        mirror = baseimage.resolve_mirror(base)
        work = flow.repo / "build" / "base-image" / base.name.replace("/", "_").replace(":", "_")
        rootfs = work / "rootfs"
        if not flow.options.dry_run:
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
        try:
            for cmd in baseimage.plan(base, mirror, rootfs, client.exe):
                flow.runner.run(cmd, passthrough=cmd.argv[0] == "debootstrap")
        except BaseException:
            summary.add(f"base {base.name}", "failed", time.monotonic() - t0)
            raise
        finally:
            if not flow.options.dry_run:
                shutil.rmtree(work, ignore_errors=True)
        summary.add(
            f"base {base.name}",
            "planned" if flow.options.dry_run else "ran",
            time.monotonic() - t0,
            f"debootstrap {base.suite} from {mirror}",
        )
        if not flow.options.dry_run:
            summary.images[base.name] = (base.name, dockercli.image_id(client, base.name) or "?")


# ------------------------------------------------------------------------------------------------------ clean
def clean(flow: Flow, summary: Summary, *, everything: bool = False) -> None:
    """Remove build/, reports/, the wheels of every matrix variant and torch-fl's builder/test images.

    ``everything`` also removes the local base images and BuildKit's build cache.
    """
    for path in [
        flow.repo / "build",
        flow.repo / "reports",
        *(flow.repo / "wheels" / c.wheel_dir for c in flow.matrix.vendors.values()),
    ]:
        if path.exists():
            flow.echo(f"remove {path.relative_to(flow.repo)}")
            if not flow.options.dry_run:
                shutil.rmtree(path)
    try:
        client = flow.docker()
        if not flow.options.dry_run:
            dockercli.check_daemon(client)
    except dockercli.DockerError as exc:
        flow.echo(f"docker images not cleaned: {exc}")
        summary.add("clean", "ran", note="files only")
        return
    images = dockercli.images_with_label(client, f"{plan.LABEL_PREFIX}.role")
    if everything:
        images += [b.name for b in flow.matrix.local_bases.values() if dockercli.image_id(client, b.name)]
    if images:
        flow.runner.run(
            plan.Command("remove images", (client.exe, "rmi", "-f", *images), log_name="clean.log"), check=False
        )
    if everything:
        flow.runner.run(
            plan.Command(
                "prune the BuildKit cache", (client.exe, "builder", "prune", "-af"), log_name="clean-cache.log"
            ),
            check=False,
        )
    summary.add("clean", "planned" if flow.options.dry_run else "ran", note=f"{len(images)} images")
