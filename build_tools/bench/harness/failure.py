"""What a failed pair says: the exception's type and the first line that names its cause, and the traceback's tail.

Torch's long errors end in advice, not in the cause: Dynamo's last line is "Set TORCHDYNAMO_VERBOSE=1 ...", and
a backend's failure wraps the real exception ("backend='inductor' raised:" then "RuntimeError: ..."). A report
that keeps the last line of such a message keeps the advice; this keeps the first line that says what went wrong,
and the type of the innermost exception it names.
"""

from __future__ import annotations

import traceback

TAIL_CHARS = 8000  # of a traceback, kept in zoo.json: enough for Dynamo's user-code frames and the inner cause
# Lines of torch's messages that introduce or advise, never a cause.
_NOISE = (
    "set torchdynamo_verbose",
    "set torch_logs",
    "you can suppress this exception",
    "for even more developer context",
    "from user code:",
    "traceback (most recent call last)",
    "the above exception was the direct cause",
    "during handling of the above exception",
    "while executing",
    "original traceback:",
)


def _meaningful(line: str) -> bool:
    text = line.strip()
    lowered = text.lower()
    if not text or text.startswith(("File ", "^", "~")) or lowered.startswith(_NOISE):
        return False
    return not text.endswith("raised:")  # "backend='inductor' raised:": the cause is on the next line


def cause(message: str) -> str:
    """The first meaningful line of ``message`` (an arm's error, "Type: message", or a process's stderr); where
    that is not the message's own first line, it follows the type in parentheses."""
    lines = [ln.strip() for ln in message.strip().splitlines()]
    if not lines:
        return ""
    head, sep, rest = lines[0].partition(": ")
    kind = head if sep and all(part.isidentifier() for part in head.split(".")) else ""
    first = next((ln for ln in ([rest] if kind else lines[:1]) + lines[1:] if _meaningful(ln)), None)
    if first is None:
        return lines[0][:300]
    if not kind:
        return first[:300]
    return (f"{kind}: {first}" if first is rest else f"{kind} ({first})")[:300]


def describe(exc: BaseException) -> str:
    """``Type: first meaningful line`` of ``exc``, followed by its innermost cause's where it has one."""
    text = cause(f"{type(exc).__name__}: {exc}")
    inner = exc
    while inner.__cause__ is not None and inner.__cause__ is not inner:
        inner = inner.__cause__
    if inner is not exc:
        text += f" <- {cause(f'{type(inner).__name__}: {inner}')}"
    return text


def tail(text: str) -> str:
    return text[-TAIL_CHARS:]


def traceback_tail(exc: BaseException) -> str:
    """The formatted traceback of ``exc`` and its causes, its last TAIL_CHARS characters."""
    return tail("".join(traceback.format_exception(exc)))
