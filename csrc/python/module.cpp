// torch_fl._C: the Python face of the runtime and the router. Python parses the
// confs and environment; this module only receives finished decisions.
#include "dispatch/counters.h"
#include "dispatch/data_movement.h"
#include "dispatch/decompositions.h"
#include "dispatch/provider_check.h"
#include "dispatch/retag.h"
#include "dispatch/router.h"
#include "replay/plan.h"
#include "runtime/autograd_threads.h"
#include "runtime/runtime.h"

#include <ATen/core/Generator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/tensor_memoryformats.h>
#include <torch/csrc/utils/pybind.h>

#include <memory>

namespace py = pybind11;

namespace torch_fl {
void bind_comm(py::module_& m);        // comm.cpp
void bind_host_access(py::module_& m); // host_access.cpp
void bind_compile_alloc(py::module_& m); // compile_alloc.cpp
void bind_graph_impl(py::module_& m);    // graph_impl.cpp
void bind_replay(py::module_& m);      // replay.cpp
void bind_sharing(py::module_& m);     // sharing.cpp
void recording_from_python(py::handle wire, replay::Recording* out); // replay.cpp

namespace {

py::object& provider_dispatcher() {
  static py::object* fn = new py::object(); // leaked: must outlive interpreter teardown order
  return *fn;
}

c10::DeviceIndex index_or_current(int index) {
  return index < 0 ? runtime().current_device() : static_cast<c10::DeviceIndex>(index);
}

// The boxed stack keeps dtype, layout and memory_format as plain ints; Python
// kernels expect torch.dtype & co., as torch's own Python bindings give them.
py::object argument_to_python(const c10::IValue& value, const c10::Argument& arg) {
  if (value.isInt()) {
    c10::TypePtr type = arg.real_type(); // type() says int; real_type() keeps ScalarType & co.
    if (auto opt = type->castRaw<c10::OptionalType>()) type = opt->getElementType();
    switch (type->kind()) {
      case c10::TypeKind::ScalarTypeType:
        return py::reinterpret_borrow<py::object>(
            reinterpret_cast<PyObject*>(torch::getTHPDtype(static_cast<at::ScalarType>(value.toInt()))));
      case c10::TypeKind::LayoutType:
        return py::reinterpret_borrow<py::object>(
            reinterpret_cast<PyObject*>(torch::getTHPLayout(static_cast<at::Layout>(value.toInt()))));
      case c10::TypeKind::MemoryFormatType:
        return py::reinterpret_borrow<py::object>(
            torch::utils::getTHPMemoryFormat(static_cast<at::MemoryFormat>(value.toInt())));
      default:
        break;
    }
  }
  return torch::jit::toPyObject(value);
}

// Calls dispatcher(provider, op, args, kwargs, record) with the vendor tensors and puts
// its result back on the stack in the operator's return types. Recording, the
// dispatcher returns (result, recording) (torch_fl/replay/_record.py).
void call_python_provider(int provider, const c10::OperatorHandle& op, torch::jit::Stack* stack,
    replay::Recording* record) {
  py::gil_scoped_acquire gil;
  const auto& schema = op.schema();
  const auto& args = schema.arguments();
  const size_t first = stack->size() - args.size();
  py::list positional;
  py::dict keywords;
  for (size_t i = 0; i < args.size(); ++i) {
    py::object value = argument_to_python((*stack)[first + i], args[i]);
    if (args[i].kwarg_only()) {
      keywords[py::str(args[i].name())] = value;
    } else {
      positional.append(value);
    }
  }
  torch::jit::drop(*stack, args.size());
  py::object fn = provider_dispatcher();
  TORCH_CHECK(fn && !fn.is_none(), "torch_fl: no provider dispatcher registered");
  const std::string name = short_op_name(schema.operator_name());
  py::object result = fn(provider, name, py::tuple(positional), keywords, record != nullptr);
  if (record != nullptr) {
    auto pair = result.cast<py::tuple>();
    recording_from_python(pair[1], record);
    result = pair[0];
  }
  const auto& returns = schema.returns();
  // A result that is not what the schema says is the provider's mistake: name it (provider_check.cpp
  // then checks device, shape and dtype).
  auto wrong = [&](const std::string& what) {
    Route route;
    route.kind = RouteKind::Provider;
    route.provider = static_cast<int16_t>(provider);
    fail_provider_result(route_name(current_routes(), route), schema.operator_name(), what);
  };
  auto convert = [&](py::handle item, size_t i) {
    try {
      return torch::jit::toIValue(item, returns[i].type());
    } catch (const std::exception& e) {
      wrong("result " + std::to_string(i) + " is not a " + returns[i].type()->str() + " (" +
          std::string(py::str(py::type::of(item).attr("__name__"))) + ")");
    }
    return c10::IValue();
  };
  if (returns.size() == 1) {
    stack->push_back(convert(result, 0));
  } else if (!returns.empty()) {
    if (!py::isinstance<py::sequence>(result)) wrong("it returned one value, the schema has " + std::to_string(returns.size()));
    auto items = result.cast<py::sequence>();
    if (items.size() != returns.size()) {
      wrong("it returned " + std::to_string(items.size()) + " values, the schema has " + std::to_string(returns.size()));
    }
    for (size_t i = 0; i < returns.size(); ++i) {
      stack->push_back(convert(items[i], i));
    }
  }
}

Route to_route(const py::tuple& t) {
  Route r;
  r.kind = t[0].cast<RouteKind>();
  r.provider = static_cast<int16_t>(t[1].cast<int>());
  return r;
}

// (stream_id, device_index, device_type): the fields torch.Stream is built from.
py::tuple stream_fields(const c10::Stream& s) {
  return py::make_tuple(s.id(), int(s.device_index()), int(s.device_type()));
}

const at::Generator& default_generator(int index) {
  return at::detail::getPrivateUse1Hooks().getDefaultGenerator(index_or_current(index));
}

} // namespace
} // namespace torch_fl

PYBIND11_MODULE(_C, m) {
  using namespace torch_fl;
  m.doc() = "torch_fl native core: the flagos runtime and per-operator router";

  m.def("built_runtimes", &built_runtimes, "Accelerators this build can run, best first.");
  bind_comm(m);
  bind_host_access(m);
  bind_compile_alloc(m);
  bind_graph_impl(m);
  bind_replay(m);
  bind_sharing(m);
  m.def("init", &init_runtime, py::arg("accelerator"), py::arg("emulated_devices"),
      py::arg("trap_host_access") = false);
  m.def("accelerator", []() -> py::object {
    return runtime_ready() ? py::object(py::str(runtime().name())) : py::object(py::none());
  });
  m.def("device_count", []() { return runtime_ready() ? int(runtime().device_count()) : 0; });
  m.def("current_device", []() { return int(runtime().current_device()); });
  m.def("set_device", [](int index) { runtime().set_device(static_cast<c10::DeviceIndex>(index)); });
  m.def("empty_host_cache", []() { runtime().empty_host_cache(); });
  m.def("synchronize", [](int index) {
    py::gil_scoped_release no_gil;
    runtime().synchronize(index_or_current(index));
  });
  m.def("current_stream", [](int index) { return stream_fields(runtime().current_stream(index_or_current(index))); });
  m.def("default_stream", [](int index) {
    return stream_fields(c10::Stream(c10::Stream::DEFAULT, flagos_device(index_or_current(index))));
  });
  m.def("exchange_stream", [](int64_t stream_id, int index) {
    const c10::Stream s(c10::Stream::UNSAFE, flagos_device(index_or_current(index)), stream_id);
    return stream_fields(runtime().exchange_stream(s));
  }, "Make the stream current on its device; returns the previous one.");
  m.def("settle_autograd_threads", [] {
    py::gil_scoped_release no_gil;
    settle_autograd_threads();
  });

  m.def("manual_seed", [](int index, uint64_t seed) {
    auto gen = default_generator(index);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(seed);
  });
  m.def("initial_seed", [](int index) { return default_generator(index).current_seed(); });
  m.def("seed", [](int index) {
    auto gen = default_generator(index);
    std::lock_guard<std::mutex> lock(gen.mutex());
    return gen.seed();
  });
  m.def("get_rng_state", [](int index) { return at::Tensor(default_generator(index).get_state()); });
  m.def("set_rng_state", [](int index, const at::Tensor& state) {
    auto gen = default_generator(index);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state);
  });

  py::enum_<RouteKind>(m, "RouteKind", "How the router runs an operator (csrc/dispatch/router.h).")
      .value("Native", RouteKind::Native)
      .value("Cpu", RouteKind::Cpu)
      .value("Provider", RouteKind::Provider);
  m.def("set_routes", [](const py::tuple& fallback, const py::dict& per_op, const std::vector<std::string>& providers,
      const std::vector<bool>& replayable) {
    auto table = std::make_unique<RouteTable>();
    table->fallback = to_route(fallback);
    table->providers = providers;
    table->replayable = replayable;
    for (const auto& item : per_op) {
      table->per_op.emplace(parse_short_op_name(item.first.cast<std::string>()), to_route(item.second.cast<py::tuple>()));
    }
    publish_routes(std::move(table));
  }, "Publish a complete route table; each route is (RouteKind, provider index or -1).");
  m.def("route_of", [](const std::string& op) {
    const RouteTable& table = current_routes();
    auto it = table.per_op.find(parse_short_op_name(op));
    return route_name(table, it == table.per_op.end() ? table.fallback : it->second);
  }, "The route the router would take for an operator now.");
  m.def("intercept_ops", &intercept_ops, "Route these ops by name even where torch has a generic kernel.");
  m.def("intercepted_ops", &intercepted_ops);
  m.def("transfer_ops", &transfer_ops, "Ops that move data between devices (never on the cpu route).");
  m.def("decomposed_ops", &decomposed_ops, "Ops the router decomposes where the route's kernel is missing.");
  m.def("fast_path_ops", &fast_path_ops, "Ops with an unboxed router entry (native route without boxing).");
  m.def("set_alias_reuse", &set_alias_reuse, "Reuse vendor aliases across calls (default on; off to measure it).");
  m.def("alias_reuse", &alias_reuse);
  m.def("set_router_counters", &counters::set_on,
      "Count host time per operator and phase in the router (off by default; dispatch/counters.h).");
  m.def("router_counters", [] {
    py::list out;
    for (const counters::Row& row : counters::rows()) {
      out.append(py::make_tuple(row.op, row.path, row.calls,
          py::make_tuple(row.ns[counters::kArguments], row.ns[counters::kKernel], row.ns[counters::kResults],
              row.ns[counters::kRelease])));
    }
    return out;
  }, "(op, path, calls, (arguments, kernel, results, release) ns summed) per operator and router path.");
  m.def("reset_router_counters", &counters::reset);
  m.def("set_log_dispatch", &set_log_dispatch);
  m.def("log_dispatch", &log_dispatch);
  m.def("set_provider_dispatcher", [](py::object fn) {
    provider_dispatcher() = std::move(fn);
    set_provider_hook(&call_python_provider);
  });
}
