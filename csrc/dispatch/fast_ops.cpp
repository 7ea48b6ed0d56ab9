// Unboxed router entries for the functional ops that dominate inference and
// training forwards (fast_kernel.h says what the entry does).
#include "dispatch/fast_kernel.h"

#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_softmax_ops.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/clone_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/mse_loss_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/native_layer_norm_ops.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/pow_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/rsqrt_ops.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/silu_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/sum_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/where_ops.h>

namespace torch_fl {

using fast::register_fast;

// Functional ops that dominate inference and training steps. Each must have its
// own autograd formula (never CompositeImplicitAutograd, which torch decomposes
// above the device); tests/routing/test_fast_path.py checks that, and that
// every op here still honours its route.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_fast<at::_ops::add_Tensor>(m);
  register_fast<at::_ops::sub_Tensor>(m);
  register_fast<at::_ops::mul_Tensor>(m);
  register_fast<at::_ops::div_Tensor>(m);
  register_fast<at::_ops::where_self>(m);
  register_fast<at::_ops::pow_Tensor_Scalar>(m);
  register_fast<at::_ops::neg>(m);
  register_fast<at::_ops::exp>(m);
  register_fast<at::_ops::rsqrt>(m);
  register_fast<at::_ops::tanh>(m);
  register_fast<at::_ops::sigmoid>(m);
  register_fast<at::_ops::relu>(m);
  register_fast<at::_ops::silu>(m);
  register_fast<at::_ops::gelu>(m);
  register_fast<at::_ops::mm>(m);
  register_fast<at::_ops::bmm>(m);
  register_fast<at::_ops::addmm>(m);
  register_fast<at::_ops::sum_dim_IntList>(m);
  register_fast<at::_ops::mean_dim>(m);
  register_fast<at::_ops::_softmax>(m);
  register_fast<at::_ops::_log_softmax>(m);
  register_fast<at::_ops::native_layer_norm>(m);
  register_fast<at::_ops::mse_loss>(m);
  // clone: torch's generic body would allocate on flagos and copy through copy_ and _copy_from (two fresh
  // aliases); as one routed call it is the vendor's clone on one alias. Autograd clones every gradient that
  // does not keep its parameter's layout.
  register_fast<at::_ops::clone>(m);
}

} // namespace torch_fl
