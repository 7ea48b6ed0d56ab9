// Which fused kernel scaled_dot_product_attention takes on flagos.
//
// torch asks a per-device choice function and, where a device has none, takes
// the math path: a dozen small ops instead of one fused kernel, and numbers that
// differ from the vendor's. flagos answers with the vendor's own choice, asked of
// the vendor's kernel on re-tagged views of the arguments, so a flagos tensor
// attends with the kernel a vendor tensor of the same shape would get. The chosen
// kernel is then an ordinary op on flagos tensors and takes its route.
#include "dispatch/retag.h"
#include "dispatch/router.h"
#include "runtime/runtime.h"

#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_ops.h>

namespace torch_fl {
namespace {

int64_t flagos_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal, std::optional<double> scale,
    bool enable_gqa) {
  static const c10::OperatorHandle op =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::_fused_sdp_choice", "");
  constexpr auto math = static_cast<int64_t>(at::SDPBackend::math);
  // Tracing (torch.compile's fake tensors) has no memory to view: the graph keeps the math
  // path, which Inductor fuses itself.
  for (const at::Tensor* t : {&query, &key, &value}) {
    if (t->unsafeGetTensorImpl()->is_python_dispatch() || !t->has_storage()) return math;
  }
  const Route route = route_of_op(op.operator_name());
  if (log_dispatch()) log_route(op, route_name(current_routes(), route));
  // A conf that sends the choice elsewhere than native asks for the plain math path.
  if (route.kind != RouteKind::Native) return math;
  Retagger retag(op);
  // The views carry no autograd state, and the choice depends on it (no fused kernel
  // differentiates an attention mask): each view says what its tensor says.
  auto view = [&](const at::Tensor& t) {
    at::Tensor v = *retag.borrow_to_vendor(t);
    if (t.requires_grad() && !v.requires_grad()) v = v.detach().requires_grad_(true);
    return v;
  };
  const at::Tensor q = view(query), k = view(key), v = view(value);
  std::optional<at::Tensor> mask;
  if (attn_mask.has_value() && attn_mask->defined()) mask = view(*attn_mask);
  retag.check_arguments();
  const int64_t choice = at::_ops::_fused_sdp_choice::redispatch(c10::DispatchKeySet(runtime().vendor_key()), q,
      k, v, mask, dropout_p, is_causal, scale, enable_gqa);
  // torch calls its flash kernel by name only for CUDA tensors and otherwise takes the host's
  // flash kernel, which a GPU vendor lacks: there flagos keeps the math path for that choice.
  if (choice == static_cast<int64_t>(at::SDPBackend::flash_attention) &&
      runtime().vendor_type() != c10::DeviceType::CPU) {
    return math;
  }
  return choice;
}

} // namespace
} // namespace torch_fl

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_fl::flagos_sdp_choice)
} // namespace at::native
