// Unboxed router entries for what a training step runs besides its forward:
// in-place updates, out= forms and backward kernels (fast_kernel.h says what the
// entry does; the optimizers' list ops are fast_ops_optim.cpp's). A unit of its
// own, so the parts compile side by side.
#include "dispatch/fast_kernel.h"

#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/addcdiv_ops.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/baddbmm_ops.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/fill_ops.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/lerp_ops.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/mse_loss_backward_ops.h>
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
  register_fast<at::_ops::add__Tensor>(m);
  register_fast<at::_ops::sub__Tensor>(m);
  register_fast<at::_ops::mul__Tensor>(m);
  register_fast<at::_ops::mul__Scalar>(m);
  register_fast<at::_ops::div__Tensor>(m);
  register_fast<at::_ops::addcmul_>(m);
  register_fast<at::_ops::addcdiv_>(m);
  register_fast<at::_ops::lerp__Scalar>(m);
  register_fast<at::_ops::relu_>(m);
  register_fast<at::_ops::fill__Scalar>(m);
  register_fast<at::_ops::zero_>(m);
  // out=
  register_fast<at::_ops::add_out>(m);
  register_fast<at::_ops::mul_out>(m);
  register_fast<at::_ops::mm_out>(m);
  register_fast<at::_ops::bmm_out>(m); // with mm.out and addmm.out, the matmuls of an Inductor graph
  register_fast<at::_ops::addmm_out>(m);
  register_fast<at::_ops::baddbmm_out>(m);
  register_fast<at::_ops::where_self_out>(m);
  // backward kernels
  register_fast<at::_ops::threshold_backward>(m);
  register_fast<at::_ops::gelu_backward>(m);
  register_fast<at::_ops::sigmoid_backward>(m);
  register_fast<at::_ops::tanh_backward>(m);
  register_fast<at::_ops::_softmax_backward_data>(m);
  register_fast<at::_ops::_log_softmax_backward_data>(m);
  register_fast<at::_ops::native_layer_norm_backward>(m);
  register_fast<at::_ops::native_batch_norm>(m);
  register_fast<at::_ops::native_batch_norm_backward>(m);
  register_fast<at::_ops::select_backward>(m);
  register_fast<at::_ops::mse_loss_backward>(m);
  register_fast<at::_ops::sqrt>(m);
}

} // namespace torch_fl
