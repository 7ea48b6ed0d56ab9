"""A route chain as written in a conf line or a FLAGOS_OP_<op> value, with the dtype lists of its routes.

    add.Tensor = flaggems[float32, bfloat16], native
    mul.Tensor = flaggems[float32, bfloat16, contiguous, same_shape], native

A provider route may carry a list: it serves the calls of those dtypes, and the next route of the chain
serves every other call (the router's dtype gate, csrc/dispatch/dtype_gate.h). A call's dtype is its first
floating-point or complex tensor argument's, else its first tensor argument's, else its ``dtype`` argument's
(the same rule the qualification counts a sample under: torch_fl/qualify/calls.py ``sample_dtype``). A call with
none of these is never served by a route that lists dtypes.

The list may also name input requirements (``REQUIREMENTS``): the route then serves only the calls whose tensor
arguments meet every one, and the others take the next route too. A list of requirements alone serves every
dtype. A requirement is the complement of an input class the qualification sorts its samples into
(``INPUT_CLASSES``): a provider that fails only on strided samples qualifies with ``contiguous``.

No imports beyond the standard library and ``_names``: the conf parser and the environment reader run before
torch is imported. Each function raises ``ValueError`` with the problem and its way out; the callers add where
(``file:line`` or the variable).
"""

from __future__ import annotations

from ._hints import close_matches
from ._names import BUILTIN_ROUTES, ROUTE_ALIASES

# The dtypes a route's list may name: torch's own names (torch.float32 -> float32). The router keeps one bit per
# dtype, so a list costs one test of a 64-bit mask per provider call.
DTYPES = (
    "float32",
    "bfloat16",
    "float16",
    "float64",
    "complex64",
    "complex128",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
)
EXAMPLE = "'flaggems[float32, bfloat16], native'"

# The input requirements a list may name, each with the input class of calls it refuses. Every one is a test of
# the call's tensor arguments (Tensor, Tensor?, Tensor[] and Tensor?[]; a Python number torch wrapped as a 0-dim
# tensor is one, as the qualification runs it) that the router makes per call from the tensors' metadata:
#   contiguous  every tensor argument is contiguous (in the default memory format): refuses `strided` calls
#   no_0dim     no tensor argument is 0-dim: refuses `0dim` calls
#   same_shape  every tensor argument has the same shape: refuses `broadcast` calls (any two shapes differ)
#   same_dtype  every tensor argument of one or more dimensions has the same dtype: refuses `mixed` calls (a kernel
#               that promotes loads two element types; a 0-dim operand is the `0dim` class's, so a number that
#               torch wrapped never makes a call mixed)
REQUIREMENTS = {"contiguous": "strided", "no_0dim": "0dim", "same_shape": "broadcast", "same_dtype": "mixed"}
INPUT_CLASSES = tuple(REQUIREMENTS.values())  # the qualification's names: "pass except strided"
REQUIREMENT_OF = {cls: word for word, cls in REQUIREMENTS.items()}

Gates = tuple[tuple[str, tuple[str, ...]], ...]  # (route, its list's words: dtypes, then requirements) per list


def dtypes_of(words: tuple[str, ...]) -> tuple[str, ...]:
    """The dtypes among a list's words; () where it names none (the route serves every dtype)."""
    return tuple(w for w in words if w in DTYPES)


def requirements_of(words: tuple[str, ...]) -> tuple[str, ...]:
    """The input requirements among a list's words, in ``REQUIREMENTS``' order."""
    return tuple(w for w in REQUIREMENTS if w in words)


def split(text: str) -> list[str]:
    """``text`` cut at the commas that are not inside a dtype list; the parts are stripped, empty ones kept."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            if depth:
                raise ValueError(f"a '[' inside a dtype list; close each list with ']', e.g. {EXAMPLE}")
            depth = 1
        elif char == "]":
            if not depth:
                raise ValueError(f"a ']' with no '[' before it; write a dtype list as {EXAMPLE}")
            depth = 0
        elif char == "," and not depth:
            parts.append(text[start:i].strip())
            start = i + 1
    if depth:
        raise ValueError(f"a dtype list is not closed; end it with ']', e.g. {EXAMPLE}")
    parts.append(text[start:].strip())
    return parts


def item(part: str) -> tuple[str, tuple[str, ...] | None]:
    """``flaggems[float32, bfloat16]`` -> ``("flaggems", ("float32", "bfloat16"))``; ``native`` -> ``("native",
    None)``. The name is returned unchecked (the callers word their own message for a bad one)."""
    name, bracket, rest = part.partition("[")
    name = name.strip()
    if not bracket:
        return name, None
    if not rest.endswith("]"):
        raise ValueError(f"text after the dtype list of {name!r}; end the route at ']', e.g. {EXAMPLE}")
    if name in BUILTIN_ROUTES or name in ROUTE_ALIASES:
        raise ValueError(
            f"{name} serves every call; a list of dtypes or input requirements belongs on a provider route, e.g. "
            f"{EXAMPLE} (remove the list)"
        )
    words = [w.strip() for w in rest[:-1].split(",")]
    if words == [""]:
        raise ValueError(f"the dtype list of {name!r} is empty; name the dtypes it serves, e.g. {EXAMPLE}")
    seen: list[str] = []
    for word in words:
        if word not in DTYPES and word not in REQUIREMENTS:
            near = close_matches(word, (*DTYPES, *REQUIREMENTS), n=3, cutoff=0.5)
            hint = f"nearest: {', '.join(near)}; " if near else ""
            raise ValueError(
                f"unknown dtype or input requirement {word!r} in the list of {name!r}; {hint}dtypes are torch's "
                f"names: {', '.join(DTYPES)}; input requirements: {', '.join(REQUIREMENTS)} "
                f"(e.g. 'flaggems[float32, contiguous], native')"
            )
        if word in seen:
            what = "dtype" if word in DTYPES else "input requirement"
            raise ValueError(f"{what} {word!r} appears twice in the list of {name!r}; list each {what} once")
        seen.append(word)
    return name, (*dtypes_of(tuple(seen)), *requirements_of(tuple(seen)))


def gates_followed(routes: tuple[str, ...], gates: Gates) -> None:
    """A route with a list needs a route after it for the calls the list leaves out."""
    if gates and routes and routes[-1] in dict(gates):
        last = routes[-1]
        listed = ", ".join(dict(gates)[last])
        left_out = "other dtypes" if dtypes_of(dict(gates)[last]) else "the calls it leaves out"
        raise ValueError(
            f"{last}[{listed}] is the last route, so {left_out} would have none; add the route that "
            f"serves them after it, e.g. '{last}[{listed}], native'"
        )


def written(routes: tuple[str, ...], gates: Gates) -> str:
    """The chain as a conf writes it: ``flaggems[float32, bfloat16], native``."""
    lists = dict(gates)
    return ", ".join(f"{r}[{', '.join(lists[r])}]" if r in lists else r for r in routes)
