// The TensorImpl and StorageImpl of a vendor alias (retag.h), kept out of the host heap.
//
// Aliases outlive their call (the per-thread alias pool, alias_pool.h), and a call may free some and make
// others in the middle of a step. Made with malloc, each new one lands in whatever hole the heap has just got,
// often inside a large kernel buffer freed a moment before (the CPU emulation's device memory is that same
// heap), so the hole can no longer hold the next buffer and the heap grows step after step (several MiB a
// step in a backward loop, and page faults in the kernels that get fresh memory). These classes take their
// memory from slabs of their own instead; they add nothing else to torch's types.
#pragma once

#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>

#include <cstddef>

namespace torch_fl {

struct AliasTensorImpl final : c10::TensorImpl {
  using c10::TensorImpl::TensorImpl;
  static void* operator new(std::size_t bytes);
  static void operator delete(void* block) noexcept;
};

struct AliasStorageImpl final : c10::StorageImpl {
  using c10::StorageImpl::StorageImpl;
  static void* operator new(std::size_t bytes);
  static void operator delete(void* block) noexcept;
};

} // namespace torch_fl
