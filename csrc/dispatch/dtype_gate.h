// The gate of a provider route that serves some calls only: a conf's `flaggems[float32, bfloat16], native` (a
// dtype list) or `flaggems[float32, contiguous], native` (with an input requirement). The router asks it once per
// call of such a route, and a call it refuses takes the route's builtin `otherwise` route. Routes without a list
// serve every call and never ask.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/ScalarType.h>

#include <cstdint>

namespace torch_fl {

// A route's mask: what it serves. One bit per c10::ScalarType from bit 0 up, and above them one bit per input
// class (torch_fl/_chain.py REQUIREMENTS; torch_fl/routing/publish.py keeps the same numbers), set where the route
// serves calls of that class: a route that requires `contiguous` has kServesStrided clear. Every bit set: the
// route serves every call.
constexpr uint64_t kEveryDtype = ~uint64_t{0};
constexpr uint64_t kServesStrided = uint64_t{1} << 63; // some tensor argument is not contiguous
constexpr uint64_t kServes0dim = uint64_t{1} << 62; // some tensor argument is 0-dim
constexpr uint64_t kServesBroadcast = uint64_t{1} << 61; // two tensor arguments differ in shape
constexpr uint64_t kServesMixed = uint64_t{1} << 60; // two tensor arguments of 1+ dimensions differ in dtype
constexpr uint64_t kInputClasses = kServesStrided | kServes0dim | kServesBroadcast | kServesMixed;
constexpr uint64_t kDtypeBits = ~kInputClasses;
static_assert(static_cast<int>(c10::ScalarType::NumOptions) <= 60, "a mask has one bit per ScalarType below 60");

inline uint64_t dtype_bit(c10::ScalarType dtype) {
  return uint64_t{1} << static_cast<int>(dtype);
}

// Whether a route serving `mask` serves this call of `op` (its arguments are the last ones on `stack`).
//
// Dtypes (tested where some dtype bit is clear): the call's dtype is its first floating-point or complex tensor
// argument's, else its first tensor argument's, else its `dtype` argument's: the rule the qualification counts a
// sample under (torch_fl/qualify/calls.py). A call with none of these is not served.
//
// Input classes (tested where some class bit is clear, so a dtype list alone never scans for them): every defined
// tensor argument, in lists too. A Python number torch wrapped as a 0-dim tensor counts as one: the qualification
// runs a recorded sample's wrapped number as a plain 0-dim tensor, so that is what its verdict covers
// (torch_fl/qualify/calls.py `input_classes` is the same test on a sample).
bool serves_call(uint64_t mask, const c10::OperatorHandle& op, const torch::jit::Stack& stack);

} // namespace torch_fl
