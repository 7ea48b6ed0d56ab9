// Collectives on flagos tensors through the vendor's own c10d backend (comm/backend.cpp). Python-free: the
// operator in ops/comm.cpp hands the backend to torch_fl/distributed.py.
#pragma once

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Backend;
} // namespace c10d

namespace torch_fl {

// A flagos backend that runs each collective on flagos tensors through `vendor` (Gloo, NCCL, RCCL).
c10::intrusive_ptr<c10d::Backend> wrap_vendor_backend(c10::intrusive_ptr<c10d::Backend> vendor);

} // namespace torch_fl
