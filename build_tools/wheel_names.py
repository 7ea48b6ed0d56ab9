"""Which distribution file satisfies a requirement, by its name alone, and so where the images' torch comes from."""

from __future__ import annotations

from collections.abc import Sequence

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from .matrix import Toolchain


def requirement_version_matches(requirement: str, wheel_name: str, python_tag: str) -> bool:
    """Does the distribution file ``wheel_name`` satisfy ``requirement`` for ``python_tag`` on Linux?"""
    try:
        req = Requirement(requirement)
        name, version, _build, tags = parse_wheel_filename(wheel_name)
    except (InvalidRequirement, InvalidWheelFilename):
        return False
    return (
        canonicalize_name(name) == canonicalize_name(req.name)
        and req.specifier.contains(version, prereleases=True)
        and any(t.interpreter in (python_tag, "py3") and "linux" in t.platform for t in tags)
    )


def torch_source(toolchain: Toolchain, staged_wheels: Sequence[str]) -> tuple[list[str], str]:
    """(extra pip args for the torch install, a one-line description of where torch comes from). A staged wheel
    that satisfies the requirement wins, so an air-gapped host never waits on the row's index."""
    torch = toolchain.torch
    if torch.from_image:
        return [], f"torch: preinstalled in {toolchain.builder_image} (torch.from_image)"
    hits = [w for w in staged_wheels if requirement_version_matches(torch.requirement, w, toolchain.python_tag)]
    if hits:
        return [], f"torch: {torch.requirement} from the staged wheelhouse ({hits[0]})"
    args = ["--extra-index-url", torch.index_url] if torch.index_url else []
    where = torch.index_url or "the configured pip index"
    return args, f"torch: {torch.requirement} from {where} (no staged wheel satisfies it)"
