"""The names of ``torch.cuda``'s device API that ``torch.flagos`` leaves out, each with the reason: the one list,
which docs/device.md prints and tests/correctness/test_device_api.py holds ``torch.flagos`` to. Pure data (no
imports), so the unit tests read it without the extension."""

from __future__ import annotations

CUDA_ONLY: dict[str, str] = {
    "CUDAGraph": "a CUDA graph object; flagos graphs are `torch.flagos.FlagosGraph` (same methods), on every vendor",
    "CUDAPluggableAllocator": "loads a shared library of cudaMalloc-style functions into CUDA's allocator; flagos "
    "memory is the vendor's caching allocator on GPUs (where torch.cuda's pluggable allocator applies) and the "
    "emulation's own under emulation",
    "change_current_allocator": "installs a CUDAPluggableAllocator, see above",
    "CudaError": "an error code of the CUDA runtime; flagos raises torch's errors (RuntimeError, "
    "torch.OutOfMemoryError, torch.AcceleratorError) on every vendor",
    "check_error": "turns a CUDA runtime error code into CudaError, see above",
    "cudaStatus": "CUDA runtime status codes, see CudaError",
    "cudart": "the CUDA runtime library's Python binding; the vendor's own library is torch.cuda.cudart() on a CUDA "
    "node",
    "DeferredCudaCallError": "raised by CUDA's lazy initialisation; flagos initialises at `import torch_fl` and "
    "reports a failure there",
    "export_dot": "a CUDAGraph capture-end hook that writes the CUDA graph's nodes as Graphviz DOT (torch 2.15); "
    "FlagosGraph has no capture hooks, and an emulated graph has no nodes, only its recorded operators",
    "export_graph_data": "a CUDAGraph post-instantiate hook that pickles the instantiated CUDA graph's data "
    "(torch 2.15), as for export_dot",
    "GreenContext": "partitions a GPU's streaming multiprocessors (CUDA green contexts); the emulation has none, and "
    "on a CUDA node torch.cuda.GreenContext applies to the same device",
    "current_blas_handle": "cuBLAS's handle of the current CUDA stream; on a CUDA node "
    "torch.cuda.current_blas_handle() is the one flagos kernels use",
    "current_solver_handle": "cuSOLVER's handle, as for current_blas_handle",
}
