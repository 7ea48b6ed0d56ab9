// See decompositions.h. The workspace layouts follow torch's CUDA kernels (aten/src/ATen/native/
// cuda/RNN.cu), so a backward always reads the workspace its own forward wrote: the activated
// gates [i, f, g, o] for the LSTM cell; [r, z, n, hx, hn] for the GRU cell.
#include "dispatch/decompositions.h"
#include "dispatch/router.h"

#include <ATen/ATen.h>

#include <string_view>

namespace torch_fl {
namespace {

at::Tensor with_bias(at::Tensor gates, const std::optional<at::Tensor>& bias) {
  return bias.has_value() && bias->defined() ? gates + *bias : gates;
}

// None and an undefined tensor (autograd's "no gradient") both mean absent.
std::optional<at::Tensor> optional_tensor(const c10::IValue& v) {
  if (v.isNone() || !v.toTensor().defined()) return std::nullopt;
  return v.toTensor();
}

// (input_gates, hidden_gates, cx, input_bias?, hidden_bias?) -> (hy, cy, workspace)
void lstm_cell(torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, 5);
  const at::Tensor gates = with_bias(with_bias(args[0].toTensor() + args[1].toTensor(), optional_tensor(args[3])),
      optional_tensor(args[4]));
  const at::Tensor cx = args[2].toTensor();
  auto chunks = gates.chunk(4, 1);
  const at::Tensor i = chunks[0].sigmoid(), f = chunks[1].sigmoid(), g = chunks[2].tanh(), o = chunks[3].sigmoid();
  at::Tensor cy = f * cx + i * g;
  at::Tensor hy = o * cy.tanh();
  at::Tensor workspace = at::cat({i, f, g, o}, 1);
  torch::jit::drop(*stack, 5);
  torch::jit::push(*stack, std::move(hy), std::move(cy), std::move(workspace));
}

// (grad_hy?, grad_cy?, cx, cy, workspace, has_bias) -> (grad_gates, grad_cx, grad_bias)
void lstm_cell_backward(torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, 6);
  const auto grad_hy = optional_tensor(args[0]);
  const auto grad_cy = optional_tensor(args[1]);
  const at::Tensor cx = args[2].toTensor(), cy = args[3].toTensor(), workspace = args[4].toTensor();
  const bool has_bias = args[5].toBool();
  auto gates = workspace.chunk(4, 1);
  const at::Tensor &i = gates[0], &f = gates[1], &g = gates[2], &o = gates[3];
  const at::Tensor tanh_cy = cy.tanh();
  at::Tensor gcy = grad_cy.has_value() ? *grad_cy : at::zeros_like(cy);
  at::Tensor go = at::zeros_like(o);
  if (grad_hy.has_value()) {
    gcy = gcy + *grad_hy * o * (1 - tanh_cy * tanh_cy);
    go = *grad_hy * tanh_cy;
  }
  at::Tensor grad_gates = at::cat({gcy * g * i * (1 - i), gcy * cx * f * (1 - f), gcy * i * (1 - g * g), go * o * (1 - o)}, 1);
  at::Tensor grad_cx = gcy * f;
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  torch::jit::drop(*stack, 6);
  torch::jit::push(*stack, std::move(grad_gates), std::move(grad_cx), std::move(grad_bias));
}

// (input_gates, hidden_gates, hx, input_bias?, hidden_bias?) -> (hy, workspace)
void gru_cell(torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, 5);
  auto in = with_bias(args[0].toTensor(), optional_tensor(args[3])).chunk(3, 1);
  auto hidden = with_bias(args[1].toTensor(), optional_tensor(args[4])).chunk(3, 1);
  const at::Tensor hx = args[2].toTensor();
  const at::Tensor r = (in[0] + hidden[0]).sigmoid();
  const at::Tensor z = (in[1] + hidden[1]).sigmoid();
  const at::Tensor n = (in[2] + r * hidden[2]).tanh();
  at::Tensor hy = n + z * (hx - n);
  at::Tensor workspace = at::cat({r, z, n, hx, hidden[2]}, 1);
  torch::jit::drop(*stack, 5);
  torch::jit::push(*stack, std::move(hy), std::move(workspace));
}

// (grad_hy, workspace, has_bias) -> (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias)
void gru_cell_backward(torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, 3);
  const at::Tensor grad_hy = args[0].toTensor();
  auto parts = args[1].toTensor().chunk(5, 1);
  const bool has_bias = args[2].toBool();
  const at::Tensor &r = parts[0], &z = parts[1], &n = parts[2], &hx = parts[3], &hn = parts[4];
  const at::Tensor grad_n = grad_hy * (1 - z) * (1 - n * n);
  const at::Tensor grad_z = grad_hy * (hx - n) * z * (1 - z);
  const at::Tensor grad_r = grad_n * hn * r * (1 - r);
  at::Tensor grad_input_gates = at::cat({grad_r, grad_z, grad_n}, 1);
  at::Tensor grad_hidden_gates = at::cat({grad_r, grad_z, grad_n * r}, 1);
  at::Tensor grad_hx = grad_hy * z;
  at::Tensor grad_input_bias = has_bias ? grad_input_gates.sum(0) : at::Tensor();
  at::Tensor grad_hidden_bias = has_bias ? grad_hidden_gates.sum(0) : at::Tensor();
  torch::jit::drop(*stack, 3);
  torch::jit::push(*stack, std::move(grad_input_gates), std::move(grad_hidden_gates), std::move(grad_hx),
      std::move(grad_input_bias), std::move(grad_hidden_bias));
}

struct Entry {
  std::string_view name;
  Decomposition fn;
};
constexpr Entry kDecompositions[] = {
    {"_thnn_fused_lstm_cell", &lstm_cell},
    {"_thnn_fused_lstm_cell_backward_impl", &lstm_cell_backward},
    {"_thnn_fused_gru_cell", &gru_cell},
    {"_thnn_fused_gru_cell_backward", &gru_cell_backward},
};

} // namespace

Decomposition find_decomposition(const c10::OperatorName& name) {
  if (!name.overload_name.empty() || name.name.rfind("aten::", 0) != 0) return nullptr;
  const std::string_view base = std::string_view(name.name).substr(6);
  for (const Entry& e : kDecompositions) {
    if (e.name == base) return e.fn;
  }
  return nullptr;
}

std::vector<std::string> decomposed_ops() {
  std::vector<std::string> out;
  for (const Entry& e : kDecompositions) out.emplace_back(e.name);
  return out;
}

} // namespace torch_fl
