// Unboxed router entries for what a training step runs besides its forward:
// in-place updates, out= forms, backward kernels and the optimizers' list ops
// (fast_kernel.h says what the entry does). Registered in a unit of their own
// so the two halves compile side by side.
#include "dispatch/fast_kernel.h"

#include <ATen/ops/_foreach_add_ops.h>
#include <ATen/ops/_foreach_addcdiv_ops.h>
#include <ATen/ops/_foreach_addcmul_ops.h>
#include <ATen/ops/_foreach_div_ops.h>
#include <ATen/ops/_foreach_lerp_ops.h>
#include <ATen/ops/_foreach_mul_ops.h>
#include <ATen/ops/_foreach_norm_ops.h>
#include <ATen/ops/_foreach_sqrt_ops.h>
#include <ATen/ops/_foreach_zero_ops.h>
#include <ATen/ops/_fused_adamw_ops.h>
#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/addcdiv_ops.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/fill_ops.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/lerp_ops.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/native_batch_norm_backward_ops.h>
#include <ATen/ops/native_batch_norm_ops.h>
#include <ATen/ops/native_layer_norm_backward_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/select_backward_ops.h>
#include <ATen/ops/sigmoid_backward_ops.h>
#include <ATen/ops/sqrt_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/tanh_backward_ops.h>
#include <ATen/ops/threshold_backward_ops.h>
#include <ATen/ops/where_ops.h>
#include <ATen/ops/zero_ops.h>

namespace torch_fl {

using fast::register_fast;

// The same rule as fast_ops.cpp: each op has an autograd formula of its own.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // in-place: gradient accumulation, optimizers without _foreach_, activations
  register_fast<at::_ops::add__Tensor>(m, "add_.Tensor");
  register_fast<at::_ops::sub__Tensor>(m, "sub_.Tensor");
  register_fast<at::_ops::mul__Tensor>(m, "mul_.Tensor");
  register_fast<at::_ops::mul__Scalar>(m, "mul_.Scalar");
  register_fast<at::_ops::div__Tensor>(m, "div_.Tensor");
  register_fast<at::_ops::addcmul_>(m, "addcmul_");
  register_fast<at::_ops::addcdiv_>(m, "addcdiv_");
  register_fast<at::_ops::lerp__Scalar>(m, "lerp_.Scalar");
  register_fast<at::_ops::relu_>(m, "relu_");
  register_fast<at::_ops::fill__Scalar>(m, "fill_.Scalar");
  register_fast<at::_ops::zero_>(m, "zero_");
  // out=
  register_fast<at::_ops::add_out>(m, "add.out");
  register_fast<at::_ops::mul_out>(m, "mul.out");
  register_fast<at::_ops::mm_out>(m, "mm.out");
  register_fast<at::_ops::where_self_out>(m, "where.self_out");
  // backward kernels
  register_fast<at::_ops::threshold_backward>(m, "threshold_backward");
  register_fast<at::_ops::gelu_backward>(m, "gelu_backward");
  register_fast<at::_ops::sigmoid_backward>(m, "sigmoid_backward");
  register_fast<at::_ops::tanh_backward>(m, "tanh_backward");
  register_fast<at::_ops::_softmax_backward_data>(m, "_softmax_backward_data");
  register_fast<at::_ops::_log_softmax_backward_data>(m, "_log_softmax_backward_data");
  register_fast<at::_ops::native_layer_norm_backward>(m, "native_layer_norm_backward");
  register_fast<at::_ops::native_batch_norm>(m, "native_batch_norm");
  register_fast<at::_ops::native_batch_norm_backward>(m, "native_batch_norm_backward");
  register_fast<at::_ops::select_backward>(m, "select_backward");
  register_fast<at::_ops::sqrt>(m, "sqrt");
  // the list ops of torch.optim (foreach and fused) and clip_grad_norm_
  register_fast<at::_ops::_foreach_add__Scalar>(m, "_foreach_add_.Scalar");
  register_fast<at::_ops::_foreach_add__List>(m, "_foreach_add_.List");
  register_fast<at::_ops::_foreach_mul__Scalar>(m, "_foreach_mul_.Scalar");
  register_fast<at::_ops::_foreach_mul__Tensor>(m, "_foreach_mul_.Tensor");
  register_fast<at::_ops::_foreach_div__ScalarList>(m, "_foreach_div_.ScalarList");
  register_fast<at::_ops::_foreach_lerp__Scalar>(m, "_foreach_lerp_.Scalar");
  register_fast<at::_ops::_foreach_addcmul__Scalar>(m, "_foreach_addcmul_.Scalar");
  register_fast<at::_ops::_foreach_addcdiv__ScalarList>(m, "_foreach_addcdiv_.ScalarList");
  register_fast<at::_ops::_foreach_sqrt>(m, "_foreach_sqrt");
  register_fast<at::_ops::_foreach_zero_>(m, "_foreach_zero_");
  register_fast<at::_ops::_foreach_norm_Scalar>(m, "_foreach_norm.Scalar");
  register_fast<at::_ops::_fused_adamw_>(m, "_fused_adamw_");
}

} // namespace torch_fl
