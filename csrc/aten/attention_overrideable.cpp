// torch's hook for an out-of-tree device's fused attention: scaled_dot_product_attention calls
// _scaled_dot_product_fused_attention_overrideable (and autograd its backward) where the device's choice
// answers `overrideable`, which attention_choice.cpp does wherever the vendor would take flash attention.
// These kernels run the vendor's flash kernel: the CPU's under emulation, CUDA's (or HIP's) on a GPU
// vendor, so outputs, logsumexp and gradients are the vendor's own bits. Both ops take their route: native
// re-tags onto the vendor, cpu runs the CPU flash kernel on host copies; a provider has no kernel for them.
//
// The results keep the layouts torch's meta kernels give these ops (the output laid out like the query, or
// contiguous on older torch lines; the gradients like the inputs; a contiguous logsumexp), which a compiled
// graph checks; a vendor kernel that lays them out otherwise gets its result copied, value for value.
#include "dispatch/retag.h"
#include "dispatch/routed_kernel.h"
#include "dispatch/router.h"
#include "runtime/runtime.h"

#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_ops.h>
#include <ATen/ops/_scaled_dot_product_fused_attention_overrideable_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <numeric>

// A namespace of its own: a unity build compiles this file in one unit with others.
namespace torch_fl::attention_hook {
namespace {

c10::OperatorHandle find_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
}

const c10::OperatorHandle& forward_op() {
  static const c10::OperatorHandle op = find_op("aten::_scaled_dot_product_fused_attention_overrideable");
  return op;
}
const c10::OperatorHandle& backward_op() {
  static const c10::OperatorHandle op = find_op("aten::_scaled_dot_product_fused_attention_overrideable_backward");
  return op;
}

// The flash kernel a route runs: the vendor's for native, the CPU's for the host.
bool runs_cpu_kernel(const Route& route) {
  return route.kind == RouteKind::Cpu || runtime().vendor_type() == c10::DeviceType::CPU;
}
const c10::OperatorHandle& flash_forward(bool cpu) {
  static const c10::OperatorHandle host = find_op("aten::_scaled_dot_product_flash_attention_for_cpu");
  static const c10::OperatorHandle gpu = find_op("aten::_scaled_dot_product_flash_attention");
  return cpu ? host : gpu;
}
const c10::OperatorHandle& flash_backward(bool cpu) {
  static const c10::OperatorHandle host = find_op("aten::_scaled_dot_product_flash_attention_for_cpu_backward");
  static const c10::OperatorHandle gpu = find_op("aten::_scaled_dot_product_flash_attention_backward");
  return cpu ? host : gpu;
}

// The route of `op`, logged; a provider route is refused with the way out.
Route route_for(const c10::OperatorHandle& op) {
  const RouteTable& table = current_routes();
  const Route route = route_of_op(op.operator_name());
  if (C10_UNLIKELY(route.kind == RouteKind::Provider)) { // the names are made only for the message
    const std::string name = short_op_name(op.operator_name());
    TORCH_CHECK(false, name, " is routed to ", route_name(table, route),
        ", which has no kernel for torch's overrideable attention hook. Route it native or cpu (",
        override_variable(name), "=native), or route _fused_sdp_choice off native so attention takes the math "
        "path.");
  }
  if (log_dispatch()) log_route(op, route_name(table, route));
  return route;
}

// Runs `kernel` on a stack of flagos arguments by the route: re-tagged onto the vendor, or on host copies.
// The stack then holds the kernel's returns as flagos tensors; `conform` shapes them first (vendor tensors on
// the native route), so the layout fix costs one vendor copy rather than a routed one.
template <typename Conform>
void run_routed(const c10::OperatorHandle& kernel, const Route& route, torch::jit::Stack* stack, Conform conform) {
  if (route.kind == RouteKind::Cpu) {
    run_on_host(kernel, stack);
    conform(stack);
    return;
  }
  Retagger retag(kernel);
  retag.arguments_to_vendor(stack);
  {
    c10::OptionalDeviceGuard guard;
    if (retag.device() >= 0) guard.reset_device(flagos_device(retag.device()));
    kernel.redispatchBoxed(c10::DispatchKeySet(runtime().vendor_key()), stack);
    conform(stack);
  }
  retag.returns_from_vendor(stack);
}

// What empty_like(t) would give (the meta kernels' rule for a result shaped like an argument): `t`'s strides when
// it is dense, else those torch's empty_like picks, asked of a meta tensor.
std::vector<int64_t> strides_of_empty_like(const at::Tensor& t) {
  if (t.is_non_overlapping_and_dense()) return t.strides().vec();
  return at::empty_like(at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta))).strides().vec();
}

// The strides of a dense tensor of `sizes` whose dimensions are ordered as `like`'s strides order them (the
// meta kernels' rule for results "laid out like the query").
std::vector<int64_t> strides_ordered_like(const at::Tensor& like, at::IntArrayRef sizes) {
  if (like.sizes() == sizes) return strides_of_empty_like(like);
  std::vector<int64_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return like.stride(a) > like.stride(b); });
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = stride;
    stride *= std::max<int64_t>(sizes[*it], 1);
  }
  return strides;
}

// Whether this torch's meta kernel lays the output out like the query (newer lines) or contiguous (older
// ones): asked once, of the meta kernel itself, with a query whose heads are not outermost.
bool meta_output_like_query() {
  static const bool like_query = [] {
    const at::Tensor q = at::empty({1, 3, 2, 4}, at::TensorOptions().device(at::kMeta)).transpose(1, 2);
    // Straight to the meta kernel: a dispatch mode active at the first call never sees the probe.
    const auto meta = at::_ops::_scaled_dot_product_fused_attention_overrideable::redispatch(
        c10::DispatchKeySet(c10::DispatchKey::Meta), q, q, q, std::nullopt, 0.0, false, false, std::nullopt);
    return std::get<0>(meta).strides() == q.strides();
  }();
  return like_query;
}

std::vector<int64_t> contiguous_strides(at::IntArrayRef sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= std::max<int64_t>(sizes[d], 1);
  }
  return strides;
}

// `t` with `strides`: a restrided view where only size-1 dimensions differ, else a copy.
at::Tensor with_strides(const at::Tensor& t, at::IntArrayRef strides) {
  if (!t.defined() || t.strides() == strides) return t;
  bool same_memory = true;
  for (int64_t d = 0; d < t.dim(); ++d) same_memory = same_memory && (t.size(d) == 1 || t.stride(d) == strides[d]);
  if (same_memory) return t.as_strided(t.sizes(), strides, t.storage_offset());
  at::Tensor out = at::empty_strided(t.sizes(), strides, t.options());
  out.copy_(t);
  return out;
}

void conform_to(torch::jit::Stack* stack, size_t first, size_t index, at::IntArrayRef strides) {
  c10::IValue& v = (*stack)[first + index];
  if (v.isTensor()) v = with_strides(v.toTensor(), strides);
}

// The 0-dim long tensors a CPU flash call returns where the GPU kernel returns its random state (the meta
// kernel's layout): nothing reads them, so they come straight from flagos' allocator on the query's device
// rather than from two calls of flagos' empty through the dispatcher. Under deterministic algorithms they are
// filled as every flagos empty is (kernels.cpp).
at::Tensor random_state_placeholder(const at::Tensor& query) {
  const c10::DeviceGuard guard(query.device());
  at::Tensor t = at::detail::empty_generic({}, c10::GetAllocator(c10::DeviceType::PrivateUse1),
      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), at::kLong, std::nullopt);
  const at::Context& ctx = at::globalContext();
  if (C10_UNLIKELY(ctx.deterministicAlgorithms() && ctx.deterministicFillUninitializedMemory())) {
    at::native::fill_empty_deterministic_(t);
  }
  return t;
}

// The native route on a host vendor (the emulation): the host's flash kernel called typed on borrowed vendor
// aliases, as the fast path calls its kernels (fast_kernel.h), with no stack of IValues to build and re-tag.
// The results take the meta layout on the vendor before they become flagos tensors, each then the only
// reference to its TensorImpl, so it is relabelled in place.
std::pair<at::Tensor, at::Tensor> host_flash_native(const at::Tensor& query, const at::Tensor& key,
    const at::Tensor& value, const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
    std::optional<double> scale, at::IntArrayRef out_strides, at::IntArrayRef lse_strides) {
  Retagger retag(flash_forward(/*cpu=*/true));
  // positions in the kernel's schema: (query, key, value, dropout_p, is_causal, attn_mask, scale)
  const auto q = retag.borrow_to_vendor(query, false, 0);
  const auto k = retag.borrow_to_vendor(key, false, 1);
  const auto v = retag.borrow_to_vendor(value, false, 2);
  std::optional<at::Tensor> mask;
  if (attn_bias.has_value() && attn_bias->defined()) mask = *retag.borrow_to_vendor(*attn_bias, false, 5);
  retag.check_arguments();
  auto results = at::_ops::_scaled_dot_product_flash_attention_for_cpu::redispatch(
      c10::DispatchKeySet(runtime().vendor_key()), *q, *k, *v, dropout_p, is_causal, mask, scale);
  at::Tensor out = std::move(std::get<0>(results)), lse = std::move(std::get<1>(results));
  out = with_strides(out, out_strides);
  lse = with_strides(lse, lse_strides);
  return {retag.from_vendor(out), retag.from_vendor(lse)};
}

using ForwardResult = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt,
    at::Tensor, at::Tensor, at::Tensor>;

ForwardResult forward(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal, bool return_debug_mask,
    std::optional<double> scale) {
  const Route route = route_for(forward_op());
  const bool cpu = runs_cpu_kernel(route);
  const bool bias = attn_bias.has_value() && attn_bias->defined();
  TORCH_CHECK(cpu || !bias, "the GPU flash kernel takes no attention mask, so flagos' choice never picks it for one");
  std::vector<int64_t> out_sizes = query.sizes().vec();
  out_sizes.back() = value.size(-1);
  const std::vector<int64_t> out_strides =
      meta_output_like_query() ? strides_ordered_like(query, out_sizes) : contiguous_strides(out_sizes);
  const std::vector<int64_t> lse_strides = {query.size(1) * query.size(2), query.size(2), 1};
  if (cpu && route.kind == RouteKind::Native) { // the emulation: the host's kernel, typed
    auto [out, lse] = host_flash_native(query, key, value, attn_bias, dropout_p, is_causal, scale, out_strides,
        lse_strides);
    at::Tensor seed = random_state_placeholder(query);
    return {std::move(out), std::move(lse), at::Tensor(), at::Tensor(), query.sym_size(-2), key.sym_size(-2),
        std::move(seed), random_state_placeholder(query), at::Tensor()};
  }
  auto conform = [&](torch::jit::Stack* s) {
    const size_t first = s->size() - flash_forward(cpu).schema().returns().size();
    conform_to(s, first, 0, out_strides);
    conform_to(s, first, 1, lse_strides);
  };
  torch::jit::Stack stack;
  if (cpu) {
    torch::jit::push(stack, query, key, value, dropout_p, is_causal, attn_bias, scale);
  } else {
    torch::jit::push(stack, query, key, value, dropout_p, is_causal, return_debug_mask, scale);
  }
  run_routed(flash_forward(cpu), route, &stack, conform);
  if (cpu) { // (output, logsumexp)
    at::Tensor seed = random_state_placeholder(query);
    return {stack[0].toTensor(), stack[1].toTensor(), at::Tensor(), at::Tensor(), query.sym_size(-2),
        key.sym_size(-2), std::move(seed), random_state_placeholder(query), at::Tensor()};
  }
  // (output, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, rng_state, unused, debug_attn_mask)
  auto tensor = [&](size_t i) { return stack[i].isTensor() ? stack[i].toTensor() : at::Tensor(); };
  return {tensor(0), tensor(1), tensor(2), tensor(3), stack[4].toSymInt(), stack[5].toSymInt(), tensor(6),
      tensor(7), tensor(8)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> backward(const at::Tensor& grad_out,
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& attn_bias,
    std::array<bool, 4> grad_input_mask, const at::Tensor& out, const at::Tensor& logsumexp,
    const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k, c10::SymInt max_q, c10::SymInt max_k,
    double dropout_p, bool is_causal, const at::Tensor& philox_seed, const at::Tensor& philox_offset,
    std::optional<double> scale) {
  const Route route = route_for(backward_op());
  const bool cpu = runs_cpu_kernel(route);
  TORCH_CHECK(!grad_input_mask[3], "the flash kernels give no gradient for the attention mask, so flagos' choice "
      "never picks them for a mask that requires grad");
  const std::vector<int64_t> q_strides = strides_of_empty_like(query);
  const std::vector<int64_t> k_strides = strides_of_empty_like(key);
  const std::vector<int64_t> v_strides = strides_of_empty_like(value);
  auto conform = [&](torch::jit::Stack* s) {
    const size_t first = s->size() - 3;
    conform_to(s, first, 0, q_strides);
    conform_to(s, first, 1, k_strides);
    conform_to(s, first, 2, v_strides);
  };
  torch::jit::Stack stack;
  std::optional<at::Tensor> mask;
  if (attn_bias.defined()) mask = attn_bias;
  if (cpu) {
    torch::jit::push(stack, grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, mask, scale);
  } else {
    torch::jit::push(stack, grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, std::move(max_q),
        std::move(max_k), dropout_p, is_causal, philox_seed, philox_offset, scale);
  }
  run_routed(flash_backward(cpu), route, &stack, conform);
  auto grad = [&](size_t i) { return grad_input_mask[i] ? stack[i].toTensor() : at::Tensor(); };
  return {grad(0), grad(1), grad(2), at::Tensor()};
}

// Routed by name: the route table takes confs and FLAGOS_OP_ overrides for them like any routed op.
const bool routed = [] {
  register_routed_kernel(c10::OperatorName("aten::_scaled_dot_product_fused_attention_overrideable", ""));
  register_routed_kernel(c10::OperatorName("aten::_scaled_dot_product_fused_attention_overrideable_backward", ""));
  return true;
}();

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(forward));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", TORCH_FN(backward));
}

} // namespace torch_fl::attention_hook
