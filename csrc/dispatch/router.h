// The per-operator router: one boxed fallback on the PrivateUse1 key that sends
// every aten operator reaching the flagos device to the route its table names.
#pragma once

#include "dispatch/op_name.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace torch_fl {

enum class RouteKind : uint8_t { Native, Cpu, Provider };

struct Route {
  RouteKind kind = RouteKind::Native;
  RouteKind otherwise = RouteKind::Native; // with a list: the builtin route of the calls it leaves out
  int16_t provider = -1; // index into RouteTable::providers when kind == Provider
  uint64_t dtypes = ~uint64_t{0}; // the dtypes and input classes a provider route serves (dtype_gate.h); all bits: all
};

// Built once in Python from the confs and environment, then published whole:
// the router never sees a half-applied table.
struct RouteTable {
  Route fallback;
  std::unordered_map<c10::OperatorName, Route> per_op;
  std::vector<std::string> providers;
  std::vector<bool> replayable; // per provider: its calls go through the replay cache (csrc/replay)
};

void publish_routes(std::unique_ptr<RouteTable> table);
const RouteTable& current_routes();
Route route_of_op(const c10::OperatorName& name); // in the current table
std::string route_name(const RouteTable& table, Route route);

void set_log_dispatch(bool on);
// FLAGOS_LOG=dispatch: read on every routed call, so the check is one relaxed load inlined at each caller, not
// a call into this library.
namespace detail {
inline std::atomic<bool> g_log_dispatch{false};
}
inline bool log_dispatch() { return detail::g_log_dispatch.load(std::memory_order_relaxed); }

namespace replay {
struct Recording;
}
// The provider route calls into Python; the binding module installs the hook.
// It receives the operator's arguments (already vendor tensors) on the stack and
// must leave the operator's returns there, as a boxed kernel does. With `record`
// set it also records what the provider did on the device (replay/plan.h).
using ProviderHook = void (*)(int provider, const c10::OperatorHandle& op, torch::jit::Stack* stack,
    replay::Recording* record);
void set_provider_hook(ProviderHook hook);

// Register the router for these ops by name too (see router.cpp); returns the
// ones newly registered. Ops with a flagos kernel of their own are skipped.
std::vector<std::string> intercept_ops(const std::vector<std::string>& ops);
std::vector<std::string> intercepted_ops();

// Rules every route applies (router.cpp), and the cpu route (cpu_route.cpp).
bool is_flagos(const at::Tensor& t);
bool is_generator_argument(const c10::Argument& arg);
// Flagos tensors of one call must share a device, as CUDA tensors must; `seen` starts at -1.
void check_same_device(c10::DeviceIndex& seen, c10::DeviceIndex index, const c10::OperatorHandle& op);
// torch's error for one call's tensors on two devices: flagos device `flagos` and `other` ("flagos:1",
// "cpu"), with how to fix the call.
[[noreturn]] void fail_two_devices(c10::DeviceIndex flagos, const std::string& other, const c10::OperatorHandle& op,
    const std::string& fix);
void run_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// The router's boxed entry point (also what the fast path falls back to).
void route_boxed(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack);
// The boxed entry of the convolution hooks (convolution_overrideable and its backward): routed by the hook's
// name, run as the ordinary op they stand for.
void route_overrideable(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack);
// One "[flagos dispatch] op -> route" line on stderr.
void log_route(const c10::OperatorHandle& op, const std::string& route);

// An operator with an unboxed router entry (dispatch/fast_ops.cpp). publish_routes
// keeps `native` current, so the entry reads one flag per call instead of the table.
struct FastEntry {
  c10::OperatorName name;
  std::atomic<bool> native{true}; // the empty table before the first publish routes everything natively
};
// Called while the extension loads; the entry lives as long as the process.
void register_fast_entry(FastEntry* entry);
std::vector<std::string> fast_path_ops();

} // namespace torch_fl
