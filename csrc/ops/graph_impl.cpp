// torch.accelerator.Graph on flagos: torch's generic graph (ATen/accelerator/Graph.h, from torch 2.13) creates
// its backend through a registry keyed by the device type's name, "FLAGOS" once PrivateUse1 is renamed. Flagos
// graphs live in Python (torch_fl/graphs: torch's CUDAGraph on a GPU vendor, the op-stream recording under
// emulation), so the implementation registered here forwards each call to a torch_fl.graphs.FlagosGraph through
// operators whose schemas the core declares and whose kernels Python registers (torch_fl/graphs/_registry.py):
// torch's Python bridge takes the GIL and converts the values. A torch without the registry builds an empty
// registration: flagos::register_graph_impl() then answers False. This file is the one home of that version
// difference.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#if __has_include(<ATen/core/GraphImplInterface.h>)
#include <ATen/core/GraphImplInterface.h>
#define TORCH_FL_HAS_GRAPH_IMPL 1
#endif

#include <string>

namespace torch_fl {
namespace {

#ifdef TORCH_FL_HAS_GRAPH_IMPL
const char* capture_mode_name(at::GraphCaptureMode mode) {
  switch (mode) {
    case at::GraphCaptureMode::Global:
      return "global";
    case at::GraphCaptureMode::ThreadLocal:
      return "thread_local";
    case at::GraphCaptureMode::Relaxed:
      return "relaxed";
    default:
      return "default";
  }
}

// Calls flagos::<name> with these arguments and returns its results.
torch::jit::Stack call_python(const char* name, torch::jit::Stack arguments) {
  static c10::Dispatcher& dispatcher = c10::Dispatcher::singleton();
  dispatcher.findSchemaOrThrow((std::string("flagos::") + name).c_str(), "").callBoxed(&arguments);
  return arguments;
}

struct PythonGraph final : at::GraphImplInterface {
  explicit PythonGraph(const at::GraphImplArgs& args)
      : handle_(call_python("graph_new", {c10::IValue(args.keep_graph)}).at(0).toInt()) {}
  ~PythonGraph() override {
    try {
      call_python("graph_release", {handle_});
    } catch (...) { // a destructor must not throw; the Python side has already reported it
    }
  }
  void capture_begin(c10::MempoolId_t pool, at::GraphCaptureMode mode) override {
    const bool has_pool = !(pool == c10::MempoolId_t{0, 0});
    call_python("graph_capture_begin", {handle_, has_pool, static_cast<int64_t>(pool.first),
                                           static_cast<int64_t>(pool.second), std::string(capture_mode_name(mode))});
  }
  void capture_end() override { call("capture_end"); }
  void instantiate() override {} // a flagos graph is instantiated by capture_end (keep_graph: by the first replay)
  void replay() override { call("replay"); }
  void reset() override { call("reset"); }
  c10::MempoolId_t pool() const override {
    auto out = call_python("graph_pool", {handle_});
    return {static_cast<c10::CaptureId_t>(out.at(0).toInt()), static_cast<c10::CaptureId_t>(out.at(1).toInt())};
  }
  // Not `override`: torch 2.13 declares these two, other snapshots of the interface do not.
  void enable_debug_mode() {}
  void debug_dump(const std::string& /*path*/) {
    TORCH_CHECK(false, "torch_fl: flagos graphs have no debug dump");
  }

 private:
  void call(const char* method) { call_python("graph_call", {handle_, std::string(method)}); }
  int64_t handle_;
};
#endif

// Register the flagos implementation under the renamed device's key; false where torch has no graph registry.
bool register_graph_impl() {
#ifdef TORCH_FL_HAS_GRAPH_IMPL
  const std::string key = c10::DeviceTypeName(c10::DeviceType::PrivateUse1, /*lower_case=*/false);
  if (!at::GraphImplRegistry()->Has(key)) {
    at::GraphImplRegistry()->Register(
        key, [](at::GraphImplArgs args) -> std::unique_ptr<at::GraphImplInterface> {
          return std::make_unique<PythonGraph>(args);
        });
  }
  return true;
#else
  return false;
#endif
}

} // namespace
} // namespace torch_fl

TORCH_LIBRARY_FRAGMENT(flagos, m) {
  // Make torch.accelerator.Graph build flagos graphs; False where this torch has no graph registry.
  m.def("register_graph_impl() -> bool", [] { return torch_fl::register_graph_impl(); });
  // Implemented in Python (torch_fl/graphs/_registry.py): a new FlagosGraph's handle; a method call by name;
  // capture_begin with its pool token (has_pool false: a private pool) and capture mode; the graph's pool token;
  // the handle's end.
  m.def("graph_new(bool keep_graph) -> int");
  m.def("graph_call(int graph, str method) -> ()");
  m.def("graph_capture_begin(int graph, bool has_pool, int pool_a, int pool_b, str mode) -> ()");
  m.def("graph_pool(int graph) -> (int, int)");
  m.def("graph_release(int graph) -> ()");
}
