// The replay cache of provider calls (FlagGems' Triton kernels on the `flaggems` route).
//
// A provider's first calls for a key (operator, argument metadata, scalar values) run in Python while a recorder
// watches what they do on the device: the tensors they allocate, fill or copy into and the module functions they
// launch, with every pointer parameter traced to an argument or an allocation. Two recordings that agree become a
// Plan, and later calls with that key run the plan from C++: the same allocations, copies and kernels, the new
// pointers, on the current stream, with no Python and no GIL. What would not replay faithfully is refused when it is
// recorded (torch_fl/replay/_record.py says what is refused and why), and those calls keep the Python path.
#pragma once

#include "runtime/module_launch.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Scalar.h>

#include <cstdint>
#include <string>
#include <vector>

namespace torch_fl::replay {

// One kernel parameter. Pointers are a byte offset from an argument tensor's or an allocation's data pointer;
// everything else is a fixed value of the key (shapes, strides, scalars), stored in `bits`.
struct Param {
  enum class Kind : uint8_t { ArgPointer, AllocPointer, Bytes };
  Kind kind = Kind::Bytes;
  uint16_t index = 0; // argument slot or allocation
  int64_t offset = 0;
  uint64_t bits = 0;
  bool operator==(const Param& o) const {
    return kind == o.kind && index == o.index && offset == o.offset && bits == o.bits;
  }
};

struct Launch {
  ModuleLaunch config;
  std::vector<Param> params;
  bool operator==(const Launch& o) const;
};

// A tensor the provider allocated, as it allocated it.
struct Alloc {
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> sizes, strides;
  int64_t storage_offset = 0;
  bool operator==(const Alloc& o) const {
    return dtype == o.dtype && sizes == o.sizes && strides == o.strides && storage_offset == o.storage_offset;
  }
};

// A view of an argument (its offset counted from the argument's own) or of an allocation (its storage offset).
struct View {
  enum class Kind : uint8_t { Arg, Alloc };
  Kind kind = Kind::Alloc;
  uint16_t index = 0;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  bool operator==(const View& o) const {
    return kind == o.kind && index == o.index && sizes == o.sizes && strides == o.strides && offset == o.offset;
  }
};

// A copy between views of the arguments and the call's allocations (a `.contiguous()`, a `.to(dtype)`, a `copy_`),
// run through torch's own copy kernel.
struct Copy {
  View dst, src;
  bool operator==(const Copy& o) const { return dst == o.dst && src == o.src; }
};

struct Step {
  enum class Kind : uint8_t { Alloc, Fill, Launch, Copy };
  Kind kind;
  uint16_t index;          // into allocs (Alloc, Fill), launches or copies
  c10::Scalar fill_value;  // Fill
  bool operator==(const Step& o) const;
};

// A result: an argument tensor itself (in-place and out= forms) or a view of an allocation.
struct Output {
  enum class Kind : uint8_t { Arg, Alloc };
  Kind kind = Kind::Alloc;
  uint16_t index = 0;
  bool whole = true; // the allocation itself, not a view of it
  std::vector<int64_t> sizes, strides;
  int64_t storage_offset = 0;
  bool operator==(const Output& o) const {
    return kind == o.kind && index == o.index && whole == o.whole && sizes == o.sizes && strides == o.strides &&
        storage_offset == o.storage_offset;
  }
};

struct Plan {
  std::vector<Alloc> allocs;
  std::vector<Launch> launches;
  std::vector<Step> steps;
  std::vector<Output> outputs;
  std::vector<Copy> copies;
  bool operator==(const Plan& o) const {
    return allocs == o.allocs && launches == o.launches && steps == o.steps && outputs == o.outputs &&
        copies == o.copies;
  }
};

// What the recorder hands back for one recorded call: a plan, or why the call cannot be replayed.
struct Recording {
  bool refused = false;
  std::string reason;
  Plan plan;
};

// ---- keys (key.cpp) --------------------------------------------------------------------

struct Key {
  const void* op = nullptr;
  std::vector<int64_t> words;
  size_t hash = 0;
  bool operator==(const Key& o) const { return op == o.op && hash == o.hash && words == o.words; }
};
struct KeyHash {
  size_t operator()(const Key& k) const { return k.hash; }
};

// The key of a call from its vendor arguments (the top of `stack`), and the argument slots: every tensor
// argument and every element of a tensor list, in schema order (torch_fl/replay/_record.py numbers them the
// same way). Returns nullptr, or why the call has no key (a generator argument, an argument type it does not
// know).
const char* make_key(const c10::OperatorHandle& op, const torch::jit::Stack& stack, Key* key,
    std::vector<at::Tensor>* slots);

// ---- running a plan (execute.cpp) ----------------------------------------------------------

// Run `plan` with these argument slots on flagos device `device`, pushing the op's results (vendor tensors).
void run_plan(const Plan& plan, const std::vector<at::Tensor>& slots, c10::DeviceIndex device,
    torch::jit::Stack* stack);
// Launch with parameters given as values (8 bytes each, little-endian: a pointer or a packed scalar):
// `torch_fl.replay.launch`, the launch a provider makes itself when it has no Triton.
void launch_values(const ModuleLaunch& launch, const std::vector<uint64_t>& values, c10::DeviceIndex device);

// ---- the cache (cache.cpp) ------------------------------------------------------------------

// The provider call as the router makes it; `record` non-null asks the provider's Python side to record.
using ProviderCall = void (*)(void* ctx, torch::jit::Stack* stack, Recording* record);

// Run one provider call through the cache: replay a ready plan, or call the provider (recording while the key
// has no plan yet). Returns the route suffix for the dispatch log: "/replay" on a replayed call, "" otherwise.
const char* call(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DeviceIndex device,
    ProviderCall provider, void* ctx);

struct Settings {
  bool enabled = true;
  bool verify = false;
  size_t capacity = 4096; // keys kept, least recently used dropped first
};
Settings settings();
void configure(const Settings& s);
void clear();

struct OpStats {
  std::string op;
  uint64_t hits = 0, recordings = 0, refused_calls = 0, unkeyed_calls = 0, verified = 0, evictions = 0;
  uint64_t ready = 0, refused_keys = 0, pending = 0; // keys of this op in the cache now
  std::vector<std::pair<std::string, uint64_t>> reasons; // why keys were refused, with counts
};
std::vector<OpStats> stats();

} // namespace torch_fl::replay
