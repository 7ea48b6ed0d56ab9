// Automatic mixed precision on flagos: torch.autocast("flagos", dtype=...) casts with the op lists torch keeps
// for every accelerator (ATen/autocast_mode.h; CUDA, XPU and MPS use the same lists). The lists are torch's
// macros, never a copy of their contents, so they follow the torch line the wheel is built against.
#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

namespace torch_fl {
namespace {

// Ops on no list run unchanged. torch registers this fallthrough itself for some keys; register it only where
// this torch has not, so a later torch that adds it does not make two registrations collide.
const bool g_fallthrough = [] {
  if (!c10::Dispatcher::singleton().hasBackendFallbackForDispatchKey(c10::DispatchKey::AutocastPrivateUse1)) {
    static auto* lib = new torch::Library(torch::Library::IMPL, "_", c10::DispatchKey::AutocastPrivateUse1,
        __FILE__, __LINE__);
    lib->fallback(torch::CppFunction::makeFallthrough());
  }
  return true;
}();

} // namespace

// AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE spells its signatures with at:: names, unqualified, and which names
// it uses differs between torch lines: the registration sees all of namespace at.
namespace lists {
using namespace at;

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define FLAGOS_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define FLAGOS_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define FLAGOS_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define FLAGOS_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_LOWER_PRECISION_FP(FLAGOS_LOWER_PRECISION_FP)
  AT_FORALL_FP32(FLAGOS_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(FLAGOS_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(FLAGOS_PROMOTE)
#undef FLAGOS_LOWER_PRECISION_FP
#undef FLAGOS_FP32
#undef FLAGOS_FP32_SET_OPT_DTYPE
#undef FLAGOS_PROMOTE
}

} // namespace lists
} // namespace torch_fl
