// The sparse refusal (layouts.h): boxed fallbacks on flagos's sparse dispatch keys, so that an op with a sparse
// flagos argument or a sparse factory on flagos names the limitation instead of a missing 'Sparseflagos' kernel.
#include "dispatch/layouts.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <sstream>

namespace torch_fl {

void refuse_layout(const std::string& what, c10::Layout layout) {
  std::ostringstream msg;
  msg << what << ": " << layout << " tensors are not supported on flagos (flagos tensors are strided): keep them "
      << "on the host (build them there, or .cpu() first), or use a dense tensor (.to_dense()).";
  TORCH_CHECK_NOT_IMPLEMENTED(false, msg.str());
}

namespace layouts {

void refuse_sparse(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  c10::Layout layout = c10::Layout::Sparse;
  for (const c10::IValue& v : *stack) {
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().layout() != c10::Layout::Strided) {
      layout = v.toTensor().layout();
      break;
    }
  }
  refuse_layout(c10::toString(op.operator_name()), layout);
}

} // namespace layouts
} // namespace torch_fl

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&torch_fl::layouts::refuse_sparse>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&torch_fl::layouts::refuse_sparse>());
}
