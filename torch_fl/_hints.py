"""Near-miss suggestions for names a user typed (operators, variables), ignoring case.

Pure Python (no torch import). A name typed in the wrong case (``FLAGOS_OP_ADDMM`` for ``addmm``) is the
closest miss there is, and difflib alone rates ``ADDMM`` against ``addmm`` as no match at all: the names are
compared in lower case, and the suggestion is given as the candidate is spelt.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["close_matches"]


def close_matches(word: str, candidates: Iterable[str], *, n: int = 5, cutoff: float = 0.6) -> list[str]:
    """Up to ``n`` of ``candidates`` closest to ``word`` in any case, best first, each spelt as in ``candidates``.

    Candidates that differ only in case from each other are all kept (``add.Tensor`` and ``add.tensor``), in
    sorted order.
    """
    by_lower: dict[str, list[str]] = {}
    for name in sorted(set(candidates)):
        by_lower.setdefault(name.lower(), []).append(name)
    found: list[str] = []
    for key in difflib.get_close_matches(word.lower(), list(by_lower), n=n, cutoff=cutoff):
        found.extend(by_lower[key])
    return found[:n]
