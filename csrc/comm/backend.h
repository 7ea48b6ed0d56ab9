// Collectives on flagos tensors through the vendor's own c10d backend (comm/backend.cpp).
#pragma once

#include <pybind11/pybind11.h>

namespace torch_fl {

// Adds comm_backend() and comm_vendor_backend() to the extension module.
void bind_comm(pybind11::module_& m);

} // namespace torch_fl
