// Which operators move data between devices, and the moves the device makes itself.
//
// Transfers (_to_copy, copy_, copy, _copy_from, _copy_from_and_resize, _to_cpu) are what the cpu
// route and the device's copies are made of, so they may run native (or on a provider) but never
// on the cpu route: it would move its arguments with the very op it is running. Their arguments
// may sit on different devices (host and flagos, or two flagos devices), as copies allow.
// Ops with a Device argument place their results where it says: a result is a flagos tensor only
// when it belongs to flagos (torch_fl/routing/table.py holds the load-time policy, from transfer_ops()).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>

#include <string>
#include <vector>

namespace torch_fl {

bool is_transfer_op(const c10::OperatorName& name);
std::vector<std::string> transfer_ops(); // short names, for the Python policy

// The device's own moves, never through the dispatcher (so never through the router):
// copy `src` into `dst` where either may be flagos; both are viewed as vendor tensors.
void copy_between(const at::Tensor& dst, const at::Tensor& src, bool non_blocking);
// A new host tensor with the values of flagos tensor `t` (dense layouts keep their strides).
at::Tensor host_copy(const at::Tensor& t);
// A new tensor on flagos device `index` with the values of host tensor `t`.
at::Tensor flagos_copy(const at::Tensor& t, c10::DeviceIndex index);

} // namespace torch_fl
