// torch_fl._C.HostAccess: opens flagos blocks under the host-read trap (runtime/host_access.h) for
// code that legitimately reads device memory on the host outside the router: the C++ kernels that
// torch.compile generates for the CPU emulation (torch_fl/compile/host.py). Its own translation unit,
// without torch's headers: it only passes storage addresses to host_access::Scope.
#include "runtime/host_access.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace py = pybind11;

namespace torch_fl {
namespace {

class HostAccess {
 public:
  explicit HostAccess(const std::vector<uintptr_t>& storages) {
    scope_.emplace();
    for (uintptr_t data : storages) scope_->open(reinterpret_cast<const void*>(data));
  }
  void close() { scope_.reset(); }

 private:
  std::optional<host_access::Scope> scope_;
};

} // namespace

void bind_host_access(py::module_& m) {
  m.def("host_trap_enabled", &host_access::enabled, "Whether FLAGOS_EMU_TRAP protects flagos memory now.");
  py::class_<HostAccess>(m, "HostAccess",
      "Keeps the flagos blocks at these storage addresses readable until close() (a no-op without the trap).")
      .def(py::init<const std::vector<uintptr_t>&>(), py::arg("storages"))
      .def("close", &HostAccess::close);
}

} // namespace torch_fl
