"""Load and validate the toolchain matrix (``configs/toolchains.toml``).

Every error names the file and the dotted key, e.g.::

    configs/toolchains.toml: vendors.cpu.python: expected "X.Y" (e.g. "3.11"), got '3'
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: nox depends on tomli there
    import tomli as tomllib

DEFAULT_PATH = Path("configs") / "toolchains.toml"
SCHEMA = 1
_VENDOR_RE = re.compile(r"^[a-z][a-z0-9]*$")
_VARIANT_RE = re.compile(r"^(?:[a-z0-9]+(\.[a-z0-9]+)*|[a-z]+\*)$")
_PYTHON_RE = re.compile(r"^3\.\d+$")
_ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_IMAGE_RE = re.compile(r"^[a-z0-9][a-z0-9._:/@-]*$")


class MatrixError(ValueError):
    """The matrix file is missing, malformed or has an invalid value."""


def _key(doc: str, *, key: str = "", **kw: Any) -> Any:
    """A field with its documentation: ``key`` is its TOML spelling where that differs from the field name;
    docker/README.md's key tables are rendered from these (``python -m build_tools.matrix``)."""
    return field(metadata={"doc": doc, "key": key}, **kw)


@dataclass(frozen=True)
class TorchSpec:
    requirement: str = _key("what pip installs into both images (a PEP 508 requirement, local label included)")
    index_url: str = _key(
        "(optional) the vendor's index, used only when no staged PIP_FIND_LINKS wheel satisfies the requirement; "
        '"" = whatever PIP_INDEX_URL/pip.conf says',
        default="",
    )
    from_image: bool = _key(
        "(optional, default false) the base image already ships torch: install nothing, use the image's "
        "interpreter (the venv is made with --system-site-packages)",
        default=False,
    )
    builder_no_deps: bool = _key(
        "(optional, default false) the builder installs torch with --no-deps (a CPU-only build against a CUDA "
        "torch needs none of its nvidia-* libraries); the test image installs them",
        default=False,
    )

    @property
    def name(self) -> str:
        return re.split(r"[<>=!~ \[;@]", self.requirement, maxsplit=1)[0]


@dataclass(frozen=True)
class Toolchain:
    """One vendor row of the matrix."""

    vendor: str = _key("", key="-")  # the table's name, not a key
    summary: str = _key("one line, shown by `nox -l`")
    dockerfile: str = _key("path (repo-relative) of the Dockerfile with `build`, `wheel` and `test` targets")
    builder_image: str = _key("base image of the builder stage (compilers are installed on top of it)")
    test_image: str = _key("base image of the test stage (no compilers)")
    python: str = _key('"X.Y" of the interpreter the images use; the wheel\'s cpXY tag must match')
    variant: str = _key(
        "local version label and wheelhouse name: the wheel is `torch_fl-<v>+pt<torch line><variant>-...` in "
        'wheels/<variant>/; or a family such as "dtk*": the builder reads the label from its image (e.g. dtk2504) '
        "and the wheel goes to wheels/<vendor>/"
    )
    torch: TorchSpec = _key("the `torch.*` keys below")
    auditwheel_exclude: tuple[str, ...] = _key(
        "sonames (globs for versioned sonames) never grafted into the wheel: torch's own libraries and the vendor "
        "runtime, which the user's torch install provides",
        key="auditwheel.exclude",
    )
    docker_run_flags: tuple[str, ...] = _key(
        "(optional) extra `docker run` flags of the test container (devices, groups, shm, ...); every "
        "--device=PATH must exist on the docker host (else test/bench stop at once), and the numeric groups of the "
        "passed device nodes are added (build_tools/hostdev.py)",
        key="docker_run.flags",
        default=(),
    )
    docker_run_optional_mounts: tuple[str, ...] = _key(
        '(optional) "/host:/container[:ro]" bind mounts added to the test container only where /host exists',
        key="docker_run.optional_mounts",
        default=(),
    )
    image_hint: str = _key(
        "(optional) how to obtain builder_image/test_image; when set, a missing image is not pulled: the build "
        "stops at once with this line",
        default="",
    )
    build_env: Mapping[str, str] = _key(
        "(optional) environment of the compile step (string values)", default_factory=dict
    )
    test_env: Mapping[str, str] = _key(
        "(optional) environment of the test container (string values)", default_factory=dict
    )
    pytest_markers: str = _key(
        '-m expression selecting this vendor\'s tests ("" runs everything; markers: tests/conftest.py)', default=""
    )
    accelerator: str = _key("the accelerator the benchmark measures (its --accelerator: cpu, cuda or dcu)", default="")
    test_suites: tuple[str, ...] = _key(
        "(optional) the suites this row's test container runs, a subset of [build].test_suites (default: all of "
        "them); the test image installs the model suite's libraries only when it runs `models`",
        default=(),
    )
    collectives: str = _key(
        "(optional) one line: how the flagos backend of torch.distributed reaches the vendor's collectives "
        "library (torch_fl/distributed.py creates it); shown by build-<vendor>",
        default="",
    )

    @property
    def variant_from_image(self) -> bool:
        """``variant = "dtk*"``: the builder reads the label from its image (e.g. dtk2504); only its family is fixed."""
        return self.variant.endswith("*")

    @property
    def wheel_dir(self) -> str:
        """The directory under wheels/: the variant, or the vendor when the variant is read from the image."""
        return self.vendor if self.variant_from_image else self.variant

    @property
    def python_tag(self) -> str:
        """The CPython wheel tag of ``python``: "3.11" -> "cp311"."""
        return "cp" + self.python.replace(".", "")

    def fingerprint(self) -> str:
        """A stable hash of the row: part of the build and test cache keys."""
        data = asdict(self)
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=list).encode()).hexdigest()


@dataclass(frozen=True)
class LocalBase:
    """How ``nox -s base-image`` makes a local base image (for hosts that cannot pull)."""

    name: str = _key("", key="-")  # the table's name: the image to make, with its tag
    tool: str = _key('how the image is made: "debootstrap" (the only one)')
    suite: str = _key("the Debian suite (e.g. bookworm)")
    variant: str = _key("(optional, default minbase) debootstrap's --variant", default="minbase")
    mirror: str = _key(
        '(optional, default "auto": the Debian mirror the host\'s apt uses, else deb.debian.org)', default="auto"
    )
    stands_for: tuple[str, ...] = _key(
        "(optional) the public images it stands in for when they are not present locally", default=()
    )


@dataclass(frozen=True)
class BuildSpec:
    inputs: tuple[str, ...] = _key(
        "files and folders copied into the builder stage and hashed to decide whether the wheel is up to date"
    )
    optional_inputs: tuple[str, ...] = _key("the same, skipped when missing")
    test_suites: tuple[str, ...] = _key(
        "folders of tests/ run in the test container, from a copy outside any source tree"
    )
    test_excludes: tuple[str, ...] = _key("folders of tests/ never copied into the test image (host-only tests)")


TABLES = (("[build]", BuildSpec), ('[local_bases."<image>"]', LocalBase), ("[vendors.<name>]", Toolchain))
DOCS_BEGIN = "<!-- matrix keys: generated by `python -m build_tools.matrix` from build_tools/matrix.py -->"
DOCS_END = "<!-- end of matrix keys -->"


def key_docs() -> str:
    """Markdown tables of every key of configs/toolchains.toml, from the field documentation above."""
    out = [DOCS_BEGIN]
    for title, cls in TABLES:
        out += ["", f"`{title}`", "", "| key | meaning |", "| --- | --- |"]
        for f in fields(cls):
            key = f.metadata.get("key") or f.name
            if key == "-":
                continue
            if f.type in ("TorchSpec", TorchSpec):
                out += [f"| `torch.{t.name}` | {t.metadata['doc']} |" for t in fields(TorchSpec)]
                continue
            out.append(f"| `{key}` | {f.metadata['doc']} |")
    return "\n".join([*out, "", DOCS_END])


def write_key_docs(readme: Path) -> bool:
    """Replace the generated key tables in ``readme``; True when it changed."""
    from .outputs import atomic_write_text

    text = readme.read_text(encoding="utf-8")
    begin, end = text.index(DOCS_BEGIN), text.index(DOCS_END) + len(DOCS_END)
    new = text[:begin] + key_docs() + text[end:]
    if new != text:
        atomic_write_text(readme, new)
    return new != text


@dataclass(frozen=True)
class Matrix:
    path: Path
    build: BuildSpec
    vendors: Mapping[str, Toolchain]
    local_bases: Mapping[str, LocalBase]

    def suites(self, chain: Toolchain) -> tuple[str, ...]:
        """The suites the test container of ``chain`` runs."""
        return chain.test_suites or self.build.test_suites

    def vendor(self, name: str) -> Toolchain:
        try:
            return self.vendors[name]
        except KeyError:
            known = ", ".join(sorted(self.vendors)) or "none"
            raise MatrixError(f"{self.path}: no [vendors.{name}] table (known vendors: {known})") from None

    def stand_in_for(self, image: str) -> LocalBase | None:
        """The local base image that stands in for the public ``image``, if one is declared."""
        for base in self.local_bases.values():
            if image == base.name or image in base.stands_for:
                return base
        return None


class _Reader:
    """Typed access to a TOML table that reports errors as ``file: dotted.key: problem``."""

    def __init__(self, path: Path, table: Mapping[str, Any], prefix: str) -> None:
        self.path, self.table, self.prefix = path, table, prefix
        self.used: set[str] = set()

    def error(self, key: str, problem: str) -> MatrixError:
        dotted = f"{self.prefix}.{key}" if self.prefix else key
        return MatrixError(f"{self.path}: {dotted}: {problem}")

    def _get(self, key: str, required: bool) -> Any:
        self.used.add(key)
        if key not in self.table:
            if required:
                raise self.error(key, "missing (required)")
            return None
        return self.table[key]

    def str(
        self,
        key: str,
        *,
        required: bool = True,
        default: str = "",
        pattern: re.Pattern[str] | None = None,
        hint: str = "",
    ) -> str:
        value = self._get(key, required)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.error(key, f"expected a string, got {value!r}")
        if pattern is not None and not pattern.match(value):
            raise self.error(key, f"expected {hint or pattern.pattern}, got {value!r}")
        return value

    def bool(self, key: str, *, default: bool = False) -> bool:
        value = self._get(key, False)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {value!r}")
        return value

    def str_list(self, key: str, *, required: bool = True) -> tuple[str, ...]:
        value = self._get(key, required)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.error(key, f"expected a list of non-empty strings, got {value!r}")
        return tuple(value)

    def str_map(self, key: str) -> dict[str, str]:
        value = self._get(key, False)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(key, f"expected a table of strings, got {value!r}")
        out: dict[str, str] = {}
        for k, v in value.items():
            if not _ENV_KEY_RE.match(k):
                raise self.error(f"{key}.{k}", "not a valid environment variable name")
            if not isinstance(v, str):
                raise self.error(f"{key}.{k}", f"expected a string, got {v!r}")
            out[k] = v
        return out

    def sub(self, key: str, *, required: bool = True) -> _Reader:
        value = self._get(key, required)
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise self.error(key, f"expected a table, got {value!r}")
        dotted = f"{self.prefix}.{key}" if self.prefix else key
        return _Reader(self.path, value, dotted)

    def reject_unknown(self) -> None:
        unknown = sorted(set(self.table) - self.used)
        if unknown:
            raise self.error(unknown[0], "unknown key (typo?)")


def _image(r: _Reader, key: str) -> str:
    return r.str(key, pattern=_IMAGE_RE, hint="a docker image reference (lower case, e.g. debian:bookworm-slim)")


def _toolchain(path: Path, vendor: str, table: Mapping[str, Any]) -> Toolchain:
    if not _VENDOR_RE.match(vendor):
        raise MatrixError(f"{path}: vendors.{vendor}: vendor names are lower-case letters and digits")
    r = _Reader(path, table, f"vendors.{vendor}")
    torch = r.sub("torch")
    spec = TorchSpec(
        requirement=torch.str("requirement"),
        index_url=torch.str("index_url", required=False),
        from_image=torch.bool("from_image"),
        builder_no_deps=torch.bool("builder_no_deps"),
    )
    torch.reject_unknown()
    if not spec.name:
        raise torch.error("requirement", f"not a requirement: {spec.requirement!r}")
    audit = r.sub("auditwheel")
    exclude = audit.str_list("exclude")
    audit.reject_unknown()
    for pattern in exclude:
        if "/" in pattern or not pattern.startswith("lib") or ".so" not in pattern:
            raise audit.error("exclude", f"{pattern!r} is not a soname glob like 'libtorch*.so*'")
    run = r.sub("docker_run", required=False)
    flags = run.str_list("flags", required=False)
    optional_mounts = run.str_list("optional_mounts", required=False)
    run.reject_unknown()
    for mount in optional_mounts:
        parts = mount.split(":")
        if len(parts) not in (2, 3) or not all(p.startswith("/") for p in parts[:2]) or parts[2:] not in ([], ["ro"]):
            raise run.error("optional_mounts", f"{mount!r}: write '/host/path:/container/path[:ro]'")
    for flag in flags:
        if not flag.startswith("--"):
            raise run.error("flags", f"{flag!r}: write flags as one '--name=value' string each")
        if flag.split("=", 1)[0] in {"--rm", "--network", "--net", "-v", "--volume", "--user", "--entrypoint"}:
            raise run.error("flags", f"{flag!r} is set by the tooling; remove it")
    chain = Toolchain(
        vendor=vendor,
        summary=r.str("summary"),
        dockerfile=r.str("dockerfile"),
        builder_image=_image(r, "builder_image"),
        test_image=_image(r, "test_image"),
        python=r.str("python", pattern=_PYTHON_RE, hint='"X.Y" (e.g. "3.11")'),
        variant=r.str(
            "variant",
            pattern=_VARIANT_RE,
            hint='a PEP 440 local label (e.g. cpu, cu130), or a family read from the image (e.g. "dtk*")',
        ),
        torch=spec,
        auditwheel_exclude=exclude,
        docker_run_flags=flags,
        docker_run_optional_mounts=optional_mounts,
        image_hint=r.str("image_hint", required=False),
        build_env=r.str_map("build_env"),
        test_env=r.str_map("test_env"),
        pytest_markers=r.str("pytest_markers"),
        accelerator=r.str("accelerator"),
        collectives=r.str("collectives", required=False),
        test_suites=r.str_list("test_suites", required=False),
    )
    r.reject_unknown()
    if "\n" in chain.summary:
        raise r.error("summary", "must be one line")
    if "\n" in chain.image_hint:
        raise r.error("image_hint", "must be one line")
    if "\n" in chain.collectives:
        raise r.error("collectives", "must be one line")
    return chain


def _local_base(path: Path, name: str, table: Mapping[str, Any]) -> LocalBase:
    r = _Reader(path, table, f'local_bases."{name}"')
    if not _IMAGE_RE.match(name) or ":" not in name:
        raise MatrixError(f'{path}: local_bases."{name}": expected an image name with a tag (e.g. x/debian:bookworm)')
    base = LocalBase(
        name=name,
        tool=r.str("tool"),
        suite=r.str("suite"),
        variant=r.str("variant", required=False, default="minbase"),
        mirror=r.str("mirror", required=False, default="auto"),
        stands_for=r.str_list("stands_for", required=False),
    )
    r.reject_unknown()
    if base.tool != "debootstrap":
        raise r.error("tool", f"only 'debootstrap' is supported, got {base.tool!r}")
    return base


def parse(data: Mapping[str, Any], path: Path) -> Matrix:
    """Validate an already-parsed TOML document."""
    top = _Reader(path, data, "")
    schema = top._get("schema", True)
    if schema != SCHEMA:
        raise top.error("schema", f"expected {SCHEMA}, got {schema!r} (this tooling reads schema {SCHEMA})")
    b = top.sub("build")
    build = BuildSpec(
        inputs=b.str_list("inputs"),
        optional_inputs=b.str_list("optional_inputs", required=False),
        test_suites=b.str_list("test_suites"),
        test_excludes=b.str_list("test_excludes", required=False),
    )
    b.reject_unknown()
    for entry in (*build.inputs, *build.optional_inputs):
        if entry.startswith("/") or ".." in Path(entry).parts:
            raise b.error("inputs", f"{entry!r} must be a path inside the repository")
    vendors_table = top.sub("vendors")
    vendors: dict[str, Toolchain] = {}
    for name, table in vendors_table.table.items():
        if not isinstance(table, dict):
            raise vendors_table.error(name, "expected a table")
        vendors[name] = _toolchain(path, name, table)
        vendors_table.used.add(name)
        extra = sorted(set(vendors[name].test_suites) - set(build.test_suites))
        if extra:
            raise MatrixError(
                f"{path}: vendors.{name}.test_suites: {', '.join(extra)} not in [build].test_suites "
                f"({', '.join(build.test_suites)})"
            )
    if not vendors:
        raise top.error("vendors", "no vendor tables")
    bases_table = top.sub("local_bases", required=False)
    bases: dict[str, LocalBase] = {}
    for name, table in bases_table.table.items():
        if not isinstance(table, dict):
            raise bases_table.error(name, "expected a table")
        bases[name] = _local_base(path, name, table)
        bases_table.used.add(name)
    top.reject_unknown()
    return Matrix(path=path, build=build, vendors=vendors, local_bases=bases)


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


if __name__ == "__main__":  # python -m build_tools.matrix: rewrite docker/README.md's key tables
    import sys

    _readme = Path(__file__).resolve().parents[1] / "docker" / "README.md"
    print(f"{_readme}: {'rewritten' if write_key_docs(_readme) else 'current'}", file=sys.stderr)
