// The host-read trap of the CPU emulation (FLAGOS_EMU_TRAP=1).
//
// Under emulation flagos memory is host memory, so a kernel that reads a flagos tensor's bytes on
// the host, behind the router's back, works here and crashes or reads garbage on an accelerator.
// With the trap on, every emulated device block is its own page-aligned mapping kept PROT_NONE;
// the places that may touch device memory (the router's re-tagged calls, the device's copies and
// resizes) open the blocks they use for the duration of the call. Any other access faults, and a
// SIGSEGV handler names the flagos block before the process dies.
//
// Threads: protection is per block and reference-counted, so two calls on different threads (the
// autograd device thread beside the main thread) that share a block never close it under each
// other. The price is that a stray read on one thread while another thread's call has the same
// block open goes unnoticed; a debug mode accepts that.
#pragma once

#include <c10/util/SmallVector.h>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace torch_fl::host_access {

// Switch the trap on for this process (before the first flagos allocation); installs the handler.
void enable();
bool enabled();

// A protected block of `nbytes` (rounded up to pages); free_block releases it.
void* allocate_block(size_t nbytes);
void free_block(void* data);

// Opens the blocks holding the given pointers (pointers of other memory are ignored) for as long
// as the scope lives. Cheap when the trap is off.
class Scope {
 public:
  Scope() = default;
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  ~Scope();
  void open(const void* data);

 private:
  c10::SmallVector<std::pair<const void*, uint64_t>, 4> opened_; // (block, its id)
};

} // namespace torch_fl::host_access
