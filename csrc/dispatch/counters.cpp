// See counters.h.
#include "dispatch/counters.h"
#include "dispatch/router.h"

#include <map>
#include <mutex>
#include <utility>

namespace torch_fl::counters {

std::atomic<bool> g_on{false};

namespace {

std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}
// Keyed by what the caller passes: the dispatcher's operator names live as long as the process.
std::map<std::pair<const c10::OperatorName*, const char*>, Row>& table() {
  static auto* t = new std::map<std::pair<const c10::OperatorName*, const char*>, Row>(); // leaked: threads may outlive statics
  return *t;
}

} // namespace

void set_on(bool on) { g_on.store(on, std::memory_order_relaxed); }

void add(const c10::OperatorName& op, const char* path, const std::array<int64_t, kPhases>& ns) {
  std::lock_guard<std::mutex> lock(table_mutex());
  Row& row = table()[{&op, path}];
  if (row.calls == 0) {
    row.op = short_op_name(op);
    row.path = path;
  }
  ++row.calls;
  for (int p = 0; p < kPhases; ++p) row.ns[p] += ns[p];
}

std::vector<Row> rows() {
  std::lock_guard<std::mutex> lock(table_mutex());
  std::vector<Row> out;
  out.reserve(table().size());
  for (const auto& [key, row] : table()) out.push_back(row);
  return out;
}

void reset() {
  std::lock_guard<std::mutex> lock(table_mutex());
  table().clear();
}

} // namespace torch_fl::counters
