"""The DCU build hipifies the CUDA runtime (csrc/runtime/cuda.cpp) with the building torch's own hipify.

csrc/hip/hipify_sources.py runs ``torch.utils.hipify`` on the DCU sources and fails the build when a CUDA spelling
survives that the ROCm/DTK torch of that hipify generation does not declare. These tests run the same code:

- on synthetic sources (what counts as unmapped, per generation; comments ignored);
- on the real csrc/ with the installed torch's hipify (v2 from torch 2.11 on; v1 before): no unmapped symbol;
- against the table below, which records what BOTH generations make of every CUDA spelling cuda.cpp uses
  (v1 = torch <= 2.10, e.g. the DAS torch of DTK 25.04; checked with ROCm's hipify v1 mappings). A new CUDA
  spelling in cuda.cpp fails here until it is added with what each generation maps it to.

The live tests (hipify for real, hipcc on the collectives backend) use the installed torch, or the torch line
that ``TORCH_FL_HIPIFY_TORCH`` names: a directory holding ``torch/include`` and ``torch/utils/hipify`` of an
unpacked torch wheel (e.g. the torch 2.9 of DTK 26.04, the DCU default), whose hipify and headers are then used
without that torch being installed. Under CI (CI=true) a missing torch, or a ``TORCH_FL_HIPIFY_TORCH`` without
those two directories, is a failure, not a skip.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CSRC = REPO / "csrc"


def _load():
    name = "torch_fl_hipify_sources"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, CSRC / "hip" / "hipify_sources.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


hs = _load()

# Every CUDA-specific spelling of the DCU sources -> (hipify v1 result, hipify v2 result). v1 results are names
# a v1 ROCm torch declares (c10/hip/*.h, ATen/hip/impl/*MasqueradingAsCUDA.h, ATen/hip/HIPGeneratorImpl.h); v2
# keeps torch's CUDA names (ROCm torch >= 2.11 declares them) and renames only headers and CUDA runtime APIs.
SPELLINGS = {
    "ATen/cuda/CUDAGeneratorImpl.h": ("ATen/hip/HIPGeneratorImpl.h", "ATen/hip/HIPGeneratorImpl.h"),
    "c10/cuda/CUDACachingAllocator.h": (
        "ATen/hip/impl/HIPCachingAllocatorMasqueradingAsCUDA.h",
        "c10/hip/HIPCachingAllocator.h",
    ),
    "c10/cuda/CUDAFunctions.h": ("c10/hip/HIPFunctions.h", "c10/hip/HIPFunctions.h"),
    "c10/cuda/CUDAGuard.h": ("ATen/hip/impl/HIPGuardImplMasqueradingAsCUDA.h", "c10/hip/HIPGuard.h"),
    "c10/cuda/CUDAStream.h": ("ATen/hip/impl/HIPStreamMasqueradingAsCUDA.h", "c10/hip/HIPStream.h"),
    "c10::cuda::CUDACachingAllocator": ("c10::hip::HIPCachingAllocator", "c10::cuda::CUDACachingAllocator"),
    "c10::cuda::device_count": ("c10::hip::device_count", "c10::cuda::device_count"),
    "c10::cuda::current_device": ("c10::hip::current_device", "c10::cuda::current_device"),
    "c10::cuda::set_device": ("c10::hip::set_device", "c10::cuda::set_device"),
    "c10::cuda::device_synchronize": ("c10::hip::device_synchronize", "c10::cuda::device_synchronize"),
    "c10::cuda::getCurrentCUDAStream": (
        "c10::hip::getCurrentHIPStreamMasqueradingAsCUDA",
        "c10::cuda::getCurrentCUDAStream",
    ),
    "c10::cuda::CUDAGuard": ("c10::hip::HIPGuardMasqueradingAsCUDA", "c10::cuda::CUDAGuard"),
    # ATen's CUDA generator keeps its name in both generations (PyTorch, not c10, spelling)
    "at::cuda::detail::getDefaultCUDAGenerator": (
        "at::cuda::detail::getDefaultCUDAGenerator",
        "at::cuda::detail::getDefaultCUDAGenerator",
    ),
    "at::cuda::detail::createCUDAGenerator": (
        "at::cuda::detail::createCUDAGenerator",
        "at::cuda::detail::createCUDAGenerator",
    ),
    # the device type and dispatch key of HIP-as-CUDA torch
    "c10::DeviceType::CUDA": ("c10::DeviceType::CUDA", "c10::DeviceType::CUDA"),
    "c10::DispatchKey::CUDA": ("c10::DispatchKey::CUDA", "c10::DispatchKey::CUDA"),
}

# The project's own names with "cuda" in them: hipify leaves them alone (v1 renames Cuda->Hip only in caffe2 mode).
OWN_NAMES = {"CudaBackedAllocator", "CudaRuntime", "make_cuda_runtime", "TORCH_FL_WITH_CUDA"}

# What counts as a CUDA spelling in the sources: an include path or a (qualified) name with cuda/CUDA in it.
_CUDA_SPELLING = re.compile(r"[<\"]([^<>\"]*cuda[^<>\"]*)[>\"]|((?:\w+::)*\w+)")


HIPIFY_TORCH = "TORCH_FL_HIPIFY_TORCH"


def _torch_root() -> Path | None:
    """The unpacked torch that TORCH_FL_HIPIFY_TORCH names, or None for the installed torch (skipped without one,
    except under CI)."""
    value = os.environ.get(HIPIFY_TORCH)
    if value:
        root = Path(value)
        missing = [part for part in ("torch/include", "torch/utils/hipify") if not (root / part).is_dir()]
        if missing:
            why = f"{HIPIFY_TORCH}={value} has no {' and no '.join(missing)} (unpack a torch wheel there)"
            if os.environ.get("CI") == "true":
                pytest.fail(why)
            pytest.skip(why)
        return root
    if os.environ.get("CI") == "true":
        import torch.utils.hipify  # noqa: F401  (CI installs torch: a missing one is a failure)
    else:
        pytest.importorskip("torch.utils.hipify")
    return None


def _torch_headers(root: Path | None) -> tuple[list[str], tuple[int, int], int]:
    """The include directories, (major, minor) line and C++11-ABI flag of the torch whose headers the compile
    check uses. An unpacked torch cannot be asked its ABI: every Linux torch wheel since 2.7 uses the C++11 one
    (CMakeLists.txt assumes the same for a torch it reads from files)."""
    if root is None:
        import torch
        import torch.utils.cpp_extension as ext

        line = tuple(int(p) for p in torch.__version__.split(".")[:2])
        return ext.include_paths(), line, int(torch._C._GLIBCXX_USE_CXX11_ABI)  # type: ignore[return-value]
    include = root / "torch" / "include"
    api = include / "torch" / "csrc" / "api" / "include"
    # torch/version.h forwards to torch/headeronly/version.h from 2.10 on; 2.9 defines the numbers itself
    for header in (include / "torch" / "headeronly" / "version.h", api / "torch" / "version.h"):
        text = header.read_text() if header.is_file() else ""
        major = re.search(r"#define TORCH_VERSION_MAJOR (\d+)", text)
        minor = re.search(r"#define TORCH_VERSION_MINOR (\d+)", text)
        if major and minor:
            return [str(include), str(api)], (int(major.group(1)), int(minor.group(1))), 1
    raise AssertionError(f"no TORCH_VERSION_MAJOR/MINOR in the headers under {include}")


def _spellings(source: str) -> set[str]:
    code = hs.strip_comments(source)
    found = set()
    for m in _CUDA_SPELLING.finditer(code):
        token = m.group(1) or m.group(2)
        if token and "cuda" in token.lower():
            found.add(token)
    return found


def test_dcu_sources_are_the_cuda_runtime():
    assert hs.DCU_SOURCES == ("runtime/cuda.cpp",)
    cmake = (REPO / "CMakeLists.txt").read_text()
    for src in hs.DCU_SOURCES:
        assert f'--output "${{_hip_runtime}}" {src}' in cmake, "CMakeLists.txt hipifies every DCU source"


def test_every_cuda_spelling_of_the_dcu_sources_is_mapped_by_both_hipify_generations():
    for src in hs.DCU_SOURCES:
        unknown = _spellings((CSRC / src).read_text()) - set(SPELLINGS) - OWN_NAMES
        assert not unknown, (
            f"{src} uses CUDA spellings with no known hipify mapping: {sorted(unknown)}; add each to "
            "SPELLINGS with what hipify v1 (torch <= 2.10) and v2 (torch >= 2.11) make of it, and check that the "
            "ROCm torch of each generation declares the result"
        )
    for cuda, (v1, v2) in SPELLINGS.items():
        # the recorded results are themselves clean for their generation
        assert hs.unmapped(f"#include <{v1}>\n" if "/" in v1 else f"x = {v1}();\n", 1) == [], (cuda, v1)
        assert hs.unmapped(f"#include <{v2}>\n" if "/" in v2 else f"x = {v2}();\n", 2) == [], (cuda, v2)


def test_unmapped_rules_per_generation():
    source = """
    // c10::cuda::CUDAGuard in a comment is fine; so is cudaMalloc here
    /* and cudaStream_t
       here */
    #include <c10/cuda/CUDAStream.h>
    cudaStream_t s; cudaMalloc(&p, 4);
    c10::cuda::CUDAGuard g(0);
    auto d = c10::DeviceType::CUDA; auto k = c10::DispatchKey::CUDA;
    c10::hip::HIPGuardMasqueradingAsCUDA m(0);
    const auto& gen = at::cuda::detail::getDefaultCUDAGenerator(0);
    #ifdef TORCH_FL_WITH_CUDA
    #if CUDA_VERSION >= 12000
    ncclAllReduce(a);
    """
    v2 = {(x.line, x.text) for x in hs.unmapped(source, 2)}
    assert v2 == {
        (5, "#include <c10/cuda/CUDAStream.h>"),
        (6, "cudaStream_t"),
        (6, "cudaMalloc"),
        (12, "CUDA_VERSION"),
        (13, "ncclAllReduce"),
    }
    v1 = {(x.line, x.text) for x in hs.unmapped(source, 1)}
    assert v1 - v2 == {(5, "CUDAStream"), (7, "c10::cuda::"), (7, "CUDAGuard")}


def test_strip_comments_keeps_lines_and_strings():
    src = 'a // c\n"// not a comment" /* x\ny */ b\n'
    out = hs.strip_comments(src)
    assert out.count("\n") == src.count("\n")
    assert '"// not a comment"' in out and "c" not in out.split("\n")[0][1:] and out.rstrip().endswith("b")


def test_generation_from_hipify_version():
    assert hs.generation("2.0.0") == 2
    assert hs.generation("1.0.0") == 1
    assert hs.generation("weird") == 1


def test_hipified_dcu_sources_have_no_unmapped_cuda_symbols(tmp_path):
    """Hipify csrc/ for real, with the chosen torch's hipify (_torch_root), as the DCU build does."""
    files, gen = hs.hipify(CSRC, hs.DCU_SOURCES, tmp_path, _torch_root())
    assert gen in (1, 2)
    for src, out in files.items():
        text = out.read_text()
        assert text.startswith("// !!! This is a file automatically generated by hipify!!!"), f"{src} not hipified"
        assert "#include <c10/cuda/" not in text and "#include <ATen/cuda/" not in text
        bad = hs.unmapped(text, gen)
        assert bad == [], f"{src} after hipify v{gen}: " + "; ".join(map(str, bad))
        # what the table says this generation produces is what it produced
        for _cuda, results in SPELLINGS.items():
            expected = results[gen - 1]
            if "/" in expected and _cuda in (CSRC / src).read_text():
                assert f"<{expected}>" in text, (src, _cuda, expected)
    assert not (CSRC / "runtime" / "hip.cpp").exists(), "hipify ran on a copy, never in the source tree"


def test_hipify_sources_cli_writes_the_output_and_fails_on_leftovers(tmp_path):
    root = _torch_root()
    chosen = [] if root is None else ["--torch-root", str(root)]
    out = tmp_path / "out" / "cuda_hip.cpp"
    assert hs.main(["--csrc", str(CSRC), "--output", str(out), *chosen, "runtime/cuda.cpp"]) == 0
    assert out.is_file() and "hipify" in out.read_text().splitlines()[0]
    bad = tmp_path / "csrc" / "runtime"
    bad.mkdir(parents=True)
    (bad / "bad.cpp").write_text(
        "#include <cuda_runtime.h>\nvoid f() { cudaDeviceSynchronize(); cudaTorchFlNotAnApi(1); }\n"
    )
    # cuda_runtime.h and cudaDeviceSynchronize are mapped by every hipify; a name hipify does not know survives,
    # and the build stops with it instead of failing later in the compiler
    rc = hs.main(["--csrc", str(tmp_path / "csrc"), "--output", str(tmp_path / "o.cpp"), *chosen, "runtime/bad.cpp"])
    assert rc == 1 and not (tmp_path / "o.cpp").exists()


# The collectives backend (csrc/comm) names no CUDA or NCCL API: it wraps whatever c10d backend torch gives it
# (on DCU, the DTK torch's "nccl" backend, which is RCCL). So the DCU build compiles it unchanged.
COMM_SOURCES = ("comm/backend.cpp",)


def test_comm_sources_need_no_hipify(tmp_path):
    """torch's hipify leaves the collectives backend as it is: nothing in it is CUDA-specific."""
    files, gen = hs.hipify(CSRC, COMM_SOURCES, tmp_path, _torch_root())
    for src, out in files.items():
        assert _spellings((CSRC / src).read_text()) == set(), f"{src} spells CUDA names"
        text = out.read_text()
        original = (CSRC / src).read_text()
        assert text.replace("// !!! This is a file automatically generated by hipify!!!\n", "") == original, (
            f"hipify v{gen} changed {src}"
        )


def test_comm_sources_compile_with_the_hip_compiler(tmp_path):
    """Debian's hipcc (clang, HIP_PLATFORM=amd) compiles the collectives backend against torch's headers, as
    DTK's compiler does in the DCU builder. Syntax only: this host has no HIP build of torch to link."""
    import shutil
    import subprocess
    import sysconfig

    include_dirs, line, abi = _torch_headers(_torch_root())
    hipcc = shutil.which("hipcc")
    if hipcc is None:
        if os.environ.get("CI") == "true":
            pytest.fail("hipcc is not installed: CI must run the HIP compile check (.ci/run installs it)")
        pytest.skip("hipcc not installed (apt-get install hipcc libamdhip64-dev)")
    std = "c++20" if line >= (2, 14) else "c++17"  # as CMakeLists.txt picks it
    # torch's headers as system headers: -Werror holds our code, not theirs, to the compiler's warnings
    cmd = [
        hipcc,
        "-fsyntax-only",
        "-x",
        "c++",
        f"-std={std}",
        "-Wall",
        "-Werror",
        "-Wno-unused-parameter",
        "-Wno-unused-command-line-argument",  # hipcc's own link flags, unused by -fsyntax-only
        f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
        f"-I{CSRC}",
        "-isystem",
        sysconfig.get_paths()["include"],
        *(a for p in include_dirs for a in ("-isystem", p)),
    ]
    for src in COMM_SOURCES:
        res = subprocess.run(
            [*cmd, str(CSRC / src)],
            env={**os.environ, "HIP_PLATFORM": "amd"},
            capture_output=True,
            text=True,
            check=False,
        )
        errors = [ln for ln in res.stderr.splitlines() if "error" in ln] or res.stderr.splitlines()[-20:]
        assert res.returncode == 0, f"hipcc failed on {src}:\n" + "\n".join(errors[:20])
