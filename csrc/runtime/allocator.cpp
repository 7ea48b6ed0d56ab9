// The flagos device allocator. It is torch's c10::DeviceAllocator for PrivateUse1, so torch's generic memory APIs
// (torch.accelerator.memory_stats, memory_allocated, empty_cache, get_memory_info, ...) and any caller of
// c10::getDeviceAllocator (recordStream, ...) reach the vendor runtime's allocator and its statistics.
// (Tensor.record_stream takes the device guard's way, guard.cpp, to the same Runtime::record_stream.) Registered at
// load time, before any runtime exists, so every call forwards to the runtime chosen later.
#include "compat/torch_compat.h"
#include "runtime/device.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/Exception.h>

#include <algorithm>

namespace torch_fl {
namespace {

class FlagosAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override { return runtime().allocator()->allocate(nbytes); }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    runtime().allocator()->copy_data(dest, src, count);
  }

  // Before torch_fl._core.init there is no runtime, hence no memory: torch.accelerator's memory APIs return
  // empty statistics then, as they do for an allocator that has not started.
  bool initialized() override { return runtime_ready(); }
  // flagos exposes no private memory pools (no graph pools), so the pool id is always the default one.
  void emptyCache(c10::MempoolId_t) override { runtime().empty_cache(); }
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override { runtime().record_stream(ptr, stream); }
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex index) override {
    return runtime().memory_stats(checked_index(index));
  }
  void resetAccumulatedStats(c10::DeviceIndex index) override {
    runtime().reset_accumulated_memory_stats(checked_index(index));
  }
  void resetPeakStats(c10::DeviceIndex index) override { runtime().reset_peak_memory_stats(checked_index(index)); }
#if TORCH_FL_DEVICE_ALLOCATOR_HAS_MEMORY_INFO
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex index) override {
    return runtime().memory_info(checked_index(index));
  }
#endif
};

FlagosAllocator g_allocator;

} // namespace

void resize_storage_bytes(const c10::Storage& storage, size_t newsize) {
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
  const size_t old = impl->nbytes();
  const c10::DeviceIndex index = impl->device().index();
  const auto old_device = runtime().current_device();
  runtime().set_device(index);
  c10::DataPtr fresh = g_allocator.allocate(newsize);
  runtime().set_device(old_device);
  const size_t keep = std::min(old, newsize);
  if (keep && impl->data()) {
    g_allocator.copy_data(fresh.get(), impl->data(), keep);
  }
  impl->set_data_ptr_noswap(std::move(fresh));
  impl->set_nbytes(newsize);
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

} // namespace torch_fl
