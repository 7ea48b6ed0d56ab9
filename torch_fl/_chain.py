"""A route chain as written in a conf line or a FLAGOS_OP_<op> value, with the dtype lists of its routes.

    add.Tensor = flaggems[float32, bfloat16], native

A provider route may carry a dtype list: it serves the calls of those dtypes, and the next route of the chain
serves every other call (the router's dtype gate, csrc/dispatch/dtype_gate.h). A call's dtype is its first
floating-point or complex tensor argument's, else its first tensor argument's, else its ``dtype`` argument's
(the same rule the qualification counts a sample under: torch_fl/qualify/calls.py ``sample_dtype``). A call with
none of these is never served by a route with a dtype list.

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

Gates = tuple[tuple[str, tuple[str, ...]], ...]  # (route, the dtypes it serves) for each route with a list


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
            f"{name} serves every dtype; a dtype list belongs on a provider route, e.g. {EXAMPLE} (remove the list)"
        )
    words = [w.strip() for w in rest[:-1].split(",")]
    if words == [""]:
        raise ValueError(f"the dtype list of {name!r} is empty; name the dtypes it serves, e.g. {EXAMPLE}")
    dtypes: list[str] = []
    for word in words:
        if word not in DTYPES:
            near = close_matches(word, DTYPES, n=3, cutoff=0.5)
            hint = f"nearest: {', '.join(near)}; " if near else ""
            raise ValueError(
                f"unknown dtype {word!r} in the dtype list of {name!r}; {hint}dtypes are torch's names: "
                f"{', '.join(DTYPES)}"
            )
        if word in dtypes:
            raise ValueError(f"dtype {word!r} appears twice in the dtype list of {name!r}; list each dtype once")
        dtypes.append(word)
    return name, tuple(dtypes)


def gates_followed(routes: tuple[str, ...], gates: Gates) -> None:
    """A route with a dtype list needs a route after it for the other dtypes."""
    if gates and routes and routes[-1] in dict(gates):
        last = routes[-1]
        listed = ", ".join(dict(gates)[last])
        raise ValueError(
            f"{last}[{listed}] is the last route, so calls of other dtypes would have none; add the route that "
            f"serves them after it, e.g. '{last}[{listed}], native'"
        )


def written(routes: tuple[str, ...], gates: Gates) -> str:
    """The chain as a conf writes it: ``flaggems[float32, bfloat16], native``."""
    lists = dict(gates)
    return ", ".join(f"{r}[{', '.join(lists[r])}]" if r in lists else r for r in routes)
