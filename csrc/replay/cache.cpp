// The replay cache: keys to plans, a bounded LRU, per-operator statistics, and the verify mode.
#include "dispatch/router.h"
#include "replay/plan.h"

#include <ATen/ops/clone.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/view_as_real.h>

#include <algorithm>
#include <atomic>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace torch_fl::replay {
namespace {

// Two recordings that agree make a plan: kernels chosen by a first-call autotuner, or a random seed baked into
// a launch, show as recordings that differ. After this many recordings without two in a row agreeing the key is
// refused for good.
constexpr int kMaxRecordings = 4;

enum class State : uint8_t { Recording, Ready, Refused };

struct Counters {
  uint64_t hits = 0, recordings = 0, refused_calls = 0, unkeyed_calls = 0, verified = 0, evictions = 0;
  std::map<std::string, uint64_t> reasons;
};

struct Entry {
  State state = State::Recording;
  int recordings = 0;
  std::shared_ptr<const Plan> plan; // Ready: the plan; Recording: the last recording, to compare the next with
  std::string reason;
  Counters* counters = nullptr;
  std::list<const Key*>::iterator lru;
};

struct Cache {
  std::mutex mutex;
  Settings settings;
  std::atomic<bool> enabled{true}; // settings.enabled, read without the lock before a key is built
  std::unordered_map<Key, Entry, KeyHash> entries;
  std::list<const Key*> lru; // most recently used first
  std::unordered_map<const void*, std::pair<std::string, Counters>> per_op;

  Counters& counters_of(const c10::OperatorHandle& op) {
    auto it = per_op.find(&op.schema());
    if (it == per_op.end()) {
      it = per_op.emplace(&op.schema(), std::make_pair(short_op_name(op.operator_name()), Counters())).first;
    }
    return it->second.second;
  }

  void evict_beyond_capacity() {
    while (entries.size() > settings.capacity && !lru.empty()) {
      const Key* oldest = lru.back();
      lru.pop_back();
      auto it = entries.find(*oldest);
      if (it != entries.end()) {
        it->second.counters->evictions++;
        entries.erase(it);
      }
    }
  }
};

Cache& cache() {
  static Cache* c = new Cache(); // leaked: provider calls may run during interpreter teardown
  return *c;
}

bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  if (a.numel() == 0) return true;
  // Compare the bytes, so that NaNs of the same payload compare equal and -0.0 differs from 0.0.
  auto bytes = [](const at::Tensor& t) {
    at::Tensor c = t.contiguous();
    if (c.is_complex()) c = at::view_as_real(c);
    const int64_t width = c.element_size();
    const c10::ScalarType as = width == 1 ? c10::kByte : width == 2 ? c10::kShort : width == 4 ? c10::kInt : c10::kLong;
    return c.view(as);
  };
  return at::equal(bytes(a), bytes(b));
}

// Verify mode: the same call through the provider on copies of the arguments, compared bit for bit with the
// replayed results and with what the replay wrote into the arguments.
void verify(const c10::OperatorHandle& op, const torch::jit::Stack& replayed, size_t returns,
    const std::vector<c10::IValue>& copies,
    const std::vector<at::Tensor>& slots, ProviderCall provider, void* ctx) {
  torch::jit::Stack stack(copies.begin(), copies.end());
  provider(ctx, &stack, nullptr);
  const std::string name = short_op_name(op.operator_name());
  auto fail = [&](const std::string& what) {
    TORCH_CHECK(false, "FLAGOS_FLAGGEMS_VERIFY: the replay of ", name, " differs from the provider's own call: ",
        what, ". Run without the replay (FLAGOS_FLAGGEMS_REPLAY=0) and report the op and its arguments.");
  };
  TORCH_CHECK(stack.size() == returns, "verify: the provider returned ", stack.size(), " values for ", name);
  for (size_t i = 0; i < returns; ++i) {
    const c10::IValue& a = replayed[replayed.size() - returns + i];
    const c10::IValue& b = stack[i];
    if (a.isTensor() != b.isTensor()) fail("result " + std::to_string(i) + " is of another kind");
    if (a.isTensor() && !bitwise_equal(a.toTensor(), b.toTensor())) fail("result " + std::to_string(i));
  }
  // Written arguments: the copies went through the provider, the originals through the replay.
  std::vector<at::Tensor> copy_slots;
  Key unused;
  torch::jit::Stack copy_stack(copies.begin(), copies.end());
  make_key(op, copy_stack, &unused, &copy_slots);
  for (size_t i = 0; i < slots.size() && i < copy_slots.size(); ++i) {
    if (!bitwise_equal(slots[i], copy_slots[i])) fail("argument tensor " + std::to_string(i) + " after the call");
  }
}

c10::IValue copy_value(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor().defined() ? c10::IValue(v.toTensor().clone()) : v;
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(t.clone());
    return out;
  }
  return v;
}

} // namespace

Settings settings() {
  std::lock_guard<std::mutex> lock(cache().mutex);
  return cache().settings;
}

void configure(const Settings& s) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.settings = s;
  if (c.settings.capacity == 0) c.settings.capacity = 1;
  c.enabled.store(s.enabled);
  c.evict_beyond_capacity();
}

void clear() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.entries.clear();
  c.lru.clear();
  c.per_op.clear();
}

std::vector<OpStats> stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  std::map<const Counters*, OpStats> out;
  for (auto& [id, named] : c.per_op) {
    OpStats s;
    s.op = named.first;
    const Counters& k = named.second;
    s.hits = k.hits;
    s.recordings = k.recordings;
    s.refused_calls = k.refused_calls;
    s.unkeyed_calls = k.unkeyed_calls;
    s.verified = k.verified;
    s.evictions = k.evictions;
    for (const auto& r : k.reasons) s.reasons.emplace_back(r.first, r.second);
    out.emplace(&k, std::move(s));
  }
  for (const auto& [key, e] : c.entries) {
    OpStats& s = out.at(e.counters);
    (e.state == State::Ready ? s.ready : e.state == State::Refused ? s.refused_keys : s.pending)++;
  }
  std::vector<OpStats> list;
  for (auto& [k, s] : out) list.push_back(std::move(s));
  std::sort(list.begin(), list.end(), [](const OpStats& a, const OpStats& b) { return a.op < b.op; });
  return list;
}

const char* call(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DeviceIndex device,
    ProviderCall provider, void* ctx) {
  Cache& c = cache();
  if (!c.enabled.load(std::memory_order_relaxed)) {
    provider(ctx, stack, nullptr);
    return "";
  }
  Key key;
  std::vector<at::Tensor> slots;
  const char* unkeyed = make_key(op, *stack, &key, &slots);

  std::shared_ptr<const Plan> plan;
  bool record = false, verify_on = false;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    if (!c.settings.enabled) {
      // switched off meanwhile: the plain provider call below
    } else if (unkeyed != nullptr) {
      Counters& k = c.counters_of(op);
      k.unkeyed_calls++;
      k.reasons[unkeyed]++;
    } else {
      auto it = c.entries.find(key);
      if (it == c.entries.end()) {
        Entry fresh;
        fresh.counters = &c.counters_of(op);
        it = c.entries.emplace(key, std::move(fresh)).first; // a copy: `key` is looked up again after recording
        c.lru.push_front(&it->first);
        it->second.lru = c.lru.begin();
        c.evict_beyond_capacity();
        it = c.entries.find(*c.lru.front()); // eviction never drops the newest key
      } else {
        c.lru.splice(c.lru.begin(), c.lru, it->second.lru);
      }
      Entry& e = it->second;
      switch (e.state) {
        case State::Ready:
          plan = e.plan;
          verify_on = c.settings.verify;
          e.counters->hits++;
          break;
        case State::Recording: record = true; break;
        case State::Refused: e.counters->refused_calls++; break;
      }
    }
  }

  if (plan) {
    const size_t n = op.schema().arguments().size();
    std::vector<c10::IValue> copies;
    if (verify_on) {
      for (auto it = stack->end() - static_cast<std::ptrdiff_t>(n); it != stack->end(); ++it) {
        copies.push_back(copy_value(*it));
      }
    }
    torch::jit::drop(*stack, n);
    run_plan(*plan, slots, device, stack);
    if (verify_on) {
      verify(op, *stack, op.schema().returns().size(), copies, slots, provider, ctx);
      std::lock_guard<std::mutex> lock(c.mutex);
      c.counters_of(op).verified++;
    }
    return "/replay";
  }
  if (!record) {
    provider(ctx, stack, nullptr);
    return "";
  }

  Recording rec;
  provider(ctx, stack, &rec);
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.entries.find(key);
  if (it == c.entries.end() || it->second.state != State::Recording) return ""; // evicted, or settled meanwhile
  Entry& e = it->second;
  e.counters->recordings++;
  e.recordings++;
  auto refuse = [&](const std::string& why) {
    e.state = State::Refused;
    e.reason = why;
    e.plan.reset();
    e.counters->reasons[why]++;
  };
  const auto& returns = op.schema().returns();
  const bool tensor_returns = rec.plan.outputs.size() == returns.size() &&
      std::all_of(returns.begin(), returns.end(), [](const c10::Argument& r) {
        return r.type()->kind() == c10::TypeKind::TensorType;
      });
  if (rec.refused) {
    refuse(rec.reason);
  } else if (!tensor_returns) {
    refuse("its results are not one tensor per return of the op (a list or an optional result)");
  } else if (e.plan && *e.plan == rec.plan) {
    e.state = State::Ready; // two recordings in a row agree
  } else if (e.recordings >= kMaxRecordings) {
    refuse("the launches differ from call to call (data-dependent or random parameters, or a tuner that has "
           "not settled)");
  } else {
    e.plan = std::make_shared<const Plan>(std::move(rec.plan));
  }
  return "";
}

} // namespace torch_fl::replay
