// Unboxed router entries for the copies a step makes on one device: casts (x.float(), autocast's weight casts and
// their gradients' casts back) are _to_copy, and cache writes, optimizers and `x[...] = y` are copy_.
//
// Without an entry both run torch's composite kernel on flagos tensors: _to_copy allocates on flagos through the
// device guard, then copy_ redispatches to _copy_from, which views both sides as vendor tensors and copies. As one
// routed call they are the vendor's own _to_copy or copy_ on the call's aliases, so a cast costs what a relu does.
// A copy that leaves the device, joins the host, or carries conjugate, negative or named bits takes the composite
// path as before (data_movement.cpp settles those bits, which torch's CUDA copy gets wrong for some layouts).
#include "dispatch/fast_kernel.h"

#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/_to_copy_ops.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/copy_ops.h>

namespace torch_fl {
namespace {

// Named tensors exist on the torch lines before 2.13 only: asked where Tensor has the question.
template <class T>
auto named(const T& t, int) -> decltype(t.has_names()) {
  return t.has_names();
}
template <class T>
bool named(const T&, long) {
  return false;
}

bool plain_flagos(const at::Tensor& t) {
  return is_flagos(t) && !t.is_conj() && !t.is_neg() && !named(t, 0);
}

} // namespace

namespace fast {

template <>
struct Narrowed<at::_ops::_to_copy> : std::true_type {
  // A cast or copy that stays on self's flagos device, strided and unpinned.
  static bool takes(const at::Tensor& self, std::optional<c10::ScalarType>, std::optional<c10::Layout> layout,
      std::optional<c10::Device> device, std::optional<bool> pin_memory, bool, std::optional<c10::MemoryFormat>) {
    if (!plain_flagos(self) || layout.value_or(c10::kStrided) != c10::kStrided || pin_memory.value_or(false)) {
      return false;
    }
    if (!device.has_value()) return true;
    return device->is_privateuseone() &&
        (device->has_index() ? device->index() : runtime().current_device()) == self.device().index();
  }
  static at::Tensor otherwise(const at::Tensor& self, std::optional<c10::ScalarType> dtype,
      std::optional<c10::Layout> layout, std::optional<c10::Device> device, std::optional<bool> pin_memory,
      bool non_blocking, std::optional<c10::MemoryFormat> memory_format) {
    return at::native::_to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format);
  }
};

template <>
struct Narrowed<at::_ops::copy_> : std::true_type {
  // Both sides flagos (two flagos devices included: the vendor copies between its devices).
  static bool takes(at::Tensor& self, const at::Tensor& src, bool) { return plain_flagos(self) && plain_flagos(src); }
  static at::Tensor& otherwise(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
    return at::native::copy_(self, src, non_blocking);
  }
};

} // namespace fast

// Both have autograd formulas of their own (ToCopyBackward, CopyBackwards), as fast_ops.cpp requires.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  fast::register_fast<at::_ops::_to_copy, at::_ops::copy_>(m);
}

} // namespace torch_fl
