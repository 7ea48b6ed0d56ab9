// The emulation's device kernels as torch.profiler sees them. Under emulation a routed call's vendor kernel runs on
// the calling thread, so its device time is that stretch of host time: the router reports it here (dispatch/
// counters.h's Timer, at the kernel phase), and the kineto plugin (profiler_kineto.cpp) hands each one to
// torch.profiler as a flagos kernel of the operator it ran under, as CUPTI does for CUDA kernels. Off, a routed call
// pays one relaxed load. GPU vendors leave it off: their kernels come from the vendor's own activity (CUPTI).
#pragma once

#include <ATen/core/operator_name.h>

#include <atomic>
#include <cstdint>

namespace torch_fl::profiler_kernels {

extern std::atomic<bool> g_recording;
inline bool recording() { return g_recording.load(std::memory_order_relaxed); }

// The vendor kernel of `op` ran from `start_ns` to `end_ns` on this thread (steady clock, as the router's Timer).
void record(const c10::OperatorName& op, int64_t start_ns, int64_t end_ns);

} // namespace torch_fl::profiler_kernels
