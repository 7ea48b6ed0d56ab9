// Whether a flagos tensor and another tensor may share one TensorImpl through a shallow copy
// (`param.data = other`, TensorImpl::shallow_copy_from).
//
// Why: nn.Module._apply (behind .to(), .cpu(), .half(), ...) keeps each Parameter object and swaps its
// data only when `torch._has_compatible_shallow_copy_type(param, moved)` is true; otherwise it wraps
// the moved data in a new Parameter per module, so weights tied across modules (an embedding and its
// LM head) come out as two separate parameters and train apart. torch's own rule
// (TensorImpl::has_compatible_shallow_copy_type) accepts only the dense backends it knows (CPU, CUDA,
// HIP, MPS, XPU, HPU, MTIA) and leaves PrivateUse1 to the backend, which answers through its own
// kernel for this aten op (see the comment above that method in c10/core/TensorImpl.h). flagos
// tensors are dense and strided like a CPU or CUDA tensor, so the answer is the same as theirs.
#include <ATen/core/Tensor.h>
#include <c10/core/DispatchKeySet.h>
#include <torch/library.h>

namespace torch_fl {

namespace {

// A dense strided tensor of flagos or of a dense backend torch accepts for shallow copies itself.
bool is_dense_strided(const at::Tensor& t) {
  constexpr auto backends = c10::DispatchKeySet({
      c10::BackendComponent::CPUBit,
      c10::BackendComponent::CUDABit,
      c10::BackendComponent::HIPBit,
      c10::BackendComponent::MPSBit,
      c10::BackendComponent::XPUBit,
      c10::BackendComponent::HPUBit,
      c10::BackendComponent::MTIABit,
      c10::BackendComponent::PrivateUse1Bit,
  });
  const c10::DispatchKeySet ks = t.key_set();
  return ks.has(c10::DispatchKey::Dense) && ks.has_any(backends) && t.layout() == c10::Layout::Strided;
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  if (self.key_set() == from.key_set() || (is_dense_strided(self) && is_dense_strided(from))) {
    return true;
  }
  // Sparse and other layouts: torch's own rule.
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

} // namespace

// Reached whenever either argument is a flagos tensor (PrivateUse1 outranks the other backends in
// the dispatch key of a mixed call); calls without one keep torch's composite kernel.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
}

} // namespace torch_fl
