"""Docker images of the flows: the client, the base images (present > local stand-in > pulled), pruning older
tags and the history check for leaked secrets. What a dry run may not do, the runner answers for."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from . import dockercli, env
from .command import Command
from .matrix import Matrix
from .runner import Runner, UserError
from .summary import ImageRef, Summary


class Images:
    def __init__(
        self, runner: Runner, matrix: Matrix, environ: Mapping[str, str], echo: Callable[[str], None] = print
    ) -> None:
        self.runner, self.matrix, self.environ, self.echo = runner, matrix, environ, echo
        self._client: dockercli.DockerClient | None = None
        self._daemon = False
        self._bases: dict[str, ImageRef] = {}

    def client(self) -> dockercli.DockerClient:
        """The BuildKit-capable docker client, its daemon checked (a dry run without one plans with ``docker``)."""
        if self._client is None:
            try:
                client = dockercli.find_client(self.environ)
            except dockercli.DockerError as exc:
                self.runner.refuse(exc)
                client = dockercli.DockerClient("docker", "?", "unknown", "dry run: no usable docker client here")
            if client.note:
                self.echo(client.note)
            try:
                server = dockercli.check_daemon(client)
                self._daemon = True
                where = f"{client.version} ({client.buildkit} BuildKit) at {client.exe}"
                self.echo(f"docker: client {where}, daemon {server}")
            except dockercli.DockerError as exc:
                self.runner.refuse(exc)
            self._client = client
        return self._client

    def daemon_usable(self) -> bool:
        """Can images be asked about? Always in a real run (client() stops without a daemon)."""
        self.client()
        return self._daemon

    def image_id(self, ref: str) -> str | None:
        return dockercli.image_id(self.client(), ref) if self.daemon_usable() else None

    def resolve_base(self, image: str, hint: str = "") -> ImageRef:
        """The image to build FROM: present locally > its local stand-in > pulled; else a clear error. With
        ``hint`` (the row's ``image_hint``) a missing image is not pulled: the build stops with the hint."""
        if image not in self._bases:
            self._bases[image] = self._find_base(image, hint)
        return self._bases[image]

    def _find_base(self, image: str, hint: str) -> ImageRef:
        client = self.client()
        if not self.daemon_usable():
            return ImageRef(image, "unknown")
        iid = dockercli.image_id(client, image)
        stand_in = self.matrix.stand_in_for(image)
        if iid:
            return ImageRef(image, iid)
        if stand_in and (sid := dockercli.image_id(client, stand_in.name)):
            made = "(made by `nox -s base-image`)"
            self.echo(f"base image {image} is not present locally; using its stand-in {stand_in.name} {made}")
            return ImageRef(stand_in.name, sid)
        if hint:
            self.runner.refuse(f"base image {image} is not present locally: {hint}")
            return ImageRef(image, "missing")
        made = f" (`nox -s base-image` makes its stand-in {stand_in.name})" if stand_in else ""
        self.echo(f"base image {image} is not present locally{made}; trying `docker pull {image}`")
        pull = Command(f"pull {image}", (client.exe, "pull", image), log_name="pull.log")
        res = self.runner.run(pull, check=False)
        iid = self.runner.ask(lambda: dockercli.image_id(client, image))
        if res.returncode != 0 or iid is None:
            fix = (
                "make its local stand-in with `nox -s base-image` (debootstrap + docker import; needs root)"
                if stand_in
                else f"pull it on a connected host and move it here (`docker save {image} | docker load`)"
            )
            raise UserError(f"base image {image} is missing and cannot be pulled: {fix}")
        return ImageRef(image, iid or "missing")

    def prune_old(self, repo_name: str, keep: str) -> None:
        """Remove the other tags of ``repo_name`` (older keys), so images do not pile up."""
        client = self.client()
        old = self.runner.ask(lambda: [t for t in dockercli.image_refs(client, repo_name) if t != keep])
        if old:
            dockercli.run_quiet([client.exe, "rmi", *old])

    def remove(self, ref: str) -> None:
        """Remove an image that served its one use (a release check's node image: 5-7 GB each, one per Python), and
        the build cache BuildKit keeps of its layers once the image is gone: removing the image alone frees no
        disk. Only the cache of layers that no image holds goes (BuildKit's ``type=regular``); pip's cache mount
        stays."""
        client = self.client()
        if self.runner.ask(lambda: dockercli.image_id(client, ref)):
            dockercli.run_quiet([client.exe, "rmi", ref])
            dockercli.run_quiet([client.exe, "builder", "prune", "--force", "--filter", "type=regular"])

    def check_history(self, images: list[str], host: env.HostEnv, summary: Summary) -> None:
        """Fail when ``docker history --no-trunc`` of an image shows a CA certificate, proxy value or index secret."""
        t0 = time.monotonic()
        exe = self.client().exe
        markers = env.secret_markers(host, self.environ)
        for ref in images:
            res = dockercli.run_quiet([exe, "history", "--no-trunc", ref])
            if res.returncode != 0:
                raise UserError(f"`docker history {ref}` failed: {res.stderr.strip()}")
            if leaks := env.history_leaks(res.stdout, markers):
                summary.add("history check", "failed", time.monotonic() - t0, ref)
                raise UserError(
                    f"docker history of {ref} contains {', '.join(leaks)}: "
                    "pass it as a BuildKit secret or a predefined proxy build arg, never as ARG/ENV/COPY"
                )
        note = f"{len(images)} images: no CA bundle, proxy value or index credential"
        summary.add("history check", "ran", time.monotonic() - t0, note)
