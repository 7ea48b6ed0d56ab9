// See emulation_streams.h. Only c10 headers: this unit compiles in seconds.
#include "runtime/emulation_streams.h"

#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace torch_fl::emulation {
namespace {

constexpr int kMaxDevices = 16; // FLAGOS_EMU_DEVICES is 1..16

// The current stream is per thread and per device, as on CUDA.
thread_local std::array<c10::StreamId, kMaxDevices> tls_current{};

std::atomic<c10::StreamId> g_next_stream{1}; // 0 is the default stream

c10::Stream make_stream(c10::DeviceIndex index, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, index), id);
}

struct HostEvent {
  std::chrono::steady_clock::time_point when{};
  bool recorded = false;
  bool timing = false;
};

} // namespace

c10::Stream SerialStreams::current(c10::DeviceIndex index) const {
  return make_stream(index, tls_current.at(index));
}

c10::Stream SerialStreams::exchange(c10::Stream stream) const {
  const auto index = stream.device_index();
  const c10::Stream old = current(index);
  tls_current.at(index) = stream.id();
  return old;
}

c10::Stream SerialStreams::create(c10::DeviceIndex index) const {
  return make_stream(index, g_next_stream.fetch_add(1));
}

void record_host_event(void** event, c10::EventFlag flag) {
  if (*event == nullptr) {
    auto* fresh = new HostEvent();
    fresh->timing = flag == c10::EventFlag::BACKEND_DEFAULT; // torch's enable_timing=True
    *event = fresh;
  }
  auto* e = static_cast<HostEvent*>(*event);
  e->when = std::chrono::steady_clock::now();
  e->recorded = true;
}

double host_elapsed_ms(void* start, void* end) {
  TORCH_CHECK(start && end, "Both events must be recorded before calculating elapsed time.");
  const auto* a = static_cast<const HostEvent*>(start);
  const auto* b = static_cast<const HostEvent*>(end);
  TORCH_CHECK(a->recorded && b->recorded, "Both events must be recorded before calculating elapsed time.");
  TORCH_CHECK(a->timing && b->timing,
      "Both events must be created with enable_timing=True to calculate elapsed time.");
  return std::chrono::duration<double, std::milli>(b->when - a->when).count();
}

void destroy_host_event(void* event) noexcept {
  delete static_cast<HostEvent*>(event);
}

} // namespace torch_fl::emulation
