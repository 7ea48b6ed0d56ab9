// The unboxed router entry for copies between flagos tensors: a cast (x.float(), autocast's weight casts and their
// gradients' casts back: torch's generic _to_copy allocates on flagos, then copies), a cache write, an optimizer's
// copy, `x[...] = y`.
//
// Without the entry copy_ runs torch's generic body, which redispatches to _copy_from: a second dispatch, two
// vendor views and a device guard. As one routed call it is the vendor's own copy_ on the call's aliases. A copy
// that joins the host, or carries conjugate, negative or named bits takes the generic body as before
// (data_movement.cpp settles those bits, which torch's CUDA copy gets wrong for some layouts).
#include "dispatch/fast_kernel.h"

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
struct Narrowed<at::_ops::copy_> : std::true_type {
  // Both sides flagos (two flagos devices included: the vendor copies between its devices).
  static bool takes(at::Tensor& self, const at::Tensor& src, bool) { return plain_flagos(self) && plain_flagos(src); }
  static at::Tensor& otherwise(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
    return at::native::copy_(self, src, non_blocking);
  }
};

} // namespace fast

// copy_ has an autograd formula of its own (CopyBackwards), as fast_ops.cpp requires.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  fast::register_fast<at::_ops::copy_>(m);
}

} // namespace torch_fl
