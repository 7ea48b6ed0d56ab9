// torch.ops.flagos: the replay's operators: settings, statistics, the recorder's plans and the provider's own
// launches (torch_fl/replay).
#include "dispatch/provider_call.h"
#include "replay/plan.h"
#include "runtime/runtime.h"

#include <torch/library.h>

#include <cstring>
#include <optional>
#include <tuple>

namespace torch_fl {
namespace {

// Reads the recorder's flat wire (torch_fl/_core.py, submit_recording, writes it) front to back:
//   allocs:   n, then per alloc   dtype, ndim, sizes..., strides..., storage_offset
//   steps:    n, then per step    kind (0 alloc | 1 fill | 2 launch), index, fill tag (0 none | 1 bool | 2 int |
//                                 3 float), fill bits (a float as its IEEE-754 double bits)
//   launches: n, then per launch  function, grid x y z, block x y z, shared bytes, nparams, then per param
//                                 kind (0 arg | 1 alloc | 2 bytes), index, offset, bits
//   outputs:  n, then per output  kind (0 arg | 1 alloc), index, whole, ndim, sizes..., strides..., storage_offset
//   copies:   n, then per copy    the destination view, then the source view, each as
//                                 kind (0 arg | 1 alloc), index, ndim, sizes..., strides..., offset
//   (a step of kind 3 is a copy, its index one into copies)
// Pointers and 64-bit values cross as the same 64 bits in a signed int.
class Wire {
 public:
  explicit Wire(const std::vector<int64_t>& words) : words_(words) {}
  int64_t next() {
    TORCH_CHECK(at_ < words_.size(), "torch_fl: the recorder's plan ends early (", words_.size(), " words)");
    return words_[at_++];
  }
  std::vector<int64_t> ints(int64_t n) {
    std::vector<int64_t> out;
    for (int64_t i = 0; i < n; ++i) out.push_back(next());
    return out;
  }
  void expect_end() const {
    TORCH_CHECK(at_ == words_.size(), "torch_fl: the recorder's plan has ", words_.size() - at_, " words too many");
  }

 private:
  const std::vector<int64_t>& words_;
  size_t at_ = 0;
};

c10::Scalar fill_value(int64_t tag, int64_t bits) {
  switch (tag) {
    case 1:
      return c10::Scalar(bits != 0);
    case 2:
      return c10::Scalar(bits);
    case 3: {
      double d;
      std::memcpy(&d, &bits, sizeof d);
      return c10::Scalar(d);
    }
    default:
      return c10::Scalar();
  }
}

replay::Plan plan_from_wire(const std::vector<int64_t>& words) {
  Wire w(words);
  replay::Plan p;
  for (int64_t n = w.next(); n > 0; --n) {
    replay::Alloc a;
    a.dtype = static_cast<c10::ScalarType>(w.next());
    const int64_t ndim = w.next();
    a.sizes = w.ints(ndim);
    a.strides = w.ints(ndim);
    a.storage_offset = w.next();
    p.allocs.push_back(std::move(a));
  }
  for (int64_t n = w.next(); n > 0; --n) {
    const auto kind = static_cast<replay::Step::Kind>(w.next());
    const auto index = static_cast<uint16_t>(w.next());
    const int64_t tag = w.next();
    p.steps.push_back(replay::Step{kind, index, fill_value(tag, w.next())});
  }
  for (int64_t n = w.next(); n > 0; --n) {
    replay::Launch launch;
    launch.config.function = reinterpret_cast<void*>(static_cast<uintptr_t>(w.next()));
    for (uint32_t& g : launch.config.grid) g = static_cast<uint32_t>(w.next());
    for (uint32_t& b : launch.config.block) b = static_cast<uint32_t>(w.next());
    launch.config.shared_bytes = static_cast<uint32_t>(w.next());
    for (int64_t k = w.next(); k > 0; --k) {
      replay::Param q;
      q.kind = static_cast<replay::Param::Kind>(w.next());
      q.index = static_cast<uint16_t>(w.next());
      q.offset = w.next();
      q.bits = static_cast<uint64_t>(w.next());
      launch.params.push_back(q);
    }
    p.launches.push_back(std::move(launch));
  }
  for (int64_t n = w.next(); n > 0; --n) {
    replay::Output o;
    o.kind = static_cast<replay::Output::Kind>(w.next());
    o.index = static_cast<uint16_t>(w.next());
    o.whole = w.next() != 0;
    const int64_t ndim = w.next();
    o.sizes = w.ints(ndim);
    o.strides = w.ints(ndim);
    o.storage_offset = w.next();
    p.outputs.push_back(std::move(o));
  }
  for (int64_t n = w.next(); n > 0; --n) {
    replay::Copy c;
    for (replay::View* v : {&c.dst, &c.src}) {
      v->kind = static_cast<replay::View::Kind>(w.next());
      v->index = static_cast<uint16_t>(w.next());
      const int64_t ndim = w.next();
      v->sizes = w.ints(ndim);
      v->strides = w.ints(ndim);
      v->offset = w.next();
    }
    p.copies.push_back(std::move(c));
  }
  w.expect_end();
  return p;
}

// The recording of this thread's provider call: a plan, or (refusal set) why the call cannot be replayed. Called
// by the Python kernel on kProviderRecordKey before it returns the call's results.
void replay_submit(std::optional<std::string> refusal, std::vector<int64_t> plan) {
  replay::Recording* out = pending_recording();
  TORCH_CHECK(out != nullptr, "torch_fl: replay_submit outside a recorded provider call");
  if (refusal.has_value()) {
    out->refused = true;
    out->reason = *refusal;
    return;
  }
  out->plan = plan_from_wire(plan);
}

// Per op: its name, ten counts (hits, recordings, refused calls, unkeyed calls, verified, evictions, ready keys,
// refused keys, pending keys, number of refusal reasons), then its reasons and their counts in order.
std::tuple<std::vector<std::string>, std::vector<int64_t>, std::vector<std::string>, std::vector<int64_t>>
replay_stats() {
  std::vector<std::string> ops, reasons;
  std::vector<int64_t> counts, reason_counts;
  for (const replay::OpStats& s : replay::stats()) {
    ops.push_back(s.op);
    for (auto v : {s.hits, s.recordings, s.refused_calls, s.unkeyed_calls, s.verified, s.evictions}) {
      counts.push_back(static_cast<int64_t>(v));
    }
    for (auto v : {s.ready, s.refused_keys, s.pending}) counts.push_back(static_cast<int64_t>(v));
    counts.push_back(static_cast<int64_t>(s.reasons.size()));
    for (const auto& [why, n] : s.reasons) {
      reasons.push_back(why);
      reason_counts.push_back(static_cast<int64_t>(n));
    }
  }
  return {ops, counts, reasons, reason_counts};
}

ModuleLaunch launch_config(int64_t function, const std::vector<int64_t>& grid, const std::vector<int64_t>& block,
    int64_t shared) {
  TORCH_CHECK(grid.size() == 3 && block.size() == 3, "a launch needs 3 grid and 3 block dimensions");
  ModuleLaunch l;
  l.function = reinterpret_cast<void*>(static_cast<uintptr_t>(function));
  for (int i = 0; i < 3; ++i) {
    l.grid[i] = static_cast<uint32_t>(grid[i]);
    l.block[i] = static_cast<uint32_t>(block[i]);
  }
  l.shared_bytes = static_cast<uint32_t>(shared);
  return l;
}

} // namespace
} // namespace torch_fl

TORCH_LIBRARY_FRAGMENT(flagos, m) {
  using namespace torch_fl;
  m.def("replay_configure(bool enabled, bool verify, int capacity) -> ()", [](bool enabled, bool verify, int64_t capacity) {
    replay::configure(replay::Settings{enabled, verify, static_cast<size_t>(capacity)});
  });
  m.def("replay_settings() -> (bool, bool, int)", [] {
    const replay::Settings s = replay::settings();
    return std::make_tuple(s.enabled, s.verify, static_cast<int64_t>(s.capacity));
  });
  // Drop every key, plan and statistic.
  m.def("replay_clear() -> ()", [] { replay::clear(); });
  m.def("replay_stats() -> (str[] ops, int[] counts, str[] reasons, int[] reason_counts)", &replay_stats);
  m.def("replay_submit(str? refusal, int[] plan) -> ()", &replay_submit);
  // Launch a loaded module function on the flagos device's current stream (parameters as 8-byte values).
  m.def("launch_module(int function, int[] grid, int[] block, int shared_bytes, int[] values, int device) -> ()",
      [](int64_t function, std::vector<int64_t> grid, std::vector<int64_t> block, int64_t shared,
          std::vector<int64_t> values, int64_t device) {
        const std::vector<uint64_t> bits(values.begin(), values.end());
        replay::launch_values(launch_config(function, grid, block, shared), bits,
            static_cast<c10::DeviceIndex>(device < 0 ? runtime().current_device() : device));
      });
  // Install the provider route's redispatch to the Python kernels (torch_fl/routing/publish.py registers them first).
  m.def("enable_provider_calls() -> ()", [] { enable_provider_calls(); });
  // A dtype's number in the recorder's wire (torch's ScalarType).
  m.def("dtype_code(ScalarType dtype) -> int", [](c10::ScalarType dtype) { return static_cast<int64_t>(dtype); });
}
