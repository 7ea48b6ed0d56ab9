// The flagos device as torch sees it: allocator, device guard, hooks and
// generators registered for PrivateUse1. Each one forwards to the vendor
// runtime selected at start-up (runtime/runtime.h).
#include "runtime/runtime.h"

#include <ATen/core/Generator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <memory>
#include <mutex>

namespace torch_fl {
namespace {

Runtime* g_runtime = nullptr;
std::once_flag g_hooks_once;

c10::DeviceIndex checked_index(c10::DeviceIndex index) {
  return index < 0 ? runtime().current_device() : index;
}

// ---- allocator -------------------------------------------------------------
// Registered at load time, before any runtime exists, so it forwards.
class FlagosAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    return runtime().allocator()->allocate(nbytes);
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    runtime().allocator()->copy_data(dest, src, count);
  }
};
FlagosAllocator g_allocator;

// ---- generator ---------------------------------------------------------------
// A flagos generator owns a vendor generator and forwards to it; the router
// hands the vendor generator to the vendor kernels (which check its type).
class FlagosGenerator final : public c10::GeneratorImpl {
 public:
  FlagosGenerator(c10::DeviceIndex index, at::Generator vendor)
      : c10::GeneratorImpl(flagos_device(index), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        vendor_(std::move(vendor)) {}

  const at::Generator& vendor() const { return vendor_; }

  void set_current_seed(uint64_t seed) override {
    std::lock_guard<std::mutex> lock(vendor_.mutex());
    vendor_.set_current_seed(seed);
  }
  void set_offset(uint64_t offset) override {
    std::lock_guard<std::mutex> lock(vendor_.mutex());
    vendor_.set_offset(offset);
  }
  uint64_t get_offset() const override { return vendor_.get_offset(); }
  uint64_t current_seed() const override { return vendor_.current_seed(); }
  uint64_t seed() override {
    std::lock_guard<std::mutex> lock(vendor_.mutex());
    return vendor_.seed();
  }
  void set_state(const c10::TensorImpl& new_state) override {
    std::lock_guard<std::mutex> lock(vendor_.mutex());
    vendor_.unsafeGetGeneratorImpl()->set_state(new_state);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    return vendor_.unsafeGetGeneratorImpl()->get_state();
  }
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

 private:
  FlagosGenerator* clone_impl() const override {
    return new FlagosGenerator(device().index(), vendor_.clone());
  }
  at::Generator vendor_;
};

std::vector<at::Generator>& default_generators() {
  static std::vector<at::Generator> generators;
  return generators;
}

// ---- device guard ------------------------------------------------------------
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
  void recordDataPtrOnStream(const c10::DataPtr& ptr, const c10::Stream& stream) const override {
    runtime().record_stream(ptr, stream);
  }
};

// ---- hooks -----------------------------------------------------------------------
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
    const auto i = checked_index(index);
    auto& generators = default_generators();
    TORCH_CHECK(i >= 0 && i < static_cast<c10::DeviceIndex>(generators.size()),
        "no flagos device ", int(i));
    return generators[i];
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    const auto i = checked_index(index);
    return at::make_generator<FlagosGenerator>(i, runtime().new_vendor_generator(i));
  }
  at::Device getDeviceFromPtr(void*) const override {
    return flagos_device(runtime().current_device());
  }
  // Pinned host memory is the vendor's (CUDA's caching host allocator on GPUs).
  bool isPinnedPtr(const void* ptr) const override { return runtime_ready() && runtime().is_pinned(ptr); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return runtime().pinned_allocator(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override;
};

FlagosHooks g_hooks;

} // namespace

// Used by the resize kernels as well as by untyped storage resize.
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

void FlagosHooks::resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const {
  resize_storage_bytes(storage, newsize);
}

Runtime& runtime() {
  TORCH_CHECK(g_runtime != nullptr,
      "the flagos runtime is not initialised: import torch_fl before using the flagos device");
  return *g_runtime;
}

bool runtime_ready() { return g_runtime != nullptr; }

std::vector<std::string> built_runtimes() {
#ifdef TORCH_FL_WITH_CUDA
#ifdef TORCH_FL_WITH_HIP
  return {"dcu", "cpu"};
#else
  return {"cuda", "cpu"};
#endif
#else
  return {"cpu"};
#endif
}

void init_runtime(const std::string& name, int emulated_devices, bool trap_host_access) {
  TORCH_CHECK(g_runtime == nullptr, "the flagos runtime is already initialised as '",
      g_runtime ? g_runtime->name() : "", "'");
  TORCH_CHECK(!trap_host_access || name == "cpu", "FLAGOS_EMU_TRAP applies to the CPU emulation only, not to FLAGOS_ACCELERATOR=",
      name, " (device memory there is not host memory); unset one of the two");
  Runtime* chosen = nullptr;
  if (name == "cpu") {
    chosen = make_emulation_runtime(emulated_devices, trap_host_access);
  }
#ifdef TORCH_FL_WITH_CUDA
  else if (name == built_runtimes().front()) {
    chosen = make_cuda_runtime(name.c_str());
  }
#endif
  if (chosen == nullptr) {
    std::string valid;
    for (const auto& n : built_runtimes()) valid += (valid.empty() ? "" : ", ") + n;
    TORCH_CHECK(false, "FLAGOS_ACCELERATOR=", name, " is not supported by this build of torch_fl; ",
        "this build supports: ", valid);
  }
  g_runtime = chosen; // never freed: tensors may outlive any teardown order
  for (c10::DeviceIndex i = 0; i < chosen->device_count(); ++i) {
    default_generators().push_back(
        at::make_generator<FlagosGenerator>(i, chosen->vendor_generator(i)));
  }
  std::call_once(g_hooks_once, [] { at::RegisterPrivateUse1HooksInterface(&g_hooks); });
}

// The vendor generator behind a flagos generator (for the router).
at::Generator vendor_generator_of(const at::Generator& gen) {
  if (!gen.defined() || gen.device().type() != c10::DeviceType::PrivateUse1) return gen;
  return static_cast<FlagosGenerator*>(gen.unsafeGetGeneratorImpl())->vendor();
}

C10_REGISTER_GUARD_IMPL(PrivateUse1, FlagosGuardImpl);
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

} // namespace torch_fl
