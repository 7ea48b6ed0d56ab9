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


# Reasons, one per cause. Emulation rows were found with triage.py (torch 2.13, first sample per op and dtype).
CONJ_VALUES = (
    "wrong values on complex input, no crash: pinv goes through the SVD's conjugate-transposed views (not the "
    "conj-bit loss fixed in re-tagging: it still fails with that fix)"
)
SPARSE = (
    "flagos has no sparse layouts: no Sparse/SparseCsr kernels are registered for its dispatch key and a sparse "
    "flagos tensor has no storage to re-tag"
)
STUB_FLAGOS = (
    "the op reaches a CPU DispatchStub with a flagos device type (its tensors were not re-tagged first): "
    "'DispatchStub: missing kernel for flagos'"
)
DEVICE_CHECK = (
    "out=: the kernel's device check sees the flagos device (the out tensor is not re-tagged first): "
    "'mode only supports CPU, CUDA and XPU device type, got: flagos'"
)
OUT_STORAGE = "out=: the out tensor is re-pointed to a new storage instead of written (CPU writes the given storage)"
EIG_PHASE = (
    "gradcheck: linalg_eig_backward refuses this sample's loss as ill-defined (it depends on the eigenvectors' "
    "phase); torch's own check, seen once the conj-view crash on this path was fixed"
)
GRADCHECK_CAST = (
    "gradcheck harness: the float64 input meets a cast to a lower dtype and autograd refuses the float64 gradient; "
    "the same on CPU tensors"
)
GRADCHECK_CPU_TOO = (
    "gradcheck harness: this one-sample fast gradcheck fails the same on CPU tensors (torch's own backward or "
    "duplicate indices), not a flagos difference"
)

VENDOR_VALUES = (
    "the vendor's kernel is not the CPU's: ties ordered otherwise (sort, argsort, topk, kthvalue), half-precision "
    "accumulation (cumsum, convolutions, norms, grid_sample) or summation order; the native route runs CUDA's own "
    "kernel on the same memory, so plain CUDA tensors give these values"
)
VENDOR_STATS_DTYPE = (
    "CUDA's batch and layer norm keep the saved mean and inverse std in float32 for half inputs where the CPU "
    "returns the input dtype (so out= refuses half buffers); CUDA's own kernel, the same on plain CUDA"
)
NO_VENDOR_KERNEL = "CUDA has no narrow_copy.out kernel: the native route refuses it by name and points to the cpu route"
POW_NAN = "gradcheck: CUDA's pow backward gives nan on this sample, numerically and analytically alike"
HALF_ROUNDING_CPU_ROUTE = (
    "one bfloat16 element off by one rounding step: the ops that the cpu conf keeps native (views, bookkeeping) "
    "run on CUDA between the host kernels"
)

# fmt: off
ROWS: tuple[Row, ...] = (
    # Both runtimes (emulation: triage.py on torch 2.13; CUDA: the H200, torch 2.11, first sample per op and dtype).
    Row("forward", ("linalg.pinv", "pinverse"), ("complex64",), CONJ_VALUES, cuda="no"),
    Row("backward", ("linalg.pinv", "pinverse"), ("complex64",), CONJ_VALUES, cuda="no"),
    Row("gradcheck", ("linalg.eig",), ("float64",), EIG_PHASE, cuda="yes"),
    Row("out", ("linalg.pinv",), ("complex64",), CONJ_VALUES, cuda="no"),
    Row("out", ("mode",), ("bfloat16", "bool", "float16", "float32", "int64"), DEVICE_CHECK, cuda="no"),
    Row("gradcheck", ("bfloat16", "cfloat", "chalf", "float", "half"), ("float64",), GRADCHECK_CAST, cuda="yes"),
    Row("gradcheck", (
        "as_strided_scatter", "linalg.lu", "lu_unpack", "nn.functional.max_unpool3d", "normal"
    ), ("float64",), GRADCHECK_CPU_TOO, cuda="yes"),
    Row("gradcheck", ("native_group_norm",), ("float64",), GRADCHECK_CPU_TOO, cuda="yes", accelerator="cpu"),
    Row("out", (
        "linalg.matrix_rank", "linalg.matrix_rank.hermitian"
    ), ("complex64", "float32"), OUT_STORAGE, cuda="unknown"),
    Row("backward", ("sparse.sampled_addmm",), ("complex64", "float32"), SPARSE, cuda="no"),
    Row("backward", ("to_sparse",), ("float32",), SPARSE, cuda="no"),
    Row("forward", ("to_sparse",), ("bfloat16", "bool", "complex64", "float16", "float32", "int64"), SPARSE, cuda="no"),
    Row("forward", ("sparse.sampled_addmm",), ("complex64", "float32"), SPARSE, cuda="no"),
    Row("gradcheck", ("sparse.sampled_addmm", "to_sparse"), ("float64",), SPARSE, cuda="no"),
    Row("out", ("sparse.sampled_addmm",), ("complex64", "float32"), SPARSE, cuda="no"),
    Row("inplace", ("conj_physical",), ("complex64",), STUB_FLAGOS, cuda="no"),
    Row("out", ("svd",), ("complex64",), STUB_FLAGOS, cuda="no"),
    # CUDA, native conf: CUDA's own kernels against the CPU's.
    Row("forward", ("argsort", "sort"), ("bfloat16", "bool", "float16"), VENDOR_VALUES, cuda="yes", conf="native",
        accelerator="cuda"),
    Row("out", ("sort",), ("bfloat16", "bool", "float16"), VENDOR_VALUES, cuda="yes", conf="native",
        accelerator="cuda"),
    Row(ANY, ("cumsum",), ("bfloat16", "float16"), VENDOR_VALUES, cuda="yes", conf="native", accelerator="cuda"),
    Row(ANY, ("kthvalue", "topk"), ("int64",), VENDOR_VALUES, cuda="yes", conf="native", accelerator="cuda"),
    Row("forward", (
        "grid_sampler_2d", "nn.functional.grid_sample", "nn.functional.conv3d", "nn.functional.conv_transpose3d",
        "nn.functional.instance_norm"
    ), ("bfloat16", "float16"), VENDOR_VALUES, cuda="yes", conf="native", accelerator="cuda"),
    Row("forward", ("nn.functional.batch_norm", "nn.functional.conv_transpose2d"), ("bfloat16",), VENDOR_VALUES,
        cuda="yes", conf="native", accelerator="cuda"),
    Row("forward", ("nn.functional.huber_loss",), ("float16",), VENDOR_VALUES, cuda="yes", conf="native",
        accelerator="cuda"),
    Row("backward", ("logcumsumexp",), ("float32",), VENDOR_VALUES, cuda="yes", conf="native", accelerator="cuda"),
    Row("forward", (
        "_batch_norm_with_update", "_native_batch_norm_legit", "native_batch_norm", "native_layer_norm"
    ), ("bfloat16", "float16"), VENDOR_STATS_DTYPE, cuda="yes", conf="native", accelerator="cuda"),
    Row("out", ("_native_batch_norm_legit", "native_batch_norm"), ("bfloat16", "float16"), VENDOR_STATS_DTYPE,
        cuda="yes", conf="native", accelerator="cuda"),
    Row("out", ("narrow_copy",), ANY, NO_VENDOR_KERNEL, cuda="yes", conf="native", accelerator="cuda"),
    Row("gradcheck", ("__rpow__",), ("float64",), POW_NAN, cuda="yes", conf="native", accelerator="cuda"),
    # CUDA, cpu conf. The complex64 gradients of the LU and Householder family failed here on the H200 (host
    # copies of conjugate views); copies now settle conjugate bits first (data_movement.cpp), not re-run there yet.
    Row("forward", ("nn.functional.group_norm",), ("bfloat16",), HALF_ROUNDING_CPU_ROUTE, cuda="unknown", conf="cpu",
        accelerator="cuda"),
)
# fmt: on


def lookup(check: str, op: str, dtype: str, *, conf: str, accelerator: str) -> Row | None:
    """The first row that matches, or None."""
    return next((r for r in ROWS if r.matches(check, op, dtype, conf, accelerator)), None)
