// Unboxed router entries for scaled_dot_product_attention's fused kernels, forward and backward: the
// memory-efficient ones torch picks on CUDA for float32 and the flash ones of the CPU (fast_kernel.h says
// what the entry does). An op the vendor's torch lacks (efficient attention under the emulation) still
// reaches the boxed router, which names the missing kernel. A unit of its own, so it compiles beside the others.
#include "dispatch/fast_kernel.h"

#include <ATen/ops/_scaled_dot_product_efficient_attention_backward_ops.h>
#include <ATen/ops/_scaled_dot_product_efficient_attention_ops.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward_ops.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_ops.h>

namespace torch_fl {

// The same rule as fast_ops.cpp: each op has an autograd formula of its own (the backward ones are the
// formulas' kernels).
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  namespace ops = at::_ops;
  fast::register_fast<ops::_scaled_dot_product_efficient_attention,
      ops::_scaled_dot_product_efficient_attention_backward>(m);
  fast::register_fast<ops::_scaled_dot_product_flash_attention_for_cpu,
      ops::_scaled_dot_product_flash_attention_for_cpu_backward>(m);
}

} // namespace torch_fl
