// Streams and events of the CPU emulation (emulation.cpp composes them into its Runtime).
#pragma once

#include <c10/core/Event.h>
#include <c10/core/Stream.h>

namespace torch_fl::emulation {

// Emulated kernels run on the host and have finished when they return, so every stream is one serial queue:
// queries are always true and waits never block. Streams still have identities, so code that compares or
// switches streams (`with stream(s): current_stream() == s`) behaves as on a GPU.
class SerialStreams {
 public:
  c10::Stream current(c10::DeviceIndex index) const;
  c10::Stream exchange(c10::Stream stream) const;
  c10::Stream create(c10::DeviceIndex index) const;
};

// Events record the host clock, so elapsed_time works as it does with timing events on a GPU.
void record_host_event(void** event, c10::EventFlag flag);
double host_elapsed_ms(void* start, void* end);
void destroy_host_event(void* event) noexcept;

} // namespace torch_fl::emulation
