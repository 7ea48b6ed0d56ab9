// Collectives on flagos tensors through the vendor's own c10d backend (comm/backend.cpp). Python-free: the
// extension module's binding (python/comm.cpp) hands these to torch_fl/distributed.py.
#pragma once

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Backend;
} // namespace c10d

namespace torch_fl {

// A flagos backend that runs each collective on flagos tensors through `vendor` (Gloo, NCCL, RCCL).
c10::intrusive_ptr<c10d::Backend> wrap_vendor_backend(c10::intrusive_ptr<c10d::Backend> vendor);

// The vendor backend inside a flagos backend; refuses, by name, a backend that is not one.
c10::intrusive_ptr<c10d::Backend> vendor_backend_of(const c10::intrusive_ptr<c10d::Backend>& backend);

} // namespace torch_fl
