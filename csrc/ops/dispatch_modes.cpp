// The flagos operators fall through the keys of Python's dispatch interposition. A TorchDispatchMode (a
// FakeTensorMode, a flop counter, the emulation's graph capture, the replay recorder) sees every operator called
// while it is active; the core's operators are the runtime's bookkeeping (set a device, read a stream, a graph's
// capture_end), not tensor computation, so a mode must neither record them nor run them in its own place: a
// graph capture would otherwise receive its own capture_end as an op.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <mutex>

namespace torch_fl {
namespace {

// Every operator of the namespace at the time of the call (torch_fl/_core.py calls it once, after loading).
void hide_from_dispatch_modes() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (c10::DispatchKey key :
        {c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot, c10::DispatchKey::PreDispatch}) {
      auto* lib = new torch::Library(torch::Library::IMPL, "flagos", key, __FILE__, __LINE__); // lives as long as the ops
      for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
        if (name.name.rfind("flagos::", 0) != 0) continue;
        const std::string op = name.name.substr(8) + (name.overload_name.empty() ? "" : "." + name.overload_name);
        lib->impl(op.c_str(), torch::CppFunction::makeFallthrough());
      }
    }
  });
}

} // namespace
} // namespace torch_fl

TORCH_LIBRARY_FRAGMENT(flagos, m) {
  m.def("hide_from_dispatch_modes() -> ()", [] { torch_fl::hide_from_dispatch_modes(); });
}
