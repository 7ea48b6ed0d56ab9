// Launching one function of a loaded GPU module (a compiled Triton kernel) through the vendor driver.
//
// Torch-free on purpose: the HIP spelling is compile-checked with Debian's hipcc in CI, where no HIP build of
// torch exists (tests/unit/test_module_launch_hip.py). CUDA's cuLaunchKernel and HIP's hipModuleLaunchKernel
// take the same arguments, so one description serves both.
#pragma once

#include <cstdint>
#include <string>

namespace torch_fl {

struct ModuleLaunch {
  void* function = nullptr; // CUfunction / hipFunction_t; under emulation a host function (runtime/emulation.cpp)
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t shared_bytes = 0;
};

// Launch on `stream` (cudaStream_t / hipStream_t) with `params` (one pointer per kernel parameter, as the
// driver expects). Returns an empty string on success, else the driver's message.
std::string launch_module_function(const ModuleLaunch& launch, void* stream, void** params);

// The driver entry this build launches through ("cuLaunchKernel from libcuda.so.1", ...), for diagnostics.
std::string module_launch_entry();

} // namespace torch_fl
