"""Find a BuildKit-capable docker client, check the daemon, inspect images.

Every failure a newcomer hits is a ``DockerError`` whose message is one line: what is wrong and the fix.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ENV_OVERRIDE = "TORCH_FL_DOCKER"
BUILDKIT_ENV = {"DOCKER_BUILDKIT": "1"}


class DockerError(RuntimeError):
    """A docker problem with a one-line explanation and fix."""


@dataclass(frozen=True)
class DockerClient:
    exe: str
    version: str
    buildkit: str  # "buildx" (plugin) or "builtin" (clients before 23.0)
    note: str = ""


Probe = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]
Which = Callable[[str], "str | None"]


def run_quiet(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(list(argv), 127, "", str(exc))


def candidates(environ: Mapping[str, str], which: Which = shutil.which) -> list[str]:
    """The docker executables to try: ``$TORCH_FL_DOCKER`` alone if set, else every ``docker`` on PATH."""
    if name := environ.get(ENV_OVERRIDE):
        if not (exe := which(name)):
            raise DockerError(f"{ENV_OVERRIDE}={name} is not an executable docker client: fix or unset it")
        return [exe]
    out = [first] if (first := which("docker")) else []
    for d in environ.get("PATH", "").split(os.pathsep):
        exe = Path(d or ".") / "docker"
        if exe.is_file() and os.access(exe, os.X_OK) and str(exe) not in out:
            out.append(str(exe))
    return out


def find_client(
    environ: Mapping[str, str] | None = None, probe: Probe = run_quiet, which: Which = shutil.which
) -> DockerClient:
    """The first docker client that can build with BuildKit (``docker build`` with secrets and ``--output``):
    clients before 23.0 have BuildKit built in, newer ones need the buildx plugin."""
    environ = os.environ if environ is None else environ
    if not (exes := candidates(environ, which)):
        raise DockerError(
            "no docker client found: install Docker (Debian/Ubuntu: `apt-get install docker.io`; "
            "elsewhere Docker Engine or Docker Desktop) and make sure `docker` is on PATH"
        )
    rejected: list[str] = []
    for exe in exes:
        ver = probe([exe, "version", "--format", "{{.Client.Version}}"])
        version = (ver.stdout or "").strip().splitlines()[0] if (ver.stdout or "").strip() else ""
        if not version:
            rejected.append(f"{exe} (does not run)")
            continue
        note = "" if exe == exes[0] else f"using {exe}: {exes[0]} cannot build with BuildKit (no buildx plugin)"
        if probe([exe, "buildx", "version"]).returncode == 0:
            return DockerClient(exe, version, "buildx", note)
        major = version.partition(".")[0]
        if not major.isdigit() or int(major) < 23:  # an unreadable version is taken for an old client
            return DockerClient(exe, version, "builtin", note)
        rejected.append(f"{exe} {version} (no buildx plugin)")
    raise DockerError(
        "no docker client that can build with BuildKit: "
        + "; ".join(rejected)
        + ". Install the buildx plugin (Debian/Ubuntu: docker-buildx or docker-buildx-plugin), or point "
        + f"{ENV_OVERRIDE} at a docker client older than 23.0"
    )


def check_daemon(client: DockerClient, probe: Probe = run_quiet) -> str:
    """The server version; a one-line DockerError when the daemon is unreachable."""
    res = probe([client.exe, "version", "--format", "{{.Server.Version}}"])
    server = (res.stdout or "").strip()
    if res.returncode == 0 and server:
        return server
    err = (res.stderr or res.stdout or "").strip().splitlines()
    detail = err[-1] if err else "no answer"
    if "permission denied" in detail.lower():
        raise DockerError(
            f"no permission to talk to the docker daemon ({detail}): add yourself to the docker group "
            "(`sudo usermod -aG docker $USER`, then log in again) or run as root"
        )
    raise DockerError(
        f"the docker daemon is not running or not reachable ({detail}): start it "
        "(`sudo systemctl start docker`; without systemd: "
        "`sudo setsid dockerd --iptables=false --bridge=none &`, then wait for /var/run/docker.sock)"
    )


def inspect_image(client: DockerClient, ref: str, probe: Probe = run_quiet) -> dict | None:
    """``docker image inspect`` of ``ref``; None when the image is not present locally."""
    res = probe([client.exe, "image", "inspect", ref])
    try:
        data = json.loads(res.stdout) if res.returncode == 0 else None
    except json.JSONDecodeError:
        return None
    return data[0] if data else None


def image_id(client: DockerClient, ref: str, probe: Probe = run_quiet) -> str | None:
    info = inspect_image(client, ref, probe)
    return info.get("Id") if info else None


def image_labels(info: Mapping | None) -> dict[str, str]:
    return dict(((info or {}).get("Config") or {}).get("Labels") or {})


def image_refs(client: DockerClient, *selector: str, probe: Probe = run_quiet) -> list[str]:
    """``repo:tag`` of the local images ``docker image ls SELECTOR`` lists (a repository, ``--filter label=K``)."""
    res = probe([client.exe, "image", "ls", *selector, "--format", "{{.Repository}}:{{.Tag}}"])
    if res.returncode != 0:
        return []
    return [line for line in res.stdout.split() if line and "<none>" not in line]


def runtime_names(client: DockerClient, probe: Probe = run_quiet) -> list[str] | None:
    """The daemon's container runtimes (``docker info``: runc, nvidia, ...); None when they cannot be read."""
    res = probe([client.exe, "info", "--format", "{{json .Runtimes}}"])
    try:
        runtimes = json.loads(res.stdout or "") if res.returncode == 0 else None
    except json.JSONDecodeError:
        return None
    return sorted(runtimes) if isinstance(runtimes, dict) else None
