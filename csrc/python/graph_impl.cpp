// torch.accelerator.Graph on flagos: torch's generic graph (ATen/accelerator/Graph.h, from torch 2.13) creates
// its backend through a registry keyed by the device type's name, "FLAGOS" once PrivateUse1 is renamed. Flagos
// graphs live in Python (torch_fl/graphs: torch's CUDAGraph on a GPU vendor, the op-stream recording under
// emulation), so the implementation registered here holds a torch_fl.graphs.FlagosGraph and forwards each call to
// it, under the GIL. A torch without the registry builds an empty registration: torch_fl._C.register_graph_impl()
// then answers False. This file is the one home of that version difference.
#include <torch/csrc/utils/pybind.h>

#if __has_include(<ATen/core/GraphImplInterface.h>)
#include <ATen/core/GraphImplInterface.h>
#define TORCH_FL_HAS_GRAPH_IMPL 1
#endif

namespace py = pybind11;

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

struct PythonGraph final : at::GraphImplInterface {
  explicit PythonGraph(const at::GraphImplArgs& args) {
    py::gil_scoped_acquire gil;
    graph_ = py::module_::import("torch_fl.graphs").attr("FlagosGraph")(py::arg("keep_graph") = args.keep_graph);
  }
  ~PythonGraph() override {
    py::gil_scoped_acquire gil;
    graph_ = py::object();
  }
  void capture_begin(c10::MempoolId_t pool, at::GraphCaptureMode mode) override {
    py::gil_scoped_acquire gil;
    py::object token = pool == c10::MempoolId_t{0, 0} ? py::object(py::none())
                                                       : py::object(py::make_tuple(pool.first, pool.second));
    graph_.attr("capture_begin")(token, capture_mode_name(mode));
  }
  void capture_end() override { call("capture_end"); }
  void instantiate() override {} // a flagos graph is instantiated by capture_end (keep_graph: by the first replay)
  void replay() override { call("replay"); }
  void reset() override { call("reset"); }
  c10::MempoolId_t pool() const override {
    py::gil_scoped_acquire gil;
    auto token = graph_.attr("pool")().cast<std::pair<c10::CaptureId_t, c10::CaptureId_t>>();
    return {token.first, token.second};
  }
  // Not `override`: torch 2.13 declares these two, other snapshots of the interface do not.
  void enable_debug_mode() {}
  void debug_dump(const std::string& /*path*/) {
    TORCH_CHECK(false, "torch_fl: flagos graphs have no debug dump");
  }

 private:
  void call(const char* method) {
    py::gil_scoped_acquire gil;
    graph_.attr(method)();
  }
  py::object graph_;
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

void bind_graph_impl(py::module_& m) {
  m.def("register_graph_impl", &register_graph_impl,
      "Make torch.accelerator.Graph build flagos graphs; False where this torch has no graph registry.");
}

} // namespace torch_fl
