// torch.ops.flagos: the router's operators. Python parses the confs and the environment; these only receive
// finished decisions (a whole route table) and answer questions about the router's registrations.
#include "dispatch/alias_pool.h"
#include "dispatch/counters.h"
#include "dispatch/data_movement.h"
#include "dispatch/decompositions.h"
#include "dispatch/dtype_gate.h"
#include "dispatch/router.h"

#include <torch/library.h>

#include <memory>
#include <tuple>

namespace torch_fl {
namespace {

Route make_route(int64_t kind, int64_t provider) {
  TORCH_CHECK(kind >= 0 && kind <= static_cast<int64_t>(RouteKind::Provider), "torch_fl: no route kind ", kind);
  Route r;
  r.kind = static_cast<RouteKind>(kind);
  r.provider = static_cast<int16_t>(provider);
  return r;
}

// The whole table in one call, so the router never sees a half-applied one: per op its route kind
// (RouteKind's value), provider index (-1 unless a provider), the dtypes it serves (dtype_gate.h's mask, as the
// signed int of the same bits; -1: every dtype) and the route kind of the other dtypes; per provider its name
// and whether its calls go through the replay cache.
void set_routes(int64_t fallback_kind, int64_t fallback_provider, std::vector<std::string> ops,
    std::vector<int64_t> kinds, std::vector<int64_t> provider_of, std::vector<int64_t> dtypes,
    std::vector<int64_t> otherwise, std::vector<std::string> providers, c10::List<bool> replayable) {
  TORCH_CHECK(ops.size() == kinds.size() && ops.size() == provider_of.size() && ops.size() == dtypes.size() &&
          ops.size() == otherwise.size(),
      "torch_fl: set_routes needs one kind, provider index, dtype mask and otherwise route per op");
  TORCH_CHECK(replayable.size() == providers.size(), "torch_fl: set_routes needs one replay flag per provider");
  auto table = std::make_unique<RouteTable>();
  table->fallback = make_route(fallback_kind, fallback_provider);
  table->providers = std::move(providers);
  for (bool r : replayable) table->replayable.push_back(r);
  for (size_t i = 0; i < ops.size(); ++i) {
    Route route = make_route(kinds[i], provider_of[i]);
    route.dtypes = static_cast<uint64_t>(dtypes[i]);
    route.otherwise = make_route(otherwise[i], -1).kind;
    const bool gated = route.dtypes != kEveryDtype;
    TORCH_CHECK(!gated || (route.kind == RouteKind::Provider && route.otherwise != RouteKind::Provider), "torch_fl: ",
        ops[i], ": only a provider route has a dtype list, and the dtypes it leaves out take a builtin route");
    table->per_op.emplace(parse_short_op_name(ops[i]), route);
  }
  publish_routes(std::move(table));
}

// One row per (operator, router path): the op, the path, its calls, then four sums of nanoseconds per row in
// `ns` (arguments, kernel, results, release).
std::tuple<std::vector<std::string>, std::vector<std::string>, std::vector<int64_t>, std::vector<int64_t>>
router_counters() {
  std::vector<std::string> ops, paths;
  std::vector<int64_t> calls, ns;
  for (const counters::Row& row : counters::rows()) {
    ops.push_back(row.op);
    paths.push_back(row.path);
    calls.push_back(static_cast<int64_t>(row.calls));
    for (int p : {counters::kArguments, counters::kKernel, counters::kResults, counters::kRelease}) {
      ns.push_back(static_cast<int64_t>(row.ns[p]));
    }
  }
  return {ops, paths, calls, ns};
}

} // namespace
} // namespace torch_fl

TORCH_LIBRARY_FRAGMENT(flagos, m) {
  using namespace torch_fl;
  m.def("set_routes(int fallback_kind, int fallback_provider, str[] ops, int[] kinds, int[] provider_of, "
        "int[] dtypes, int[] otherwise, str[] providers, bool[] replayable) -> ()",
      &set_routes);
  // The bit of a dtype in a route's dtype mask (dispatch/dtype_gate.h).
  m.def("dtype_bit(ScalarType dtype) -> int", [](c10::ScalarType dtype) {
    return static_cast<int64_t>(dtype_bit(dtype));
  });
  // The route the router would take for an operator now.
  m.def("route_of(str op) -> str", [](std::string op) {
    const RouteTable& table = current_routes();
    auto it = table.per_op.find(parse_short_op_name(op));
    return route_name(table, it == table.per_op.end() ? table.fallback : it->second);
  });
  // Route these ops by name even where torch has a generic kernel; returns the ones newly registered.
  m.def("intercept_ops(str[] ops) -> str[]", [](std::vector<std::string> ops) { return intercept_ops(ops); });
  m.def("intercepted_ops() -> str[]", [] { return intercepted_ops(); });
  // Ops that move data between devices (never on the cpu route).
  m.def("transfer_ops() -> str[]", [] { return transfer_ops(); });
  // Ops the router decomposes where the route's kernel is missing.
  m.def("decomposed_ops() -> str[]", [] { return decomposed_ops(); });
  // Ops with an unboxed router entry (native route without boxing).
  m.def("fast_path_ops() -> str[]", [] { return fast_path_ops(); });
  // Reuse vendor aliases across calls (default on; off to measure it).
  m.def("set_alias_reuse(bool on) -> ()", [](bool on) { set_alias_reuse(on); });
  m.def("alias_reuse() -> bool", [] { return alias_reuse(); });
  // Host time per operator and phase in the router (off by default; dispatch/counters.h).
  m.def("set_router_counters(bool on) -> ()", [](bool on) { counters::set_on(on); });
  m.def("router_counters() -> (str[] ops, str[] paths, int[] calls, int[] ns)", &router_counters);
  m.def("reset_router_counters() -> ()", [] { counters::reset(); });
  m.def("set_log_dispatch(bool on) -> ()", [](bool on) { set_log_dispatch(on); });
  m.def("log_dispatch() -> bool", [] { return log_dispatch(); });
}
