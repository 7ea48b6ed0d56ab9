// flagos tensors are strided. torch's sparse (COO, CSR, CSC, BSR, BSC) and mkldnn layouts have no flagos
// kernels: the vendor's sparse kernels would need sparse flagos tensors (their own indices and values re-tagged
// op by op), which the router does not build. Every way to make one ends in the one message below: a sparse
// flagos factory or op (the fallbacks in layouts.cpp) and a native-route result that the vendor made sparse
// (Retagger::from_vendor, e.g. dense.to_sparse()).
#pragma once

#include <c10/core/Layout.h>

#include <string>

namespace torch_fl {

// "<what>: sparse tensors are not supported on flagos ..." with the ways out.
[[noreturn]] void refuse_layout(const std::string& what, c10::Layout layout);

} // namespace torch_fl
