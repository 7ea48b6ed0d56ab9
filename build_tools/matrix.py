"""Load and validate the toolchain matrix (``configs/toolchains.toml``).

Each key is declared once, as a field below that tomlfields reads and documents. Every problem is reported at once,
each naming the file and the dotted key, e.g.::

    configs/toolchains.toml: toolchains.cpu.python: expected "X.Y" (e.g. "3.11"), got '3'
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from . import matrix_extends as extends
from . import matrix_rules as rules
from .tomlfields import Problems, given, key, matches, one_line, read, rule

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: nox depends on tomli there
    import tomli as tomllib

DEFAULT_PATH = Path("configs") / "toolchains.toml"
SCHEMA = 1


class MatrixError(ValueError):
    """The matrix file is missing, malformed or has invalid values (one line per problem)."""


@dataclass(frozen=True)
class PythonSource:
    """Where the images get one CPython: a ``[pythons."X.Y"]`` table."""

    version: str = given(matches(rules.PYTHON_RE, '"X.Y" (e.g. "3.12")'), quoted=True)
    source: str = key(
        '"host": the host\'s own `pythonX.Y` (its whole installation is staged into the build context, and the test '
        "and node images run a copy of it); or a Debian suite whose packages pythonX.Y and pythonX.Y-venv bring it. "
        "Builders need no Python of the matrix: the wheel holds no CPython ABI",
        check=matches(rules.SUITE_RE, '"host" or a Debian suite name (e.g. "sid")'),
    )
    image: str = key(
        "the base image of the install check's node image for this Python (a suite's own Debian image; a host "
        "interpreter runs on a Debian at least as new as the host's)",
        check=rules.image,
    )

    @property
    def from_host(self) -> bool:
        return self.source == "host"

    @property
    def tag(self) -> str:
        return "cp" + self.version.replace(".", "")


@dataclass(frozen=True)
class TorchSpec:
    requirement: str = key(
        "what pip installs into both images (a PEP 508 requirement, local label included)", check=rules.requirement
    )
    index_url: str = key(
        "(optional) the vendor's index, used only when no staged PIP_FIND_LINKS wheel satisfies the requirement; "
        '"" = whatever PIP_INDEX_URL/pip.conf says',
        default="",
    )
    from_image: bool = key(
        "(optional, default false) the base image already ships torch: install nothing, use the image's "
        "interpreter (the venv is made with --system-site-packages)",
        default=False,
    )
    builder_no_deps: bool = key(
        "(optional, default false) the builder installs torch with --no-deps (a CPU-only build against a CUDA "
        "torch needs none of its nvidia-* libraries); the test image installs them",
        default=False,
    )
    node_requirement: str = key(
        "(optional) what the node images of the install checks on other Pythons than python install instead of "
        "requirement: a torch whose CPU build is at hand for one Python only (torch 2.13.0+cpu in the machine's "
        "wheelhouse) is PyPI's build of the same version on the others",
        check=rules.requirement,
        default="",
    )
    line: str = key(
        '(optional) "M.m": the torch line of the torch an image brings (torch.from_image), for `nox -s wheels -- '
        "--list`; other rows take it from requirement",
        default="",
    )
    shared_deps: str = key(
        "(optional) a group name: the images of the rows naming it first install, as one layer they share, the "
        "packages that all their install locks pin alike (the CUDA libraries of two torch lines)",
        default="",
    )

    @property
    def name(self) -> str:
        return rules.requirement_name(self.requirement)


@dataclass(frozen=True, kw_only=True)
class Toolchain:
    """One row of the matrix: a ``[toolchains.<name>]`` table."""

    name: str = given(rule(rules.NAME_RE.match, "toolchain names are lower-case letters and digits"))
    summary: str = key("one line, shown by `nox -l`", check=one_line)
    extends: str = key(
        "(optional) another row whose keys this row takes, overriding those it sets (tables key by key)", default=""
    )
    dockerfile: str = key("path (repo-relative) of the Dockerfile with `build`, `wheel` and `test` targets")
    docker_dir: str = key(
        "(optional) path (repo-relative) of the row's directory under docker/: its requirement files and locks, "
        "which the build context stages as vendor/ (default: the Dockerfile's directory)",
        default="",
    )
    builder_image: str = key(
        "base image of the builder stage (compilers are installed on top of it)", check=rules.image
    )
    test_image: str = key("base image of the test stage (no compilers)", check=rules.image)
    python: str = key(
        '"X.Y" of the interpreter the test image runs the suites with (a [pythons] entry)',
        check=matches(rules.PYTHON_RE, '"X.Y" (e.g. "3.11")'),
    )
    builder_python: str = key(
        '(optional) "X.Y" of the builder image\'s own interpreter, which runs CMake and pip (default: python); at '
        "least the oldest of pythons, since scikit-build-core tags a wheel abi3 only from a Python as new as the tag",
        check=matches(rules.PYTHON_RE, '"X.Y" (e.g. "3.11")'),
        default="",
    )
    pythons: tuple[str, ...] = key(
        "(optional) the CPythons this row's one wheel serves: it is tagged cp<oldest>-abi3 (the core library holds "
        "no CPython ABI), so pip takes it on each of them and refuses older ones; `install-<toolchain> -- "
        "--all-pythons` checks each (default: python alone)",
        check=matches(rules.PYTHON_RE, '"X.Y" (e.g. "3.12")'),
        default=(),
    )
    install_pythons: tuple[str, ...] = key(
        "(optional) the CPythons `install-<toolchain>` installs the wheel on as a node does, each in a node image "
        "of that Python, a subset of pythons (default: python alone)",
        check=matches(rules.PYTHON_RE, '"X.Y" (e.g. "3.12")'),
        default=(),
    )
    variant: str = key(
        "local version label and wheelhouse name: the wheel is `torch_fl-<v>+pt<torch line><variant>-...` in "
        'wheels/<variant>/; or a family such as "dtk*": the builder reads the label from its image (e.g. dtk2504) '
        "and the wheel goes to wheels/<toolchain>/",
        check=matches(
            rules.VARIANT_RE, 'a PEP 440 local label (e.g. cpu, cu130), or a family read from the image (e.g. "dtk*")'
        ),
    )
    torch: TorchSpec = key("the `torch.*` keys below")
    builder_requirements: tuple[str, ...] = key(
        "(optional) requirements the builder installs beside requirements-build.txt, pinned in its lock: what one "
        "torch line needs and its sibling rows do not (the CUDA toolkit wheels of that torch's CUDA release)",
        check=rules.requirement,
        default=(),
    )
    auditwheel_exclude: tuple[str, ...] = key(
        "sonames (globs for versioned sonames) never grafted into the wheel: torch's own libraries and the vendor "
        "runtime, which the user's torch install provides",
        toml="auditwheel.exclude",
        check=rules.soname_glob,
    )
    docker_run_flags: tuple[str, ...] = key(
        "(optional) extra `docker run` flags of the test container (devices, groups, shm, ...); every "
        "--device=PATH must exist on the docker host (else test/bench stop at once), and the numeric groups of the "
        "passed device nodes are added (build_tools/hostdev.py)",
        toml="docker_run.flags",
        check=rules.run_flag,
        default=(),
    )
    docker_run_optional_mounts: tuple[str, ...] = key(
        '(optional) "/host:/container[:ro]" bind mounts added to the test container only where /host exists',
        toml="docker_run.optional_mounts",
        check=rules.mount,
        default=(),
    )
    image_hint: str = key(
        "(optional) how to obtain builder_image/test_image; when set, a missing image is not pulled: the build "
        "stops at once with this line",
        check=one_line,
        default="",
    )
    build_env: Mapping[str, str] = key(
        "(optional) environment of the compile step (string values)", check=rules.env_name, default_factory=dict
    )
    test_env: Mapping[str, str] = key(
        "(optional) environment of the test container (string values)", check=rules.env_name, default_factory=dict
    )
    pytest_markers: str = key(
        '-m expression selecting this toolchain\'s tests ("" runs everything; markers: tests/conftest.py)'
    )
    accelerator: str = key("the accelerator the benchmark measures (its --accelerator: cpu, cuda or dcu)")
    test_suites: tuple[str, ...] = key(
        "(optional) the suites this row's test container runs, a subset of [build].test_suites (default: all of "
        "them); the test image installs the model suite's libraries only when it runs `models`",
        default=(),
    )
    install_ways: tuple[str, ...] = key(
        "(optional) the ways `install-<toolchain>` installs the wheel as a node does, each in a container of its own "
        "(http, file, find-links, extra-index: docker/scripts/install_smoke.py); default all of them",
        check=rules.install_way,
        default=rules.INSTALL_WAYS,
    )
    collectives: str = key(
        "(optional) one line: how the flagos backend of torch.distributed reaches the vendor's collectives "
        "library (torch_fl/distributed.py creates it); shown by build-<toolchain>",
        check=one_line,
        default="",
    )

    @property
    def vendor_dir(self) -> Path:
        """The row's docker directory (repo-relative): docker_dir, else the Dockerfile's directory."""
        return Path(self.docker_dir) if self.docker_dir else Path(self.dockerfile).parent

    @property
    def variant_from_image(self) -> bool:
        return self.variant.endswith("*")

    @property
    def wheel_dir(self) -> str:
        """The directory under wheels/: the variant, or the toolchain's name when the variant is read from the image."""
        return self.name if self.variant_from_image else self.variant

    @property
    def python_tag(self) -> str:
        """The test image's interpreter as a wheel tag (``cp313``): what a torch wheel for its images must carry."""
        return "cp" + self.python.replace(".", "")

    @property
    def served_pythons(self) -> tuple[str, ...]:
        """Every Python the row's one wheel serves."""
        return _sorted_pythons(self.pythons or (self.python,))

    @property
    def wheel_python(self) -> str:
        """The Python tag of the row's wheel (``cp310``): its oldest served Python, which scikit-build-core's
        ``wheel.py-api`` turns into ``cp310-abi3``."""
        return "cp" + self.served_pythons[0].replace(".", "")

    @property
    def wheel_tag(self) -> str:
        """``cp310-abi3``: the Python and ABI tags of the row's wheel, which pip accepts on that CPython or newer."""
        return f"{self.wheel_python}-abi3"

    @property
    def checked_pythons(self) -> tuple[str, ...]:
        """The Pythons the install checks run on."""
        return _sorted_pythons(self.install_pythons or (self.python,))

    def fingerprint(self) -> str:
        """A stable hash of the row: part of the build and test cache keys."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True, default=list).encode()).hexdigest()


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def _sorted_pythons(versions) -> tuple[str, ...]:
    return tuple(sorted(set(versions), key=_version_key))


@dataclass(frozen=True)
class LocalBase:
    """How ``nox -s base-image`` makes a local base image (for hosts that cannot pull)."""

    name: str = given(  # the table's name: the image to make, with its tag
        rule(
            lambda n: ":" in n and rules.IMAGE_RE.match(n), "expected an image name with a tag (e.g. x/debian:bookworm)"
        ),
        quoted=True,
    )
    tool: str = key(
        'how the image is made: "debootstrap" (the only one)',
        check=rule("debootstrap".__eq__, "only 'debootstrap' is supported, got {v!r}"),
    )
    suite: str = key("the Debian suite (e.g. bookworm)")
    variant: str = key("(optional, default minbase) debootstrap's --variant", default="minbase")
    mirror: str = key(
        '(optional, default "auto": the Debian mirror the host\'s apt uses, else deb.debian.org)', default="auto"
    )
    stands_for: tuple[str, ...] = key(
        "(optional) the public images it stands in for when they are not present locally", default=()
    )


@dataclass(frozen=True, kw_only=True)
class BuildSpec:
    inputs: tuple[str, ...] = key(
        "files and folders copied into the builder stage and hashed to decide whether the wheel is up to date",
        check=rules.inside_repo,
    )
    optional_inputs: tuple[str, ...] = key("the same, skipped when missing", check=rules.inside_repo, default=())
    test_suites: tuple[str, ...] = key(
        "folders of tests/ run in the test container, from a copy outside any source tree"
    )
    test_excludes: tuple[str, ...] = key(
        "folders of tests/ never copied into the test image (host-only tests)", default=()
    )


T = TypeVar("T")


def _entry(tables: Mapping[str, T], name: str, missing: str, known: str) -> T:
    """``tables[name]``; else a MatrixError that says ``missing`` and lists the names there are."""
    try:
        return tables[name]
    except KeyError:
        names = ", ".join(sorted(tables)) or "none"
        raise MatrixError(f"{missing} ({known}: {names})") from None


@dataclass(frozen=True, kw_only=True)
class Matrix:
    """The whole file; its tables are documented above."""

    path: Path = given()
    schema: Any = key(f"the version of the file's format: {SCHEMA}", default=None)  # checked by parse
    build: BuildSpec = key("[build]")
    toolchains: Mapping[str, Toolchain] = key("[toolchains.<name>]", default_factory=dict)
    local_bases: Mapping[str, LocalBase] = key('[local_bases."<image>"]', default_factory=dict)
    pythons: Mapping[str, PythonSource] = key('[pythons."X.Y"]', default_factory=dict)

    def python(self, version: str) -> PythonSource:
        return _entry(self.pythons, version, f'{self.path}: no [pythons."{version}"] table', "known")

    def suites(self, toolchain: Toolchain) -> tuple[str, ...]:
        """The suites the test container of ``toolchain`` runs."""
        return toolchain.test_suites or self.build.test_suites

    def toolchain(self, name: str) -> Toolchain:
        return _entry(self.toolchains, name, f"{self.path}: no [toolchains.{name}] table", "known toolchains")

    def stand_in_for(self, image: str) -> LocalBase | None:
        """The local base image that stands in for the public ``image``, if one is declared."""
        for base in self.local_bases.values():
            if image == base.name or image in base.stands_for:
                return base
        return None


def parse(data: Mapping[str, Any], path: Path) -> Matrix:
    """Validate an already-parsed TOML document; every problem at once in one ``MatrixError``."""
    problems = Problems()
    data = {**data, "toolchains": extends.resolve(data.get("toolchains"), problems)}
    if data.get("schema") != SCHEMA:
        problems.add("schema", f"expected {SCHEMA}, got {data.get('schema')!r} (this tooling reads schema {SCHEMA})")
    build = data.get("build")
    if not isinstance(build, dict):  # its keys are then reported missing too
        problems.add("build", "missing (required)" if build is None else f"expected a table, got {build!r}")
    if not isinstance(data.get("toolchains"), dict) or not data["toolchains"]:
        problems.add("toolchains", "no toolchain tables")
    matrix = read(Matrix, {**data, "build": build if isinstance(build, dict) else {}}, "", problems, path=path)
    for name, row in matrix.toolchains.items() if matrix else ():
        if extra := sorted(set(row.test_suites) - set(matrix.build.test_suites)):
            suites = ", ".join(matrix.build.test_suites)
            problems.add(f"toolchains.{name}.test_suites", f"{', '.join(extra)} not in [build].test_suites ({suites})")
        if row.torch.from_image:
            continue  # the image's own interpreter: no [pythons] entry, one Python
        for field_name, versions in (
            ("python", (row.python,)),
            ("pythons", row.pythons),
            ("install_pythons", row.install_pythons),
        ):
            if unknown := [v for v in versions if v not in matrix.pythons]:
                known = ", ".join(sorted(matrix.pythons)) or "none"
                problems.add(f"toolchains.{name}.{field_name}", f"{', '.join(unknown)}: no [pythons] table ({known})")
        if row.pythons and (outside := sorted({row.python, *row.checked_pythons} - set(row.pythons))):
            problems.add(f"toolchains.{name}.pythons", f"misses {', '.join(outside)} (python and install_pythons)")
        builder, oldest = row.builder_python or row.python, row.served_pythons[0]
        well_formed = all(map(rules.PYTHON_RE.match, (builder, oldest)))
        if well_formed and _version_key(builder) < _version_key(oldest):
            problems.add(
                f"toolchains.{name}.builder_python",
                f"{builder} is older than {oldest}, the oldest of pythons: scikit-build-core tags the "
                f"wheel {row.wheel_tag} only when a Python at least that new builds it (raise builder_python, or "
                "drop the older Pythons from pythons)",
            )
    if problems:
        raise MatrixError("\n".join(f"{path}: {p}" for p in problems))
    return matrix


def load(path: Path | str = DEFAULT_PATH) -> Matrix:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MatrixError(f"{path}: toolchain matrix not found (run nox from the repository root)") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MatrixError(f"{path}: not valid TOML: {exc}") from None
    return parse(data, path)
