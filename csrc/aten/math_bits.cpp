// Conjugate and negative views of flagos tensors.
//
// Why: torch's Conjugate/Negative fallback materialises a tensor with such a bit by cloning it, and
// the clone of a flagos tensor ends in copy_ -> _copy_from, the device's own copy kernel. With the
// fallback also in front of _copy_from, that clone clones again, without end (a stack overflow,
// seen as SIGSEGV). The device's copy (kernels.cpp) views both sides as vendor tensors that keep
// the two bits, and the vendor's copy_ (CPU and CUDA alike) honours them, so the bits pass
// straight through to it. Only backends whose copies go through _copy_from (out-of-tree devices)
// ever reach these two ops.
#include <torch/library.h>

TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
