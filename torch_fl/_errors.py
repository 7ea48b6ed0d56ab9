"""The errors torch_fl raises: the one of a bad flagos configuration (environment variables, confs and routes
alike) and the one of a graph capture that meets work a replay cannot repeat.

Pure Python (no imports from the package) so every layer can raise them without importing another: the conf
parser, the environment reader and the route resolver, in the wheel and in unit tests without the core; the
provider kernels of the routing and the graphs' capture alike.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["CaptureError", "ConfError", "ConfigError", "EnvError", "RouteError", "merged"]

HEADING = "problems in the flagos route configuration"


class ConfigError(ValueError):
    """Every problem found in the configuration; ``problems`` holds them one by one.

    Each problem says where it is (``path:line``, ``env FLAGOS_OP_<op>`` or the variable) and what to do. One
    problem reads as itself; several read as a count and the list. An error about one line of one conf also
    carries its ``path`` and ``line`` (0 stands for the file as a whole).
    """

    def __init__(self, problems: str | Iterable[str], *, path: str | None = None, line: int | None = None) -> None:
        self.problems = (problems,) if isinstance(problems, str) else tuple(problems)
        self.path = path
        self.line = line
        if len(self.problems) == 1:
            text = self.problems[0]
        else:
            text = "\n".join([f"{len(self.problems)} {HEADING}:", *(f"  {p}" for p in self.problems)])
        super().__init__(text)

    @classmethod
    def at(cls, path: str, line: int, message: str) -> ConfigError:
        """A problem on ``line`` of the conf at ``path``: ``"path:line: message"``."""
        return cls(f"{path}:{line}: {message}", path=path, line=line)


# Other names of ConfigError, for code that catches a conf, environment or route problem by those names.
ConfError = EnvError = RouteError = ConfigError


def merged(errors: Iterable[ConfigError]) -> ConfigError | None:
    """One error holding the problems of all ``errors`` in order, or None when there are none; a single error
    comes back as it is, with its location."""
    errors = list(errors)
    if len(errors) <= 1:
        return errors[0] if errors else None
    return ConfigError(problem for error in errors for problem in error.problems)


class CaptureError(RuntimeError):
    """An op that a graph cannot capture was called during a capture; the capture is abandoned. Documented as
    ``torch_fl.graphs.CaptureError``, which is this class."""
