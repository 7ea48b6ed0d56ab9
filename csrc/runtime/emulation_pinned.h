// Pinned host memory of the CPU emulation (emulation.cpp hands it out as the runtime's pinned allocator).
#pragma once

#include <c10/core/Allocator.h>

namespace torch_fl::emulation {

// Pinned memory under emulation is ordinary host memory that remembers it was asked for as pinned, so
// is_pinned(), DataLoader(pin_memory=True) and non_blocking copies work as they do on a GPU.
c10::Allocator* pinned_host_allocator();
bool is_pinned_host_ptr(const void* ptr);

} // namespace torch_fl::emulation
