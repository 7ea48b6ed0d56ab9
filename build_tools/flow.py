"""What every session's flow works with: the checkout, the matrix, the options, and the runner, images and build
state built from them (``Flow``).

A flow records its stages in a ``Summary``; errors a newcomer can hit are one-line exceptions (``ERRORS``) that the
nox session turns into ``session.error``. pipeline.py tells the stories of the sessions that build and test a row.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from . import dockercli, env, hostpython, wheelcheck
from .images import Images
from .matrix import Matrix, MatrixError, Toolchain
from .options import Options
from .runner import Runner, StepFailed, UserError
from .state import State

ERRORS = (
    UserError,
    StepFailed,
    dockercli.DockerError,
    MatrixError,
    env.EnvError,
    FileNotFoundError,
    wheelcheck.WheelError,
    hostpython.HostPythonError,
)


@dataclass
class Flow:
    repo: Path
    matrix: Matrix
    options: Options
    echo: Callable[[str], None] = print

    def __post_init__(self) -> None:
        # options.dry_run goes to the runner and nowhere else
        self.runner = Runner(self.repo / "build" / "logs", dry_run=self.options.dry_run, echo=self.echo)
        self.images = Images(self.runner, self.matrix, self.options.environ, self.echo)
        self.state = State(self.repo / "build" / "state")

    def toolchain(self, name: str) -> Toolchain:
        toolchain = self.matrix.toolchain(name)
        if not (self.repo / toolchain.dockerfile).is_file():
            self.runner.refuse(
                f"{toolchain.dockerfile} does not exist yet: the {name} row of {self.matrix.path} is data only "
                f"(write the Dockerfile to enable build-{name}/test-{name})"
            )
        return toolchain

    def host(self) -> env.HostEnv:
        host = self.options.host
        for w in host.warnings:
            self.echo("warning: " + w)
        return host

    def pipconf(self, host: env.HostEnv, torch_args: list[str]) -> AbstractContextManager[Path]:
        """The pip.conf BuildKit secret, with the torch index of ``torch_args`` (runner.secret_file)."""
        text = env.pip_conf(host, extra_index_urls=[a for a in torch_args if a.startswith("http")])
        shown = "\n".join("    " + env.redact(line) for line in text.splitlines())
        title = "pip.conf passed as the BuildKit secret 'pipconf' (credentials redacted here):\n"
        return self.runner.secret_file("pip.conf", text, title + shown)
