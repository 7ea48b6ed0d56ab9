// The provider hook as a redispatch to the Python kernels (provider_call.h says why).
#include "dispatch/provider_call.h"

#include "dispatch/router.h"

#include <ATen/core/dispatch/Dispatcher.h>

namespace torch_fl {
namespace {

thread_local replay::Recording* t_recording = nullptr;

// A recording call restores the previous pointer, so a provider kernel that calls another routed op records
// only its own call.
class RecordingScope {
 public:
  explicit RecordingScope(replay::Recording* record) : previous_(t_recording) { t_recording = record; }
  ~RecordingScope() { t_recording = previous_; }
  RecordingScope(const RecordingScope&) = delete;
  RecordingScope& operator=(const RecordingScope&) = delete;

 private:
  replay::Recording* previous_;
};

void call_provider_kernel(int /*provider*/, const c10::OperatorHandle& op, torch::jit::Stack* stack,
    replay::Recording* record) {
  // The Python side finds the provider from its copy of the published table (torch_fl/routing/publish.py).
  RecordingScope scope(record);
  op.redispatchBoxed(c10::DispatchKeySet(record != nullptr ? kProviderRecordKey : kProviderCallKey), stack);
}

} // namespace

void enable_provider_calls() { set_provider_hook(&call_provider_kernel); }

replay::Recording* pending_recording() { return t_recording; }

} // namespace torch_fl
