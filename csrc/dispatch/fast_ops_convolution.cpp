// Unboxed router entries for the convolution hooks. Torch reaches an out-of-tree device's convolutions through
// convolution_overrideable and convolution_backward_overrideable, whose own bodies only raise; the router runs the
// ordinary op they stand for (router.cpp, route_overrideable). Boxed, a call carries four int[] lists through the
// stack, a list object each, and a CNN step makes two calls per layer: a typed entry hands them over as they came.
// Other routes go through route_overrideable, as before.
#include "dispatch/fast_kernel.h"

#include <ATen/ops/convolution_backward_ops.h>
#include <ATen/ops/convolution_backward_overrideable_ops.h>
#include <ATen/ops/convolution_ops.h>
#include <ATen/ops/convolution_overrideable_ops.h>

namespace torch_fl {
namespace fast {

template <>
struct VendorOp<at::_ops::convolution_overrideable> {
  using target = at::_ops::convolution; // the same arguments
  static constexpr auto boxed = &route_overrideable;
  template <class... A>
  static at::Tensor call(c10::DispatchKeySet keys, A&&... args) {
    return target::redispatch(keys, std::forward<A>(args)...);
  }
};

template <>
struct VendorOp<at::_ops::convolution_backward_overrideable> {
  using target = at::_ops::convolution_backward; // takes bias_sizes fourth: None, as the boxed entry passes it
  static constexpr auto boxed = &route_overrideable;
  static std::tuple<at::Tensor, at::Tensor, at::Tensor> call(c10::DispatchKeySet keys, const at::Tensor& grad_output,
      const at::Tensor& input, const at::Tensor& weight, c10::SymIntArrayRef stride, c10::SymIntArrayRef padding,
      c10::SymIntArrayRef dilation, bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups,
      std::array<bool, 3> output_mask) {
    return target::redispatch(keys, grad_output, input, weight, std::nullopt, stride, padding, dilation, transposed,
        output_padding, std::move(groups), output_mask);
  }
};

} // namespace fast

// Their autograd formulas are the hooks' own (convolution_overrideable's backward is the backward hook).
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  fast::register_fast<at::_ops::convolution_overrideable, at::_ops::convolution_backward_overrideable>(m);
}

} // namespace torch_fl
