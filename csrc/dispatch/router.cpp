// The boxed fallback that routes every aten operator on the flagos device; the
// re-tagging it relies on is retag.cpp's.
#include "dispatch/router.h"
#include "dispatch/counters.h"
#include "dispatch/data_movement.h"
#include "dispatch/decompositions.h"
#include "dispatch/dtype_gate.h"
#include "dispatch/provider_check.h"
#include "dispatch/retag.h"
#include "dispatch/routed_kernel.h"
#include "replay/plan.h"
#include "runtime/runtime.h"

#include <ATen/core/Generator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/TensorImpl.h>
#include <torch/library.h>

#include <cstdio>
#include <mutex>
#include <unordered_set>

namespace torch_fl {

bool is_flagos(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

bool is_generator_argument(const c10::Argument& arg) {
  const auto& type = arg.type();
  if (type->kind() == c10::TypeKind::GeneratorType) return true;
  if (auto opt = type->castRaw<c10::OptionalType>()) {
    return opt->getElementType()->kind() == c10::TypeKind::GeneratorType;
  }
  return false;
}

void check_same_device(c10::DeviceIndex& seen, c10::DeviceIndex index, const c10::OperatorHandle& op) {
  if (index < 0) index = runtime().current_device();
  if (seen < 0) {
    seen = index;
    return;
  }
  if (seen != index) fail_two_devices(seen, "flagos:" + std::to_string(int(index)), op, "move one of them with .to()");
}

void fail_two_devices(c10::DeviceIndex flagos, const std::string& other, const c10::OperatorHandle& op,
    const std::string& fix) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, flagos:",
      int(flagos), " and ", other, "! (when running ", short_op_name(op.operator_name()), " on the flagos device; ",
      fix, ")");
}

namespace {

std::atomic<const RouteTable*> g_table{nullptr};
std::atomic<ProviderHook> g_provider_hook{nullptr};

const RouteTable& empty_table() {
  static const RouteTable table;
  return table;
}

// Built on first use, since fast_ops.cpp registers its entries while the library
// loads, possibly before this file's globals exist; and never destroyed, like the
// route tables they guard: a thread still routing at exit (the autograd engine's,
// a DataLoader worker's) must not find them gone.
std::mutex& intercept_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::unordered_set<c10::OperatorName>& intercepted_names() {
  static auto* names = new std::unordered_set<c10::OperatorName>;
  return *names;
}
std::vector<FastEntry*>& fast_entries() {
  static auto* entries = new std::vector<FastEntry*>;
  return *entries;
}

Route route_of(const RouteTable& table, const c10::OperatorName& name) {
  if (table.per_op.empty()) return table.fallback;
  auto it = table.per_op.find(name);
  return it == table.per_op.end() ? table.fallback : it->second;
}

} // namespace

void log_route(const c10::OperatorHandle& op, const std::string& route) {
  const std::string line = "[flagos dispatch] " + short_op_name(op.operator_name()) + " -> " + route + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr); // one write: lines from threads never interleave
}

void register_fast_entry(FastEntry* entry) {
  std::lock_guard<std::mutex> lock(intercept_mutex());
  entry->native.store(route_of(current_routes(), entry->name).kind == RouteKind::Native);
  fast_entries().push_back(entry);
  intercepted_names().insert(entry->name); // a router entry by name, like the intercepted ops
}

void register_routed_kernel(const c10::OperatorName& name) {
  std::lock_guard<std::mutex> lock(intercept_mutex());
  intercepted_names().insert(name);
}

// ---- routes ------------------------------------------------------------------------

void publish_routes(std::unique_ptr<RouteTable> table) {
  // Tables are small and reloads rare: the old one is kept (not freed) so a
  // call racing with a reload never reads freed memory and needs no lock.
  std::lock_guard<std::mutex> lock(intercept_mutex());
  const RouteTable* published = table.release();
  g_table.store(published, std::memory_order_release);
  for (FastEntry* entry : fast_entries()) {
    entry->native.store(route_of(*published, entry->name).kind == RouteKind::Native, std::memory_order_release);
  }
}

Route route_of_op(const c10::OperatorName& name) {
  return route_of(current_routes(), name);
}

const RouteTable& current_routes() {
  const RouteTable* t = g_table.load(std::memory_order_acquire);
  return t ? *t : empty_table();
}

std::string route_name(const RouteTable& table, Route route) {
  switch (route.kind) {
    case RouteKind::Native: return "native";
    case RouteKind::Cpu: return "cpu";
    case RouteKind::Provider:
      if (route.provider >= 0 && static_cast<size_t>(route.provider) < table.providers.size()) {
        return table.providers[route.provider];
      }
      return "provider#" + std::to_string(route.provider);
  }
  return "?";
}

void set_log_dispatch(bool on) { detail::g_log_dispatch.store(on, std::memory_order_relaxed); }
void set_provider_hook(ProviderHook hook) { g_provider_hook.store(hook); }

namespace {

// One call of a provider's Python kernel, its results checked against the op's schema and Meta kernel. The
// replay cache calls it for the calls it does not replay.
struct ProviderCall {
  ProviderHook hook;
  const Route* route;
  const c10::OperatorHandle* op;
  c10::DeviceIndex device;

  static void run(void* self, torch::jit::Stack* stack, replay::Recording* record) {
    const auto& c = *static_cast<ProviderCall*>(self);
    const size_t n = c.op->schema().arguments().size();
    const std::vector<c10::IValue> arguments(stack->end() - static_cast<std::ptrdiff_t>(n), stack->end());
    c.hook(c.route->provider, *c.op, stack, record);
    check_provider_results(*c.op, route_name(current_routes(), *c.route), arguments, *stack,
        runtime().vendor_device(c.device));
  }
};

void run_on_vendor(const c10::OperatorHandle& op, torch::jit::Stack* stack, const Route* provider) {
  if (provider == nullptr) {
    // Torch sends some ops to every accelerator but has kernels for CUDA only: where the vendor
    // has none, run their decomposition on the flagos tensors, each part taking its own route.
    Decomposition decomposed = find_decomposition(op.operator_name());
    if (decomposed != nullptr && !op.hasKernelForDispatchKey(runtime().vendor_key())) return decomposed(stack);
  }
  counters::Timer timer(op.operator_name(), provider != nullptr ? "provider" : "boxed");
  Retagger retag(op);
  retag.arguments_to_vendor(stack);
  if (provider != nullptr) retag.refuse_host_tensors();
  timer.mark(counters::kArguments);
  {
    c10::OptionalDeviceGuard guard;
    if (retag.device() >= 0) guard.reset_device(flagos_device(retag.device()));
    if (provider == nullptr) {
      try {
        op.redispatchBoxed(c10::DispatchKeySet(runtime().vendor_key()), stack);
      } catch (const c10::NotImplementedError&) {
        // Torch picks some ops only for accelerators (fused RNN cells, ...);
        // say plainly that the vendor has no kernel instead of torch's table.
        if (op.hasKernelForDispatchKey(runtime().vendor_key())) throw;
        const std::string name = short_op_name(op.operator_name());
        const bool cpu_can =
            runtime().vendor_key() != c10::DispatchKey::CPU && op.hasKernelForDispatchKey(c10::DispatchKey::CPU);
        TORCH_CHECK_NOT_IMPLEMENTED(false, name, " has no ", c10::toString(runtime().vendor_key()),
            " kernel, so its native route cannot run with FLAGOS_ACCELERATOR=", runtime().name(),
            cpu_can ? ". Route it to the host (" + override_variable(name) + "=cpu)"
                    : std::string(". torch has no CPU kernel for it either, so no route of this machine can run it"),
            ", or run on an accelerator whose torch has it.");
      }
    } else {
      ProviderCall call{g_provider_hook.load(), provider, &op,
          retag.device() < 0 ? runtime().current_device() : retag.device()};
      TORCH_CHECK(call.hook != nullptr, "no provider hook installed for ", short_op_name(op.operator_name()));
      const RouteTable& table = current_routes();
      const char* path = "";
      if (static_cast<size_t>(provider->provider) < table.replayable.size() && table.replayable[provider->provider]) {
        path = replay::call(op, stack, call.device, &ProviderCall::run, &call);
      } else {
        ProviderCall::run(&call, stack, nullptr);
      }
      if (log_dispatch()) log_route(op, route_name(table, *provider) + path);
    }
  }
  timer.mark(counters::kKernel);
  retag.returns_from_vendor(stack);
  timer.mark(counters::kResults);
}

// Route a call of `op`; native and host routes run `vendor_op`, which is `op`
// itself except for torch's overrideable hooks (see route_overrideable).
void dispatch_routed(const c10::OperatorHandle& op, torch::jit::Stack* stack,
    const c10::OperatorHandle* vendor_op = nullptr, int insert_none_at = -1) {
  const RouteTable& table = current_routes();
  Route route = route_of(table, op.operator_name());
  // A provider route with a list serves the calls it names only (dtypes, input requirements); others take its builtin.
  if (route.kind == RouteKind::Provider && route.dtypes != kEveryDtype && !serves_call(route.dtypes, op, *stack)) {
    Route builtin;
    builtin.kind = route.otherwise;
    route = builtin;
  }
  // A provider call is logged once it ran: the line says whether it was replayed.
  if (route.kind == RouteKind::Provider) return run_on_vendor(op, stack, &route);
  if (log_dispatch()) log_route(op, route_name(table, route));
  if (vendor_op != nullptr && insert_none_at >= 0) {
    const size_t first = stack->size() - op.schema().arguments().size();
    stack->insert(stack->begin() + static_cast<std::ptrdiff_t>(first + insert_none_at), c10::IValue());
  }
  const c10::OperatorHandle& target = vendor_op != nullptr ? *vendor_op : op;
  if (route.kind == RouteKind::Native) {
    run_on_vendor(target, stack, nullptr);
  } else {
    run_on_host(target, stack);
  }
}


} // namespace

void route_boxed(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  dispatch_routed(op, stack);
}

// Torch reaches out-of-tree devices for convolution through "overrideable"
// hooks whose generic body only raises. The vendor's entry point is the
// ordinary op: same arguments, except that the backward takes bias_sizes
// (None here) as its fourth.
void route_overrideable(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  static const c10::OperatorHandle forward =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution", "");
  static const c10::OperatorHandle backward =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution_backward", "");
  if (op.operator_name().name == "aten::convolution_overrideable") {
    dispatch_routed(op, stack, &forward);
  } else {
    dispatch_routed(op, stack, &backward, /*insert_none_at=*/3);
  }
}

namespace {

bool is_overrideable_hook(const c10::OperatorName& name) {
  return name.name == "aten::convolution_overrideable" || name.name == "aten::convolution_backward_overrideable";
}

torch::Library& intercept_library() {
  static auto* lib = new torch::Library(
      torch::Library::IMPL, "aten", std::make_optional(c10::DispatchKey::PrivateUse1), __FILE__, __LINE__);
  return *lib; // leaked on purpose: registrations must outlive every tensor
}

} // namespace

// The fallback only sees ops with no kernel usable for PrivateUse1. Ops torch
// implements once for all backends (structured functional variants such as
// add.Tensor, composites such as zeros) would otherwise run their generic
// body and reach the router only as their parts (add.out, fill_), so the
// route named for them would never apply. The router's one boxed function is
// registered for those names too: the same mechanism, no per-op code.
std::vector<std::string> intercept_ops(const std::vector<std::string>& ops) {
  std::lock_guard<std::mutex> lock(intercept_mutex());
  std::vector<std::string> added;
  for (const std::string& op : ops) {
    c10::OperatorName name = parse_short_op_name(op);
    if (intercepted_names().count(name)) continue;
    auto handle = c10::Dispatcher::singleton().findOp(name);
    if (!handle || handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) continue;
    if (is_overrideable_hook(name)) {
      intercept_library().impl(op.c_str(), torch::CppFunction::makeFromBoxedFunction<&route_overrideable>());
    } else {
      intercept_library().impl(op.c_str(), torch::CppFunction::makeFromBoxedFunction<&route_boxed>());
    }
    intercepted_names().insert(std::move(name));
    added.push_back(op);
  }
  return added;
}

std::vector<std::string> fast_path_ops() {
  std::lock_guard<std::mutex> lock(intercept_mutex());
  std::vector<std::string> out;
  for (const FastEntry* entry : fast_entries()) out.push_back(short_op_name(entry->name));
  return out;
}

std::vector<std::string> intercepted_ops() {
  std::lock_guard<std::mutex> lock(intercept_mutex());
  std::vector<std::string> out;
  for (const auto& name : intercepted_names()) out.push_back(short_op_name(name));
  return out;
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&route_boxed>());
}

} // namespace torch_fl
