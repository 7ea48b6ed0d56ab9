// See host_scalars.h. From torch's CUDA kernels (aten/src/ATen/native/cuda and the structured meta functions):
// index_select checks every tensor with cuda::check_device; the index_add/copy/reduce, gather/scatter and
// take/put kernels, complex/polar and binary_cross_entropy build a TensorIterator without CPU scalars;
// searchsorted/bucketize, equal and masked_fill's mask compare the devices themselves; the margin losses
// read raw device pointers; normal(mean, std) allocates its result where `mean` is and then fills it on the device.
// The H200's comparison over OpInfo samples (build_tools/node/mixed_device_check.py, torch 2.11) found the rest: the
// generated CUDA wrappers of clamp_min/clamp_max(Tensor), igamma(c), logaddexp, nextafter, normal and _scaled_mm
// check every tensor's device, and mse_loss and smooth_l1_loss refuse a host operand inside their kernels.
#include "dispatch/host_scalars.h"

#include <array>
#include <utility>

namespace torch_fl {
namespace {

// (op base name, argument name; empty: any argument). In-place and out= forms share the base name, in-place
// ones listed with their underscore.
constexpr std::array<std::pair<std::string_view, std::string_view>, 47> kRefused = {{
    {"index_select", ""}, {"index_add", ""}, {"index_add_", ""}, {"index_copy", ""}, {"index_copy_", ""},
    {"index_reduce", ""}, {"index_reduce_", ""}, {"gather", ""}, {"scatter", ""}, {"scatter_", ""},
    {"scatter_add", ""}, {"scatter_add_", ""}, {"scatter_reduce", ""}, {"scatter_reduce_", ""}, {"take", ""},
    {"put", ""}, {"put_", ""}, {"searchsorted", ""}, {"bucketize", ""}, {"equal", ""}, {"complex", ""},
    {"polar", ""}, {"binary_cross_entropy", ""}, {"binary_cross_entropy_backward", ""},
    {"multi_margin_loss", ""}, {"multi_margin_loss_backward", ""}, {"multilabel_margin_loss_forward", ""},
    {"multilabel_margin_loss_backward", ""}, {"masked_fill", "mask"}, {"masked_fill_", "mask"},
    {"normal", "mean"}, {"normal", "std"}, {"clamp_min", ""}, {"clamp_min_", ""}, {"clamp_max", ""},
    {"clamp_max_", ""}, {"igamma", ""}, {"igamma_", ""}, {"igammac", ""}, {"igammac_", ""}, {"logaddexp", ""},
    {"nextafter", ""}, {"nextafter_", ""}, {"mse_loss", ""}, {"smooth_l1_loss", ""}, {"_scaled_mm", ""},
}};

} // namespace

bool refuses_host_scalar(const c10::OperatorName& op, std::string_view argument) {
  const std::string_view name(op.name);
  if (name.rfind("aten::", 0) != 0) return false;
  const std::string_view base = name.substr(6);
  for (const auto& [refused, only] : kRefused) {
    if (refused == base && (only.empty() || only == argument)) return true;
  }
  return false;
}

} // namespace torch_fl
