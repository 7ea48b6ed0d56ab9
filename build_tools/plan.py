"""The docker commands of each step, as data (pure: unit-tested, printed by ``--dry-run``).

Every toolchain's Dockerfile has the targets and takes the build args (``build_args``) of docker/README.md ("The
Dockerfile contract"). Every package comes from the row's lock files; where torch may come from reaches pip through
the pip.conf secret.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .command import Command
from .dockercli import BUILDKIT_ENV
from .env import HostEnv
from .matrix import Toolchain

LABEL_PREFIX = "org.torch-fl"
TREE_IN_IMAGE = "/opt/torch-fl-tree"  # tests/ and the tools it runs (context.TEST_IMAGE_TOOLS), as in the checkout
TESTS_IN_IMAGE = f"{TREE_IN_IMAGE}/tests"
HARNESS_HOME_IN_IMAGE = f"{TREE_IN_IMAGE}/build_tools/bench"
BENCH_MODULE = "harness"  # the benchmark harness, `python -m harness` from build_tools/bench (docs/bench.md)
SCRIPTS_IN_IMAGE = "/opt/torch-fl/scripts"
REPORTS_IN_CONTAINER = "/reports"


def image_repo(name: str, role: str) -> str:
    return f"torch-fl/{name}-{role}"


def image_tag(name: str, role: str, key: str) -> str:
    return f"{image_repo(name, role)}:{key[:12]}"


@dataclass(frozen=True)
class BuildInputs:
    """Everything a build command depends on besides the matrix row."""

    context: Path
    dockerfile: Path
    builder_image: str
    test_image: str
    pipconf: Path
    host: HostEnv
    key: str
    source_date_epoch: str = "315532800"  # the commit's time (git.source_date_epoch); 1980-01-01 when unknown
    python_source: str = ""  # where the test image's Python comes from: "host" or a Debian suite
    locks: dict[str, str] = field(default_factory=dict)  # the lock files by build arg (locks.lock_args)


def vendor_path(toolchain: Toolchain, path: Path) -> str:
    """``path`` (repo-relative, inside the row's docker directory) as the staged context's vendor/ holds it."""
    return path.relative_to(toolchain.vendor_dir).as_posix()


def build_args(toolchain: Toolchain, inp: BuildInputs) -> list[str]:
    args = {
        "BUILDER_IMAGE": inp.builder_image,
        "TEST_IMAGE": inp.test_image,
        "ACCELERATOR": toolchain.accelerator,  # which toolkit the builder adds (docker/Dockerfile)
        "PYTHON_VERSION": toolchain.python,
        "VARIANT": toolchain.variant,
        "BUILDER_LOCK": inp.locks["BUILDER_LOCK"],
        "TEST_LOCK": inp.locks["TEST_LOCK"],
        "BUILD_ENV": " ".join(f"{k}={v}" for k, v in sorted(toolchain.build_env.items())),
        "AUDITWHEEL_EXCLUDE": " ".join(toolchain.auditwheel_exclude),
        "SOURCE_DATE_EPOCH": inp.source_date_epoch,
        # the row's one wheel is tagged cp<oldest Python>-abi3 (scikit-build-core's wheel.py-api)
        "WHEEL_PY_API": toolchain.wheel_python,
    }
    if not toolchain.torch.from_image:  # torch's own lock, which the test stage installs first
        args["INSTALL_LOCK"] = inp.locks["INSTALL_LOCK"]
        args["PYTHON_SOURCE"] = inp.python_source
    return [a for k, v in args.items() for a in ("--build-arg", f"{k}={v}")] + inp.host.proxy_flags("--build-arg")


def secrets(inp: BuildInputs) -> list[str]:
    out = ["--secret", f"id=pipconf,src={inp.pipconf}"]
    if inp.host.ca_bundle:
        out += ["--secret", f"id=cacert,src={inp.host.ca_bundle}"]
    return out


def docker_build(docker: str, dockerfile: Path) -> list[str]:
    """The start of every ``docker build`` here: host network (no bridge on these hosts), plain progress (parsed
    by the runner) and the Dockerfile."""
    return [docker, "build", "--network", "host", "--progress", "plain", "-f", str(dockerfile)]


def _docker_build(docker: str, toolchain: Toolchain, inp: BuildInputs, target: str) -> list[str]:
    return [*docker_build(docker, inp.dockerfile), "--target", target, *build_args(toolchain, inp), *secrets(inp)]


def build_command(title: str, argv: Sequence[str], log_name: str) -> Command:
    """A BuildKit ``docker build``: its plain progress is parsed by the runner."""
    return Command(title, tuple(argv), BUILDKIT_ENV, log_name, "build")


def labels(toolchain: Toolchain, role: str, key: str) -> list[str]:
    values = {"vendor": toolchain.name, "role": role, "key": key}
    return [a for k, v in values.items() for a in ("--label", f"{LABEL_PREFIX}.{k}={v}")]


def plan_build(docker: str, toolchain: Toolchain, inp: BuildInputs, export_dir: Path) -> list[Command]:
    """Build (and tag) the builder image, then export the repaired wheel from the cache into ``export_dir``."""
    name, ctx = toolchain.name, str(inp.context)
    tag, log = image_tag(name, "builder", inp.key), f"{name}/docker-build"
    build = (*_docker_build(docker, toolchain, inp, "build"), *labels(toolchain, "builder", inp.key), "-t", tag, ctx)
    export = (*_docker_build(docker, toolchain, inp, "wheel"), "--output", f"type=local,dest={export_dir}", ctx)
    return [
        build_command(f"build {name}: compile and repair the wheel in {tag}", build, f"{log}-builder.log"),
        build_command(f"build {name}: export the repaired wheel", export, f"{log}-export.log"),
    ]


def plan_test_image(docker: str, toolchain: Toolchain, inp: BuildInputs, *, deps: bool = False) -> Command:
    """``docker build`` of the test image; with ``deps``, of its dependency layers alone (``test-deps``), which
    test-<toolchain> builds while the wheel compiles so that the test image takes them from the build cache."""
    target = "test-deps" if deps else "test"
    tag = f"{image_repo(toolchain.name, 'test')}:deps" if deps else image_tag(toolchain.name, "test", inp.key)
    what = "the test image's dependency layers" if deps else f"the test image {tag}"
    argv = (*_docker_build(docker, toolchain, inp, target), *labels(toolchain, target, inp.key), "-t", tag)
    return build_command(
        f"test {toolchain.name}: build {what}", (*argv, str(inp.context)), f"{toolchain.name}/docker-build-{target}.log"
    )


@dataclass(frozen=True)
class Site:
    """Where a container of the test image runs; ``reports_dir`` is mounted at /reports, ``host_flags`` are what
    hostdev.run_flags found on this host."""

    docker: str
    toolchain: Toolchain
    image: str
    reports_dir: Path
    host: HostEnv
    user: str | None = None
    host_flags: Sequence[str] = ()


def _docker_run(site: Site, env: Sequence[str] = ()) -> list[str]:
    """``docker run`` of a test-image container, up to the image."""
    argv = [site.docker, "run", "--rm", "--network", "host", "-v", f"{site.reports_dir}:{REPORTS_IN_CONTAINER}"]
    if site.user:
        argv += ["--user", site.user]
    items = ["HOME=/tmp", *(f"{k}={v}" for k, v in sorted(site.toolchain.test_env.items())), *env]
    argv += [a for item in items for a in ("-e", item)]
    return [*argv, *site.host.proxy_flags("-e"), *site.toolchain.docker_run_flags, *site.host_flags]


def plan_test_run(
    site: Site, *, bench: str, pytest_args: Sequence[str], suites: Sequence[str] = ("routing", "correctness")
) -> Command:
    """``docker run`` of the suites. A row whose suites leave out ``bench`` runs no short benchmark either (the
    benchmark's own tests are that suite); ``--bench-full`` still runs it."""
    if bench == "short" and "bench" not in suites:
        bench = "none"
    toolchain = site.toolchain
    argv = _docker_run(site)
    argv += [site.image, "python", f"{SCRIPTS_IN_IMAGE}/run_tests.py", "--tests", TESTS_IN_IMAGE]
    argv += ["--reports", REPORTS_IN_CONTAINER, "--markers", toolchain.pytest_markers]
    argv += ["--accelerator", toolchain.accelerator, "--bench", bench, "--suites", ",".join(suites)]
    if pytest_args:
        argv += ["--", *pytest_args]
    title = f"test {toolchain.name}: run the suites in {site.image}"
    return Command(title, tuple(argv), log_name=f"{toolchain.name}/docker-run-tests.log")


def plan_bench_run(site: Site, *, bench_args: Sequence[str], commit: str = "") -> Command:
    """``docker run`` of the benchmark alone from the image's copy of build_tools/bench. ``commit`` (the checkout's
    HEAD) reaches the report as TORCH_FL_COMMIT: the container has no checkout to ask."""
    toolchain = site.toolchain
    argv = _docker_run(site, [f"TORCH_FL_COMMIT={commit}"] if commit else [])
    argv += ["-w", HARNESS_HOME_IN_IMAGE, site.image, "python", "-m", BENCH_MODULE]
    argv += ["--accelerator", toolchain.accelerator, "--out", REPORTS_IN_CONTAINER]
    title = f"bench {toolchain.name}: run python -m {BENCH_MODULE} in {site.image}"
    return Command(title, (*argv, *bench_args), log_name=f"{toolchain.name}/docker-run-bench.log")


# bash -c SCRIPT PROVIDER ARGS...: $0 is the provider, "$@" the qualify arguments
QUALIFY_SCRIPT = (
    f'set -e; python {TREE_IN_IMAGE}/build_tools/node/record_workloads.py --samples /reports/samples --provider "$0" '
    '--skip-if-recorded; python -m torch_fl qualify --out /reports --provider "$0" "$@"'
)


def plan_qualify_run(site: Site, *, provider: str, qualify_args: Sequence[str]) -> Command:
    """``docker run`` of ``python -m torch_fl qualify``: the workloads' calls are recorded first (once per run
    directory), then every operator the provider claims runs against native. The run directory is mounted as it
    is, so a run cut short resumes in the next one."""
    argv = (*_docker_run(site), site.image, "bash", "-c", QUALIFY_SCRIPT, provider, *qualify_args)
    title = f"qualify {site.toolchain.name}: python -m torch_fl qualify --provider {provider} in {site.image}"
    return Command(title, argv, log_name=f"{site.toolchain.name}/docker-run-qualify.log")
