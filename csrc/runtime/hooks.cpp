// The PrivateUse1 hooks: torch's questions about the flagos device that are not about one stream or one
// allocation (availability, pinned host memory, which device a pointer is on, generators, storage resizing).
#include "runtime/device.h"

#include <ATen/core/Generator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include <mutex>

namespace torch_fl {
namespace {

class FlagosHooks final : public at::PrivateUse1HooksInterface {
 public:
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return runtime_ready() && runtime().device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override {
    return runtime_ready() ? runtime().device_count() : 0;
  }
  void setCurrentDevice(c10::DeviceIndex device) const override { runtime().set_device(device); }
  c10::DeviceIndex getCurrentDevice() const override { return runtime().current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const auto old = runtime().current_device();
    runtime().set_device(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    return default_generator(index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override { return new_generator(index); }
  // Answered by the vendor from the pointer itself (on GPUs the driver knows every allocation).
  at::Device getDeviceFromPtr(void* ptr) const override { return flagos_device(runtime().device_of(ptr)); }
  // Pinned host memory is the vendor's (CUDA's caching host allocator on GPUs).
  bool isPinnedPtr(const void* ptr) const override { return runtime_ready() && runtime().is_pinned(ptr); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return runtime().pinned_allocator(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage_bytes(storage, newsize);
  }
};

FlagosHooks g_hooks;
std::once_flag g_hooks_once;

} // namespace

void register_hooks() {
  std::call_once(g_hooks_once, [] { at::RegisterPrivateUse1HooksInterface(&g_hooks); });
}

} // namespace torch_fl
