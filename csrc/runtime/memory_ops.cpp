// The memory questions torch.flagos (torch_fl/_memory.py) asks the runtime, as dispatcher operators
// (torch.ops.flagos.<name>): schema types only, so the Python side needs no compiled binding.
//
// mem_get_info and the caching_allocator_* pair serve every vendor. The emulation_* operators serve the CPU
// emulation, whose allocator is the plugin's own (runtime/emulation_memory.h); on a GPU vendor torch.flagos asks
// torch.cuda instead, whose caching allocator is where flagos memory lives.
//
// emulation_memory_snapshot returns flat lists:
//   blocks           5 per live block: device, address, size, pool id (0: none), traceback (-1: none)
//   events           6 per trace entry: device, action, address (an oom: the free bytes), size, time_us, traceback;
//                    action codes are emulation::Action's (alloc, free_requested, free_completed, segment_alloc,
//                    segment_free, oom)
//   frame_files, frame_names, frame_lines    the distinct frames
//   traceback_starts, traceback_frames       traceback i is frames traceback_frames[starts[i]:starts[i + 1]]
#include "runtime/device.h"
#include "runtime/emulation_memory.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace torch_fl {
namespace {

c10::DeviceIndex device_index(int64_t device) {
  const auto count = runtime().device_count();
  TORCH_CHECK(device >= 0 && device < count, "flagos device index ", device, " is out of range: this process has ",
      int(count), " flagos devices");
  return static_cast<c10::DeviceIndex>(device);
}

void require_emulation(const char* what) {
  TORCH_CHECK(std::string(runtime().name()) == "cpu", "torch.ops.flagos.", what,
      " serves the CPU emulation's allocator, and this process runs FLAGOS_ACCELERATOR=", runtime().name(),
      "; there torch.flagos answers from torch.cuda's caching allocator, which holds flagos memory");
}

std::tuple<int64_t, int64_t> mem_get_info(int64_t device) {
  const auto [free_bytes, total] = runtime().memory_info(device_index(device));
  return {static_cast<int64_t>(free_bytes), static_cast<int64_t>(total)};
}

// ---- raw allocations (torch.flagos.caching_allocator_alloc/delete) ----------------------------------------------
// The blocks come from the flagos allocator like any tensor's; this table keeps each one alive until deleted.

std::mutex g_raw_mutex;
std::unordered_map<int64_t, c10::DataPtr> g_raw;

int64_t caching_allocator_alloc(int64_t size, int64_t device, std::optional<int64_t> stream) {
  TORCH_CHECK(size >= 0, "caching_allocator_alloc: size must be >= 0 bytes, got ", size);
  const auto index = device_index(device);
  c10::DeviceGuard device_guard(flagos_device(index));
  std::optional<c10::StreamGuard> stream_guard;
  if (stream.has_value()) stream_guard.emplace(c10::Stream(c10::Stream::UNSAFE, flagos_device(index), *stream));
  c10::DataPtr block = c10::GetAllocator(c10::DeviceType::PrivateUse1)->allocate(static_cast<size_t>(size));
  const auto address = static_cast<int64_t>(reinterpret_cast<uintptr_t>(block.get()));
  if (address == 0) return 0; // a 0-byte block has no address and nothing to delete
  std::lock_guard<std::mutex> lock(g_raw_mutex);
  g_raw.emplace(address, std::move(block));
  return address;
}

void caching_allocator_delete(int64_t address) {
  c10::DataPtr block;
  {
    std::lock_guard<std::mutex> lock(g_raw_mutex);
    auto found = g_raw.find(address);
    TORCH_CHECK(found != g_raw.end(), "caching_allocator_delete: ", address,
        " is not an address caching_allocator_alloc returned (or it was deleted already)");
    block = std::move(found->second);
    g_raw.erase(found);
  }
} // the block goes back to the allocator here, outside the lock

// ---- the emulation's allocator ----------------------------------------------------------------------------------

void emulation_set_capacity(int64_t bytes) {
  require_emulation("emulation_set_capacity");
  emulation::set_capacity(bytes);
}

int64_t emulation_capacity() {
  require_emulation("emulation_capacity");
  return emulation::capacity();
}

void emulation_set_memory_fraction(double fraction, int64_t device) {
  require_emulation("emulation_set_memory_fraction");
  emulation::set_memory_fraction(device_index(device), fraction);
}

double emulation_memory_fraction(int64_t device) {
  require_emulation("emulation_memory_fraction");
  return emulation::memory_fraction(device_index(device));
}

void emulation_record_memory_history(std::optional<std::string> enabled, std::optional<std::string> context,
    std::string stacks, int64_t max_entries) {
  require_emulation("emulation_record_memory_history");
  emulation::record_history(enabled, context, stacks, max_entries);
}

std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::vector<std::string>, std::vector<std::string>,
    std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>>
emulation_memory_snapshot() {
  require_emulation("emulation_memory_snapshot");
  emulation::Snapshot s = emulation::snapshot();
  return {std::move(s.blocks), std::move(s.events), std::move(s.frame_files), std::move(s.frame_names),
      std::move(s.frame_lines), std::move(s.traceback_starts), std::move(s.traceback_frames)};
}

void emulation_pool_begin(int64_t device, int64_t pool) {
  require_emulation("emulation_pool_begin");
  emulation::pool_begin(device_index(device), pool);
}

void emulation_pool_end(int64_t device, int64_t pool) {
  require_emulation("emulation_pool_end");
  emulation::pool_end(device_index(device), pool);
}

} // namespace

TORCH_LIBRARY_FRAGMENT(flagos, m) {
  m.def("mem_get_info(int device) -> (int, int)", &mem_get_info);
  m.def("caching_allocator_alloc(int size, int device, int? stream) -> int", &caching_allocator_alloc);
  m.def("caching_allocator_delete(int address) -> ()", &caching_allocator_delete);
  m.def("emulation_set_capacity(int bytes) -> ()", &emulation_set_capacity);
  m.def("emulation_capacity() -> int", &emulation_capacity);
  m.def("emulation_set_memory_fraction(float fraction, int device) -> ()", &emulation_set_memory_fraction);
  m.def("emulation_memory_fraction(int device) -> float", &emulation_memory_fraction);
  m.def("emulation_record_memory_history(str? enabled, str? context, str stacks, int max_entries) -> ()",
      &emulation_record_memory_history);
  m.def("emulation_memory_snapshot() -> (int[], int[], str[], str[], int[], int[], int[])",
      &emulation_memory_snapshot);
  m.def("emulation_pool_begin(int device, int pool) -> ()", &emulation_pool_begin);
  m.def("emulation_pool_end(int device, int pool) -> ()", &emulation_pool_end);
}

} // namespace torch_fl
