"""Every known failure of the OpInfo suite, with its reason: the one table to read and to edit.

A row matches tests by check (forward, out, inplace, backward, gradcheck or "*"), OpInfo full name (as in
op_db: "div.floor_rounding"; a tuple for several), dtypes ("*" or a tuple of names), the route conf the run
uses (native, cpu or "*") and the accelerator (FLAGOS_ACCELERATOR: cpu emulation, cuda, or "*").
`cuda` says whether plain CUDA tensors (no flagos) fail the same way: "yes", "no" or "unknown".

Rows become strict expected failures: a row whose tests start to pass fails the run, so fixed bugs leave the
table. crash=True rows are not run at all (the process would die); flip them by deleting the row, or see
whether the fix landed with FLAGOS_OPINFO_RUN_CRASHERS=1 under pytest-xdist (-n 2), which survives a crash.
"""

from __future__ import annotations

from dataclasses import dataclass

CONFS = ("native", "cpu")
ANY = "*"


@dataclass(frozen=True)
class Row:
    check: str
    ops: tuple[str, ...] | str
    dtypes: tuple[str, ...] | str
    reason: str
    cuda: str = "unknown"  # does plain CUDA share it: yes / no / unknown
    conf: str = ANY
    accelerator: str = ANY
    crash: bool = False

    def matches(self, check: str, op: str, dtype: str, conf: str, accelerator: str) -> bool:
        ops = (self.ops,) if isinstance(self.ops, str) else self.ops
        return (
            self.check in (ANY, check)
            and (ops == (ANY,) or op in ops)
            and (self.dtypes == ANY or dtype in self.dtypes)
            and self.conf in (ANY, conf)
            and self.accelerator in (ANY, accelerator)
        )


CONJ_SEGV = "complex conjugate views lose their conj bit when re-tagged and the process dies (SIGSEGV); issue 10 item 2"

ROWS: tuple[Row, ...] = ()


def lookup(check: str, op: str, dtype: str, *, conf: str, accelerator: str) -> Row | None:
    """The first row that matches, or None."""
    return next((r for r in ROWS if r.matches(check, op, dtype, conf, accelerator)), None)
