// Which fused kernel scaled_dot_product_attention takes on flagos.
//
// torch asks a per-device choice function and, where a device has none, takes the math path: a dozen small
// ops instead of one fused kernel, and numbers that differ from the vendor's. flagos answers with the vendor's
// own choice, asked of the vendor's choice function on metadata-only vendor tensors: the same sizes, strides,
// dtype and autograd state, on the vendor device, over a storage that has the right size and no memory. That
// function reads nothing else, so the answer is the one a vendor tensor of the same shape gets, and it is the
// same in eager mode and under tracing (torch.compile's fake tensors carry the same metadata). An eager call
// asks it of pooled vendor aliases instead (retag.h): the same metadata over the tensors' own bytes, which it
// never reads, taken from the thread's pool rather than made and freed for each of the four tensors (a decode
// step asks once per layer). Where the vendor takes flash attention, flagos answers `overrideable`: torch then calls
// _scaled_dot_product_fused_attention_overrideable, which attention_overrideable.cpp forwards to the vendor's
// flash kernel. The cuDNN and memory-efficient kernels torch calls by name for every device, so those
// choices stand and the kernels take their routes as ordinary ops.
#include "dispatch/retag.h"
#include "dispatch/routed_kernel.h"
#include "dispatch/router.h"
#include "runtime/runtime.h"

#include <ATen/EmptyTensor.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_ops.h>
#include <c10/core/TensorImpl.h>
#include <torch/library.h>

// A namespace of its own: a unity build compiles this file in one unit with others.
namespace torch_fl::sdp_choice {
namespace {

// A tensor of the vendor device with `t`'s metadata and no memory: its storage has the byte size `t`'s layout
// needs (so bounds checks agree) and a null data pointer (so nothing can read it).
at::Tensor vendor_metadata(const at::Tensor& t) {
  const c10::Device device = runtime().vendor_device(t.device().index());
  // Symbolic under dynamic-shape tracing: the vendors' choice functions read sym_size and sym_stride, so a
  // dynamic dimension stays dynamic.
  const c10::SymIntArrayRef sizes = t.sym_sizes(), strides = t.sym_strides();
  const c10::SymInt offset = t.sym_storage_offset();
  const c10::SymInt nbytes =
      at::detail::computeStorageNbytes(sizes, strides, static_cast<int64_t>(t.dtype().itemsize()), offset);
  auto storage = c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), nbytes, c10::DataPtr(nullptr, device), nullptr, false);
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      c10::Storage(std::move(storage)), c10::DispatchKeySet(runtime().vendor_key()), t.dtype());
  impl->set_sizes_and_strides(sizes, strides, offset);
  // The choice depends on autograd state (no fused kernel differentiates an attention mask).
  if (t.requires_grad()) impl->set_requires_grad(true);
  return at::Tensor(std::move(impl));
}

// Whether the pool's vendor aliases give the choice function what metadata-only tensors give it: every tensor a
// flagos tensor of one device, none traced (a fake tensor has no bytes to alias) and none requiring grad (an
// alias carries no autograd state, and the choice reads it).
bool pooled_aliases_serve(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor* mask) {
  const c10::DeviceIndex device = query.device().index();
  auto plain = [&](const at::Tensor& t) {
    return is_flagos(t) && t.device().index() == device && !t.requires_grad() &&
        !t.unsafeGetTensorImpl()->is_python_dispatch();
  };
  return plain(query) && plain(key) && plain(value) && (mask == nullptr || plain(*mask));
}

int64_t choice_on_aliases(const c10::OperatorHandle& op, const at::Tensor& query, const at::Tensor& key,
    const at::Tensor& value, const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
    std::optional<double> scale, bool enable_gqa) {
  Retagger retag(op);
  const auto q = retag.borrow_to_vendor(query), k = retag.borrow_to_vendor(key), v = retag.borrow_to_vendor(value);
  std::optional<at::Tensor> mask;
  if (attn_mask.has_value() && attn_mask->defined()) mask = *retag.borrow_to_vendor(*attn_mask);
  return at::_ops::_fused_sdp_choice::redispatch(
      c10::DispatchKeySet(runtime().vendor_key()), *q, *k, *v, mask, dropout_p, is_causal, scale, enable_gqa);
}

int64_t choice_on_metadata(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal, std::optional<double> scale,
    bool enable_gqa) {
  std::optional<at::Tensor> mask;
  if (attn_mask.has_value() && attn_mask->defined()) mask = vendor_metadata(*attn_mask);
  return at::_ops::_fused_sdp_choice::redispatch(c10::DispatchKeySet(runtime().vendor_key()),
      vendor_metadata(query), vendor_metadata(key), vendor_metadata(value), mask, dropout_p, is_causal, scale,
      enable_gqa);
}

int64_t flagos_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal, std::optional<double> scale,
    bool enable_gqa) {
  static const c10::OperatorHandle op =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::_fused_sdp_choice", "");
  constexpr auto math = static_cast<int64_t>(at::SDPBackend::math);
  const Route route = route_of_op(op.operator_name());
  if (log_dispatch()) log_route(op, route_name(current_routes(), route));
  // A conf that sends the choice elsewhere than native asks for the plain math path.
  if (route.kind != RouteKind::Native) return math;
  const bool host_vendor = runtime().vendor_type() == c10::DeviceType::CPU;
  const bool has_mask = attn_mask.has_value() && attn_mask->defined();
  const int64_t choice = pooled_aliases_serve(query, key, value, has_mask ? &*attn_mask : nullptr)
      ? choice_on_aliases(op, query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
      : choice_on_metadata(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
  if (choice != static_cast<int64_t>(at::SDPBackend::flash_attention)) return choice;
  // torch pads a GPU flash kernel's head size to a multiple of 8 around the call; the overrideable op has
  // no such step, so those head sizes keep the math path.
  if (!host_vendor && (query.sym_size(-1) % 8 != 0 || value.sym_size(-1) % 8 != 0)) return math;
  // A compiled training graph on a GPU vendor keeps the math path too: it saves the flash kernel's random state
  // for the backward and asserts its layout against the overrideable op's meta kernel, and the vendor's kernel
  // returns another one (a 1-d seed where the meta says 0-d; the H200 with torch 2.11). Eager calls and graphs
  // without gradients take the fused kernel; the emulation's host kernel keeps no such state.
  const bool traced = query.unsafeGetTensorImpl()->is_python_dispatch();
  if (!host_vendor && traced && (query.requires_grad() || key.requires_grad() || value.requires_grad())) {
    return math;
  }
  return static_cast<int64_t>(at::SDPBackend::overrideable);
}

const bool routed = [] {
  register_routed_kernel(c10::OperatorName("aten::_fused_sdp_choice", ""));
  return true;
}();

} // namespace

// The op answers what scaled_dot_product_attention asks of the stub, so a caller of
// torch._fused_sdp_choice learns the kernel flagos attention takes.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", TORCH_FN(flagos_sdp_choice));
}

} // namespace torch_fl::sdp_choice

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_fl::sdp_choice::flagos_sdp_choice)
} // namespace at::native
