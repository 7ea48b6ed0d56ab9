// The emulated devices' memory as a device has it: a capacity (FLAGOS_EMU_MEMORY), the per-process fraction of it,
// torch's out-of-memory error, and, while asked for, the history of allocations and the live blocks behind
// torch.flagos.memory._snapshot (the format of torch.cuda.memory._snapshot, which PyTorch's memory visualiser reads).
// emulation.cpp calls in here from its allocator; runtime/memory_ops.cpp is how Python reaches it.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace torch_fl::emulation {

// ---- capacity --------------------------------------------------------------------------------------------------
// Every emulated device has the same capacity; the default is the host's physical memory.
void set_capacity(int64_t bytes);
int64_t capacity();
void set_memory_fraction(c10::DeviceIndex index, double fraction);
double memory_fraction(c10::DeviceIndex index);
// The bytes this process may hold on the device: capacity times the fraction.
int64_t memory_limit(c10::DeviceIndex index);
// Throws c10::OutOfMemoryError (torch.OutOfMemoryError) with the sizes; `host_error` is the host allocator's
// message when the host itself ran out before the emulated capacity did.
[[noreturn]] void out_of_memory(
    c10::DeviceIndex index, size_t requested, int64_t in_use, const std::string& host_error = {});

// ---- history and live blocks -----------------------------------------------------------------------------------
// Off (one relaxed load per allocation) unless history is recorded, a memory pool is in use on some thread, or a
// block allocated under either is still alive.
bool tracking();
void on_alloc(c10::DeviceIndex index, const void* ptr, size_t nbytes);
void on_free(c10::DeviceIndex index, const void* ptr, size_t nbytes);

// enabled: none (stop), "state" (live blocks only) or "all" (also the trace of alloc/free events);
// context: none, "state", "alloc" or "all" (which events keep their stack); stacks: "python" or "all" (+ C++).
void record_history(const std::optional<std::string>& enabled, const std::optional<std::string>& context,
    const std::string& stacks, int64_t max_entries);

// Allocations of this thread on `index` are tagged with `pool` (non-zero) until the matching pool_end.
void pool_begin(c10::DeviceIndex index, int64_t pool);
void pool_end(c10::DeviceIndex index, int64_t pool);

// The snapshot as flat lists (the op's schema has no dicts): see memory_ops.cpp for the layout.
struct Snapshot {
  std::vector<int64_t> blocks; // per live block: device, address, size, pool, traceback
  std::vector<int64_t> events; // per trace entry: device, action, address, size, time_us, traceback
  std::vector<std::string> frame_files;
  std::vector<std::string> frame_names;
  std::vector<int64_t> frame_lines;
  std::vector<int64_t> traceback_starts; // traceback i is frames [starts[i], starts[i + 1])
  std::vector<int64_t> traceback_frames;
};
Snapshot snapshot();

// Trace actions, in the order of the codes the snapshot gives (memory_ops.cpp names them for Python).
enum class Action : int64_t { alloc = 0, free_requested, free_completed, segment_alloc, segment_free, oom };

} // namespace torch_fl::emulation
