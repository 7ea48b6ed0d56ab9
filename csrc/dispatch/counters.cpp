// See counters.h.
#include "dispatch/counters.h"
#include "dispatch/router.h"

#include <map>
#include <mutex>
#include <utility>

namespace torch_fl::counters {

std::atomic<bool> g_on{false};

namespace {

// Keyed by what the caller passes: the dispatcher's operator names live as long as the process.
using Table = std::map<std::pair<const c10::OperatorName*, const char*>, Row>;

// The table and the mutex that guards it, made once and never destroyed: a thread still routing calls while
// the process exits (autograd's device threads) may count one after static destructors ran.
struct Guarded {
  std::mutex mutex;
  Table table;
};
Guarded& counted() {
  static auto* g = new Guarded();
  return *g;
}

} // namespace

void set_on(bool on) { g_on.store(on, std::memory_order_relaxed); }

void add(const c10::OperatorName& op, const char* path, const std::array<int64_t, kPhases>& ns) {
  Guarded& g = counted();
  std::lock_guard<std::mutex> lock(g.mutex);
  Row& row = g.table[{&op, path}];
  if (row.calls == 0) {
    row.op = short_op_name(op);
    row.path = path;
  }
  ++row.calls;
  for (int p = 0; p < kPhases; ++p) row.ns[p] += ns[p];
}

std::vector<Row> rows() {
  Guarded& g = counted();
  std::lock_guard<std::mutex> lock(g.mutex);
  std::vector<Row> out;
  out.reserve(g.table.size());
  for (const auto& [key, row] : g.table) out.push_back(row);
  return out;
}

void reset() {
  Guarded& g = counted();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.table.clear();
}

} // namespace torch_fl::counters
