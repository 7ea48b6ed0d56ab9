// Ops with a flagos kernel of their own that still take routes (aten/attention_overrideable.cpp).
#pragma once

#include <ATen/core/operator_name.h>

namespace torch_fl {

// Lists `name` with the ops the router takes by name, so the route table takes confs and FLAGOS_OP_
// overrides for it; its kernel reads the route itself. Called while the extension loads (router.cpp).
void register_routed_kernel(const c10::OperatorName& name);

} // namespace torch_fl
