// Unboxed router entries for the list ops of torch.optim (the _foreach_ forms
// of SGD, Adam(W), RMSprop, Adagrad, ... and the fused AdamW) and of
// clip_grad_norm_: one call carries every parameter, so a call's re-tag is most
// of what flagos adds to an optimizer step (fast_kernel.h says what the entry
// does). A unit of its own, so it compiles beside the others.
#include "dispatch/fast_kernel.h"

#include <ATen/ops/_foreach_add_ops.h>
#include <ATen/ops/_foreach_addcdiv_ops.h>
#include <ATen/ops/_foreach_addcmul_ops.h>
#include <ATen/ops/_foreach_div_ops.h>
#include <ATen/ops/_foreach_lerp_ops.h>
#include <ATen/ops/_foreach_maximum_ops.h>
#include <ATen/ops/_foreach_mul_ops.h>
#include <ATen/ops/_foreach_neg_ops.h>
#include <ATen/ops/_foreach_norm_ops.h>
#include <ATen/ops/_foreach_sqrt_ops.h>
#include <ATen/ops/_foreach_sub_ops.h>
#include <ATen/ops/_foreach_zero_ops.h>
#include <ATen/ops/_fused_adamw_ops.h>

namespace torch_fl {

// Each has an autograd formula of its own (derivatives.yaml), as fast_ops.cpp requires.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  namespace ops = at::_ops;
  fast::register_fast<ops::_foreach_add__Scalar, ops::_foreach_add__List, ops::_foreach_add__ScalarList,
      ops::_foreach_add__Tensor>(m);
  fast::register_fast<ops::_foreach_sub__Scalar, ops::_foreach_sub__List, ops::_foreach_sub__ScalarList>(m);
  fast::register_fast<ops::_foreach_mul__Scalar, ops::_foreach_mul__List, ops::_foreach_mul__ScalarList,
      ops::_foreach_mul__Tensor>(m);
  fast::register_fast<ops::_foreach_div__Scalar, ops::_foreach_div__List, ops::_foreach_div__ScalarList,
      ops::_foreach_div__Tensor>(m);
  fast::register_fast<ops::_foreach_lerp__Scalar, ops::_foreach_lerp__List, ops::_foreach_maximum__List>(m);
  fast::register_fast<ops::_foreach_addcmul__Scalar, ops::_foreach_addcmul__ScalarList, ops::_foreach_addcdiv__Scalar,
      ops::_foreach_addcdiv__ScalarList>(m);
  fast::register_fast<ops::_foreach_sqrt, ops::_foreach_sqrt_, ops::_foreach_neg_, ops::_foreach_zero_,
      ops::_foreach_norm_Scalar>(m);
  fast::register_fast<ops::_fused_adamw_>(m);
}

} // namespace torch_fl
