"""Provide the CUDA compiler and headers in the cuda builder (run by docker/cuda/Dockerfile).

usage: python cuda_toolkit.py

- A base image that has a CUDA toolkit (nvidia/cuda devel: /usr/local/cuda/bin/nvcc) is used as it is.
- Otherwise the toolkit is composed from PyPI's NVIDIA wheels at exactly the CUDA release the installed torch was
  built with: torch's own ``cuda-toolkit[...]==X.Y.Z`` requirement, with the nvcc, crt, cccl and cudart extras
  (torch brings only the runtime libraries). The wheels install under site-packages/nvidia/cu<major>/ (bin,
  include, lib); /usr/local/cuda points there so CMake's FindCUDAToolkit finds it like a system toolkit, and the
  unversioned libcudart.so that find_library needs is linked beside the versioned one.

Needs pip's configuration in PIP_CONFIG_FILE (the BuildKit secret) when it has to install.
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
EXTRAS = "cudart,nvcc,crt,cccl"


def toolkit_requirement(torch_requires: list[str], torch_cuda: str | None) -> str:
    """``cuda-toolkit[cudart,nvcc,crt,cccl]==13.0.2``: torch's own pin when it has one, else its CUDA line."""
    for req in torch_requires:
        m = re.match(r"cuda-toolkit(\[[^\]]*\])?\s*==\s*([0-9.]+)", req)
        if m:
            return f"cuda-toolkit[{EXTRAS}]=={m.group(2)}"
    if not torch_cuda:
        raise SystemExit("cuda_toolkit: the installed torch is not a CUDA build (torch.version.cuda is None)")
    return f"cuda-toolkit[{EXTRAS}]=={torch_cuda}.*"


def main() -> int:
    if (SYSTEM / "bin" / "nvcc").is_file():
        print(f"cuda_toolkit: using the base image's toolkit at {SYSTEM.resolve()}", flush=True)
        return 0
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    import torch

    req = toolkit_requirement(metadata.requires("torch") or [], torch.version.cuda)
    print(f"cuda_toolkit: no toolkit in the base image; installing {req} from the package index", flush=True)
    subprocess.check_call([sys.executable, "-m", "pip", "install", req])
    major = (torch.version.cuda or "").split(".")[0]
    site = Path(torch.__file__).resolve().parents[1]
    root = site / "nvidia" / f"cu{major}"
    if not (root / "bin" / "nvcc").is_file():
        raise SystemExit(f"cuda_toolkit: {req} did not provide {root}/bin/nvcc")
    lib = root / "lib"
    versioned = sorted(lib.glob("libcudart.so.*"))
    if not versioned:
        raise SystemExit(f"cuda_toolkit: no libcudart.so.* in {lib}")
    if not (lib / "libcudart.so").exists():
        (lib / "libcudart.so").symlink_to(versioned[0].name)
    if SYSTEM.is_symlink() or SYSTEM.exists():
        shutil.rmtree(SYSTEM) if SYSTEM.is_dir() and not SYSTEM.is_symlink() else SYSTEM.unlink()
    SYSTEM.symlink_to(root)
    out = subprocess.run([str(SYSTEM / "bin" / "nvcc"), "--version"], capture_output=True, text=True, check=True)
    print(f"cuda_toolkit: {SYSTEM} -> {root}: {out.stdout.strip().splitlines()[-1]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
