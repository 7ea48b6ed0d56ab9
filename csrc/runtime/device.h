// The flagos device as torch sees it: what is registered for PrivateUse1, one file per piece, each forwarding to
// the vendor runtime chosen at start-up (runtime/runtime.h):
//   runtime.cpp    choosing the runtime; registering hooks and default generators once it exists
//   allocator.cpp  the device allocator (a c10::DeviceAllocator: stats, empty_cache, record_stream) and resizing
//   guard.cpp      the device guard: current device, streams and events
//   hooks.cpp      the PrivateUse1 hooks: pinned memory, pointers, generators, resizing
//   generator.cpp  flagos generators, each wrapping the vendor generator its kernels draw from
//   memory_ops.cpp the memory operators torch.flagos calls (torch.ops.flagos.*)
//   profiler_*.cpp torch.profiler's device events and the emulation's kernels
// The functions below are how those files reach each other (and the router reaches them).
#pragma once

#include "runtime/runtime.h"

#include <c10/core/Storage.h>

namespace at {
class Generator;
}

namespace torch_fl {

// A negative index means the current device, as in torch's device APIs.
inline c10::DeviceIndex checked_index(c10::DeviceIndex index) {
  return index < 0 ? runtime().current_device() : index;
}

// allocator.cpp. Resize a flagos storage in place (resize kernels, untyped storage resize).
void resize_storage_bytes(const c10::Storage& storage, size_t newsize);

// generator.cpp
void create_default_generators(Runtime& rt);
const at::Generator& default_generator(c10::DeviceIndex index);
at::Generator new_generator(c10::DeviceIndex index);
// The vendor generator behind a flagos generator (for the router); other generators pass through.
at::Generator vendor_generator_of(const at::Generator& gen);

// hooks.cpp. Once per process, after the runtime exists.
void register_hooks();

} // namespace torch_fl
