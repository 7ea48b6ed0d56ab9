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
CONJ_SEGV = (
    "the process dies (SIGSEGV) on complex input: a conjugate (or negative) view loses its bit when re-tagged "
    "(issue 10: conj/neg bits must survive re-tagging)"
)
COMPLEX_INTERMEDIATE_SEGV = (
    "the process dies (SIGSEGV): the backward of this real-input op goes through complex conjugate views (FFT, "
    "eig), which lose their conj bit when re-tagged"
)
CONJ_VALUES = (
    "wrong values on complex input, no crash: pinv goes through the SVD's conjugate-transposed views, most likely "
    "the same lost conj bit"
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
GRADCHECK_CAST = (
    "gradcheck harness: the float64 input meets a cast to a lower dtype and autograd refuses the float64 gradient; "
    "the same on CPU tensors"
)
GRADCHECK_CPU_TOO = (
    "gradcheck harness: this one-sample fast gradcheck fails the same on CPU tensors (torch's own backward or "
    "duplicate indices), not a flagos difference"
)

# fmt: off
# fmt: off
ROWS: tuple[Row, ...] = (
    # crash=True rows hold for every accelerator (not run: the crash is in flagos's re-tagging); the others
    # were seen on CPU emulation and are scoped to it until a GPU run confirms them.
    Row("backward", (
        "fft.hfft", "fft.hfft2", "fft.hfftn", "fft.ifft", "fft.ihfft", "linalg.eig", "linalg.eigvals", "polar"
    ), ("float32",), COMPLEX_INTERMEDIATE_SEGV, cuda="no", crash=True),
    Row("forward", (
        "fft.hfft", "fft.hfft2", "fft.hfftn", "fft.ifft", "fft.ihfft"
    ), ("bool", "float32", "int64"), COMPLEX_INTERMEDIATE_SEGV, cuda="no", crash=True),
    Row("gradcheck", (
        "fft.hfft", "fft.hfft2", "fft.hfftn", "fft.ifft", "fft.ihfft", "linalg.eig", "linalg.eigvals", "polar"
    ), ("float64",), COMPLEX_INTERMEDIATE_SEGV, cuda="no", crash=True),
    Row("out", (
        "fft.hfft", "fft.hfft2", "fft.hfftn"
    ), ("bool", "float32", "int64"), COMPLEX_INTERMEDIATE_SEGV, cuda="no", crash=True),
    Row("backward", (
        "H", "__rdiv__", "__rmatmul__", "__rmul__", "__rpow__", "acos", "acosh", "addcdiv", "addcmul", "addmv",
        "addr", "asin", "asinh", "atan", "atanh", "cholesky", "cholesky_inverse", "cholesky_solve", "conj",
        "corrcoef", "cos", "cosh", "cov", "cross", "cumprod", "cumulative_trapezoid", "div.no_rounding_mode", "dot",
        "exp", "exp2", "expm1", "fft.hfft", "fft.hfft2", "fft.hfftn", "float_power", "inner", "kron", "ldexp",
        "linalg.cholesky", "linalg.cholesky_ex", "linalg.cross", "linalg.eig", "linalg.eigh", "linalg.eigvals",
        "linalg.householder_product", "linalg.lstsq", "linalg.lstsq.grad_oriented", "linalg.pinv",
        "linalg.pinv.hermitian", "linalg.qr", "linalg.slogdet", "linalg.svd", "linalg.vecdot", "log", "log10",
        "log1p", "log2", "logaddexp", "logcumsumexp", "logdet", "logsumexp", "mH", "masked.cumprod",
        "masked.logsumexp", "masked.normalize", "masked.std", "masked.var", "matmul", "matrix_exp", "mul", "mv",
        "nn.functional.normalize", "nn.functional.rms_norm", "nn.functional.softsign", "ormqr", "outer",
        "pca_lowrank", "pinverse", "pow", "prod", "qr", "reciprocal", "renorm", "rsqrt", "sgn", "sin", "sinc", "sinh",
        "sqrt", "square", "svd", "svd_lowrank", "tan", "trapezoid", "trapz", "triangular_solve", "true_divide", "vdot"
    ), ("complex64",), CONJ_SEGV, cuda="no", crash=True),
    Row("backward", (
        "addbmm", "addmm", "addmm.decomposed", "baddbmm", "bmm", "linalg.eigvalsh", "linalg.inv", "linalg.inv_ex",
        "linalg.lu", "linalg.lu_factor", "linalg.lu_factor_ex", "linalg.lu_solve", "linalg.multi_dot", "linalg.solve",
        "linalg.solve_ex", "linalg.solve_triangular", "linalg.tensorinv", "linalg.tensorsolve", "lu", "lu_solve",
        "mm", "nn.functional.linear", "tensordot"
    ), ("complex64",), CONJ_SEGV, cuda="no", conf="cpu", crash=True),
    Row("forward", (
        "H", "conj", "fft.hfft", "fft.hfft2", "fft.hfftn", "mH", "masked.std", "masked.var"
    ), ("complex64",), CONJ_SEGV, cuda="no", crash=True),
    Row("forward", (
        "cholesky", "cholesky_inverse", "cholesky_solve", "corrcoef", "cov", "linalg.cholesky", "linalg.cholesky_ex",
        "pca_lowrank", "svd_lowrank"
    ), ("complex64",), CONJ_SEGV, cuda="no", conf="cpu", crash=True),
    Row("out", ("fft.hfft", "fft.hfft2", "fft.hfftn"), ("complex64",), CONJ_SEGV, cuda="no", crash=True),
    Row("out", (
        "cholesky", "cholesky_inverse", "cholesky_solve", "linalg.cholesky", "linalg.cholesky_ex"
    ), ("complex64",), CONJ_SEGV, cuda="no", conf="cpu", crash=True),
    Row("forward", ("linalg.pinv", "pinverse"), ("complex64",), CONJ_VALUES, cuda="no", accelerator="cpu"),
    Row("out", ("linalg.pinv",), ("complex64",), CONJ_VALUES, cuda="no", accelerator="cpu"),
    Row("out", (
        "mode",
    ), ("bfloat16", "bool", "float16", "float32", "int64"), DEVICE_CHECK, cuda="no", accelerator="cpu"),
    Row("gradcheck", (
        "bfloat16", "cfloat", "chalf", "float", "half"
    ), ("float64",), GRADCHECK_CAST, cuda="yes", accelerator="cpu"),
    Row("gradcheck", (
        "as_strided_scatter", "linalg.lu", "lu_unpack", "native_group_norm", "nn.functional.max_unpool3d", "normal"
    ), ("float64",), GRADCHECK_CPU_TOO, cuda="yes", accelerator="cpu"),
    Row("out", (
        "linalg.matrix_rank", "linalg.matrix_rank.hermitian"
    ), ("complex64", "float32"), OUT_STORAGE, cuda="unknown", accelerator="cpu"),
    Row("backward", ("sparse.sampled_addmm",), ("complex64", "float32"), SPARSE, cuda="no", accelerator="cpu"),
    Row("backward", ("to_sparse",), ("float32",), SPARSE, cuda="no", accelerator="cpu"),
    Row("forward", (
        "to_sparse",
    ), ("bfloat16", "bool", "complex64", "float16", "float32", "int64"), SPARSE, cuda="no", accelerator="cpu"),
    Row("forward", ("sparse.sampled_addmm",), ("complex64", "float32"), SPARSE, cuda="no", accelerator="cpu"),
    Row("gradcheck", ("sparse.sampled_addmm", "to_sparse"), ("float64",), SPARSE, cuda="no", accelerator="cpu"),
    Row("out", ("sparse.sampled_addmm",), ("complex64", "float32"), SPARSE, cuda="no", accelerator="cpu"),
    Row("inplace", ("conj_physical",), ("complex64",), STUB_FLAGOS, cuda="no", accelerator="cpu"),
    Row("out", ("svd",), ("complex64",), STUB_FLAGOS, cuda="no", accelerator="cpu"),
)
# fmt: on


def lookup(check: str, op: str, dtype: str, *, conf: str, accelerator: str) -> Row | None:
    """The first row that matches, or None."""
    return next((r for r in ROWS if r.matches(check, op, dtype, conf, accelerator)), None)
