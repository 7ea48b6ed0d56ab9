// torch.ops.flagos: the runtime's operators (devices, streams, generators). The core's whole face to Python is
// dispatcher operators (csrc/ops/), so the library names no CPython symbol and one build serves every Python of a
// torch line; torch_fl/_core.py gives them their Python names and types.
#include "runtime/autograd_threads.h"
#include "runtime/runtime.h"

#include <ATen/core/Generator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <torch/library.h>

#include <mutex>
#include <optional>
#include <tuple>

namespace torch_fl {
namespace {

using StreamFields = std::tuple<int64_t, int64_t, int64_t>;

c10::DeviceIndex index_or_current(int64_t index) {
  return index < 0 ? runtime().current_device() : static_cast<c10::DeviceIndex>(index);
}

// (stream_id, device_index, device_type): the fields torch.Stream is built from.
StreamFields stream_fields(const c10::Stream& s) {
  return {s.id(), s.device_index(), static_cast<int64_t>(s.device_type())};
}

const at::Generator& default_generator(int64_t index) {
  return at::detail::getPrivateUse1Hooks().getDefaultGenerator(index_or_current(index));
}

// Seeds are 64-bit unsigned; an operator's int is signed, so they cross as the same 64 bits (torch_fl/_core.py).
uint64_t seed_bits(int64_t v) { return static_cast<uint64_t>(v); }
int64_t seed_int(uint64_t v) { return static_cast<int64_t>(v); }

} // namespace
} // namespace torch_fl

TORCH_LIBRARY_FRAGMENT(flagos, m) {
  using namespace torch_fl;
  m.def("built_runtimes() -> str[]", [] { return built_runtimes(); });
  m.def("init(str accelerator, int emulated_devices, bool trap_host_access=False) -> ()",
      [](std::string accelerator, int64_t emulated_devices, bool trap) {
        init_runtime(accelerator, static_cast<int>(emulated_devices), trap);
      });
  m.def("accelerator() -> str?", []() -> std::optional<std::string> {
    if (!runtime_ready()) return std::nullopt;
    return std::string(runtime().name());
  });
  m.def("device_count() -> int", [] { return runtime_ready() ? int64_t(runtime().device_count()) : int64_t(0); });
  m.def("current_device() -> int", [] { return int64_t(runtime().current_device()); });
  m.def("set_device(int index) -> ()", [](int64_t index) { runtime().set_device(static_cast<c10::DeviceIndex>(index)); });
  m.def("empty_host_cache() -> ()", [] { runtime().empty_host_cache(); });
  // torch.ops calls run without the GIL, so a long wait here blocks no other Python thread.
  m.def("synchronize(int index) -> ()", [](int64_t index) { runtime().synchronize(index_or_current(index)); });
  m.def("current_stream(int index) -> (int, int, int)",
      [](int64_t index) { return stream_fields(runtime().current_stream(index_or_current(index))); });
  m.def("default_stream(int index) -> (int, int, int)", [](int64_t index) {
    return stream_fields(c10::Stream(c10::Stream::DEFAULT, flagos_device(index_or_current(index))));
  });
  // Make the stream current on its device; returns the previous one.
  m.def("exchange_stream(int stream_id, int index) -> (int, int, int)", [](int64_t stream_id, int64_t index) {
    const c10::Stream s(c10::Stream::UNSAFE, flagos_device(index_or_current(index)), stream_id);
    return stream_fields(runtime().exchange_stream(s));
  });
  m.def("settle_autograd_threads() -> ()", [] { settle_autograd_threads(); });

  m.def("manual_seed(int index, int seed) -> ()", [](int64_t index, int64_t seed) {
    auto gen = default_generator(index);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(seed_bits(seed));
  });
  m.def("initial_seed(int index) -> int", [](int64_t index) { return seed_int(default_generator(index).current_seed()); });
  m.def("seed(int index) -> int", [](int64_t index) {
    auto gen = default_generator(index);
    std::lock_guard<std::mutex> lock(gen.mutex());
    return seed_int(gen.seed());
  });
  m.def("get_rng_state(int index) -> Tensor", [](int64_t index) { return at::Tensor(default_generator(index).get_state()); });
  m.def("set_rng_state(int index, Tensor state) -> ()", [](int64_t index, const at::Tensor& state) {
    auto gen = default_generator(index);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state);
  });
}
