// torch.profiler's device events for flagos (its PrivateUse1 stubs): the profiler records an event on the current
// flagos stream when an operator starts and ends, and reports the time between them as the operator's device time
// (the "flagos" time columns of key_averages().table()). The events are the runtime's own: host-clock events under
// emulation, where an operator's kernels have finished when it returns, so device time is the kernels' host time;
// the vendor's timing events on GPUs. On CUDA torch.profiler's CUDA activity (CUPTI) gives the kernels themselves.
#include "runtime/device.h"

#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

namespace torch_fl {
namespace {

namespace prof = torch::profiler::impl;

class FlagosProfilerStubs final : public prof::ProfilerStubs {
 public:
  void record(c10::DeviceIndex* device, prof::ProfilerVoidEventStub* event, int64_t* cpu_ns) const override {
    const c10::DeviceIndex index = runtime().current_device();
    if (device != nullptr) *device = index;
    void* raw = nullptr;
    // BACKEND_DEFAULT is torch's enable_timing=True: an event whose time can be read back.
    runtime().record_event(&raw, runtime().current_stream(index), c10::EventFlag::BACKEND_DEFAULT);
    *event = std::shared_ptr<void>(raw, [index](void* e) { runtime().destroy_event(e, index); });
    if (cpu_ns != nullptr) *cpu_ns = c10::getTime();
  }

  // Microseconds, as torch's stubs answer.
  float elapsed(const prof::ProfilerVoidEventStub* start, const prof::ProfilerVoidEventStub* end) const override {
    runtime().synchronize_event(end->get());
    return static_cast<float>(runtime().elapsed_ms(start->get(), end->get(), runtime().current_device()) * 1000.0);
  }

  // Named ranges are a vendor tracer's (NVTX on CUDA); flagos has none of its own.
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}

  bool enabled() const override { return runtime_ready(); }

  void onEachDevice(std::function<void(int)> op) const override {
    const c10::DeviceIndex previous = runtime().current_device();
    for (c10::DeviceIndex i = 0; i < runtime().device_count(); ++i) {
      runtime().set_device(i);
      op(i);
    }
    runtime().set_device(previous);
  }

  void synchronize() const override { runtime().synchronize(runtime().current_device()); }
};

// Registered at load time, like the allocator: every call reaches the runtime chosen later.
struct Register {
  Register() {
    static FlagosProfilerStubs stubs;
    prof::registerPrivateUse1Methods(&stubs);
  }
} g_register;

} // namespace
} // namespace torch_fl
