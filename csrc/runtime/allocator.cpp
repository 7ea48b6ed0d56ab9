// The flagos device allocator, and resizing flagos storages with it. Registered at load time, before any runtime
// exists, so every call forwards to the runtime chosen later.
#include "runtime/device.h"

#include <c10/core/StorageImpl.h>
#include <c10/util/Exception.h>

#include <algorithm>

namespace torch_fl {
namespace {

class FlagosAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override { return runtime().allocator()->allocate(nbytes); }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    runtime().allocator()->copy_data(dest, src, count);
  }
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
