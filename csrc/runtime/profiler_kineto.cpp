// The emulation's kernels in torch.profiler (profiler_kernels.h): a kineto activity profiler that torch.profiler's
// PrivateUse1 activity (ProfilerActivity.PrivateUse1, "flagos") starts. Each kernel the router reports becomes a
// kernel activity linked to the innermost operator running on its thread, so key_averages() gives flagos operators
// device time and the trace has a flagos device row, as CUDA kernels do through CUPTI.
#include "compat/torch_compat.h"
#include "runtime/profiler_kernels.h"

#if TORCH_FL_KINETO_PLUGIN

#include "runtime/runtime.h"

#include <c10/util/ApproximateClock.h>
#include <kineto/GenericTraceActivity.h>
#include <kineto/IActivityProfiler.h>
#include <kineto/libkineto.h>
#include <kineto/output_base.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace torch_fl::profiler_kernels {

std::atomic<bool> g_recording{false};

namespace {

struct Kernel {
  std::string name;
  int64_t start_ns; // Unix time, the clock of torch.profiler's events
  int64_t end_ns;
  int64_t correlation; // the operator it ran under (0: none)
  int32_t device;
  int32_t thread;
};

std::mutex g_mutex;
std::vector<Kernel> g_kernels;

// The operators running on this thread, innermost last, by torch.profiler's correlation ids.
thread_local std::vector<uint64_t> tls_operators;

class Session final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_kernels.clear();
    }
    // Only the emulation reports kernels: a GPU vendor's come from its own activity.
    g_recording.store(runtime_ready() && std::string(runtime().name()) == "cpu");
    status_ = libkineto::TraceStatus::RECORDING;
  }
  void stop() override {
    g_recording.store(false);
    status_ = libkineto::TraceStatus::PROCESSING;
  }
  void pushCorrelationId(uint64_t id) override { tls_operators.push_back(id); }
  void popCorrelationId() override {
    if (!tls_operators.empty()) tls_operators.pop_back();
  }
  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override { processTrace(logger, nullptr, 0, 0); }
  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked_to,
      int64_t, int64_t) override {
    std::vector<Kernel> kernels;
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      kernels.swap(g_kernels);
    }
    for (const Kernel& k : kernels) {
      // Kept by the session: the logger may hold on to the activities it was given.
      auto& a = *activities_.emplace_back(std::make_unique<libkineto::GenericTraceActivity>(
          span_, libkineto::ActivityType::CONCURRENT_KERNEL, k.name));
      a.startTime = k.start_ns;
      a.endTime = k.end_ns;
      a.id = static_cast<int32_t>(k.correlation);
      a.device = k.device;
      a.resource = 0;
      a.threadId = k.thread;
      if (linked_to && k.correlation != 0) a.linked = linked_to(static_cast<int32_t>(k.correlation));
      a.addMetadataQuoted("device", "flagos emulation");
      logger.handleGenericActivity(a);
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override { return nullptr; }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

 private:
  libkineto::TraceSpan span_{0, 0, "flagos"};
  std::vector<std::unique_ptr<libkineto::GenericTraceActivity>> activities_;
};

class Plugin final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return activities_; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>& wanted, const libkineto::Config&) override {
    if (!wanted.count(libkineto::ActivityType::CONCURRENT_KERNEL)) return nullptr;
    return std::make_unique<Session>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<libkineto::ActivityType>& wanted, const libkineto::Config& config) override {
    return configure(wanted, config);
  }

 private:
  const std::string name_ = "flagos";
  const std::set<libkineto::ActivityType> activities_ = {libkineto::ActivityType::CONCURRENT_KERNEL};
};

struct Register {
  Register() {
    libkineto::api().registerProfilerFactory([] { return std::make_unique<Plugin>(); });
  }
} g_register;

} // namespace

void record(const c10::OperatorName& op, int64_t start_ns, int64_t end_ns) {
  const int64_t steady_now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
  const int64_t unix_end = static_cast<int64_t>(c10::getTime()) - (steady_now - end_ns);
  Kernel kernel{op.name + (op.overload_name.empty() ? "" : "." + op.overload_name) + " (emulated kernel)",
      unix_end - (end_ns - start_ns), unix_end, tls_operators.empty() ? 0 : int64_t(tls_operators.back()),
      int32_t(runtime().current_device()), int32_t(libkineto::systemThreadId())};
  std::lock_guard<std::mutex> lock(g_mutex);
  g_kernels.push_back(std::move(kernel));
}

} // namespace torch_fl::profiler_kernels

#else // no kineto plugin interface in this torch line: the flag stays off, nothing is ever recorded

namespace torch_fl::profiler_kernels {
std::atomic<bool> g_recording{false};
void record(const c10::OperatorName&, int64_t, int64_t) {}
} // namespace torch_fl::profiler_kernels

#endif
