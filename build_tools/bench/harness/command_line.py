"""What the harness's commands share on their command lines: the description and the in-process pairs' options."""

from __future__ import annotations

import argparse
from typing import Any


def parser(module: str, doc: str | None) -> argparse.ArgumentParser:
    """``python -m harness.<module>``'s parser (``module`` "" for the harness itself), described by the first
    paragraph of the module's docstring, its line breaks kept."""
    return argparse.ArgumentParser(
        prog="python -m harness" + (f".{module}" if module else ""),
        description=(doc or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def in_process_pairs(module: str, doc: str | None, rounds: int, calls: int) -> argparse.ArgumentParser:
    """A parser for a benchmark of arms timed in one process: rounds, calls per turn, intra-op threads."""
    p = parser(module, doc)
    p.add_argument("--rounds", type=int, default=rounds, help=f"rotated rounds of every arm (default {rounds})")
    p.add_argument("--calls", type=int, default=calls, help=f"calls per arm and round (default {calls})")
    p.add_argument("--threads", type=int, help="torch.set_num_threads (default: torch's)")
    return p


def apply_threads(args: Any) -> int:
    """Sets torch's intra-op threads where ``--threads`` asks; the count in use."""
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    return torch.get_num_threads()
