// The vendor runtime behind the flagos device.
//
// Every flagos tensor lives in memory owned by one vendor runtime: host memory
// under CPU emulation, CUDA memory on NVIDIA, HIP memory (seen by torch as CUDA)
// on DCU. The device-level registrations (runtime/device.h: allocator, guard,
// hooks, generator) and the router only talk to this interface, so adding a
// vendor means adding a Runtime, not touching the router.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "runtime/module_launch.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace at {
class Generator;
}
namespace c10::CachingDeviceAllocator {
struct DeviceStats; // c10/core/CachingDeviceAllocator.h, needed only where stats are made or read
}

namespace torch_fl {

class Runtime {
 public:
  virtual ~Runtime() = default;

  // "cpu" (emulation), "cuda" or "dcu": the FLAGOS_ACCELERATOR value.
  virtual const char* name() const = 0;
  // The torch device type/key whose kernels the native route runs.
  virtual c10::DeviceType vendor_type() const = 0;
  virtual c10::DispatchKey vendor_key() const = 0;
  c10::Device vendor_device(c10::DeviceIndex index) const {
    return vendor_type() == c10::DeviceType::CPU
        ? c10::Device(c10::DeviceType::CPU)
        : c10::Device(vendor_type(), index);
  }

  virtual c10::DeviceIndex device_count() const = 0;
  virtual c10::DeviceIndex current_device() const = 0;
  virtual void set_device(c10::DeviceIndex index) const = 0;
  // Whether the device has been set up in this process (a GPU context exists); emulated devices always are.
  virtual bool in_use(c10::DeviceIndex index) const { return true; }

  // Memory for flagos storages; the DataPtr is tagged with the flagos device.
  virtual c10::Allocator* allocator() = 0;
  // Account for memory the vendor's own kernels allocated (native-route outputs)
  // and that a flagos tensor takes over; the returned DataPtr releases it.
  virtual c10::DataPtr adopt(c10::DataPtr vendor_ptr, size_t nbytes, c10::DeviceIndex index) = 0;
  // Statistics of flagos memory in torch's own terms: the flagos c10::DeviceAllocator (allocator.cpp) hands
  // them to torch.accelerator.memory_stats & co. A vendor fills the fields it keeps and leaves the rest 0.
  virtual c10::CachingDeviceAllocator::DeviceStats memory_stats(c10::DeviceIndex index) const = 0;
  virtual void reset_peak_memory_stats(c10::DeviceIndex index) = 0;
  virtual void reset_accumulated_memory_stats(c10::DeviceIndex index) = 0;
  // Give cached, unused device memory back to the system (a no-op where nothing is cached).
  virtual void empty_cache() = 0;
  // Free and total bytes of the device (torch.accelerator.get_memory_info, torch.flagos.mem_get_info): the
  // driver's count on GPUs, which sees every process; under emulation the emulated capacity less the bytes in use.
  virtual std::pair<size_t, size_t> memory_info(c10::DeviceIndex index) const = 0;
  // The device that `ptr` (device memory) is on, for at::from_blob & co.
  virtual c10::DeviceIndex device_of(const void* ptr) const = 0;

  // Streams and events, in flagos terms: on GPUs they are the vendor's, relabelled with the flagos device; under
  // emulation every stream is one serial queue (kernels finish before they return) and events carry host time.
  virtual c10::Stream current_stream(c10::DeviceIndex index) const = 0;
  virtual c10::Stream exchange_stream(c10::Stream stream) const = 0;
  virtual c10::Stream new_stream(c10::DeviceIndex index, int priority) const = 0;
  virtual c10::Stream pool_stream(c10::DeviceIndex index, bool high_priority) const = 0;
  virtual bool query_stream(const c10::Stream& stream) const = 0;
  virtual void synchronize_stream(const c10::Stream& stream) const = 0;
  virtual void synchronize(c10::DeviceIndex index) const = 0;

  virtual void record_event(void** event, const c10::Stream& stream, c10::EventFlag flag) const = 0;
  virtual void block_on_event(void* event, const c10::Stream& stream) const = 0;
  virtual bool query_event(void* event) const = 0;
  virtual void synchronize_event(void* event) const = 0;
  virtual double elapsed_ms(void* start, void* end, c10::DeviceIndex index) const = 0;
  virtual void destroy_event(void* event, c10::DeviceIndex index) const noexcept = 0;

  // Keep the memory behind `ptr` from being reused until the work queued on `stream` so far has finished
  // (tensor.record_stream). `ptr` is a flagos storage's own DataPtr, never a re-tagged alias.
  virtual void record_stream(const c10::DataPtr& ptr, const c10::Stream& stream) const = 0;

  // Pinned host memory for fast, asynchronous copies (pin_memory(), non_blocking=True).
  virtual c10::Allocator* pinned_allocator() = 0;
  virtual bool is_pinned(const void* ptr) const = 0;
  // Hand the unused pinned host memory the vendor caches back to the system (torch.accelerator.empty_host_cache).
  virtual void empty_host_cache() = 0;

  // Launch one function of a loaded module (a compiled Triton kernel the replay cache recorded) on the device's
  // current stream. Under emulation `launch.function` is a host function `void(const uint32_t grid[3], void**
  // params)` that runs at once, so the replay path is exercised without a GPU.
  virtual void launch_module(const ModuleLaunch& launch, c10::DeviceIndex index, void** params) const = 0;

  // The generator the vendor's kernels draw from for this device.
  virtual const at::Generator& vendor_generator(c10::DeviceIndex index) const = 0;
  virtual at::Generator new_vendor_generator(c10::DeviceIndex index) const = 0;
};

// The runtime chosen at start-up (torch_fl._core.init). Throws if none is active.
Runtime& runtime();
bool runtime_ready();
// Names of the runtimes compiled into this build, best first.
std::vector<std::string> built_runtimes();
// Select the runtime; only once per process. Throws with the valid names. `trap_host_access`
// (emulation only, FLAGOS_EMU_TRAP) protects device memory from host reads (runtime/host_access.h).
void init_runtime(const std::string& name, int emulated_devices, bool trap_host_access = false);

// Factories, one per vendor translation unit.
Runtime* make_emulation_runtime(int device_count, bool trap_host_access);
#ifdef TORCH_FL_WITH_CUDA
Runtime* make_cuda_runtime(const char* name);
#endif

inline c10::Device flagos_device(c10::DeviceIndex index) {
  return c10::Device(c10::DeviceType::PrivateUse1, index);
}

} // namespace torch_fl
