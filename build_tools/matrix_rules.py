"""The checks of single values of configs/toolchains.toml (names, images, flags, mounts, requirements): each a
``tomlfields`` rule that matrix.py's fields name, so that a bad value is reported with its key and the fix."""

from __future__ import annotations

import re
from pathlib import Path

from .tomlfields import matches, rule

NAME_RE = re.compile(r"^[a-z][a-z0-9]*$")
VARIANT_RE = re.compile(r"^(?:[a-z0-9]+(\.[a-z0-9]+)*|[a-z]+\*)$")
PYTHON_RE = re.compile(r"^3\.\d+$")
ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
IMAGE_RE = re.compile(r"^[a-z0-9][a-z0-9._:/@-]*$")
TOOLING_FLAGS = {"--rm", "--network", "--net", "-v", "--volume", "--user", "--entrypoint"}


def requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!~ \[;@]", requirement, maxsplit=1)[0]


image = matches(IMAGE_RE, "a docker image reference (lower case, e.g. debian:bookworm-slim)")
env_name = rule(ENV_KEY_RE.match, "not a valid environment variable name")
requirement = rule(requirement_name, "not a requirement: {v!r}")
soname_glob = rule(
    lambda p: "/" not in p and p.startswith("lib") and ".so" in p, "{v!r} is not a soname glob like 'libtorch*.so*'"
)
inside_repo = rule(
    lambda path: not path.startswith("/") and ".." not in Path(path).parts, "{v!r} must be a path inside the repository"
)
# the ways a node installs torch-fl from an index, which `install-<toolchain>` checks (docker/scripts/install_smoke.py)
INSTALL_WAYS = ("http", "file", "find-links", "extra-index")
install_way = rule(INSTALL_WAYS.__contains__, f"expected one of {', '.join(INSTALL_WAYS)}, got {{v!r}}")


def run_flag(flag: str) -> str | None:
    if not flag.startswith("--"):
        return f"{flag!r}: write flags as one '--name=value' string each"
    if flag.split("=", 1)[0] in TOOLING_FLAGS:
        return f"{flag!r} is set by the tooling; remove it"
    return None


def is_mount(mount: str) -> bool:
    parts = mount.split(":")
    return len(parts) in (2, 3) and all(p.startswith("/") for p in parts[:2]) and parts[2:] in ([], ["ro"])


mount = rule(is_mount, "{v!r}: write '/host/path:/container/path[:ro]'")


SUITE_RE = re.compile(r"^[a-z]+$")
