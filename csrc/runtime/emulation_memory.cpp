// The emulated devices' capacity, out-of-memory error, history and live blocks (emulation_memory.h).
#include "runtime/emulation_memory.h"

#include <c10/util/Exception.h>
#include <torch/csrc/profiler/combined_traceback.h>

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <mutex>
#include <unordered_map>

namespace torch_fl::emulation {
namespace {

constexpr int kMaxDevices = 16; // FLAGOS_EMU_DEVICES' upper bound

std::atomic<int64_t> g_capacity{0}; // 0: not set, the host's physical memory
// Per device: the fraction set, and the limit it gives (0: no fraction set, the capacity), read per allocation.
std::array<std::atomic<int64_t>, kMaxDevices> g_limit{};
std::array<double, kMaxDevices> g_fraction = [] {
  std::array<double, kMaxDevices> all{};
  all.fill(1.0);
  return all;
}();
std::mutex g_fraction_mutex;

int64_t host_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? int64_t(pages) * page : int64_t(1) << 34;
}

void check_device(c10::DeviceIndex index) {
  TORCH_CHECK(index >= 0 && index < kMaxDevices, "flagos device index ", int(index), " is out of range");
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 6) {
    bytes /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), unit ? "%.2f %s" : "%.0f %s", bytes, units[unit]);
  return text;
}

// ---- history -------------------------------------------------------------------------------------------------

enum class Level { none, state, all };

struct Config {
  Level enabled = Level::none;
  bool context_live = false; // live blocks keep their allocation stack
  bool context_alloc = false; // alloc events keep theirs
  bool context_free = false; // free events keep theirs
  bool cpp = false;
  size_t max_entries = 0;
};

using Context = std::shared_ptr<c10::GatheredContext>;

struct Live {
  c10::DeviceIndex device;
  size_t size;
  int64_t pool;
  Context context;
};

struct Event {
  c10::DeviceIndex device;
  Action action;
  uintptr_t address; // for an oom event: the bytes that were free
  size_t size;
  int64_t time_us;
  Context context;
};

std::mutex g_mutex; // guards everything below
Config g_config;
std::unordered_map<const void*, Live> g_live;
std::array<std::deque<Event>, kMaxDevices> g_events;
int g_pools_in_use = 0;
std::atomic<bool> g_tracking{false};

// The pools this thread allocates into, innermost last, per device.
thread_local std::array<std::vector<int64_t>, kMaxDevices> tls_pools;

// On while history is recorded, a pool is in use, or a block is known: a pool's block must be seen when it is
// freed after the pool was left.
void update_tracking() {
  g_tracking.store(g_config.enabled != Level::none || g_pools_in_use > 0 || !g_live.empty());
}

Config config() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_config;
}

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Stacks are gathered outside g_mutex: gathering Python frames takes the GIL, and a thread holding the GIL may be
// waiting for g_mutex in an allocation.
Context gather(const Config& cfg) {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/false, /*cpp=*/cfg.cpp);
}

void push(const Config& cfg, Event event) {
  auto& events = g_events[event.device];
  events.push_back(std::move(event));
  while (cfg.max_entries && events.size() > cfg.max_entries) events.pop_front();
}

// Symbolizing Python frames reads their code objects, which needs the GIL, and an operator runs with it released.
// The core includes no CPython header (docs/architecture.md, "One wheel per torch line"), so it takes the GIL
// through CPython's stable-ABI functions, found at run time in the process; without Python there is no frame to
// name, and `held()` says so.
class PythonGil {
 public:
  PythonGil() {
    using IsInitialized = int (*)();
    auto is_initialized = reinterpret_cast<IsInitialized>(dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
    ensure_ = reinterpret_cast<Ensure>(dlsym(RTLD_DEFAULT, "PyGILState_Ensure"));
    release_ = reinterpret_cast<Release>(dlsym(RTLD_DEFAULT, "PyGILState_Release"));
    if (is_initialized && ensure_ && release_ && is_initialized()) {
      state_ = ensure_();
      held_ = true;
    }
  }
  ~PythonGil() {
    if (held_) release_(state_);
  }
  PythonGil(const PythonGil&) = delete;
  PythonGil& operator=(const PythonGil&) = delete;
  bool held() const { return held_; }

 private:
  using Ensure = int (*)();
  using Release = void (*)(int);
  Ensure ensure_ = nullptr;
  Release release_ = nullptr;
  int state_ = 0;
  bool held_ = false;
};

} // namespace

// ---- capacity ----------------------------------------------------------------------------------------------------

void set_capacity(int64_t bytes) {
  TORCH_CHECK(bytes > 0, "the emulated device memory must be a positive number of bytes, got ", bytes,
      "; set FLAGOS_EMU_MEMORY to a size such as 16GiB, or unset it to use the host's memory");
  g_capacity.store(bytes);
  std::lock_guard<std::mutex> lock(g_fraction_mutex);
  for (int i = 0; i < kMaxDevices; ++i) {
    g_limit[i].store(g_fraction[i] < 1.0 ? int64_t(g_fraction[i] * double(bytes)) : 0);
  }
}

int64_t capacity() {
  int64_t bytes = g_capacity.load(std::memory_order_relaxed);
  if (bytes == 0) {
    bytes = host_memory();
    g_capacity.store(bytes);
  }
  return bytes;
}

void set_memory_fraction(c10::DeviceIndex index, double fraction) {
  check_device(index);
  TORCH_CHECK(fraction >= 0.0 && fraction <= 1.0,
      "set_per_process_memory_fraction: the fraction must be in [0, 1], got ", fraction);
  std::lock_guard<std::mutex> lock(g_fraction_mutex);
  g_fraction[index] = fraction;
  // A limit of 0 means "the capacity", so a fraction of 0 keeps one byte short of any allocation.
  g_limit[index].store(fraction < 1.0 ? std::max<int64_t>(int64_t(fraction * double(capacity())), 1) : 0);
}

double memory_fraction(c10::DeviceIndex index) {
  check_device(index);
  std::lock_guard<std::mutex> lock(g_fraction_mutex);
  return g_fraction[index];
}

int64_t memory_limit(c10::DeviceIndex index) {
  const int64_t limit = g_limit[index].load(std::memory_order_relaxed);
  return limit ? limit : capacity();
}

void out_of_memory(c10::DeviceIndex index, size_t requested, int64_t in_use, const std::string& host_error) {
  const int64_t limit = memory_limit(index);
  const int64_t free_bytes = std::max<int64_t>(limit - in_use, 0);
  if (g_tracking.load()) {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_config.enabled == Level::all) {
      push(g_config, Event{index, Action::oom, uintptr_t(free_bytes), requested, now_us(), nullptr});
    }
  }
  const double fraction = memory_fraction(index);
  std::string cause = host_error.empty()
      ? ""
      : " The host could not provide the memory either (" + host_error.substr(0, host_error.find('\n')) + ").";
  TORCH_CHECK_WITH(OutOfMemoryError, false, "flagos out of memory on emulated device ", int(index),
      ": tried to allocate ", format_bytes(double(requested)), ". The device has ", format_bytes(double(capacity())),
      " (FLAGOS_EMU_MEMORY)", fraction < 1.0 ? ", of which this process may use " + format_bytes(double(limit)) +
      " (set_per_process_memory_fraction(" + std::to_string(fraction) + "))" : std::string(),
      "; ", format_bytes(double(in_use)), " is in use and ", format_bytes(double(free_bytes)), " free.", cause,
      " Free tensors you no longer need, use smaller batches, or raise FLAGOS_EMU_MEMORY.");
}

// ---- history and live blocks ---------------------------------------------------------------------------------------

bool tracking() { return g_tracking.load(std::memory_order_relaxed); }

void on_alloc(c10::DeviceIndex index, const void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  const Config cfg = config();
  const auto& pools = tls_pools[index];
  const int64_t pool = pools.empty() ? 0 : pools.back();
  const bool recording = cfg.enabled != Level::none;
  if (!recording && pool == 0) return;
  Context context = recording && (cfg.context_live || cfg.context_alloc) ? gather(cfg) : nullptr;
  const int64_t when = now_us();
  std::lock_guard<std::mutex> lock(g_mutex);
  g_live[ptr] = Live{index, nbytes, pool, cfg.context_live ? context : nullptr};
  if (cfg.enabled == Level::all) {
    // Every emulated allocation is its own segment: nothing is cached, so the host block is the device block.
    push(cfg, Event{index, Action::segment_alloc, uintptr_t(ptr), nbytes, when, nullptr});
    push(cfg, Event{index, Action::alloc, uintptr_t(ptr), nbytes, when, cfg.context_alloc ? context : nullptr});
  }
}

void on_free(c10::DeviceIndex index, const void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  const Config cfg = config();
  Context context = cfg.enabled == Level::all && cfg.context_free ? gather(cfg) : nullptr;
  const int64_t when = now_us();
  Context released; // dropped after the lock: a traceback's destructor hands its frames back to Python
  std::lock_guard<std::mutex> lock(g_mutex);
  auto found = g_live.find(ptr);
  if (found != g_live.end()) {
    released = std::move(found->second.context);
    g_live.erase(found);
    if (g_live.empty()) update_tracking();
  }
  if (cfg.enabled == Level::all) {
    push(cfg, Event{index, Action::free_requested, uintptr_t(ptr), nbytes, when, context});
    push(cfg, Event{index, Action::free_completed, uintptr_t(ptr), nbytes, when, context});
    push(cfg, Event{index, Action::segment_free, uintptr_t(ptr), nbytes, when, nullptr});
  }
}

void record_history(const std::optional<std::string>& enabled, const std::optional<std::string>& context,
    const std::string& stacks, int64_t max_entries) {
  Config cfg;
  const std::string level = enabled.value_or("");
  TORCH_CHECK(level.empty() || level == "state" || level == "all", "_record_memory_history: enabled must be None, ",
      "'state' or 'all', got '", level, "'");
  const std::string keep = context.value_or("");
  TORCH_CHECK(keep.empty() || keep == "state" || keep == "alloc" || keep == "all",
      "_record_memory_history: context must be None, 'state', 'alloc' or 'all', got '", keep, "'");
  TORCH_CHECK(stacks == "python" || stacks == "all", "_record_memory_history: stacks must be 'python' or 'all', got '",
      stacks, "'");
  TORCH_CHECK(max_entries >= 0, "_record_memory_history: max_entries must be >= 0, got ", max_entries);
  cfg.enabled = level.empty() ? Level::none : level == "state" ? Level::state : Level::all;
  cfg.context_live = !keep.empty();
  cfg.context_alloc = keep == "alloc" || keep == "all";
  cfg.context_free = keep == "all";
  cfg.cpp = stacks == "all";
  cfg.max_entries = size_t(max_entries);
  std::deque<Event> dropped[kMaxDevices]; // destroyed after the lock is released
  std::lock_guard<std::mutex> lock(g_mutex);
  g_config = cfg;
  if (cfg.enabled != Level::all) {
    for (int i = 0; i < kMaxDevices; ++i) dropped[i].swap(g_events[i]);
  }
  if (cfg.enabled == Level::none) {
    // Stopping forgets the blocks, as torch.cuda does, except those of a pool still in use.
    for (auto it = g_live.begin(); it != g_live.end();) {
      if (it->second.pool == 0) {
        it = g_live.erase(it);
      } else {
        it->second.context = nullptr;
        ++it;
      }
    }
  }
  update_tracking();
}

void pool_begin(c10::DeviceIndex index, int64_t pool) {
  check_device(index);
  TORCH_CHECK(pool != 0, "a memory pool id must be non-zero");
  tls_pools[index].push_back(pool);
  std::lock_guard<std::mutex> lock(g_mutex);
  ++g_pools_in_use;
  update_tracking();
}

void pool_end(c10::DeviceIndex index, int64_t pool) {
  check_device(index);
  auto& pools = tls_pools[index];
  TORCH_CHECK(!pools.empty() && pools.back() == pool, "use_mem_pool: pool ", pool,
      " is not the innermost pool of this thread on flagos:", int(index),
      "; leave pools in the reverse order of entry");
  pools.pop_back();
  std::lock_guard<std::mutex> lock(g_mutex);
  --g_pools_in_use;
  update_tracking();
}

Snapshot snapshot() {
  std::vector<std::pair<const void*, Live>> live;
  std::vector<Event> events;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    live.assign(g_live.begin(), g_live.end());
    for (const auto& per_device : g_events) events.insert(events.end(), per_device.begin(), per_device.end());
  }
  std::sort(live.begin(), live.end(), [](const auto& a, const auto& b) { return a.first < b.first; });

  // Each distinct traceback is symbolized once; blocks and events refer to it by its index.
  std::unordered_map<c10::GatheredContext*, int64_t> index_of;
  std::vector<torch::CapturedTraceback*> to_symbolize;
  auto traceback = [&](const Context& context) -> int64_t {
    auto* captured = dynamic_cast<torch::CapturedTraceback*>(context.get());
    if (captured == nullptr) return -1;
    auto [it, fresh] = index_of.emplace(context.get(), int64_t(to_symbolize.size()));
    if (fresh) to_symbolize.push_back(captured);
    return it->second;
  };
  Snapshot out;
  for (const auto& [ptr, block] : live) {
    out.blocks.insert(out.blocks.end(), {int64_t(block.device), int64_t(uintptr_t(ptr)), int64_t(block.size),
        block.pool, traceback(block.context)});
  }
  for (const auto& e : events) {
    out.events.insert(out.events.end(), {int64_t(e.device), int64_t(e.action), int64_t(e.address), int64_t(e.size),
        e.time_us, traceback(e.context)});
  }
  PythonGil gil;
  if (!to_symbolize.empty() && gil.held()) {
    torch::SymbolizedTracebacks named = torch::symbolize(to_symbolize);
    for (const auto& frame : named.all_frames) {
      out.frame_files.push_back(frame.filename);
      out.frame_names.push_back(frame.funcname);
      out.frame_lines.push_back(int64_t(frame.lineno));
    }
    for (const auto& frames : named.tracebacks) {
      out.traceback_starts.push_back(int64_t(out.traceback_frames.size()));
      for (uint64_t f : frames) out.traceback_frames.push_back(int64_t(f));
    }
  } else {
    out.traceback_starts.assign(to_symbolize.size(), 0); // known stacks, no names: every traceback is empty
  }
  out.traceback_starts.push_back(int64_t(out.traceback_frames.size()));
  // The copies of contexts die here, with the GIL held or not: their destructors only queue Python frames.
  return out;
}

} // namespace torch_fl::emulation
