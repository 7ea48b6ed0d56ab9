// See emulation_pinned.h. Only c10 headers: this unit compiles in seconds.
#include "runtime/emulation_pinned.h"

#include <c10/core/impl/alloc_cpu.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>

namespace torch_fl::emulation {
namespace {

// Pinned blocks by start address, so a pointer anywhere inside one is recognised.
struct PinnedBlocks {
  std::mutex mutex;
  std::map<uintptr_t, size_t> blocks;
};
PinnedBlocks& pinned_blocks() {
  static auto* blocks = new PinnedBlocks(); // leaked: tensors may be freed during static destruction
  return *blocks;
}

void free_pinned(void* data) {
  {
    auto& p = pinned_blocks();
    std::lock_guard<std::mutex> lock(p.mutex);
    p.blocks.erase(reinterpret_cast<uintptr_t>(data));
  }
  c10::free_cpu(data);
}

class PinnedHostAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    void* data = nbytes ? c10::alloc_cpu(nbytes) : nullptr;
    if (data) {
      auto& p = pinned_blocks();
      std::lock_guard<std::mutex> lock(p.mutex);
      p.blocks[reinterpret_cast<uintptr_t>(data)] = nbytes;
    }
    return {data, data, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count) std::memcpy(dest, src, count);
  }
};

} // namespace

c10::Allocator* pinned_host_allocator() {
  static PinnedHostAllocator allocator;
  return &allocator;
}

bool is_pinned_host_ptr(const void* ptr) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  auto& p = pinned_blocks();
  std::lock_guard<std::mutex> lock(p.mutex);
  auto it = p.blocks.upper_bound(address);
  if (it == p.blocks.begin()) return false;
  --it;
  return address < it->first + it->second;
}

} // namespace torch_fl::emulation
