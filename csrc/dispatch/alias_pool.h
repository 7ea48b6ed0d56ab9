// Vendor aliases of flagos tensors (retag.h), and the pool of one thread that calls take them from.
//
// Why a pool: an alias is a StorageImpl and a TensorImpl, each made and destroyed, for every tensor of every
// call, and that is most of what a re-tag costs (a list op of torch.optim carries 24 to 96 tensors). Aliases
// kept past their call for their own tensor are cold by the time the next step asks for them. So a call gives
// its aliases back to the pool of its thread when it ends, and the next call, whatever its tensors, takes them
// while they are still in cache: re-pointed at its tensors, not rebuilt.
//
// How: a pooled tensor alias keeps its own storage alias, so taking one points that storage at the caller's
// bytes and size in place and sets the caller's dtype, layout and version counter on the tensor; no storage
// changes hands. Only a tensor whose storage the call already has an alias of (arguments sharing a storage)
// moves onto that alias, and its own storage waits among the pool's spares until a tensor needs one. Only an
// alias nothing else holds goes back (no other reference, no Python object, no autograd data), with a storage
// that is still its own (unshared, not resized into vendor memory; otherwise it takes a spare), a disabled
// version counter (so it keeps no caller's objects alive) and its storage's last address, never read before it
// is re-pointed. An alias whose dispatch keys differ from what the caller needs (conjugate, negative, ...) is
// made anew. set_alias_reuse(false) makes every alias anew, to measure what the reuse saves.
//
// The storage index: a list op finds which of its tensors share a storage through the pool's index (a table of
// storage addresses stamped with the call's number, so a new call clears nothing), not by searching its list.
// The index belongs to the thread, not to the call, and a nested router call on the same thread stamps it anew.
// That is safe only because a call reads the index while it converts its arguments, and a nested router call
// can only begin after that, inside the vendor kernel; once the kernel ran, the Retagger searches its own list
// of storages, never the index. Converting arguments lazily, or routing a call from inside argument conversion,
// needs an index per call.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace torch_fl {

// A vendor view of one flagos tensor, for bookkeeping kernels (copies); any other tensor as it is.
at::Tensor vendor_alias(const at::Tensor& flagos);

// Whether calls reuse the vendor aliases of earlier calls on the same thread (on by default).
void set_alias_reuse(bool on);
bool alias_reuse();

// A new vendor alias of `like`: over `shared` (the call's alias of like's storage) when there is one, else over
// a new storage alias of like's bytes.
at::Tensor new_vendor_alias(const at::Tensor& like, c10::StorageImpl* shared);

// Sizes, strides, offset and the conjugate and negative bits of `like`, set on `impl`.
void copy_layout(c10::TensorImpl& impl, const at::Tensor& like);
// Whether two tensors have the same sizes, strides and offset.
inline bool same_layout(const c10::TensorImpl& a, const c10::TensorImpl& b) {
  if (a.storage_offset() != b.storage_offset()) return false;
  const c10::IntArrayRef as = a.sizes(), bs = b.sizes(), at = a.strides(), bt = b.strides();
  if (as.size() != bs.size()) return false;
  for (size_t d = 0; d < as.size(); ++d) { // a few dims: a loop beats a call to memcmp
    if (as[d] != bs[d] || at[d] != bt[d]) return false;
  }
  return true;
}

class AliasPool {
 public:
  // This thread's pool: never shared, so it takes no lock.
  static AliasPool& of_this_thread();

  // The alias of `like` for one call: over `shared` (the call's alias of like's storage, when it has one),
  // else over the alias's own storage, re-pointed at like's bytes (`original`).
  at::Tensor tensor(const at::Tensor& like, c10::StorageImpl* original, c10::StorageImpl* shared);
  // At the end of a call: keep what nothing else holds, drop the rest.
  void give_back(at::Tensor&& alias);

  // A list op's storages, by the position of each in its Retagger's list of them: found without a search of
  // that list (quadratic for the lists of an optimizer step). A new call takes a new number, which marks
  // every slot of an earlier call free.
  uint64_t new_call() { return ++calls_; }
  // Where the call's position of `storage` is kept (SIZE_MAX: not noted yet), or null when the index is full.
  size_t* index_of(const c10::StorageImpl* storage, uint64_t call) {
    size_t h = static_cast<size_t>((reinterpret_cast<uint64_t>(storage) * 0x9E3779B97F4A7C15ull) >> (64 - kIndexBits));
    for (size_t probe = 0; probe < kIndex; ++probe, h = (h + 1) & (kIndex - 1)) {
      Slot& slot = index_[h];
      if (slot.call != call) {
        slot = {storage, call, SIZE_MAX};
        return &slot.position;
      }
      if (slot.storage == storage) return &slot.position;
    }
    return nullptr; // full: the caller searches its list
  }

 private:
  // Enough for the lists of a fused optimizer step over a few hundred parameters; more are freed.
  static constexpr size_t kCapacity = 1024;
  static constexpr int kIndexBits = 11;
  static constexpr size_t kIndex = size_t{1} << kIndexBits;
  struct Slot {
    const c10::StorageImpl* storage = nullptr;
    uint64_t call = 0;
    size_t position = SIZE_MAX;
  };
  std::vector<at::Tensor> tensors_;
  std::vector<c10::Storage> spares_; // storage aliases of tensors moved onto a shared one
  c10::DispatchKeySet caller_keys_; // the keys of the last caller given a new alias, and that alias's
  c10::DispatchKeySet alias_keys_;
  std::array<Slot, kIndex> index_{};
  uint64_t calls_ = 0;
};

} // namespace torch_fl
