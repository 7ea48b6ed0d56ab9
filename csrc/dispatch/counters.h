// Host time the router spends on each operator, split by phase, behind a switch
// (torch_fl._core.set_router_counters). Off, a call pays two relaxed loads (this switch and the profiler's); on, four
// clock reads and one locked table update. It answers what a profiler cannot at
// µs scale: of an op's host time on flagos, how much is the re-tag (arguments in,
// results out, the call's bookkeeping released) and how much the vendor kernel.
#pragma once

#include "runtime/profiler_kernels.h"

#include <ATen/core/operator_name.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace torch_fl::counters {

enum Phase : int { kArguments, kKernel, kResults, kRelease, kPhases };

extern std::atomic<bool> g_on;
inline bool on() { return g_on.load(std::memory_order_relaxed); }
void set_on(bool on);

struct Row {
  std::string op;
  std::string path; // "fast", "boxed" (native), "provider" or "copy"
  int64_t calls = 0;
  std::array<int64_t, kPhases> ns{}; // summed over the calls
};
void add(const c10::OperatorName& op, const char* path, const std::array<int64_t, kPhases>& ns);
std::vector<Row> rows();
void reset();

// One call's clock: made first in a router entry, so its destructor runs after the
// call's Retagger and vendor arguments are gone (the release phase).
// It also times the vendor kernel for torch.profiler while the emulation's kernels are recorded
// (runtime/profiler_kernels.h).
class Timer {
 public:
  Timer(const c10::OperatorName& op, const char* path) {
    if (on() || profiler_kernels::recording()) {
      op_ = &op;
      path_ = path;
      last_ = now();
    }
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  void mark(Phase phase) {
    if (op_ == nullptr) return;
    const int64_t t = now();
    if (phase == kKernel && profiler_kernels::recording()) profiler_kernels::record(*op_, last_, t);
    ns_[phase] += t - last_;
    last_ = t;
  }
  ~Timer() {
    if (op_ == nullptr) return;
    mark(kRelease);
    if (on()) add(*op_, path_, ns_);
  }

 private:
  static int64_t now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  const c10::OperatorName* op_ = nullptr;
  const char* path_ = "";
  int64_t last_ = 0;
  std::array<int64_t, kPhases> ns_{};
};

} // namespace torch_fl::counters
