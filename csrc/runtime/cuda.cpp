// CUDA runtime (also DCU: DTK's torch exposes HIP devices through the CUDA
// key). Flagos memory, streams, events and generators are CUDA's own, so the
// native route costs no copy and no synchronisation.
#include "compat/torch_compat.h"
#include "runtime/runtime.h"

#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/CachingHostAllocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <string>

namespace torch_fl {
namespace {

namespace cca = c10::cuda::CUDACachingAllocator;

// CUDA's caching allocator, with the blocks labelled as flagos memory.
class CudaBackedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DataPtr ptr = cca::get()->allocate(nbytes);
    ptr.unsafe_set_device(flagos_device(ptr.device().index()));
    return ptr;
  }
  c10::DeleterFnPtr raw_deleter() const override { return cca::get()->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    cca::get()->copy_data(dest, src, count);
  }
};

class CudaRuntime final : public Runtime {
 public:
  explicit CudaRuntime(const char* name) : name_(name), guard_(c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)) {}

  const char* name() const override { return name_.c_str(); }
  c10::DeviceType vendor_type() const override { return c10::DeviceType::CUDA; }
  c10::DispatchKey vendor_key() const override { return c10::DispatchKey::CUDA; }

  c10::DeviceIndex device_count() const override { return c10::cuda::device_count(); }
  c10::DeviceIndex current_device() const override { return c10::cuda::current_device(); }
  void set_device(c10::DeviceIndex index) const override { c10::cuda::set_device(index); }
  bool in_use(c10::DeviceIndex index) const override { return hooks().hasPrimaryContext(index); }

  c10::Allocator* allocator() override { return &allocator_; }
  c10::DataPtr adopt(c10::DataPtr vendor_ptr, size_t, c10::DeviceIndex index) override {
    // Already counted by the caching allocator's own statistics.
    vendor_ptr.unsafe_set_device(flagos_device(index));
    return vendor_ptr;
  }
  // The caching allocator's own statistics: torch.accelerator.memory_stats() on flagos is torch.cuda's.
  c10::CachingDeviceAllocator::DeviceStats memory_stats(c10::DeviceIndex index) const override {
    return cca::getDeviceStats(index);
  }
  void reset_peak_memory_stats(c10::DeviceIndex index) override { cca::resetPeakStats(index); }
  void reset_accumulated_memory_stats(c10::DeviceIndex index) override { cca::resetAccumulatedStats(index); }
  void empty_cache() override { cca::emptyCache(); }
  // The driver's count for the device, every process's memory included (what torch.cuda.mem_get_info reports),
  // as the caching allocator asks it. torch 2.9's allocator has no such question; torch.flagos.mem_get_info asks
  // the vendor's Python API there.
  std::pair<size_t, size_t> memory_info(c10::DeviceIndex index) const override {
#if TORCH_FL_DEVICE_ALLOCATOR_HAS_MEMORY_INFO
    c10::cuda::CUDAGuard guard(index);
    return cca::get()->getMemoryInfo(index);
#else
    TORCH_CHECK(false, "this torch line's allocator cannot say how much of flagos:", int(index),
        " is free: call torch.flagos.mem_get_info(", int(index), ") instead, which asks the vendor's Python API");
#endif
  }
  c10::DeviceIndex device_of(const void* ptr) const override {
    return hooks().getDeviceFromPtr(const_cast<void*>(ptr)).index(); // the driver's pointer attributes
  }

  c10::Stream current_stream(c10::DeviceIndex index) const override {
    return to_flagos(c10::cuda::getCurrentCUDAStream(index).unwrap());
  }
  c10::Stream exchange_stream(c10::Stream stream) const override {
    return to_flagos(guard_->exchangeStream(to_vendor(stream)));
  }
  c10::Stream new_stream(c10::DeviceIndex index, int priority) const override {
    return to_flagos(guard_->getNewStream(c10::Device(c10::DeviceType::CUDA, index), priority));
  }
  c10::Stream pool_stream(c10::DeviceIndex index, bool high_priority) const override {
    return to_flagos(guard_->getStreamFromGlobalPool(c10::Device(c10::DeviceType::CUDA, index), high_priority));
  }
  bool query_stream(const c10::Stream& stream) const override { return guard_->queryStream(to_vendor(stream)); }
  void synchronize_stream(const c10::Stream& stream) const override {
    guard_->synchronizeStream(to_vendor(stream));
  }
  void synchronize(c10::DeviceIndex index) const override {
    c10::cuda::CUDAGuard guard(index);
    c10::cuda::device_synchronize();
  }

  void record_event(void** event, const c10::Stream& stream, c10::EventFlag flag) const override {
    guard_->record(event, to_vendor(stream), stream.device_index(), flag);
  }
  void block_on_event(void* event, const c10::Stream& stream) const override {
    guard_->block(event, to_vendor(stream));
  }
  bool query_event(void* event) const override { return guard_->queryEvent(event); }
  void synchronize_event(void* event) const override { guard_->synchronizeEvent(event); }
  double elapsed_ms(void* start, void* end, c10::DeviceIndex index) const override {
    return guard_->elapsedTime(start, end, index);
  }
  void destroy_event(void* event, c10::DeviceIndex index) const noexcept override {
    guard_->destroyEvent(event, index);
  }
  // The flagos DataPtr is the caching allocator's own block (relabelled), so the allocator finds it.
  void record_stream(const c10::DataPtr& ptr, const c10::Stream& stream) const override {
    guard_->recordDataPtrOnStream(ptr, to_vendor(stream));
  }

  void launch_module(const ModuleLaunch& launch, c10::DeviceIndex index, void** params) const override {
    const std::string problem =
        launch_module_function(launch, c10::cuda::getCurrentCUDAStream(index).stream(), params);
    TORCH_CHECK(problem.empty(), "flagos: launching a recorded kernel on ", name_, ":", int(index), " failed: ",
        problem);
  }

  c10::Allocator* pinned_allocator() override { return hooks().getPinnedMemoryAllocator(); }
  // flagos pinned memory is the vendor's (pinned_allocator above), so its cache is the vendor's host cache
  void empty_host_cache() override { at::getHostAllocator(c10::DeviceType::CUDA)->empty_cache(); }
  bool is_pinned(const void* ptr) const override { return hooks().isPinnedPtr(ptr); }

  const at::Generator& vendor_generator(c10::DeviceIndex index) const override {
    return at::cuda::detail::getDefaultCUDAGenerator(index);
  }
  at::Generator new_vendor_generator(c10::DeviceIndex index) const override {
    return at::cuda::detail::createCUDAGenerator(index);
  }

 private:
  // The vendor's own hooks (CUDA's, or HIP's under the CUDA name on DCU): pinned host memory, contexts. Asked
  // by device type, so this file names no vendor header that hipify would have to know.
  static const at::AcceleratorHooksInterface& hooks() {
    return at::globalContext().getAcceleratorHooksInterface(c10::DeviceType::CUDA);
  }
  static c10::Stream to_vendor(c10::Stream s) {
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::CUDA, s.device_index()), s.id());
  }
  static c10::Stream to_flagos(c10::Stream s) {
    return c10::Stream(c10::Stream::UNSAFE, flagos_device(s.device_index()), s.id());
  }

  const std::string name_;
  const c10::impl::DeviceGuardImplInterface* guard_;
  CudaBackedAllocator allocator_;
};

} // namespace

Runtime* make_cuda_runtime(const char* name) {
  return new CudaRuntime(name);
}

} // namespace torch_fl
