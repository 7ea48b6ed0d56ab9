#!/usr/bin/env python3
"""Hipify the CUDA runtime sources for a DCU (DTK/ROCm) build of torch-fl, and check the result.

    python csrc/hip/hipify_sources.py --csrc csrc --output BUILD/hip/runtime/cuda_hip.cpp runtime/cuda.cpp

DCU shares the CUDA source path: DTK's torch registers its HIP kernels under the CUDA dispatch key, so the
flagos CUDA runtime (csrc/runtime/cuda.cpp) is the DCU runtime too, once hipified. The hipify used is the one
of the torch being built against (``torch.utils.hipify``), so its output matches that torch's headers:

* hipify v1 (torch <= 2.10, e.g. DAS torch 2.4.1 of DTK 25.04): ``c10::cuda`` becomes ``c10::hip``,
  ``CUDACachingAllocator`` becomes ``HIPCachingAllocator``, streams and guards become the
  ``...MasqueradingAsCUDA`` classes, headers move to ``c10/hip`` and ``ATen/hip``;
* hipify v2 (torch >= 2.11): CUDA class and namespace names stay (ROCm torch declares them), only headers
  and CUDA runtime API calls are renamed.

After hipify, the output is checked for CUDA spellings the ROCm torch of that generation does not declare
(``unmapped()``); the build stops with the list instead of failing later in the compiler. torch is imported
only when hipifying, so tests can import this file without torch.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

# Sources compiled into the DCU variant in hipified form (paths relative to csrc/).
DCU_SOURCES = ("runtime/cuda.cpp",)

# CUDA spellings that may remain in hipified output, whatever the generation: the device type and dispatch
# key (DTK's torch keeps HIP devices under CUDA), the Masquerading classes of hipify v1, torch's CUDA-named
# ATen namespaces that ROCm torch keeps (at::cuda::detail::getDefaultCUDAGenerator, createCUDAGenerator),
# and this project's own build macros.
ALLOWED = (
    r"DeviceType::CUDA",
    r"DispatchKey::CUDA",
    r"\w*MasqueradingAsCUDA\w*",
    r"at::cuda::detail::(?:getDefaultCUDAGenerator|createCUDAGenerator)",
    r"TORCH_FL_WITH_CUDA",
)

# Spellings that must be gone after hipify of either generation: CUDA headers, the CUDA runtime and driver
# APIs and their types, CUDA toolkit libraries, and CUDA-only macros.
FORBIDDEN_ALWAYS = (
    (
        r"#\s*include\s*[<\"](?:c10/cuda/|ATen/cuda/|ATen/native/cuda/|cuda_runtime|cuda\.h|cuda_fp16|cublas|cudnn|"
        r"nccl\.h|curand|cusparse|cusolver|nvrtc|nvToolsExt)[^>\"]*[>\"]",
        "a CUDA header",
    ),
    (r"\bcu(?:da|blas|blasLt|dnn|rand|sparse|solver|fft)[A-Z]\w*", "a CUDA runtime/library API"),
    (r"\bcu(?:Init|Ctx\w+|Device\w+|Module\w+|Launch\w+|Stream\w+|Event\w+|Mem\w+)\b", "a CUDA driver API"),
    (r"\bnccl[A-Z]\w*", "an NCCL API (RCCL keeps the nccl names only through hipify's rccl mapping)"),
    (
        r"\b(?:CUDA_VERSION|__CUDA_ARCH__|__CUDACC__|USE_CUDA|C10_CUDA_CHECK|C10_CUDA_KERNEL_LAUNCH_CHECK)\b",
        "a CUDA-only macro",
    ),
)

# Spellings hipify v1 renames in torch's own headers, so they must not survive in v1 output either. (v2 keeps
# the CUDA names in ROCm torch's headers, so the same spellings are right there.)
FORBIDDEN_V1 = (
    (r"\bc10::cuda::", "c10::cuda is c10::hip in a hipify-v1 ROCm torch"),
    (
        r"\b(?:CUDACachingAllocator|CUDAAllocator|CUDAGuard|OptionalCUDAGuard|CUDAStreamGuard|CUDAStream|"
        r"getCurrentCUDAStream|getDefaultCUDAStream|setCurrentCUDAStream|CUDAEvent)\b",
        "a c10/cuda class or function that a hipify-v1 ROCm torch only declares under a HIP name",
    ),
)


@dataclass(frozen=True)
class Leftover:
    line: int
    text: str
    why: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.text!r} ({self.why})"


def strip_comments(source: str) -> str:
    """``source`` with // and /* */ comments blanked (line numbers kept; string literals are left alone)."""
    out: list[str] = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c == '"':
            j = i + 1
            while j < n and source[j] != '"':
                j += 2 if source[j] == "\\" else 1
            out.append(source[i : j + 1])
            i = j + 1
        elif source.startswith("//", i):
            j = source.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in source[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def generation(version: str) -> int:
    """The hipify generation from ``torch.utils.hipify.__version__`` ("1.0.0" -> 1, "2.0.0" -> 2)."""
    try:
        return int(version.split(".")[0])
    except ValueError:
        return 1


def unmapped(hipified: str, gen: int) -> list[Leftover]:
    """CUDA spellings left in hipified source that the ROCm torch of hipify generation ``gen`` lacks."""
    code = strip_comments(hipified)
    allowed = re.compile("|".join(ALLOWED))
    rules = FORBIDDEN_ALWAYS + (FORBIDDEN_V1 if gen < 2 else ())
    found: list[Leftover] = []
    for number, line in enumerate(code.splitlines(), start=1):
        masked = allowed.sub(lambda m: "_" * len(m.group(0)), line)
        for pattern, why in rules:
            for m in re.finditer(pattern, masked):
                found.append(Leftover(number, line[m.start() : m.end()].strip(), why))
    return found


_UNPACKED_HIPIFY: dict[Path, tuple[ModuleType, int]] = {}


def load_hipify(torch_root: Path | None = None) -> tuple[ModuleType, int]:
    """torch's ``hipify_python`` module and its generation: the installed torch's, or the one under
    ``torch_root/torch/utils/hipify`` (an unpacked torch wheel, so another torch line's hipify runs without that
    torch being installed or importable). The unpacked one loads under a name of its own and leaves
    ``torch.utils.hipify`` alone; it imports nothing outside its directory."""
    if torch_root is None:
        os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")  # never import an installed torch_fl here
        import torch.utils.hipify as th
        from torch.utils.hipify import hipify_python

        return hipify_python, generation(getattr(th, "__version__", "1.0.0"))
    package = (torch_root / "torch" / "utils" / "hipify").resolve()
    if package not in _UNPACKED_HIPIFY:
        if not (package / "hipify_python.py").is_file():
            raise FileNotFoundError(f"hipify_sources: no torch/utils/hipify/hipify_python.py under {torch_root}")
        name = f"_torch_fl_unpacked_hipify_{len(_UNPACKED_HIPIFY)}"
        spec = importlib.util.spec_from_file_location(
            name, package / "__init__.py", submodule_search_locations=[str(package)]
        )
        assert spec is not None and spec.loader is not None
        top = importlib.util.module_from_spec(spec)
        sys.modules[name] = top  # before exec: its relative imports look the package up by name
        spec.loader.exec_module(top)
        hipify_python = importlib.import_module(f"{name}.hipify_python")
        _UNPACKED_HIPIFY[package] = (hipify_python, generation(getattr(top, "__version__", "1.0.0")))
    return _UNPACKED_HIPIFY[package]


def hipify(
    csrc: Path, sources: Iterable[str], work: Path, torch_root: Path | None = None
) -> tuple[dict[str, Path], int]:
    """Run torch's hipify (``load_hipify(torch_root)``) on a copy of ``csrc`` in ``work``; returns
    ({source: hipified file}, generation)."""
    hipify_python, gen = load_hipify(torch_root)

    tree = work / "csrc"
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(csrc, tree, ignore=shutil.ignore_patterns("__pycache__", "*.py", "*.pyc"))
    wanted = [str(tree / s) for s in sources]
    for w in wanted:
        if not Path(w).is_file():
            raise FileNotFoundError(f"hipify_sources: {w} does not exist")
    results = hipify_python.hipify(
        project_directory=str(tree),
        output_directory=str(tree),
        includes=wanted,
        header_include_dirs=[str(tree)],
        is_pytorch_extension=True,
        show_progress=False,
    )
    out: dict[str, Path] = {}
    for source, w in zip(sources, wanted, strict=True):
        res = results.get(os.path.abspath(w))
        path = getattr(res, "hipified_path", None) if res is not None else None
        # an unchanged file is "skipped" with hipified_path set to the file itself
        out[source] = Path(path) if path else Path(w)
    return out, gen


def write_whole(path: Path, text: str) -> None:
    """``text`` at ``path``, never half of it: an interrupted build must not leave a truncated source that looks
    newer than its inputs. A product build step, so it needs nothing from the repository's tooling."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csrc", type=Path, required=True, help="the csrc/ directory")
    ap.add_argument("--output", type=Path, required=True, help="where the hipified source is written")
    ap.add_argument("source", help="the source to hipify, relative to csrc/ (e.g. runtime/cuda.cpp)")
    ap.add_argument(
        "--torch-root",
        type=Path,
        default=None,
        help="an unpacked torch wheel (holding torch/utils/hipify) whose hipify to use; default: the installed torch",
    )
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="torch-fl-hipify-") as tmp:
        files, gen = hipify(args.csrc.resolve(), [args.source], Path(tmp), args.torch_root)
        text = files[args.source].read_text(encoding="utf-8")
    bad = unmapped(text, gen)
    if bad:
        print(
            f"hipify_sources: {args.source} still has CUDA spellings after hipify v{gen} (torch's hipify does not "
            "map them for this torch; write them as spellings it maps, see csrc/hip/hipify_sources.py):",
            file=sys.stderr,
        )
        for b in bad:
            print(f"  {b}", file=sys.stderr)
        return 1
    write_whole(args.output, text)
    print(f"hipify_sources: {args.source} -> {args.output} (hipify v{gen})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
