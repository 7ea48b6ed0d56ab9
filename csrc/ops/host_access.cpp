// torch.ops.flagos: the host-read trap's operators (runtime/host_access.h) for code that legitimately reads
// device memory on the host outside the router: the C++ kernels that torch.compile generates for the CPU
// emulation (torch_fl/compile/host.py). An open set of blocks is a numbered scope, closed by its number.
#include "runtime/host_access.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace torch_fl {
namespace {

struct OpenScopes {
  std::mutex mutex;
  int64_t next = 1;
  std::unordered_map<int64_t, std::unique_ptr<host_access::Scope>> open;
};

OpenScopes& scopes() {
  static auto* s = new OpenScopes(); // leaked: a scope may be closed during interpreter teardown
  return *s;
}

// Keeps the flagos blocks at these storage addresses readable until host_access_close (a no-op without the trap).
int64_t host_access_open(std::vector<int64_t> storages) {
  auto scope = std::make_unique<host_access::Scope>();
  for (int64_t data : storages) scope->open(reinterpret_cast<const void*>(static_cast<uintptr_t>(data)));
  OpenScopes& s = scopes();
  std::lock_guard<std::mutex> lock(s.mutex);
  const int64_t id = s.next++;
  s.open.emplace(id, std::move(scope));
  return id;
}

void host_access_close(int64_t id) {
  std::unique_ptr<host_access::Scope> closing;
  OpenScopes& s = scopes();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.open.find(id);
    TORCH_CHECK(it != s.open.end(), "torch_fl: no open host-access scope ", id, " (closed twice?)");
    closing = std::move(it->second);
    s.open.erase(it);
  }
}

} // namespace
} // namespace torch_fl

TORCH_LIBRARY_FRAGMENT(flagos, m) {
  using namespace torch_fl;
  // Whether FLAGOS_EMU_TRAP protects flagos memory now.
  m.def("host_trap_enabled() -> bool", [] { return host_access::enabled(); });
  m.def("host_access_open(int[] storages) -> int", &host_access_open);
  m.def("host_access_close(int scope) -> ()", &host_access_close);
}
