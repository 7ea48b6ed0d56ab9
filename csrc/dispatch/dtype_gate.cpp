// The call's dtype for the dtype gate (dtype_gate.h). It reads the arguments as the router received them,
// before any re-tag, and stops at the first floating-point tensor: most calls are decided by their first one.
#include "dispatch/dtype_gate.h"

#include <optional>

namespace torch_fl {
namespace {

// The first tensor's dtype so far; `floating` once a floating-point or complex one is seen.
struct CallDtype {
  std::optional<c10::ScalarType> first;
  bool floating = false;

  void see(const at::Tensor& t) {
    if (floating || !t.defined()) return;
    const c10::ScalarType dtype = t.scalar_type();
    if (c10::isFloatingType(dtype) || c10::isComplexType(dtype)) {
      first = dtype;
      floating = true;
    } else if (!first) {
      first = dtype;
    }
  }

  void see(const c10::IValue& value) {
    if (value.isTensor()) {
      see(value.toTensor());
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorList().vec()) see(t);
    } else if (value.isList()) { // lists of optional tensors (index, index_put_)
      for (const c10::IValue& element : value.toListRef()) {
        if (element.isTensor()) see(element.toTensor());
      }
    }
  }
};

} // namespace

bool serves_call(uint64_t dtypes, const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const auto& arguments = op.schema().arguments();
  const size_t n = arguments.size();
  const auto begin = stack.end() - static_cast<std::ptrdiff_t>(n);
  CallDtype call;
  for (size_t i = 0; i < n && !call.floating; ++i) call.see(begin[static_cast<std::ptrdiff_t>(i)]);
  if (call.first) return (dtypes & dtype_bit(*call.first)) != 0;
  for (size_t i = 0; i < n; ++i) { // a factory: no tensor, its dtype is an argument
    const c10::IValue& value = begin[static_cast<std::ptrdiff_t>(i)];
    if (arguments[i].name() == "dtype" && value.isInt()) {
      return (dtypes & dtype_bit(static_cast<c10::ScalarType>(value.toInt()))) != 0;
    }
  }
  return false;
}

} // namespace torch_fl
