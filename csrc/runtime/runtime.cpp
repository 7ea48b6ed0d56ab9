// Choosing the vendor runtime (FLAGOS_ACCELERATOR, via torch_fl._core.init), once per process.
#include "runtime/device.h"

#include <c10/util/Exception.h>

namespace torch_fl {
namespace {

Runtime* g_runtime = nullptr;

} // namespace

Runtime& runtime() {
  TORCH_CHECK(g_runtime != nullptr,
      "the flagos runtime is not initialised: import torch_fl before using the flagos device");
  return *g_runtime;
}

bool runtime_ready() { return g_runtime != nullptr; }

std::vector<std::string> built_runtimes() {
#ifdef TORCH_FL_WITH_CUDA
#ifdef TORCH_FL_WITH_HIP
  return {"dcu", "cpu"};
#else
  return {"cuda", "cpu"};
#endif
#else
  return {"cpu"};
#endif
}

void init_runtime(const std::string& name, int emulated_devices, bool trap_host_access) {
  TORCH_CHECK(g_runtime == nullptr, "the flagos runtime is already initialised as '",
      g_runtime ? g_runtime->name() : "", "'");
  TORCH_CHECK(!trap_host_access || name == "cpu", "FLAGOS_EMU_TRAP applies to the CPU emulation only, not to FLAGOS_ACCELERATOR=",
      name, " (device memory there is not host memory); unset one of the two");
  Runtime* chosen = nullptr;
  if (name == "cpu") {
    chosen = make_emulation_runtime(emulated_devices, trap_host_access);
  }
#ifdef TORCH_FL_WITH_CUDA
  else if (name == built_runtimes().front()) {
    chosen = make_cuda_runtime(name.c_str());
  }
#endif
  if (chosen == nullptr) {
    std::string valid;
    for (const auto& n : built_runtimes()) valid += (valid.empty() ? "" : ", ") + n;
    TORCH_CHECK(false, "FLAGOS_ACCELERATOR=", name, " is not supported by this build of torch_fl; ",
        "this build supports: ", valid);
  }
  g_runtime = chosen; // never freed: tensors may outlive any teardown order
  create_default_generators(*chosen);
  register_hooks();
}

} // namespace torch_fl
