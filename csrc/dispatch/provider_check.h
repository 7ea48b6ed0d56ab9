// Checks a provider's results against what the operator promises, so a wrong kernel is an error
// that names it instead of wrong numbers downstream.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <string>
#include <vector>

namespace torch_fl {

// `arguments` are the (vendor) arguments the provider was given, `stack` holds its returns.
// Throws when a result has the wrong count, device, shape or dtype (shape and dtype from the op's
// Meta kernel, where torch has one), or when an in-place/out= op returns a tensor other than the
// argument it writes.
void check_provider_results(const c10::OperatorHandle& op, const std::string& provider,
    const std::vector<c10::IValue>& arguments, const torch::jit::Stack& stack, c10::Device vendor_device);

// The error for a provider result that is not what the op gives (`what`): it names the provider and the op,
// and the route override that sends the op elsewhere.
[[noreturn]] void fail_provider_result(const std::string& provider, const c10::OperatorName& op,
    const std::string& what);

} // namespace torch_fl
