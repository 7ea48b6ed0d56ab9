// The flagos device guard: current device, streams and events as torch's generic code (device guards,
// torch.Stream, torch.Event, autograd's stream sync) asks for them. Each call forwards to the vendor runtime.
#include "compat/torch_compat.h"
#include "runtime/device.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

namespace torch_fl {
namespace {

class FlagosGuardImpl final : public c10::impl::DeviceGuardImplInterface {
 public:
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }

  c10::Device exchangeDevice(c10::Device device) const override {
    const c10::Device old = getDevice();
    if (old.index() != device.index()) setDevice(device);
    return old;
  }
  c10::Device getDevice() const override {
    return flagos_device(runtime().current_device());
  }
  void setDevice(c10::Device device) const override {
    TORCH_CHECK(device.is_privateuseone(), "expected a flagos device, got ", device);
    const auto index = checked_index(device.index());
    TORCH_CHECK(index < runtime().device_count(), "flagos:", int(index), " does not exist: this process has ",
        int(runtime().device_count()), " flagos device(s) (FLAGOS_ACCELERATOR=", runtime().name(), ")");
    runtime().set_device(index);
  }
  void uncheckedSetDevice(c10::Device device) const noexcept override {
    try {
      setDevice(device);
    } catch (...) {
    }
  }
#if TORCH_FL_GUARD_HAS_DEVICE_CAPABILITY
  // torch.accelerator.get_device_capability: the dtypes flagos tensors can hold are the vendor device's, since its
  // kernels serve them. A vendor that does not say (CUDA's guard on some torch lines) gets torch's default, every
  // dtype, as flagos memory holds any of them.
  c10::DeviceCapability getDeviceCapability(c10::Device device) const override {
    const auto index = checked_index(device.index());
    try {
      const auto* vendor = c10::impl::getDeviceGuardImpl(runtime().vendor_type());
      return vendor->getDeviceCapability(runtime().vendor_device(index));
    } catch (const c10::Error&) {
      return c10::DeviceCapability();
    }
  }
#endif
  c10::Stream getStream(c10::Device device) const override {
    return runtime().current_stream(checked_index(device.index()));
  }
  c10::Stream getDefaultStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::DEFAULT, flagos_device(checked_index(device.index())));
  }
  c10::Stream getNewStream(c10::Device device, int priority) const override {
    return runtime().new_stream(checked_index(device.index()), priority);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool isHighPriority) const override {
    return runtime().pool_stream(checked_index(device.index()), isHighPriority);
  }
  c10::Stream exchangeStream(c10::Stream stream) const override {
    return runtime().exchange_stream(stream);
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return runtime_ready() ? runtime().device_count() : 0;
  }
  void synchronizeDevice(const c10::DeviceIndex index) const override {
    runtime().synchronize(checked_index(index));
  }
  void synchronizeStream(const c10::Stream& stream) const override { runtime().synchronize_stream(stream); }
  bool queryStream(const c10::Stream& stream) const override { return runtime().query_stream(stream); }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex index,
      const c10::EventFlag flag) const override {
    TORCH_CHECK(index == -1 || index == stream.device_index(), "event device index ", int(index),
        " does not match the stream's device flagos:", int(stream.device_index()));
    runtime().record_event(event, stream, flag);
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (event) runtime().block_on_event(event, stream); // an event never recorded is complete
  }
  bool queryEvent(void* event) const override { return event == nullptr || runtime().query_event(event); }
  void destroyEvent(void* event, const c10::DeviceIndex index) const noexcept override {
    if (event && runtime_ready()) runtime().destroy_event(event, index);
  }
  void synchronizeEvent(void* event) const override {
    if (event) runtime().synchronize_event(event);
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex index) const override {
    return runtime().elapsed_ms(start, end, index);
  }
  // The flagos DataPtr is the vendor allocator's own block, so the vendor runtime records the use.
  void recordDataPtrOnStream(const c10::DataPtr& ptr, const c10::Stream& stream) const override {
    runtime().record_stream(ptr, stream);
  }
};

} // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, FlagosGuardImpl);

} // namespace torch_fl
