"""Make a local base image for hosts that cannot pull: ``debootstrap`` + ``docker import``, from the mirror the
host's apt already uses (so an apt proxy or a local mirror works as for ``apt-get``), else ``deb.debian.org``."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from pathlib import Path

from .matrix import LocalBase
from .plan import Command

DEFAULT_MIRROR = "http://deb.debian.org/debian"
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _one_line_entries(text: str) -> Iterable[tuple[str, list[str]]]:
    """(uri, suites) of ``deb [opts] uri suite comp...`` lines."""
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line.startswith("deb "):
            continue
        line = re.sub(r"\[[^\]]*\]", " ", line)
        parts = line.split()
        if len(parts) >= 3:
            yield parts[1], [parts[2]]


def _deb822_entries(text: str) -> Iterable[tuple[str, list[str]]]:
    """(uri, suites) of deb822 stanzas (``Types: deb`` / ``URIs:`` / ``Suites:``)."""
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line:
                continue
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
            continue
        for uri in fields.get("uris", "").split():
            yield uri, fields.get("suites", "").split()


def apt_mirror(sources: dict[str, str], suite: str) -> str | None:
    """The first Debian mirror serving ``suite`` in apt source files (name -> text); None if there is none."""
    for name in sorted(sources, key=lambda n: (n != "sources.list", n)):
        text = sources[name]
        entries = _deb822_entries(text) if name.endswith(".sources") else _one_line_entries(text)
        for uri, suites in entries:
            if suite in suites and uri.startswith(("http://", "https://")) and "security" not in uri:
                return uri.rstrip("/")
    return None


def resolve_mirror(base: LocalBase, etc_apt: Path = Path("/etc/apt")) -> str:
    if base.mirror != "auto":
        return base.mirror
    parts = [f for f in sorted((etc_apt / "sources.list.d").glob("*")) if f.suffix in (".list", ".sources")]
    sources = {f.name: f.read_text(errors="replace") for f in [etc_apt / "sources.list", *parts] if f.is_file()}
    return apt_mirror(sources, base.suite) or DEFAULT_MIRROR


def plan(base: LocalBase, mirror: str, rootfs: Path, docker: str) -> list[Command]:
    """debootstrap into ``rootfs``, trim apt caches, then stream it into ``docker import``."""
    message = f"torch-fl local base: debootstrap --variant={base.variant} {base.suite} {mirror}"
    root = shlex.quote(str(rootfs))
    trim = f"rm -rf {root}/var/cache/apt/archives/*.deb {root}/var/lib/apt/lists/*"
    changes = ("--change", f"ENV PATH={IMAGE_PATH}", "--change", 'CMD ["/bin/bash"]')
    import_cmd = shlex.join([docker, "import", *changes, "--message", message, "-", base.name])
    debootstrap = ("debootstrap", f"--variant={base.variant}", base.suite, str(rootfs), mirror)
    stream = ("bash", "-o", "pipefail", "-c", f"{trim} && tar -C {root} -c . | {import_cmd}")
    title = f"base-image: debootstrap {base.suite} ({base.variant}) from {mirror}"
    return [
        Command(title, debootstrap, log_name=f"debootstrap-{base.suite}.log"),
        Command(f"base-image: docker import as {base.name}", stream, log_name=f"docker-import-{base.suite}.log"),
    ]
