// The sparse and quantized refusals (layouts.h): boxed fallbacks on flagos's sparse and quantized dispatch keys, so
// that an op with such a flagos argument, or such a factory on flagos, names the limitation instead of a missing
// 'Sparseflagos' or 'Quantizedflagos' kernel.
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
  // a sparse gradient is made inside backward(), where the user's way out is the layer's option
  if (layout != c10::Layout::Mkldnn) {
    msg << " For sparse gradients, build nn.Embedding or nn.EmbeddingBag with sparse=False.";
  }
  TORCH_CHECK_NOT_IMPLEMENTED(false, msg.str());
}

void refuse_quantized(const std::string& what) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, what, ": quantized tensors are not supported on flagos (flagos tensors carry ",
      "no quantizer): quantize and run quantized ops on the host (build the tensor there, or .cpu() first), or keep ",
      "the flagos tensor in a floating dtype (.dequantize() on the host, then .to('flagos')).");
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

void refuse_quantized_op(const c10::OperatorHandle& op, torch::jit::Stack*) {
  refuse_quantized(c10::toString(op.operator_name()));
}

} // namespace layouts
} // namespace torch_fl

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&torch_fl::layouts::refuse_sparse>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&torch_fl::layouts::refuse_sparse>());
}

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&torch_fl::layouts::refuse_quantized_op>());
}
