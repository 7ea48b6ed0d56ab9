// The gate's tests of a call (dtype_gate.h). They read the arguments as the router received them, before any
// re-tag: the dtype stops at the first floating-point tensor (most calls are decided by their first one); the
// input classes read every tensor's metadata and stop at the first one that falls in a refused class.
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

// The input classes a route refuses, tested tensor by tensor: `refused` holds the kServes* bits that are clear.
struct CallInputs {
  uint64_t refused;
  c10::IntArrayRef shape; // the first tensor's, once `shaped`
  bool shaped = false;
  std::optional<c10::ScalarType> dtype; // the first tensor's of one or more dimensions

  // Whether `t` keeps the call outside every refused class.
  bool fits(const at::Tensor& t) {
    if (!t.defined()) return true;
    if ((refused & kServesStrided) && !t.is_contiguous()) return false;
    if ((refused & kServes0dim) && t.dim() == 0) return false;
    if (refused & kServesBroadcast) {
      if (!shaped) {
        shape = t.sizes();
        shaped = true;
      } else if (t.sizes() != shape) {
        return false;
      }
    }
    if ((refused & kServesMixed) && t.dim() > 0) { // a 0-dim operand (a wrapped number) is the 0dim class's
      if (!dtype) {
        dtype = t.scalar_type();
      } else if (t.scalar_type() != *dtype) {
        return false;
      }
    }
    return true;
  }

  bool fits(const c10::IValue& value) {
    if (value.isTensor()) return fits(value.toTensor());
    if (value.isList()) { // Tensor[] and Tensor?[] alike, read in place
      for (const c10::IValue& element : value.toListRef()) {
        if (element.isTensor() && !fits(element.toTensor())) return false;
      }
    }
    return true;
  }
};

bool serves_dtype(uint64_t dtypes, const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
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

} // namespace

bool serves_call(uint64_t mask, const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  if ((mask & kDtypeBits) != kDtypeBits && !serves_dtype(mask, op, stack)) return false;
  if ((mask & kInputClasses) == kInputClasses) return true;
  const size_t n = op.schema().arguments().size();
  const auto begin = stack.end() - static_cast<std::ptrdiff_t>(n);
  CallInputs inputs{~mask & kInputClasses};
  for (size_t i = 0; i < n; ++i) {
    if (!inputs.fits(begin[static_cast<std::ptrdiff_t>(i)])) return false;
  }
  return true;
}

} // namespace torch_fl
