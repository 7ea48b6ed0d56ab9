"""PyTorch's own operator database run on the flagos device, every result compared with torch's CPU kernels.

torch ships, inside the wheel, the per-operator sample database (``op_db``, one OpInfo per operator and
variant) and the device-generic test framework (``instantiate_device_type_tests``). A renamed PrivateUse1
backend gets its own test base from that framework, so the classes below become ``...FLAGOS`` classes whose
tests receive ``device="flagos:0"``.

Each sample is made on flagos by the OpInfo's own sample function (factory ops get ``device=flagos``), then
copied to the host with every flagos device argument rewritten to ``cpu``: that copy is the reference. The
operator runs on both and the results must agree (device, dtype, shape, values). When the reference raises,
flagos must raise the same kind of error. Operators that draw random numbers (any ATen op they call carries
the ``nondeterministic_seeded`` tag) are checked for shape, dtype and device, and for same seed -> same result;
operators that return uninitialised memory (``empty`` and friends) for shape, dtype and device.

Which route each operator takes comes from the conf the conftest installs (``--flagos-conf native|cpu``);
known failures are in expected_failures.py, applied by the conftest as strict expected failures.
"""

from __future__ import annotations

import os

import torch

import torch_fl  # noqa: F401  (before torch's test framework: it lists the device types it finds at import)

# isort: split
ACCELERATOR = os.environ.get("FLAGOS_ACCELERATOR", "cpu")
ON_ACCELERATOR = ACCELERATOR != "cpu"
if ON_ACCELERATOR:
    # The comparison is against CPU float32 arithmetic: TF32 convolutions would be a different computation.
    # Set before torch's test framework loads: it freezes the cudnn flags at import (disable_global_flags).
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False

from torch.testing._internal import common_device_type as cdt  # noqa: E402
from torch.testing._internal.common_device_type import OpDTypes, instantiate_device_type_tests, ops  # noqa: E402
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402
from torch.testing._internal.common_utils import TestCase  # noqa: E402
from torch.utils import _pytree as pytree  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

# Some torch lines add the PrivateUse1 base only when CUDA is absent; flagos is tested whatever else is present.
if cdt.PrivateUse1TestBase not in cdt.device_type_test_bases:
    cdt.device_type_test_bases.append(cdt.PrivateUse1TestBase)

FAMILIES = (torch.float32, torch.float16, torch.bfloat16, torch.complex64, torch.int64, torch.bool)
GRAD_DTYPES = (torch.float32, torch.complex64)  # gradients against CPU; float64 goes to gradcheck
# At most this many samples per (operator, dtype), in the database's (seeded) order; 0 = all.
MAX_SAMPLES = int(os.environ.get("FLAGOS_OPINFO_SAMPLES", "0") or 0)
SEED = 20261130

# ATen ops whose output is uninitialised memory: a sample that calls only these is compared by metadata.
UNINITIALISED = {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted", "resize_"}


class _Trace(TorchDispatchMode):
    """Records the ATen ops that a call reaches (on the CPU reference: independent of flagos routing)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func)
        return func(*args, **(kwargs or {}))


def _is_flagos_device(value: object) -> bool:
    if isinstance(value, torch.device):
        return value.type == "flagos"
    return isinstance(value, str) and value.split(":")[0] == "flagos"


def _to_host(tree, *, keep_grad: bool = False):
    """The reference copy of a sample: tensors on the host (same values, dtype, conj/neg bits), devices -> cpu."""

    def leaf(x):
        if isinstance(x, torch.Tensor):
            t = x.detach().to("cpu")
            if keep_grad and x.requires_grad:
                t.requires_grad_(True)
            return t
        if _is_flagos_device(x):
            return torch.device("cpu") if isinstance(x, torch.device) else "cpu"
        return x

    return pytree.tree_map(leaf, tree)


def _host(tree):
    return pytree.tree_map(lambda x: x.detach().cpu() if isinstance(x, torch.Tensor) else x, tree)


def _samples(op, device, dtype, *, requires_grad=False):
    """The op's samples on flagos, with their host references; the first MAX_SAMPLES when set."""
    for i, sample in enumerate(op.sample_inputs(device, dtype, requires_grad=requires_grad)):
        if MAX_SAMPLES and i >= MAX_SAMPLES:
            return
        ref = tuple(_to_host(part, keep_grad=True) for part in (sample.input, sample.args, sample.kwargs))
        yield sample, ref


def _with_out(op, out):
    return lambda inp, *args, **kwargs: op(inp, *args, **kwargs, out=out)


def _empty_like(tree, device):
    return pytree.tree_map(lambda w: torch.empty_like(w, device=device) if isinstance(w, torch.Tensor) else w, tree)


def _call(fn, inp, args, kwargs):
    try:
        return fn(inp, *args, **kwargs), None
    except Exception as exc:  # noqa: BLE001  (the kind of error is what is compared)
        return None, exc


def _traced(fn, inp, args, kwargs):
    trace = _Trace()
    with trace:
        out, exc = _call(fn, inp, args, kwargs)
    names = {f.__name__.split(".")[0] for f in trace.ops}
    random = any(torch.Tag.nondeterministic_seeded in f.tags for f in trace.ops)
    uninit = bool(names) and names <= UNINITIALISED
    return out, exc, ("random" if random else "uninit" if uninit else "values")


class FlagosOpsBase(TestCase):
    """Shared checks; the test methods below are parametrised over op_db by ``@ops``."""

    def skip_unless_vendor_has(self, op, dtype: torch.dtype, *, grad: bool = False) -> None:
        """The native route runs the vendor's own kernels: on a GPU, a dtype the op's vendor (CUDA, or HIP as
        CUDA) kernels lack is skipped, as PyTorch's device tests skip it for plain CUDA tensors. The op database
        lists the CPU's dtypes for an out-of-tree device; the cpu conf runs CPU kernels and keeps them all."""
        if not ON_ACCELERATOR or os.environ.get("FLAGOS_OPINFO_CONF", "native") != "native":
            return
        supported = op.supported_backward_dtypes("cuda") if grad else op.supported_dtypes("cuda")
        if dtype not in supported:
            self.skipTest(f"{op.name}: {ACCELERATOR}'s kernels have no {dtype} (plain {ACCELERATOR} tensors neither)")

    def same_error(self, exc_ref: BaseException, fn, sample, what: str) -> None:
        """The reference raised: ``fn`` on the flagos sample must raise the same kind of error (same class)."""
        try:
            got = fn(sample.input, *sample.args, **sample.kwargs)
        except Exception as exc:  # noqa: BLE001
            self.assertIs(
                type(exc),
                type(exc_ref),
                f"{what}: CPU raised {type(exc_ref).__name__}: {exc_ref}; flagos raised {type(exc).__name__}: {exc}",
            )
            return
        self.fail(f"{what}: CPU raised {type(exc_ref).__name__}: {exc_ref}; flagos returned {type(got).__name__}")

    def same_meta(self, got, want, what: str) -> None:
        got_leaves, got_spec = pytree.tree_flatten(got)
        want_leaves, want_spec = pytree.tree_flatten(want)
        self.assertEqual(str(got_spec), str(want_spec), msg=f"{what}: result structure")
        for i, (g, w) in enumerate(zip(got_leaves, want_leaves, strict=True)):
            if isinstance(w, torch.Tensor):
                self.assertIsInstance(g, torch.Tensor, msg=f"{what}[{i}]")
                self.assertEqual(g.device.type, "flagos", msg=f"{what}[{i}]: result on {g.device}")
                self.assertEqual((g.dtype, g.shape), (w.dtype, w.shape), msg=f"{what}[{i}]: dtype and shape")

    def same_values(self, got, want, what: str) -> None:
        self.same_meta(got, want, what)
        tol = {}
        if ON_ACCELERATOR:  # another kernel library: PyTorch's own device-vs-CPU bar, dtype defaults if looser
            leaves = [w for w in pytree.tree_leaves(want) if isinstance(w, torch.Tensor)]
            if leaves:
                from torch.testing._comparison import default_tolerances

                rtol, atol = default_tolerances(*leaves)
                tol = {"rtol": max(rtol, 1e-3), "atol": max(atol, 1e-3)}
        self.assertEqual(_host(got), want, msg=what, **tol)

    def compare(self, fn, sample, ref, what: str, *, dev_fn=None):
        """``fn`` on the reference and ``dev_fn`` (default ``fn``) on flagos agree; random ops: metadata, and
        same seed -> same result. Returns flagos's result (None when the reference raised, and flagos too)."""
        dev_fn = dev_fn or fn
        want, exc, kind = _traced(fn, *ref)
        if exc is not None:
            self.same_error(exc, dev_fn, sample, what)
            return None
        torch.manual_seed(SEED)
        result = dev_fn(sample.input, *sample.args, **sample.kwargs)
        want, got = sample.output_process_fn_grad(want), sample.output_process_fn_grad(result)
        if kind == "values":
            self.same_values(got, want, what)
            return result
        self.same_meta(got, want, what)
        if kind == "random":
            torch.manual_seed(SEED)
            again = sample.output_process_fn_grad(dev_fn(sample.input, *sample.args, **sample.kwargs))
            self.assertEqual(_host(again), _host(got), msg=f"{what}: same seed", atol=0, rtol=0)
        return result


class TestFlagosOps(FlagosOpsBase):
    @ops(op_db, allowed_dtypes=FAMILIES)
    def test_forward(self, device, dtype, op):
        self.skip_unless_vendor_has(op, dtype)
        for n, (sample, ref) in enumerate(_samples(op, device, dtype)):
            self.compare(op, sample, ref, f"sample {n} {sample.summary()}")

    @ops([op for op in op_db if op.supports_out], allowed_dtypes=FAMILIES)
    def test_out(self, device, dtype, op):
        self.skip_unless_vendor_has(op, dtype)
        for n, (sample, ref) in enumerate(_samples(op, device, dtype)):
            what = f"sample {n} {sample.summary()} out="
            want, exc = _call(op, *ref)
            if exc is not None:  # no functional result to shape out= from: empty outs, both must raise alike
                cpu_out = torch.empty(0, dtype=dtype)
                _, exc_out = _call(_with_out(op, cpu_out), *ref)
                if exc_out is not None:
                    dev_out = torch.empty(0, dtype=dtype, device=device)
                    self.same_error(exc_out, _with_out(op, dev_out), sample, what)
                continue
            cpu_out, dev_out = _empty_like(want, "cpu"), _empty_like(want, device)
            ptrs = [t.data_ptr() for t in pytree.tree_leaves(dev_out) if isinstance(t, torch.Tensor)]
            returned = self.compare(_with_out(op, cpu_out), sample, ref, what, dev_fn=_with_out(op, dev_out))
            if returned is None:  # both raised
                continue
            for r, o in zip(pytree.tree_leaves(returned), pytree.tree_leaves(dev_out), strict=True):
                self.assertIs(r, o, msg=f"{what}: the returned tensor is the out tensor")
            self.assertEqual(ptrs, [t.data_ptr() for t in pytree.tree_leaves(dev_out)], msg=f"{what}: out storage")

    @ops([op for op in op_db if op.inplace_variant is not None], allowed_dtypes=FAMILIES)
    def test_inplace(self, device, dtype, op):
        self.skip_unless_vendor_has(op, dtype)
        inplace = op.inplace_variant
        for n, (sample, ref) in enumerate(_samples(op, device, dtype)):
            if not isinstance(sample.input, torch.Tensor):
                continue
            what = f"sample {n} {sample.summary()} in-place"

            self.compare(self.on_clone(inplace, what), sample, ref, what)

    def on_clone(self, inplace, what):
        """The in-place variant applied to a clone of the input; it must return that very tensor."""

        def run(inp, *args, **kwargs):
            target = inp.clone()
            result = inplace(target, *args, **kwargs)
            self.assertIs(result, target, msg=f"{what}: returns its input")
            return target

        return run

    @ops([op for op in op_db if op.supports_autograd], dtypes=OpDTypes.supported_backward, allowed_dtypes=GRAD_DTYPES)
    def test_backward(self, device, dtype, op):
        self.skip_unless_vendor_has(op, dtype, grad=True)
        for n, (sample, ref) in enumerate(_samples(op, device, dtype, requires_grad=True)):
            what = f"sample {n} {sample.summary()} backward"
            want, exc, kind = _traced(op, *ref)
            if exc is not None:
                self.same_error(exc, op, sample, what)
                continue
            torch.manual_seed(SEED)
            got = op(sample.input, *sample.args, **sample.kwargs)
            want, got = sample.output_process_fn_grad(want), sample.output_process_fn_grad(got)
            w_out = [t for t in pytree.tree_leaves(want) if isinstance(t, torch.Tensor) and t.requires_grad]
            g_out = [t for t in pytree.tree_leaves(got) if isinstance(t, torch.Tensor) and t.requires_grad]
            self.assertEqual(len(g_out), len(w_out), msg=f"{what}: outputs that require grad")
            w_in = [t for t in pytree.tree_leaves(ref) if isinstance(t, torch.Tensor) and t.requires_grad]
            g_in = [
                t
                for t in pytree.tree_leaves((sample.input, sample.args, sample.kwargs))
                if isinstance(t, torch.Tensor) and t.requires_grad
            ]
            if not w_out or not w_in:
                continue
            gen = torch.Generator().manual_seed(SEED + n)
            seeds = [torch.randn(t.shape, dtype=t.dtype, generator=gen) for t in w_out]
            w_grads = torch.autograd.grad(w_out, w_in, seeds, allow_unused=True)
            g_grads = torch.autograd.grad(g_out, g_in, [s.to(device) for s in seeds], allow_unused=True)
            for i, (g, w) in enumerate(zip(g_grads, w_grads, strict=True)):
                if w is None:
                    self.assertIsNone(g, msg=f"{what}: input {i} has no gradient on CPU")
                elif kind == "random":
                    self.same_meta(g, w, f"{what}: gradient of input {i}")
                else:
                    self.same_values(g, w, f"{what}: gradient of input {i}")

    @ops(op_db, dtypes=OpDTypes.supported_backward, allowed_dtypes=(torch.float64,))
    def test_gradcheck(self, device, dtype, op):
        self.skip_unless_vendor_has(op, dtype, grad=True)
        fn = op.get_op()
        for n, (sample, _) in enumerate(_samples(op, device, dtype, requires_grad=True)):
            leaves, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
            where = [i for i, t in enumerate(leaves) if isinstance(t, torch.Tensor) and t.requires_grad]
            if not where:
                continue

            def call(*diff, leaves=leaves, where=where, spec=spec):
                filled = list(leaves)
                for i, t in zip(where, diff, strict=True):
                    filled[i] = t
                inp, args, kwargs = pytree.tree_unflatten(filled, spec)
                torch.manual_seed(SEED)  # random ops (normal, dropout): the same draw at every evaluation
                return op.gradcheck_wrapper(fn, inp, *args, **kwargs)

            self.assertTrue(
                torch.autograd.gradcheck(
                    call,
                    [leaves[i] for i in where],
                    fast_mode=True,
                    check_batched_grad=False,
                    check_undefined_grad=False,
                    nondet_tol=op.gradcheck_nondet_tol,
                ),
                msg=f"sample {n} {sample.summary()} gradcheck",
            )


instantiate_device_type_tests(TestFlagosOps, globals(), only_for=("flagos",))

# test name -> (check, op full name, dtype name), for the conftest's expected failures and counts
TESTS: dict[str, tuple[str, str, str]] = {}
for _op in op_db:
    for _check in ("forward", "out", "inplace", "backward", "gradcheck"):
        for _dtype in (*FAMILIES, torch.float64):
            _name = str(_dtype).split(".")[1]
            TESTS[f"test_{_check}_{_op.formatted_name}_flagos_{_name}"] = (_check, _op.full_name, _name)
