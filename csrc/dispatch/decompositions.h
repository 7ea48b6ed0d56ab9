// Decompositions for operators that torch sends to accelerators but implements for CUDA only.
//
// Torch's RNN cells call the fused cell ops (_thnn_fused_lstm_cell, _thnn_fused_gru_cell and their
// backwards) for any accelerator, flagos included, and only CUDA has kernels for them. When the
// route's kernel is missing (native under emulation, or the cpu route), the router runs these
// instead: the same arithmetic out of ordinary ops, so LSTM and GRU run everywhere.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <string>
#include <vector>

namespace torch_fl {

// Takes the op's arguments from the stack and leaves its returns there, as a boxed kernel.
using Decomposition = void (*)(torch::jit::Stack* stack);

// nullptr when the op has none.
Decomposition find_decomposition(const c10::OperatorName& name);
std::vector<std::string> decomposed_ops();

} // namespace torch_fl
