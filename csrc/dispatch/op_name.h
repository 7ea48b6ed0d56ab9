// Operator names as confs, overrides and logs spell them: "add.Tensor" for aten::add.Tensor, and its route
// override FLAGOS_OP_add__Tensor (each dot doubled into "__", so the name is a valid environment variable).
// The Python side reads overrides in the same spelling.
#pragma once

#include <ATen/core/operator_name.h>

#include <string>

namespace torch_fl {

// "add.Tensor", "relu": the aten namespace left out, the overload after a dot.
std::string short_op_name(const c10::OperatorName& name);
// The aten operator a short name stands for (short_op_name's inverse).
c10::OperatorName parse_short_op_name(const std::string& short_name);
// The environment variable that overrides the route of the op with this short name: FLAGOS_OP_add__Tensor.
std::string override_variable(const std::string& short_name);

} // namespace torch_fl
