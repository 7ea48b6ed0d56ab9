"""How a failed zoo pair names its cause (build_tools/bench/harness/failure.py): the first meaningful line of torch's
long errors, not their closing advice, and the innermost exception's type."""

from __future__ import annotations

from harness import failure

DYNAMO = (
    "BackendCompilerFailed: backend='inductor' raised:\n"
    "RuntimeError: Expected all tensors to be on the same device\n"
    "\n"
    "While executing %mm : [num_users=1] = call_function[target=torch.ops.aten.mm.default]\n"
    "Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're reporting a bug)"
)


def test_the_cause_is_the_first_meaningful_line_not_the_last():
    assert (
        failure.cause(DYNAMO) == "BackendCompilerFailed (RuntimeError: Expected all tensors to be on the same device)"
    )
    assert failure.cause("ValueError: bad size\n\nSet TORCHDYNAMO_VERBOSE=1 for more") == "ValueError: bad size"
    assert failure.cause("flagos: the process ended (exit -11)\nFatal Python error") == (
        "flagos: the process ended (exit -11)"
    )
    assert failure.cause("") == ""


def test_describe_names_the_innermost_cause():
    try:
        try:
            raise KeyError("weight")
        except KeyError as inner:
            raise RuntimeError("backend='inductor' raised:\nKeyError: 'weight'\n\nSet TORCHDYNAMO_VERBOSE=1") from inner
    except RuntimeError as exc:
        text = failure.describe(exc)
        tail = failure.traceback_tail(exc)
    assert text == "RuntimeError (KeyError: 'weight') <- KeyError: 'weight'"
    assert "raise KeyError" in tail and "direct cause" in tail and len(tail) <= failure.TAIL_CHARS
