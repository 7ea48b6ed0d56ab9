// The autograd fallback of the PrivateUse1 key, for the torch lines that register none (torch_compat.h names
// them). An op with no autograd kernel of its own (a custom op with only a CPU kernel, a CompositeImplicitAutograd
// op with a flagos kernel) reaches AutogradPrivateUse1 with a flagos tensor; with no kernel there, the call
// fails, where torch 2.10 and later run their basic autograd fallback, as for CPU and CUDA. This registers the
// same fallback, so every torch line sees one behaviour.
#include "compat/torch_compat.h"

#if !TORCH_FL_TORCH_HAS_PRIVATEUSE1_AUTOGRAD_FALLBACK

#include <ATen/core/VariableHooksInterface.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DispatchKeySet.h>
#include <torch/library.h>

namespace torch_fl {
namespace {

void autograd_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  // A torch without autograd (no variable hooks) goes straight to the kernel, as torch's own fallback does.
  if (!at::impl::HasVariableHooks()) {
    op.redispatchBoxed(keys & c10::after_autograd_keyset, stack);
    return;
  }
  at::impl::GetVariableHooks()->basic_autograd_not_implemented_fallback(op, keys, stack);
}

} // namespace

TORCH_LIBRARY_IMPL(_, AutogradPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&autograd_fallback>());
}

} // namespace torch_fl

#endif
