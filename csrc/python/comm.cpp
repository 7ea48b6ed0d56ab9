// torch_fl._C's collectives functions: the c10d backend objects torch_fl/distributed.py creates and inspects.
#include "comm/backend.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/utils/pybind.h>

namespace torch_fl {

void bind_comm(pybind11::module_& m) {
  m.def("comm_backend", &wrap_vendor_backend, pybind11::arg("vendor"),
      "Wrap the vendor's c10d backend so that it runs collectives on flagos tensors.");
  m.def("comm_vendor_backend", &vendor_backend_of, pybind11::arg("backend"),
      "The vendor backend inside a flagos backend (for diagnostics).");
}

} // namespace torch_fl
