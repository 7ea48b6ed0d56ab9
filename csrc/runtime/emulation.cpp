// CPU emulation runtime: N flagos devices backed by host memory.
//
// Kernels run synchronously on the host, so every stream is one serial queue
// (emulation_streams.h), but device indices, per-device memory accounting and per-device generators
// are real: multi-device code paths (guards, cross-device copies) behave as
// they do on an accelerator. Random numbers come from the CPU default
// generator (see the constructor).
#include "runtime/emulation_memory.h"
#include "runtime/emulation_pinned.h"
#include "runtime/emulation_streams.h"
#include "runtime/host_access.h"
#include "runtime/runtime.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>

namespace torch_fl {
namespace {

thread_local c10::DeviceIndex tls_current_device = 0;

struct DeviceCounters {
  std::atomic<int64_t> allocated{0};
  std::atomic<int64_t> peak{0};

  void add(int64_t n) {
    const int64_t now = allocated.fetch_add(n) + n;
    int64_t seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
  }
  void sub(int64_t n) { allocated.fetch_sub(n); }
};

class EmulationRuntime;

// What the deleter needs to undo an allocation: the block and who to credit.
struct HostBlock {
  DeviceCounters* counters;
  size_t nbytes;
  void* data;
  c10::DeviceIndex index;
};

struct AdoptedBlock {
  DeviceCounters* counters;
  size_t nbytes;
  c10::DataPtr inner;
  c10::DeviceIndex index;
};

// What every allocation and release tells the outside: the memory history while it is recorded
// (emulation_memory.h) and torch.profiler's memory columns while it profiles memory. Each costs one load when off.
void noted_alloc(DeviceCounters* counters, c10::DeviceIndex index, void* data, size_t nbytes) {
  if (emulation::tracking()) emulation::on_alloc(index, data, nbytes);
  if (data != nullptr && c10::memoryProfilingEnabled()) {
    const auto in_use = static_cast<size_t>(counters->allocated.load());
    c10::reportMemoryUsageToProfiler(data, static_cast<int64_t>(nbytes), in_use, in_use, flagos_device(index));
  }
}

void noted_free(DeviceCounters* counters, c10::DeviceIndex index, void* data, size_t nbytes) {
  if (emulation::tracking()) emulation::on_free(index, data, nbytes);
  if (data != nullptr && c10::memoryProfilingEnabled()) {
    const auto in_use = static_cast<size_t>(counters->allocated.load());
    c10::reportMemoryUsageToProfiler(data, -static_cast<int64_t>(nbytes), in_use, in_use, flagos_device(index));
  }
}

// The device's memory limit (FLAGOS_EMU_MEMORY times the per-process fraction) is checked before the host is
// asked, so a too-large request is torch's OutOfMemoryError, as on a GPU. Two threads may pass the check together
// and overshoot by one allocation: the limit is a device's, not a hard quota.
void admit(const DeviceCounters* counters, c10::DeviceIndex index, size_t nbytes) {
  const int64_t in_use = counters->allocated.load(std::memory_order_relaxed);
  if (static_cast<int64_t>(nbytes) > emulation::memory_limit(index) - in_use) {
    emulation::out_of_memory(index, nbytes, in_use);
  }
}

// The host's own failure (less host memory than the emulated capacity) is an out-of-memory error too.
template <class Allocate>
void* host_allocation(const DeviceCounters* counters, c10::DeviceIndex index, size_t nbytes, Allocate allocate) {
  try {
    return allocate();
  } catch (const c10::OutOfMemoryError&) {
    throw;
  } catch (const c10::Error& error) {
    emulation::out_of_memory(index, nbytes, counters->allocated.load(), error.what_without_backtrace());
  }
}

// Counts a block's bytes as freed and drops its bookkeeping; the caller gives the returned memory back to where it
// came from (the host heap, or the trap's protected pages).
void* forget_block(void* ctx) {
  auto* block = static_cast<HostBlock*>(ctx);
  block->counters->sub(static_cast<int64_t>(block->nbytes));
  noted_free(block->counters, block->index, block->data, block->nbytes);
  void* data = block->data;
  delete block;
  return data;
}

void free_host_block(void* ctx) {
  c10::free_cpu(forget_block(ctx));
}

void free_trapped_block(void* ctx) {
  host_access::free_block(forget_block(ctx));
}

// Device memory under the trap: a protected block (runtime/host_access.h).
c10::DataPtr trapped_allocation(DeviceCounters* counters, size_t nbytes, c10::DeviceIndex index) {
  admit(counters, index, nbytes);
  void* data =
      nbytes ? host_allocation(counters, index, nbytes, [&] { return host_access::allocate_block(nbytes); }) : nullptr;
  counters->add(static_cast<int64_t>(nbytes));
  if (data == nullptr) {
    return {nullptr, new HostBlock{counters, 0, nullptr, index}, &free_host_block, flagos_device(index)};
  }
  noted_alloc(counters, index, data, nbytes);
  return {data, new HostBlock{counters, nbytes, data, index}, &free_trapped_block, flagos_device(index)};
}

void free_adopted_block(void* ctx) {
  auto* block = static_cast<AdoptedBlock*>(ctx);
  block->counters->sub(static_cast<int64_t>(block->nbytes));
  noted_free(block->counters, block->index, block->inner.get(), block->nbytes);
  delete block; // releases the vendor allocation through its own deleter
}

class HostAllocator final : public c10::Allocator {
 public:
  explicit HostAllocator(std::vector<std::unique_ptr<DeviceCounters>>* counters)
      : counters_(counters) {}

  c10::DataPtr allocate(size_t nbytes) override {
    const c10::DeviceIndex index = tls_current_device;
    auto* counters = (*counters_)[index].get();
    if (host_access::enabled()) return trapped_allocation(counters, nbytes, index);
    admit(counters, index, nbytes);
    void* data = nbytes ? host_allocation(counters, index, nbytes, [&] { return c10::alloc_cpu(nbytes); }) : nullptr;
    counters->add(static_cast<int64_t>(nbytes));
    noted_alloc(counters, index, data, nbytes);
    auto* block = new HostBlock{counters, nbytes, data, index};
    return {data, block, &free_host_block, flagos_device(index)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (!count) return;
    host_access::Scope access; // device memory may be copied by the device itself
    access.open(dest);
    access.open(src);
    std::memcpy(dest, src, count);
  }

 private:
  std::vector<std::unique_ptr<DeviceCounters>>* counters_;
};

class EmulationRuntime final : public Runtime {
 public:
  EmulationRuntime(int device_count, bool trap_host_access) : allocator_(&counters_) {
    if (trap_host_access) host_access::enable();
    TORCH_CHECK(device_count >= 1 && device_count <= 16,
        "FLAGOS_EMU_DEVICES must be between 1 and 16, got ", device_count);
    for (int i = 0; i < device_count; ++i) {
      counters_.push_back(std::make_unique<DeviceCounters>());
      // Every emulated device draws from torch's CPU default generator: CPU
      // kernels without a generator argument (dropout, ...) use it anyway, so
      // one stream is the only way seeding flagos reproduces every op.
      generators_.push_back(at::detail::getDefaultCPUGenerator());
    }
  }

  const char* name() const override { return "cpu"; }
  c10::DeviceType vendor_type() const override { return c10::DeviceType::CPU; }
  c10::DispatchKey vendor_key() const override { return c10::DispatchKey::CPU; }

  c10::DeviceIndex device_count() const override {
    return static_cast<c10::DeviceIndex>(counters_.size());
  }
  c10::DeviceIndex current_device() const override { return tls_current_device; }
  void set_device(c10::DeviceIndex index) const override {
    check_index(index);
    tls_current_device = index;
  }

  c10::Allocator* allocator() override { return &allocator_; }

  c10::DataPtr adopt(c10::DataPtr vendor_ptr, size_t nbytes, c10::DeviceIndex index) override {
    check_index(index);
    auto* counters = counters_[index].get();
    if (host_access::enabled()) {
      // The vendor kernel wrote its result into ordinary host memory: move it behind the trap.
      c10::DataPtr trapped = trapped_allocation(counters, nbytes, index);
      allocator_.copy_data(trapped.get(), vendor_ptr.get(), nbytes);
      return trapped;
    }
    // The vendor kernel has allocated already; the limit still applies, so memory held on the device never exceeds
    // it whichever kernel allocated (the result is released on the way out).
    admit(counters, index, nbytes);
    counters->add(static_cast<int64_t>(nbytes));
    void* data = vendor_ptr.get();
    noted_alloc(counters, index, data, nbytes);
    auto* block = new AdoptedBlock{counters, nbytes, std::move(vendor_ptr), index};
    return {data, block, &free_adopted_block, flagos_device(index)};
  }

  // Live and peak bytes only: adopt() is on every native-route call, so it pays for no other counter. With no
  // cache every byte held is in use, so reserved and active bytes are the allocated ones.
  c10::CachingDeviceAllocator::DeviceStats memory_stats(c10::DeviceIndex index) const override {
    check_index(index);
    c10::CachingDeviceAllocator::DeviceStats stats;
    auto& all = stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
    all.current = counters_[index]->allocated.load();
    all.peak = counters_[index]->peak.load();
    stats.reserved_bytes = stats.allocated_bytes;
    stats.active_bytes = stats.allocated_bytes;
    return stats;
  }
  void reset_peak_memory_stats(c10::DeviceIndex index) override {
    check_index(index);
    counters_[index]->peak.store(counters_[index]->allocated.load());
  }
  void reset_accumulated_memory_stats(c10::DeviceIndex index) override { check_index(index); } // none kept
  void empty_cache() override {} // nothing cached: freed blocks go straight back to the host
  // Each emulated device has the capacity FLAGOS_EMU_MEMORY sets (the host's memory by default), and only this
  // process uses it.
  std::pair<size_t, size_t> memory_info(c10::DeviceIndex index) const override {
    check_index(index);
    const int64_t total = emulation::capacity();
    const int64_t free_bytes = std::max<int64_t>(total - counters_[index]->allocated.load(), 0);
    return {static_cast<size_t>(free_bytes), static_cast<size_t>(total)};
  }
  void empty_host_cache() override {} // pinned blocks are not cached either (emulation_pinned.cpp)
  // Emulated device memory is ordinary host memory that records no device: answer the current one.
  c10::DeviceIndex device_of(const void*) const override { return tls_current_device; }

  c10::Stream current_stream(c10::DeviceIndex index) const override {
    check_index(index);
    return streams_.current(index);
  }
  c10::Stream exchange_stream(c10::Stream stream) const override {
    check_index(stream.device_index());
    return streams_.exchange(stream);
  }
  c10::Stream new_stream(c10::DeviceIndex index, int) const override {
    check_index(index);
    return streams_.create(index);
  }
  c10::Stream pool_stream(c10::DeviceIndex index, bool) const override { return new_stream(index, 0); }
  // Host kernels have finished when they return: nothing is ever pending.
  bool query_stream(const c10::Stream&) const override { return true; }
  void synchronize_stream(const c10::Stream& stream) const override { check_index(stream.device_index()); }
  void synchronize(c10::DeviceIndex index) const override { check_index(index); }

  void record_event(void** event, const c10::Stream&, c10::EventFlag flag) const override {
    emulation::record_host_event(event, flag);
  }
  void block_on_event(void*, const c10::Stream&) const override {}
  bool query_event(void*) const override { return true; }
  void synchronize_event(void*) const override {}
  double elapsed_ms(void* start, void* end, c10::DeviceIndex) const override {
    return emulation::host_elapsed_ms(start, end);
  }
  void destroy_event(void* event, c10::DeviceIndex) const noexcept override {
    emulation::destroy_host_event(event);
  }
  void record_stream(const c10::DataPtr&, const c10::Stream&) const override {} // one serial queue

  void launch_module(const ModuleLaunch& launch, c10::DeviceIndex index, void** params) const override {
    check_index(index);
    TORCH_CHECK(launch.function != nullptr, "launch_module: no function");
    reinterpret_cast<void (*)(const uint32_t*, void**)>(launch.function)(launch.grid, params);
  }

  c10::Allocator* pinned_allocator() override { return emulation::pinned_host_allocator(); }
  bool is_pinned(const void* ptr) const override { return emulation::is_pinned_host_ptr(ptr); }

  const at::Generator& vendor_generator(c10::DeviceIndex index) const override {
    check_index(index);
    return generators_[index];
  }
  at::Generator new_vendor_generator(c10::DeviceIndex index) const override {
    check_index(index);
    return at::detail::createCPUGenerator();
  }

 private:
  void check_index(c10::DeviceIndex index) const {
    TORCH_CHECK(index >= 0 && index < device_count(), "flagos device index ", int(index),
        " is out of range: this process has ", int(device_count()),
        " emulated devices (set FLAGOS_EMU_DEVICES to change)");
  }

  std::vector<std::unique_ptr<DeviceCounters>> counters_;
  std::vector<at::Generator> generators_;
  HostAllocator allocator_;
  emulation::SerialStreams streams_;
};

} // namespace

Runtime* make_emulation_runtime(int device_count, bool trap_host_access) {
  return new EmulationRuntime(device_count, trap_host_access);
}

} // namespace torch_fl
