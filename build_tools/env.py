"""What passes from the host into docker builds and test runs: pip's settings, the CA bundle and the proxies of an
air-gapped or proxied host, each as the table in docker/README.md ("Air-gapped and proxied hosts") says."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

# Docker's predefined build args: excluded from `docker history` and from the image config.
PROXY_VARS = tuple(v for k in ("HTTP", "HTTPS", "NO", "ALL", "FTP") for v in (f"{k}_PROXY", f"{k.lower()}_proxy"))
SECRET_CA = "/run/secrets/cacert"
WHEELHOUSE_IN_CONTAINER = "/wheelhouse"


class EnvError(ValueError):
    """A host setting points at something that does not exist."""


@dataclass(frozen=True)
class HostEnv:
    index_url: str = ""
    extra_index_urls: tuple[str, ...] = ()
    trusted_hosts: tuple[str, ...] = ()
    find_links_dirs: tuple[Path, ...] = ()
    find_links_urls: tuple[str, ...] = ()
    ca_bundle: Path | None = None
    proxies: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())

    def describe(self) -> list[str]:
        """One line per setting that is in effect, without credentials."""
        lines = [f"pip index: {redact(self.index_url)}"] if self.index_url else []
        lines += [f"pip extra index: {redact(url)}" for url in self.extra_index_urls]
        lines += [f"wheelhouse (staged into the build context): {d}" for d in self.find_links_dirs]
        lines += [f"find-links URL: {redact(url)}" for url in self.find_links_urls]
        if self.ca_bundle:
            lines.append(f"CA bundle (BuildKit secret 'cacert', never in a layer): {self.ca_bundle}")
        if self.proxies:
            lines.append("proxy variables passed through: " + " ".join(self.proxies))
        return lines

    def proxy_flags(self, flag: str) -> list[str]:
        """``FLAG NAME`` per proxy variable (``--build-arg``, ``-e``): no value, docker reads it from its own
        environment, so it is never printed."""
        return [a for name in self.proxies for a in (flag, name)]


def redact(url: str) -> str:
    """``https://user:token@host/simple`` -> ``https://***@host/simple``."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
        return parts._replace(netloc=f"***@{host}").geturl()
    return url


def _split(value: str | None) -> list[str]:
    return shlex.split(value) if value else []


def from_environ(environ: Mapping[str, str]) -> HostEnv:
    warnings: list[str] = []
    dirs: list[Path] = []
    urls: list[str] = []
    for entry in _split(environ.get("PIP_FIND_LINKS")):
        if "://" in entry and not entry.startswith("file://"):
            urls.append(entry)
            continue
        path = Path(entry.removeprefix("file://")).expanduser()
        if path.is_dir():
            dirs.append(path.resolve())
        else:
            warnings.append(f"PIP_FIND_LINKS entry {entry!r} is not a directory; ignored")
    ca: Path | None = None
    for name in ("PIP_CERT", "REQUESTS_CA_BUNDLE"):
        if value := environ.get(name):
            path = Path(value).expanduser()
            if not path.is_file():
                raise EnvError(f"{name}={value} does not name a file: point it at your CA bundle or unset it")
            ca = path.resolve()
            break
    return HostEnv(
        index_url=environ.get("PIP_INDEX_URL", ""),
        extra_index_urls=tuple(_split(environ.get("PIP_EXTRA_INDEX_URL"))),
        trusted_hosts=tuple(_split(environ.get("PIP_TRUSTED_HOST"))),
        find_links_dirs=tuple(dict.fromkeys(dirs)),
        find_links_urls=tuple(urls),
        ca_bundle=ca,
        proxies=tuple(name for name in PROXY_VARS if environ.get(name)),
        warnings=tuple(warnings),
    )


def pip_conf(host: HostEnv, *, extra_index_urls: Sequence[str] = ()) -> str:
    """The pip.conf passed to builds as the ``pipconf`` secret (may hold credentials: never write it to a layer)."""
    lines = ["[global]", "disable-pip-version-check = true", "no-input = true"]
    if host.index_url:
        lines.append(f"index-url = {host.index_url}")
    if extra := [*host.extra_index_urls, *extra_index_urls]:
        lines.append("extra-index-url =\n" + "\n".join(f"    {u}" for u in dict.fromkeys(extra)))
    staged = [f"{WHEELHOUSE_IN_CONTAINER}/{i}" for i in range(len(host.find_links_dirs))]
    if links := [*staged, *host.find_links_urls]:
        lines.append("find-links =\n" + "\n".join(f"    {u}" for u in links))
    if host.trusted_hosts:
        lines.append("trusted-host = " + " ".join(host.trusted_hosts))
    if host.ca_bundle:
        lines.append(f"cert = {SECRET_CA}")
    return "\n".join(lines) + "\n"


def current_user() -> str | None:
    """``uid:gid`` for ``docker run --user`` so reports are owned by the caller (None where not POSIX)."""
    return f"{os.getuid()}:{os.getgid()}" if hasattr(os, "getuid") else None


def secret_markers(host: HostEnv, environ: Mapping[str, str]) -> dict[str, str]:
    """Strings that must never appear in an image's history: what a leak would look like -> why it matters."""
    markers = {"-----BEGIN CERTIFICATE-----": "a CA certificate"}
    for name in host.proxies:
        value = environ.get(name, "")
        parts = urlsplit(value) if "://" in value else None
        if parts and parts.password:
            markers[parts.password] = f"the password in {name}"
        if name.upper() != "NO_PROXY" and value:
            markers[value] = f"the value of {name}"
    for url in (host.index_url, *host.extra_index_urls, *host.find_links_urls):
        parts = urlsplit(url)
        if parts.password:
            markers[parts.password] = "a pip index password"
        if parts.username and parts.password is None:
            markers[parts.username] = "a pip index token"
    return markers


def history_leaks(history: str, markers: Mapping[str, str]) -> list[str]:
    return sorted({why for marker, why in markers.items() if marker and marker in history})
