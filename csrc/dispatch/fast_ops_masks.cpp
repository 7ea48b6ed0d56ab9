// Unboxed router entries for the small ops around a model's matmuls: the position ids, causal, padding and
// sliding-window masks that a decoder builds for every token (arange, comparisons, bitwise and, roll, masked
// fills), and the routing of a mixture of experts (topk, nonzero, index, index_add_, scatter_). In a training step
// each runs a few times; in greedy decoding at batch 1 several times per token, where the boxed router's stack
// costs more than the tiny kernel (fast_kernel.h says what the entry does).
#include "dispatch/fast_kernel.h"

#include <ATen/ops/_local_scalar_dense_ops.h>
#include <ATen/ops/abs_ops.h>
#include <ATen/ops/all_ops.h>
#include <ATen/ops/any_ops.h>
#include <ATen/ops/arange_ops.h>
#include <ATen/ops/bitwise_and_ops.h>
#include <ATen/ops/bitwise_not_ops.h>
#include <ATen/ops/bitwise_or_ops.h>
#include <ATen/ops/clamp_ops.h>
#include <ATen/ops/cumsum_ops.h>
#include <ATen/ops/eq_ops.h>
#include <ATen/ops/ge_ops.h>
#include <ATen/ops/gt_ops.h>
#include <ATen/ops/index_add_ops.h>
#include <ATen/ops/index_ops.h>
#include <ATen/ops/isneginf_ops.h>
#include <ATen/ops/le_ops.h>
#include <ATen/ops/log_ops.h>
#include <ATen/ops/lt_ops.h>
#include <ATen/ops/masked_fill_ops.h>
#include <ATen/ops/maximum_ops.h>
#include <ATen/ops/minimum_ops.h>
#include <ATen/ops/ne_ops.h>
#include <ATen/ops/nonzero_ops.h>
#include <ATen/ops/roll_ops.h>
#include <ATen/ops/scatter_ops.h>
#include <ATen/ops/topk_ops.h>
#include <ATen/ops/tril_ops.h>
#include <ATen/ops/triu_ops.h>

namespace torch_fl {

// The same rule as fast_ops.cpp: each op has an autograd formula of its own.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  namespace ops = at::_ops;
  // positions and masks
  fast::register_fast<ops::arange_start_out, ops::cumsum, ops::triu, ops::tril, ops::roll, ops::masked_fill__Scalar>(m);
  fast::register_fast<ops::eq_Scalar, ops::eq_Tensor, ops::ne_Scalar, ops::lt_Scalar, ops::lt_Tensor, ops::le_Scalar,
      ops::le_Tensor, ops::gt_Scalar, ops::gt_Tensor, ops::ge_Scalar, ops::ge_Tensor>(m);
  fast::register_fast<ops::bitwise_and_Tensor, ops::bitwise_or_Tensor, ops::bitwise_not, ops::all_dim, ops::any_dim,
      ops::isneginf, ops::minimum, ops::maximum, ops::clamp, ops::abs_out, ops::log>(m);
  // a mixture of experts' routing; _local_scalar_dense is .item() and .tolist(), which its loop over the experts
  // calls per token
  fast::register_fast<ops::topk, ops::nonzero, ops::index_Tensor, ops::index_add_, ops::scatter__value,
      ops::scatter__src, ops::scatter_src, ops::_local_scalar_dense>(m);
}

} // namespace torch_fl
