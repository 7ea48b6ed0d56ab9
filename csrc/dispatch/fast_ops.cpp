// Unboxed router entries for the functional ops that dominate inference and
// training forwards (fast_kernel.h says what the entry does).
#include "dispatch/fast_kernel.h"

#include <ATen/ops/_index_put_impl_ops.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_softmax_ops.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/argmax_ops.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/cat_ops.h>
#include <ATen/ops/clone_ops.h>
#include <ATen/ops/cos_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/index_copy_ops.h>
#include <ATen/ops/index_select_ops.h>
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
#include <ATen/ops/sin_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/sum_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/where_ops.h>

namespace torch_fl {

// Functional ops that dominate inference and training steps. Each must have its
// own autograd formula (never CompositeImplicitAutograd, which torch decomposes
// above the device); tests/routing/test_fast_path.py checks that, and that
// every op here still honours its route.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  namespace ops = at::_ops;
  fast::register_fast<ops::add_Tensor, ops::sub_Tensor, ops::mul_Tensor, ops::div_Tensor, ops::where_self,
      ops::pow_Tensor_Scalar>(m);
  fast::register_fast<ops::neg, ops::exp, ops::rsqrt, ops::tanh, ops::sigmoid, ops::relu, ops::silu, ops::gelu>(m);
  fast::register_fast<ops::mm, ops::bmm, ops::addmm>(m);
  fast::register_fast<ops::sum_dim_IntList, ops::mean_dim, ops::_softmax, ops::_log_softmax, ops::native_layer_norm,
      ops::mse_loss>(m);
  // clone: torch's generic body would allocate on flagos and copy through copy_ and _copy_from (two fresh
  // aliases); as one routed call it is the vendor's clone on one alias. Autograd clones every gradient that
  // does not keep its parameter's layout.
  fast::register_fast<ops::clone>(m);
  // A decoder's decode step at batch 1 is thousands of tiny calls, each paying the boxed router's stack over the
  // typed entry's cost: the embedding's index_select, the static cache's index_copy_, greedy argmax, and the
  // rotary embedding's cos, sin and cat (rotate_half).
  fast::register_fast<ops::index_select, ops::index_copy_, ops::argmax, ops::cos, ops::sin, ops::cat>(m);
  // The static cache's write cache[:, :, position] = key when it takes index_put_ (torch's index_put_ is this op
  // above the device).
  fast::register_fast<ops::_index_put_impl_>(m);
}

} // namespace torch_fl
