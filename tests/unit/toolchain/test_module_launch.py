"""The replay's kernel launch (csrc/runtime/module_launch.cpp) compiled and run without torch, for both vendors.

The file is torch-free so that its HIP spelling is compiled here for real with Debian's hipcc (``HIP_PLATFORM=amd``,
warnings as errors) against Debian's HIP runtime, where no HIP build of torch exists; the DCU wheel compiles the
same file with DTK's compiler. A small driver calls the launch with no device present: the HIP runtime must answer
with an error that names hipModuleLaunchKernel, and the CUDA spelling (any C++ compiler) must say that the driver
library cannot be loaded. Needs ``hipcc`` and ``libamdhip64-dev``; without them the HIP test skips, except under CI
(CI=true), where that is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from buildtest_support import REPO

CSRC = REPO / "csrc"
SOURCE = CSRC / "runtime" / "module_launch.cpp"
DRIVER = r"""
#include "runtime/module_launch.h"
#include <cstdio>
int main() {
  torch_fl::ModuleLaunch launch;  // no function: whatever the driver, the launch must fail and say why
  launch.grid[0] = 1;
  launch.block[0] = 32;
  void* params[1] = {nullptr};
  const std::string problem = torch_fl::launch_module_function(launch, nullptr, params);
  std::printf("entry: %s\nproblem: %s\n", torch_fl::module_launch_entry().c_str(), problem.c_str());
  return problem.empty() ? 1 : 0;
}
"""


def _build_and_run(compiler: list[str], tmp_path: Path, extra: list[str], env: dict[str, str]) -> str:
    driver = tmp_path / "driver.cpp"
    driver.write_text(DRIVER)
    out = tmp_path / "launch-check"
    cmd = [
        *compiler,
        "-std=c++17",
        "-O1",
        "-Wall",
        "-Wextra",
        "-Werror",
        f"-I{CSRC}",
        *extra,
        "-o",
        str(out),
        str(driver),
        str(SOURCE),
        "-ldl",
    ]
    res = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, check=False)
    assert res.returncode == 0, f"compile failed: {' '.join(cmd)}\n{res.stdout}\n{res.stderr}"
    run = subprocess.run(
        [str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.endswith("_VISIBLE_DEVICES")},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def test_hip_launch_compiles_with_hipcc_and_reports_the_runtime_error(tmp_path):
    hipcc = shutil.which("hipcc")
    if hipcc is None:
        if os.environ.get("CI") == "true":
            pytest.fail("hipcc is not installed: CI must compile the HIP launch (.ci/run: apt-get install hipcc)")
        pytest.skip("hipcc not installed (apt-get install hipcc libamdhip64-dev)")
    out = _build_and_run([hipcc, "--offload-arch=gfx906"], tmp_path, ["-DTORCH_FL_WITH_HIP"], {"HIP_PLATFORM": "amd"})
    assert "entry: hipModuleLaunchKernel (HIP runtime)" in out
    assert "problem: hipModuleLaunchKernel: " in out  # no DCU here: the runtime's own message follows


def test_cuda_launch_says_when_the_driver_library_is_missing(tmp_path):
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        if os.environ.get("CI") == "true":
            pytest.fail("no C++ compiler: CI builds the wheel on the host and must have one")
        pytest.skip("no C++ compiler")
    if any(
        Path(d, "libcuda.so.1").exists() for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/nvidia/lib64")
    ):
        pytest.skip("this machine has a CUDA driver: the missing-driver message cannot be shown")
    out = _build_and_run([cxx], tmp_path, [], {})
    assert "entry: cuLaunchKernel (libcuda.so.1)" in out
    assert "problem: the CUDA driver library libcuda.so.1 cannot be loaded" in out
