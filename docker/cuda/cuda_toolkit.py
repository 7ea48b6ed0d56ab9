"""Provide the CUDA compiler and headers in the cuda builder (run, without arguments, by docker/Dockerfile's
toolkit-cuda stage).

A base image's toolkit (nvidia/cuda devel: /usr/local/cuda/bin/nvcc) is used as it is. Otherwise /usr/local/cuda
is the toolkit that PyPI's NVIDIA wheels of the builder's lock unpack, once every wheel is checked to be of torch's
CUDA release. CUDA 13's wheels unpack one tree, site-packages/nvidia/cu13/, and /usr/local/cuda links to it. CUDA
12's (torch 2.9 and 2.10 are CUDA 12.8 builds) unpack one directory per component (nvidia/cuda_nvcc, cuda_runtime,
cuda_cccl): /usr/local/cuda becomes one tree of hard links to their files. nvcc's profile links from ``lib64`` and
CMake needs the unversioned ``libcudart.so``: both are links made beside the wheels' files.

CUDA 12's nvcc wheel has ptxas, nvvm and the crt headers but no nvcc driver. The extension compiles no device code
(the C++ compiler builds the CUDA runtime against CUDA's headers and libcudart), so a CUDA 12 toolkit is checked by
building and linking a host program against it, and CMake's FindCUDAToolkit finds it by the ``version.txt`` that a
toolkit without nvcc is found by. A CUDA 13 toolkit must build a kernel with its nvcc.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

SYSTEM = Path("/usr/local/cuda")
# The toolkit wheels whose release must be torch's CUDA release (major.minor), per CUDA major; nvidia-nvvm is the
# one that drifted in 13: nvidia-cuda-nvcc asks for it without a version. CUDA 12's nvcc wheel carries the crt
# headers that cuda_runtime.h includes.
TOOLKITS = {
    "13": ("nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-runtime", "nvidia-cuda-crt", "nvidia-cuda-cccl"),
    "12": ("nvidia-cuda-nvcc-cu12", "nvidia-cuda-runtime-cu12", "nvidia-cuda-cccl-cu12"),
}
# CUDA 12: the component directories under site-packages/nvidia/ that make one toolkit tree, nvcc's first
CU12_PARTS = ("cuda_nvcc", "cuda_runtime", "cuda_cccl")


def torch_cuda_release(torch_requires: list[str], version_py: str) -> tuple[str, str | None]:
    """(torch's CUDA major.minor from its version.py, torch's own ``cuda-toolkit==X.Y.Z`` pin or None)."""
    if not (m := re.search(r"^cuda\b[^=]*=\s*'([0-9.]+)'", version_py, re.M)):
        raise SystemExit("cuda_toolkit: the installed torch is not a CUDA build (torch/version.py has no cuda)")
    pin = None
    for req in torch_requires:
        if t := re.match(r"cuda-toolkit(\[[^\]]*\])?\s*==\s*([0-9.]+)", req):
            pin = t.group(2)
    return ".".join(m.group(1).split(".")[:2]), pin


def toolkit(cuda: str) -> tuple[str, ...]:
    """The toolkit wheels of a CUDA release; a major with no known wheel layout stops here."""
    major = cuda.split(".")[0]
    if major not in TOOLKITS:
        raise SystemExit(
            f"cuda_toolkit: torch is a CUDA {cuda} build; the toolkit wheels of CUDA "
            f"{' and '.join(sorted(TOOLKITS))} are known here, not of CUDA {major}"
        )
    return TOOLKITS[major]


def release_problems(cuda: str, pin: str | None, installed: dict[str, str | None]) -> list[str]:
    """Each toolkit wheel that is missing or of another CUDA release than torch's, with the fix."""
    fix = "pin it in the row's builder_requirements (configs/toolchains.toml) and run `nox -s lock`"
    problems = []
    if pin and installed.get("cuda-toolkit") not in (pin, None):
        problems.append(f"cuda-toolkit {installed['cuda-toolkit']} is installed, torch requires {pin}: {fix}")
    for name in toolkit(cuda):
        if (version := installed.get(name)) is None:
            problems.append(f"{name} is not installed: add the extra to cuda-toolkit[...] and {fix}")
        elif ".".join(version.split(".")[:2]) != cuda:
            problems.append(f"{name} {version} is not of torch's CUDA release {cuda}: {fix}")
    return problems


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _link(link: Path, target: str) -> None:
    if not link.exists() and not link.is_symlink():
        link.symlink_to(target)


def merge_parts(parts: list[Path], dest: Path) -> None:
    """One toolkit tree at ``dest`` from CUDA 12's component directories: each file hard-linked (copied where the
    link fails), the first part's file kept where two parts ship one path."""
    for part in parts:
        for src in sorted(part.rglob("*")):
            rel = src.relative_to(part)
            if src.is_dir() and not src.is_symlink() or rel.parts[0] in ("__init__.py", "__pycache__"):
                continue
            dst = dest / rel
            if dst.exists() or dst.is_symlink():
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_symlink():
                dst.symlink_to(os.readlink(src))
                continue
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)


def _clear(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def main() -> int:
    if (SYSTEM / "bin" / "nvcc").is_file():
        print(f"cuda_toolkit: using the base image's toolkit at {SYSTEM.resolve()}", flush=True)
        return 0
    dist = metadata.distribution("torch")
    version_py = Path(dist.locate_file("torch/version.py")).read_text(encoding="utf-8")
    cuda, pin = torch_cuda_release(dist.requires or [], version_py)
    names = toolkit(cuda)
    installed = {name: _version(name) for name in ("cuda-toolkit", *names)}
    if problems := release_problems(cuda, pin, installed):
        raise SystemExit("cuda_toolkit: the toolkit wheels are not one CUDA release:\n  " + "\n  ".join(problems))
    nvidia = Path(dist.locate_file("nvidia"))
    _clear(SYSTEM)
    host_only = cuda.startswith("12.")
    if host_only:
        merge_parts([nvidia / part for part in CU12_PARTS], SYSTEM)
        root = SYSTEM
        (root / "version.txt").write_text(f"CUDA Version {installed[names[1]]}\n")  # FindCUDAToolkit's sentinel
    else:
        root = nvidia / f"cu{cuda.split('.')[0]}"
        if not (root / "bin" / "nvcc").is_file():
            raise SystemExit(f"cuda_toolkit: {names[0]} {installed[names[0]]} did not provide {root}/bin/nvcc")
    lib = root / "lib"
    if not (versioned := sorted(lib.glob("libcudart.so.*"))):
        raise SystemExit(f"cuda_toolkit: no libcudart.so.* in {lib}")
    _link(lib / "libcudart.so", versioned[0].name)
    _link(root / "lib64", "lib")
    if root != SYSTEM:
        SYSTEM.symlink_to(root)
    probe = Path("/tmp/cuda_toolkit_probe")
    probe.mkdir(exist_ok=True)
    if host_only:  # the headers and libcudart, as the extension's CUDA runtime uses them
        (probe / "h.cpp").write_text("#include <cuda_runtime.h>\nint main() { int n = 0; cudaGetDeviceCount(&n); }\n")
        argv = [
            os.environ.get("CXX", "c++"),
            str(probe / "h.cpp"),
            f"-I{SYSTEM}/include",
            f"-L{SYSTEM}/lib64",
            "-lcudart",
            "-o",
            str(probe / "h"),
        ]
        what = "a host program builds and links against it"
        failed = "a host program including cuda_runtime.h does not build or link against it"
    else:  # nvcc must compile and link a kernel: ptxas refuses PTX of a later nvvm, and a missing lib64 fails the link
        (probe / "k.cu").write_text("__global__ void k() {}\nint main() { k<<<1, 1>>>(); return 0; }\n")
        argv = [str(SYSTEM / "bin" / "nvcc"), str(probe / "k.cu"), "-o", str(probe / "k")]
        what = "nvcc builds a kernel"
        failed = "nvcc cannot build a kernel with this toolkit"
    res = subprocess.run(argv, capture_output=True, text=True)
    shutil.rmtree(probe, ignore_errors=True)
    if res.returncode != 0:
        raise SystemExit(f"cuda_toolkit: {failed}:\n{res.stderr.strip()}")
    shown = ", ".join(f"{n} {installed[n]}" for n in names)
    where = "one tree of its components' files" if root == SYSTEM else f"-> {root}"
    print(f"cuda_toolkit: {SYSTEM} {where} (CUDA {cuda}: {shown}); {what}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
