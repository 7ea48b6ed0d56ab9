// The dtype gate of a provider route that serves some dtypes only (a conf's `flaggems[float32, bfloat16],
// native`): the router asks it once per call of such a route, and a call it refuses takes the route's builtin
// `otherwise` route. Routes without a list serve every dtype and never ask.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/ScalarType.h>

#include <cstdint>

namespace torch_fl {

// One bit per c10::ScalarType; every bit set: the route serves every dtype.
constexpr uint64_t kEveryDtype = ~uint64_t{0};
static_assert(static_cast<int>(c10::ScalarType::NumOptions) <= 64, "a dtype mask has one bit per ScalarType");

inline uint64_t dtype_bit(c10::ScalarType dtype) {
  return uint64_t{1} << static_cast<int>(dtype);
}

// Whether a route serving `dtypes` serves this call of `op` (its arguments are the last ones on `stack`). The
// call's dtype is its first floating-point or complex tensor argument's, else its first tensor argument's, else
// its `dtype` argument's: the rule the qualification counts a sample under (torch_fl/qualify/calls.py). A call
// with none of these is not served.
bool serves_call(uint64_t dtypes, const c10::OperatorHandle& op, const torch::jit::Stack& stack);

} // namespace torch_fl
