// flagos tensors are strided. torch's sparse (COO, CSR, CSC, BSR, BSC) and mkldnn layouts have no flagos
// kernels: the vendor's sparse kernels would need sparse flagos tensors (their own indices and values re-tagged
// op by op), which the router does not build. Every way to make one ends in the one message below: a sparse
// flagos factory or op (the fallbacks in layouts.cpp) and a native-route result that the vendor made sparse
// (Retagger::from_vendor, e.g. dense.to_sparse()).
//
// Quantized tensors are refused the same way, for the same reason: the vendor's quantized kernels take tensors
// that carry a quantizer (scale, zero point), which a re-tagged alias does not. A quantized flagos tensor would
// find no kernel for its first op (flatten, flip, dequantize, ...), so none is made: quantizing a flagos tensor
// on the native route (Retagger::from_vendor), a quantized factory on flagos and moving a quantized host tensor to
// flagos (the fallback on the quantized flagos key) all end in one message that names the ways out.
#pragma once

#include <c10/core/Layout.h>

#include <string>

namespace torch_fl {

// "<what>: sparse tensors are not supported on flagos ..." with the ways out.
[[noreturn]] void refuse_layout(const std::string& what, c10::Layout layout);
// "<what>: quantized tensors are not supported on flagos ..." with the ways out.
[[noreturn]] void refuse_quantized(const std::string& what);

} // namespace torch_fl
