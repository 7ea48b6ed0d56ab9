// torch_fl._C's replay functions: plans from the Python recorder, settings, statistics, and the Python launch.
#include "replay/plan.h"
#include "runtime/runtime.h"

#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>

namespace py = pybind11;

namespace torch_fl {
namespace {

std::vector<int64_t> ints(py::handle h) { return h.cast<std::vector<int64_t>>(); }

ModuleLaunch launch_config(py::handle function, py::handle grid, py::handle block, py::handle shared) {
  ModuleLaunch l;
  l.function = reinterpret_cast<void*>(function.cast<uintptr_t>());
  const auto g = grid.cast<std::vector<uint32_t>>();
  const auto b = block.cast<std::vector<uint32_t>>();
  TORCH_CHECK(g.size() == 3 && b.size() == 3, "a launch needs 3 grid and 3 block dimensions");
  std::copy(g.begin(), g.end(), l.grid);
  std::copy(b.begin(), b.end(), l.block);
  l.shared_bytes = shared.cast<uint32_t>();
  return l;
}

} // namespace

// The recorder's wire format (torch_fl/replay/_record.py, Recording.wire): ("refused", reason) or
// ("plan", allocs, steps, launches, outputs) with
//   alloc  = (dtype, sizes, strides, storage_offset)
//   step   = (kind 0 alloc | 1 fill | 2 launch, index, fill value or None)
//   launch = (function, grid, block, shared_bytes, params), param = (kind 0 arg | 1 alloc | 2 bytes, index, offset, bits)
//   output = (kind 0 arg | 1 alloc, index, whole, sizes, strides, storage_offset)
void recording_from_python(py::handle wire, replay::Recording* out) {
  auto t = wire.cast<py::tuple>();
  const std::string kind = t[0].cast<std::string>();
  if (kind == "refused") {
    out->refused = true;
    out->reason = t[1].cast<std::string>();
    return;
  }
  TORCH_CHECK(kind == "plan", "torch_fl: unknown recording kind ", kind);
  replay::Plan& p = out->plan;
  for (py::handle a : t[1].cast<py::list>()) {
    auto f = a.cast<py::tuple>();
    p.allocs.push_back(replay::Alloc{torch::jit::toIValue(f[0], c10::IntType::get()).toScalarType(), ints(f[1]),
        ints(f[2]), f[3].cast<int64_t>()});
  }
  for (py::handle s : t[2].cast<py::list>()) {
    auto f = s.cast<py::tuple>();
    replay::Step step{static_cast<replay::Step::Kind>(f[0].cast<int>()), f[1].cast<uint16_t>(), c10::Scalar()};
    if (step.kind == replay::Step::Kind::Fill) step.fill_value = torch::jit::toIValue(f[2], c10::NumberType::get()).toScalar();
    p.steps.push_back(step);
  }
  for (py::handle l : t[3].cast<py::list>()) {
    auto f = l.cast<py::tuple>();
    replay::Launch launch;
    launch.config = launch_config(f[0], f[1], f[2], f[3]);
    for (py::handle q : f[4].cast<py::list>()) {
      auto g = q.cast<py::tuple>();
      launch.params.push_back(replay::Param{static_cast<replay::Param::Kind>(g[0].cast<int>()), g[1].cast<uint16_t>(),
          g[2].cast<int64_t>(), g[3].cast<uint64_t>()});
    }
    p.launches.push_back(std::move(launch));
  }
  for (py::handle o : t[4].cast<py::list>()) {
    auto f = o.cast<py::tuple>();
    p.outputs.push_back(replay::Output{static_cast<replay::Output::Kind>(f[0].cast<int>()), f[1].cast<uint16_t>(),
        f[2].cast<bool>(), ints(f[3]), ints(f[4]), f[5].cast<int64_t>()});
  }
}

void bind_replay(py::module_& m) {
  m.def("replay_configure", [](bool enabled, bool verify, size_t capacity) {
    replay::configure(replay::Settings{enabled, verify, capacity});
  });
  m.def("replay_settings", [] {
    const replay::Settings s = replay::settings();
    return py::make_tuple(s.enabled, s.verify, s.capacity);
  });
  m.def("replay_clear", &replay::clear, "Drop every key, plan and statistic.");
  m.def("replay_stats", [] {
    py::list out;
    for (const replay::OpStats& s : replay::stats()) {
      py::dict d;
      d["op"] = s.op;
      d["hits"] = s.hits;
      d["recordings"] = s.recordings;
      d["refused_calls"] = s.refused_calls;
      d["unkeyed_calls"] = s.unkeyed_calls;
      d["verified"] = s.verified;
      d["evictions"] = s.evictions;
      d["ready_keys"] = s.ready;
      d["refused_keys"] = s.refused_keys;
      d["pending_keys"] = s.pending;
      py::dict reasons;
      for (const auto& [why, n] : s.reasons) reasons[py::str(why)] = n;
      d["reasons"] = reasons;
      out.append(d);
    }
    return out;
  });
  m.def("launch_module", [](py::handle function, py::handle grid, py::handle block, py::handle shared,
                             const std::vector<uint64_t>& values, int device) {
    const ModuleLaunch l = launch_config(function, grid, block, shared);
    replay::launch_values(l, values, static_cast<c10::DeviceIndex>(device < 0 ? runtime().current_device() : device));
  }, "Launch a loaded module function on the flagos device's current stream (parameters as 8-byte values).");
}

} // namespace torch_fl
