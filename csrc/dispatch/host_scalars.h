// Where CUDA refuses even a 0-dim host tensor beside device tensors.
//
// A 0-dim host tensor may join device tensors as an input on CUDA only where the kernel reads it as a number:
// TensorIterator's CPU scalars (the elementwise ops) and the kernels that call .item() on it. The kernels listed
// in host_scalars.cpp check that every tensor is on one device instead, so the emulation refuses the host
// scalar there too. Asked only when a call has a 0-dim host tensor among its inputs.
#pragma once

#include <ATen/core/operator_name.h>

#include <string_view>

namespace torch_fl {

// Whether CUDA's kernel of `op` refuses a 0-dim host tensor as its argument `argument`.
bool refuses_host_scalar(const c10::OperatorName& op, std::string_view argument);

} // namespace torch_fl
