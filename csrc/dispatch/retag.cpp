// Re-tagging: flagos tensors seen as vendor tensors and back (retag.h says how).
#include "dispatch/retag.h"
#include "dispatch/alias_objects.h"
#include "dispatch/data_movement.h"
#include "dispatch/router.h"
#include "runtime/runtime.h"

#include <ATen/core/Generator.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/UndefinedTensorImpl.h>
#include <c10/core/impl/PyObjectSlot.h>

#include <array>
#include <atomic>

namespace torch_fl {

at::Generator vendor_generator_of(const at::Generator& gen); // runtime/generator.cpp

namespace {

bool is_written(const c10::Argument& arg) {
  return arg.alias_info() != nullptr && arg.alias_info()->isWrite();
}

// Keeps a vendor storage alive for as long as the flagos storage that adopted
// its bytes (native-route outputs are allocated by the vendor's kernels).
void release_vendor_storage(void* ctx) {
  c10::raw::intrusive_ptr::decref(static_cast<c10::StorageImpl*>(ctx));
}

void copy_layout(c10::TensorImpl& impl, const at::Tensor& like) {
  impl.set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  if (like.is_conj()) impl._set_conj(true);
  if (like.is_neg()) impl._set_neg(true);
}

// A tensor the caller keeps (a result): flagos keys plus the autograd keys and
// version counter every user-visible tensor has.
at::Tensor make_tensor_on(const c10::Storage& storage, c10::DispatchKeySet keys, const at::Tensor& like) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(storage), keys, like.dtype());
  copy_layout(*impl, like);
  return at::Tensor(std::move(impl));
}

// A vendor alias lives below autograd, for one call. It is built as torch builds
// its own views (the VIEW constructor, the caller's keys with the backend swapped)
// and shares the caller's version counter instead of allocating one: that is most
// of what a re-tag cost. Sharing is also what a nested in-place op inside a vendor
// kernel (a host foreach loop) needs to count as a write to the caller's tensor.
at::Tensor make_vendor_alias(const c10::Storage& storage, const at::Tensor& like) {
  c10::TensorImpl* caller = like.unsafeGetTensorImpl();
  auto impl = c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::unsafe_steal_from_new(
      new AliasTensorImpl(c10::TensorImpl::VIEW, c10::Storage(storage), caller->key_set(), like.dtype()));
  impl->_change_backend_component_keys(storage.device());
  copy_layout(*impl, like);
  impl->set_version_counter(caller->version_counter());
  return at::Tensor(std::move(impl));
}

c10::Storage alias_storage_of(const at::Tensor& t) {
  Runtime& rt = runtime();
  c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
  // Resizable through the vendor allocator, so an out= argument that a vendor
  // kernel resizes gets vendor memory, adopted afterwards (written_from_vendor).
  return c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::unsafe_steal_from_new(new AliasStorageImpl(
      c10::StorageImpl::use_byte_size_t(), impl->nbytes(),
      c10::DataPtr(impl->mutable_data(), rt.vendor_device(t.device().index())),
      c10::GetAllocator(rt.vendor_type()), /*resizable=*/true)));
}

// ---- alias reuse -----------------------------------------------------------------------
//
// A training step hands the router the same parameters, gradients and optimizer
// states on every step, and building their aliases (a StorageImpl and a
// TensorImpl each) was most of what a list op's re-tag cost. So aliases outlive
// their call, in a small table per thread (no locks, never shared). An entry is
// reused only while it is exactly what a fresh alias would be: the same storage
// bytes, size, device, dtype and dispatch keys, no other holder, no Python
// object. Its layout and version counter are set again from the caller on every
// use. A miss only builds what was built before, so the table may forget freely.
std::atomic<bool> g_alias_reuse{true};

template <class T>
bool exposed_to_python(const T& impl) {
  // A vendor kernel written in Python gave it a PyObject: dropping that later,
  // at thread exit, would need an interpreter that may be gone.
  return impl.pyobj_slot()->load_pyobj() != nullptr;
}

void prefetch_object(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (size_t line = 0; line < bytes; line += 64) __builtin_prefetch(c + line);
}

} // namespace

class AliasTable {
 public:
  struct StorageSlot {
    c10::StorageImpl* original = nullptr;
    c10::DeviceIndex device = -1;
    c10::Storage alias;
    // The call that last took this alias, and where its list of storages holds it: a call asks this
    // instead of searching that list (quadratic for a list op's 24 to 72 tensors).
    uint64_t call = 0;
    size_t index = 0;
  };

  // A number no earlier call on this thread had (never 0).
  uint64_t new_call() { return ++calls_; }

  // The slot of `t`'s storage, holding a valid alias of its bytes, reused or made anew; `displaced`
  // says whether it held another storage's alias before.
  StorageSlot& storage(const at::Tensor& t, bool* displaced) {
    c10::StorageImpl* original = t.storage().unsafeGetStorageImpl();
    StorageSlot& slot = storages_[index_of(original)];
    c10::StorageImpl* alias = slot.alias.unsafeGetStorageImpl();
    *displaced = alias != nullptr && slot.original != original;
    // mutable_data(): a copy-on-write storage materializes first, exactly as for a fresh alias.
    if (slot.original != original || slot.device != t.device().index() || alias == nullptr ||
        alias->data() != original->mutable_data() || alias->nbytes() != original->nbytes() ||
        exposed_to_python(*alias)) {
      slot = {original, t.device().index(), alias_storage_of(t)};
    }
    return slot;
  }

  // The alias of `like` over `storage` (which storage() gave), reused or made anew.
  at::Tensor tensor(const c10::Storage& storage, const at::Tensor& like) {
    c10::TensorImpl* caller = like.unsafeGetTensorImpl();
    TensorSlot& slot = tensors_[index_of(caller)];
    c10::TensorImpl* alias = slot.alias.defined() ? slot.alias.unsafeGetTensorImpl() : nullptr;
    if (alias == nullptr || slot.caller != caller || slot.keys != caller->key_set() || slot.alias.use_count() != 1 ||
        slot.alias.weak_use_count() != 1 || alias->storage().unsafeGetStorageImpl() != storage.unsafeGetStorageImpl() ||
        alias->dtype() != caller->dtype() || exposed_to_python(*alias)) {
      slot = {caller, caller->key_set(), make_vendor_alias(storage, like)};
      return slot.alias;
    }
    if (alias->sizes() != caller->sizes() || alias->strides() != caller->strides() ||
        alias->storage_offset() != caller->storage_offset()) {
      alias->set_sizes_and_strides(caller->sizes(), caller->strides(), caller->storage_offset());
    }
    alias->set_version_counter(caller->version_counter());
    return slot.alias;
  }

  // Start the loads storage() and tensor() will make for a list op's tensors (see Retagger::prepare_list):
  // `stage` 0 the tensors' own objects, 1 their slots, 2 the aliases the slots hold.
  void prefetch(at::TensorList list, int stage) const {
    for (const at::Tensor& t : list) {
      const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
      if (stage == 0) {
        prefetch_object(impl, sizeof(c10::TensorImpl));
        continue;
      }
      if (!is_flagos(t)) continue; // only flagos tensors get aliases (and have a storage to ask for)
      const StorageSlot& s = storages_[index_of(t.storage().unsafeGetStorageImpl())];
      const TensorSlot& ts = tensors_[index_of(impl)];
      if (stage == 1) {
        prefetch_object(t.storage().unsafeGetStorageImpl(), sizeof(c10::StorageImpl));
        __builtin_prefetch(&s);
        __builtin_prefetch(&ts);
      } else {
        const c10::StorageImpl* alias = s.alias.unsafeGetStorageImpl();
        if (alias != nullptr) prefetch_object(alias, sizeof(c10::StorageImpl));
        if (ts.alias.defined()) prefetch_object(ts.alias.unsafeGetTensorImpl(), sizeof(c10::TensorImpl));
      }
    }
  }

  // Drop `alias` if this table holds it and Python has seen it (see exposed_to_python).
  void forget_if_exposed(const at::Tensor& caller, const at::Tensor& alias) {
    TensorSlot& slot = tensors_[index_of(caller.unsafeGetTensorImpl())];
    if (slot.alias.defined() && slot.alias.unsafeGetTensorImpl() == alias.unsafeGetTensorImpl() &&
        exposed_to_python(*alias.unsafeGetTensorImpl())) {
      slot = {};
    }
    StorageSlot& s = storages_[index_of(caller.storage().unsafeGetStorageImpl())];
    if (s.alias.unsafeGetStorageImpl() == alias.storage().unsafeGetStorageImpl() &&
        exposed_to_python(*alias.storage().unsafeGetStorageImpl())) {
      s = {};
    }
  }

 private:
  // A step's parameters, gradients, optimizer states and activations: several hundred objects.
  static constexpr int kSlotBits = 10;
  static constexpr size_t kSlots = size_t{1} << kSlotBits;
  // Fibonacci hashing: objects allocated one after another sit a fixed stride apart, which a
  // mask of low address bits would fold onto a few slots.
  static size_t index_of(const void* p) {
    return static_cast<size_t>((reinterpret_cast<uint64_t>(p) * 0x9E3779B97F4A7C15ull) >> (64 - kSlotBits));
  }
  struct TensorSlot {
    const c10::TensorImpl* caller = nullptr;
    c10::DispatchKeySet keys;
    at::Tensor alias;
  };
  std::array<StorageSlot, kSlots> storages_{};
  std::array<TensorSlot, kSlots> tensors_{};
  uint64_t calls_ = 0;
};

// This thread's table (never shared, so it needs no lock).
static AliasTable& alias_table() {
  thread_local AliasTable table;
  return table;
}

namespace {

// Under emulation the vendor kernels are CPU kernels and would happily take a
// host tensor beside flagos ones; an accelerator would refuse, so we do too.
// 0-dim host tensors (scalars) are allowed, as CUDA allows them.
[[noreturn]] void reject_host_tensor(const at::Tensor& t, c10::DeviceIndex flagos_index, const c10::OperatorHandle& op) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, flagos:",
      int(flagos_index), " and cpu! (when running ", short_op_name(op.operator_name()),
      " on the flagos device; move the host tensor of shape ", t.sizes(), " with .to('flagos'))");
}

} // namespace

at::Tensor vendor_alias(const at::Tensor& flagos) {
  if (!is_flagos(flagos)) return flagos;
  return make_vendor_alias(alias_storage_of(flagos), flagos);
}

void set_alias_reuse(bool on) { g_alias_reuse.store(on, std::memory_order_relaxed); }
bool alias_reuse() { return g_alias_reuse.load(std::memory_order_relaxed); }

Retagger::Retagger(const c10::OperatorHandle& op)
    : op_(op),
      reuse_(alias_reuse()),
      table_(reuse_ ? &alias_table() : nullptr),
      call_(reuse_ ? table_->new_call() : 0) {}

Retagger::~Retagger() {
  if (!reuse_) return;
  for (const auto& a : tensors_) table_->forget_if_exposed(*a.original, a.alias);
}

// Asked only when a call mixes devices, so the hot path never compares op names.
bool Retagger::is_transfer() const {
  return is_transfer_op(op_.operator_name());
}

void Retagger::note_device(c10::DeviceIndex index) {
  if (device_ >= 0 && (index < 0 ? runtime().current_device() : index) != device_ && is_transfer()) {
    return; // copies may join two flagos devices; the first one guards the call
  }
  check_same_device(device_, index, op_);
}

// The boxed path hands over the stack's reference (owned), the fast path a
// borrowed one: either way no extra refcount on a Python-owned tensor, whose
// first C++ reference would cost a GIL round trip.
at::Tensor Retagger::to_vendor(c10::MaybeOwned<at::Tensor> owned_or_borrowed, bool written) {
  const at::Tensor& t = *owned_or_borrowed;
  note_device(t.device().index());
  // Shared storage -> one alias, so the vendor's overlap checks still see it.
  const c10::Storage& alias = reuse_ ? reused_storage_alias(t) : storage_alias(t);
  at::Tensor v = reuse_ ? table_->tensor(alias, t) : make_vendor_alias(alias, t);
  tensors_.push_back({v, std::move(owned_or_borrowed), written});
  return v;
}

const c10::Storage& Retagger::storage_alias(const at::Tensor& t) {
  c10::StorageImpl* original = t.storage().unsafeGetStorageImpl();
  // Newest first: a list op's elements rarely share storage, and an op's
  // arguments that do (x.add_(x[1:])) are usually adjacent.
  for (auto s = storages_.rbegin(); s != storages_.rend(); ++s) {
    if (s->original == original) return s->alias;
  }
  return add_storage(t, alias_storage_of(t));
}

const c10::Storage& Retagger::reused_storage_alias(const at::Tensor& t) {
  c10::StorageImpl* original = t.storage().unsafeGetStorageImpl();
  bool displaced = false;
  AliasTable::StorageSlot& slot = table_->storage(t, &displaced);
  if (slot.call == call_ && slot.index < storages_.size() && storages_[slot.index].original == original) {
    return storages_[slot.index].alias; // taken earlier in this call
  }
  // Only a slot another storage held may hide one taken earlier in this call (every argument is
  // taken before the vendor kernel runs, so no nested call moves a stamp in between).
  if (displaced) {
    for (auto& s : storages_) {
      if (s.original == original) return s.alias;
    }
  }
  slot.call = call_;
  slot.index = storages_.size();
  return add_storage(t, slot.alias);
}

const c10::Storage& Retagger::add_storage(const at::Tensor& t, c10::Storage alias) {
  c10::StorageImpl* original = t.storage().unsafeGetStorageImpl();
  storages_.push_back({original, std::move(alias), original->mutable_data()});
  access_.open(original->data()); // the vendor kernel may touch these bytes (FLAGOS_EMU_TRAP)
  return storages_.back().alias;
}

void Retagger::prepare_list(at::TensorList list) {
  storages_.reserve(storages_.size() + list.size());
  tensors_.reserve(tensors_.size() + list.size());
  if (!reuse_) return;
  // A list op's tensors are an optimizer's parameters, gradients and states: their objects, table slots and
  // aliases were last touched a whole step ago. Converted one after another, each would wait for its own
  // cache misses; requested in three sweeps first (each needs the one before), the loads overlap.
  for (int stage = 0; stage < 3; ++stage) table_->prefetch(list, stage);
}

at::Tensor Retagger::list_element_to_vendor(const at::Tensor& t, bool written) {
  if (!is_flagos(t)) {
    note_host_tensor(t);
    return t;
  }
  return to_vendor(c10::MaybeOwned<at::Tensor>::borrowed(t), written);
}

c10::MaybeOwned<at::Tensor> Retagger::borrow_to_vendor(const at::Tensor& t, bool written) {
  if (!is_flagos(t)) {
    note_host_tensor(t);
    return c10::MaybeOwned<at::Tensor>::borrowed(t);
  }
  return c10::MaybeOwned<at::Tensor>::owned(to_vendor(c10::MaybeOwned<at::Tensor>::borrowed(t), written));
}

at::Tensor& Retagger::caller_tensor(at::Tensor& t) {
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  for (const auto& a : tensors_) {
    // Borrowed from the caller's `Tensor&` argument, so writable.
    if (a.alias.unsafeGetTensorImpl() == impl) return const_cast<at::Tensor&>(*a.original);
  }
  return t;
}

void Retagger::note_host_tensor(const at::Tensor& t) {
  if (t.defined() && t.dim() > 0 && t.is_cpu()) host_tensor_ = &t; // host scalars are fine, as on CUDA
}

void Retagger::check_arguments() const {
  // Copies join host and device by definition; everything else keeps to one device.
  if (host_tensor_ != nullptr && device_ >= 0 && runtime().vendor_type() == c10::DeviceType::CPU && !is_transfer()) {
    reject_host_tensor(*host_tensor_, device_, op_);
  }
}

void Retagger::refuse_host_tensors() const {
  if (host_tensor_ != nullptr && !is_transfer()) {
    reject_host_tensor(*host_tensor_, device_ < 0 ? runtime().current_device() : device_, op_);
  }
}

c10::IValue Retagger::value_to_vendor(c10::IValue value, bool written) {
  using Owned = c10::MaybeOwned<at::Tensor>;
  if (value.isTensor()) return to_vendor(Owned::owned(std::move(value).toTensor()), written);
  if (value.isTensorList()) {
    auto list = value.toTensorList();
    c10::List<at::Tensor> out;
    out.reserve(list.size());
    for (const at::Tensor& t : list) out.push_back(is_flagos(t) ? to_vendor(Owned::owned(at::Tensor(t)), written) : t);
    return out;
  }
  if (value.isList()) { // List[Optional[Tensor]] (index, index_put)
    auto list = value.toList();
    bool any = false;
    for (const c10::IValue& item : list) any = any || (item.isTensor() && is_flagos(item.toTensor()));
    if (!any) return value;
    c10::List<std::optional<at::Tensor>> out;
    out.reserve(list.size());
    for (const c10::IValue& item : list) {
      if (!item.isTensor()) {
        out.push_back(std::nullopt);
      } else {
        const at::Tensor& t = item.toTensor();
        out.push_back(is_flagos(t) ? to_vendor(Owned::owned(at::Tensor(t)), written) : t);
      }
    }
    return out;
  }
  if (value.isDevice()) {
    const c10::Device d = value.toDevice();
    if (d.type() != c10::DeviceType::PrivateUse1) {
      // The results belong where this says (x.to("cpu")). Under emulation a host result looks like a
      // vendor result, so it must not be relabelled as flagos.
      results_elsewhere_ = true;
      return value;
    }
    note_device(d.index());
    return runtime().vendor_device(device_);
  }
  if (value.isGenerator()) return vendor_generator_of(value.toGenerator());
  return value;
}

void Retagger::arguments_to_vendor(torch::jit::Stack* stack) {
  const auto& args = op_.schema().arguments();
  const size_t first = stack->size() - args.size();
  for (size_t i = 0; i < args.size(); ++i) {
    c10::IValue& slot = (*stack)[first + i];
    if (slot.isNone()) {
      if (is_generator_argument(args[i])) unset_generators_.push_back(first + i);
      continue;
    }
    if (slot.isTensor() && !is_flagos(slot.toTensor())) { // host scalars, a copy's host side, or a mistake
      note_host_tensor(slot.toTensor());
      if (slot.toTensor().defined()) host_arguments_.push_back(slot.toTensor().unsafeGetTensorImpl());
      continue;
    }
    slot = value_to_vendor(std::move(slot), is_written(args[i]));
  }
  check_arguments();
  // A kernel given no generator draws from the vendor default; give it this
  // flagos device's own so seeding torch.flagos reproduces results.
  for (size_t slot : unset_generators_) {
    (*stack)[slot] = runtime().vendor_generator(device_ < 0 ? runtime().current_device() : device_);
  }
}

c10::Storage Retagger::adopt_storage(const c10::Storage& vendor) {
  c10::StorageImpl* impl = vendor.unsafeGetStorageImpl();
  for (const auto& [seen, flagos] : adopted_) {
    if (seen == impl) return flagos; // outputs sharing one buffer keep sharing it
  }
  const c10::DeviceIndex index = device_ < 0 ? runtime().current_device() : device_;
  c10::raw::intrusive_ptr::incref(impl);
  c10::DataPtr keep(impl->mutable_data(), impl, &release_vendor_storage, runtime().vendor_device(index));
  c10::Storage flagos(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), impl->nbytes(),
      runtime().adopt(std::move(keep), impl->nbytes(), index),
      c10::GetAllocator(c10::DeviceType::PrivateUse1), /*resizable=*/true));
  adopted_.emplace_back(impl, flagos);
  return flagos;
}

at::Tensor Retagger::from_vendor(const at::Tensor& t) {
  if (!t.defined() || t.device().type() != runtime().vendor_type() || t.unsafeGetTensorImpl()->is_wrapped_number()) return t;
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  for (const auto& a : tensors_) {
    if (a.alias.unsafeGetTensorImpl() == impl) return *a.original; // in-place and out=: the caller's own tensor
  }
  // A result is flagos only when it belongs to flagos: not a host argument handed back (the
  // destination of a copy to the host), not a result placed on another device by a Device argument.
  if (results_elsewhere_) return t;
  for (const c10::TensorImpl* host : host_arguments_) {
    if (host == impl) return t;
  }
  const c10::DispatchKeySet flagos_keys(c10::DispatchKey::PrivateUse1);
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  for (const auto& s : storages_) {
    if (s.alias.unsafeGetStorageImpl() == storage && storage->data() == s.original_data) {
      // A view of an argument: same bytes, seen through the caller's storage.
      return make_tensor_on(c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(s.original)),
                            flagos_keys, t);
    }
  }
  if (t.use_count() == 1 && t.weak_use_count() == 1 && t.storage().use_count() == 1) return relabel_fresh(t);
  return make_tensor_on(adopt_storage(t.storage()), flagos_keys, t);
}

// A result nobody else can see (the only reference to its TensorImpl and to its
// storage) becomes a flagos tensor in place: no second TensorImpl or storage.
at::Tensor Retagger::relabel_fresh(const at::Tensor& t) {
  const c10::DeviceIndex index = device_ < 0 ? runtime().current_device() : device_;
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  c10::StorageImpl* storage = impl->storage().unsafeGetStorageImpl();
  const size_t nbytes = storage->nbytes();
  c10::DataPtr vendor = storage->set_data_ptr(c10::DataPtr(nullptr, storage->device()));
  storage->set_data_ptr_noswap(runtime().adopt(std::move(vendor), nbytes, index));
  storage->set_allocator(c10::GetAllocator(c10::DeviceType::PrivateUse1)); // later resizes get flagos memory
  impl->set_storage_keep_dtype(impl->storage()); // the device comes from the storage
  impl->_change_backend_component_keys(flagos_device(index));
  return t;
}

c10::IValue Retagger::value_from_vendor(c10::IValue value) {
  if (value.isTensor()) return from_vendor(value.toTensor());
  if (value.isTensorList()) {
    auto list = value.toTensorList();
    c10::List<at::Tensor> out;
    out.reserve(list.size());
    for (const at::Tensor& t : list) out.push_back(from_vendor(t));
    return out;
  }
  return value;
}

void Retagger::written_from_vendor() {
  for (const auto& a : tensors_) {
    if (!a.written) continue;
    c10::TensorImpl* alias = a.alias.unsafeGetTensorImpl();
    c10::TensorImpl* original = a.original->unsafeGetTensorImpl();
    c10::StorageImpl* alias_storage = alias->storage().unsafeGetStorageImpl();
    // Still the caller's bytes (the common case): not resized, nothing to search for.
    if (alias_storage->data() != original->storage().unsafeGetStorageImpl()->data()) adopt_resized(alias_storage);
    if (alias->sizes() != original->sizes() || alias->strides() != original->strides() ||
        alias->storage_offset() != original->storage_offset()) {
      original->set_sizes_and_strides(alias->sizes(), alias->strides(), alias->storage_offset());
    }
  }
}

// The vendor kernel resized a written argument into vendor memory: the caller's
// storage takes those bytes over, so every view of it sees them.
void Retagger::adopt_resized(c10::StorageImpl* alias_storage) {
  for (auto& s : storages_) {
    if (s.alias.unsafeGetStorageImpl() != alias_storage || alias_storage->data() == s.original_data) continue;
    const size_t nbytes = alias_storage->nbytes();
    c10::DataPtr taken = alias_storage->set_data_ptr(c10::DataPtr(nullptr, alias_storage->device()));
    c10::DataPtr adopted = runtime().adopt(std::move(taken), nbytes, s.original->device().index());
    s.original->set_data_ptr_noswap(std::move(adopted));
    s.original->set_nbytes(nbytes);
    s.original_data = s.original->mutable_data();
    // the alias now points nowhere; keep later checks consistent
    alias_storage->set_data_ptr_noswap(c10::DataPtr(s.original_data, alias_storage->device()));
  }
}

void Retagger::returns_from_vendor(torch::jit::Stack* stack) {
  written_from_vendor();
  const size_t n = op_.schema().returns().size();
  for (size_t i = stack->size() - n; i < stack->size(); ++i) {
    (*stack)[i] = value_from_vendor(std::move((*stack)[i]));
  }
}

} // namespace torch_fl
