// Unboxed router entries for what a training step runs besides its forward:
// in-place updates, out= forms and backward kernels (fast_kernel.h says what the
// entry does; the optimizers' list ops are fast_ops_optim.cpp's). A unit of its
// own, so the parts compile side by side.
#include "dispatch/fast_kernel.h"

#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale_ops.h>
#include <ATen/ops/_amp_update_scale_ops.h>
#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/addcdiv_ops.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/baddbmm_ops.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/embedding_dense_backward_ops.h>
#include <ATen/ops/fill_ops.h>
#include <ATen/ops/gather_ops.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/lerp_ops.h>
#include <ATen/ops/max_pool2d_with_indices_backward_ops.h>
#include <ATen/ops/max_pool2d_with_indices_ops.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/mse_loss_backward_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/native_batch_norm_backward_ops.h>
#include <ATen/ops/native_batch_norm_ops.h>
#include <ATen/ops/native_layer_norm_backward_ops.h>
#include <ATen/ops/nll_loss_backward_ops.h>
#include <ATen/ops/nll_loss_forward_ops.h>
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

// The same rule as fast_ops.cpp: each op has an autograd formula of its own.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  namespace ops = at::_ops;
  // in-place: gradient accumulation, optimizers without _foreach_, activations
  fast::register_fast<ops::add__Tensor, ops::sub__Tensor, ops::mul__Tensor, ops::mul__Scalar, ops::div__Tensor>(m);
  fast::register_fast<ops::addcmul_, ops::addcdiv_, ops::lerp__Scalar, ops::relu_, ops::fill__Scalar, ops::zero_>(m);
  // out= (mm.out, bmm.out and addmm.out are the matmuls of an Inductor graph)
  fast::register_fast<ops::add_out, ops::mul_out, ops::mm_out, ops::bmm_out, ops::addmm_out, ops::baddbmm_out,
      ops::where_self_out>(m);
  // backward kernels
  fast::register_fast<ops::threshold_backward, ops::gelu_backward, ops::sigmoid_backward, ops::tanh_backward>(m);
  fast::register_fast<ops::_softmax_backward_data, ops::_log_softmax_backward_data,
      ops::native_layer_norm_backward>(m);
  fast::register_fast<ops::native_batch_norm, ops::native_batch_norm_backward, ops::select_backward,
      ops::mse_loss_backward, ops::sqrt>(m);
  // a step's once-per-step kernels: the loss, the embedding's and the pooling's gradients, GradScaler's checks
  fast::register_fast<ops::nll_loss_forward, ops::nll_loss_backward, ops::gather, ops::embedding_dense_backward,
      ops::max_pool2d_with_indices, ops::max_pool2d_with_indices_backward>(m);
  fast::register_fast<ops::_amp_foreach_non_finite_check_and_unscale_, ops::_amp_update_scale_, ops::fill__Tensor>(m);
}

} // namespace torch_fl
