"""The ops a composite becomes on flagos, for ``python -m torch_fl route OP``.

torch decomposes some ops before they reach the device (``linear`` is CompositeImplicitAutograd), so routing them
by name does nothing: their parts are what the router sees, and what to route. Which parts depends on the inputs
(a 1-d ``linear`` is not a 2-d one), so they are read off real calls: PyTorch's OpInfo samples of the op, run on
flagos with the router's dispatch log on, the log read back from the process's stderr. What the log names is what
the router received and the route it took, not a guess from the schema.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import warnings
from collections.abc import Iterator

import torch

from . import _core

_LOG_LINE = re.compile(r"\[flagos dispatch\] (\S+) -> (\S+)")


@contextlib.contextmanager
def _dispatch_log() -> Iterator[list[tuple[str, str]]]:
    """The (op, route) lines the router logs inside the block; the C++ log writes to fd 2, so fd 2 is swapped."""
    calls: list[tuple[str, str]] = []
    was_on = _core.log_dispatch()
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        _core.set_log_dispatch(True)
        try:
            yield calls
        finally:
            _core.set_log_dispatch(was_on)
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            calls.extend(m.groups() for m in _LOG_LINE.finditer(sink.read().decode(errors="replace")))


def parts(op: str, samples: int = 16) -> list[tuple[str, str]] | None:
    """(op, route) of each distinct call the router received while ``samples`` OpInfo samples of ``op`` ran on
    flagos; None when OpInfo has no sample of it, or when torch's test database cannot be imported here (it needs
    numpy and expecttest, which a plain torch install lacks)."""
    base = op.partition(".")[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            from torch.testing._internal.common_methods_invocations import op_db
        except ImportError:
            return None

    infos = [info for info in op_db if info.aten_name == base or info.name == base]
    if not infos:
        return None
    vendor = "cpu" if _core.accelerator() == "cpu" else "cuda"
    seen: dict[tuple[str, str], None] = {}
    for info in infos:
        dtypes = info.supported_dtypes(vendor)
        dtype = torch.float32 if torch.float32 in dtypes else next(iter(dtypes), None)
        if dtype is None:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for n, sample in enumerate(info.sample_inputs("flagos", dtype, requires_grad=False)):
                if n >= samples:
                    break
                with _dispatch_log() as calls, contextlib.suppress(Exception):  # a refused sample names nothing
                    info.op(sample.input, *sample.args, **sample.kwargs)
                seen.update(dict.fromkeys(calls))
    return list(seen)
