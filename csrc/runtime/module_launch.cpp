// The driver entry behind launch_module_function (module_launch.h). CUDA's is looked up in libcuda.so.1 when first
// used, as torch and Triton do, so the wheel links no driver library and imports on machines without one. HIP's is
// part of the HIP runtime the DCU build links anyway.
#include "runtime/module_launch.h"

#if defined(TORCH_FL_WITH_HIP)
#include <hip/hip_runtime.h>
#else
#include <dlfcn.h>
#endif


namespace torch_fl {

#if defined(TORCH_FL_WITH_HIP)

std::string launch_module_function(const ModuleLaunch& l, void* stream, void** params) {
  const hipError_t rc = hipModuleLaunchKernel(static_cast<hipFunction_t>(l.function), l.grid[0], l.grid[1],
      l.grid[2], l.block[0], l.block[1], l.block[2], l.shared_bytes, static_cast<hipStream_t>(stream), params,
      nullptr);
  if (rc == hipSuccess) return {};
  return std::string("hipModuleLaunchKernel: ") + hipGetErrorString(rc);
}

std::string module_launch_entry() { return "hipModuleLaunchKernel (HIP runtime)"; }

#else

namespace {

// cuLaunchKernel's and cuGetErrorString's C signatures, with the driver's handle types as void*.
using LaunchFn = int (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
    void**, void**);
using ErrorStringFn = int (*)(int, const char**);

struct Driver {
  LaunchFn launch = nullptr;
  ErrorStringFn error_string = nullptr;
  std::string problem;
};

const Driver& driver() {
  static const Driver d = [] {
    Driver out;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      out.problem = std::string("the CUDA driver library libcuda.so.1 cannot be loaded (") + (why ? why : "?") + ")";
      return out;
    }
    out.launch = reinterpret_cast<LaunchFn>(dlsym(lib, "cuLaunchKernel"));
    out.error_string = reinterpret_cast<ErrorStringFn>(dlsym(lib, "cuGetErrorString"));
    if (out.launch == nullptr) out.problem = "libcuda.so.1 has no cuLaunchKernel";
    return out;
  }();
  return d;
}

} // namespace

std::string launch_module_function(const ModuleLaunch& l, void* stream, void** params) {
  const Driver& d = driver();
  if (d.launch == nullptr) return d.problem;
  const int rc = d.launch(l.function, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2],
      l.shared_bytes, stream, params, nullptr);
  if (rc == 0) return {};
  const char* text = nullptr;
  if (d.error_string != nullptr) d.error_string(rc, &text);
  return "cuLaunchKernel failed with CUresult " + std::to_string(rc) + (text ? std::string(" (") + text + ")" : "");
}

std::string module_launch_entry() { return "cuLaunchKernel (libcuda.so.1)"; }

#endif

} // namespace torch_fl
