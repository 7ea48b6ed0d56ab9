// Re-tagging: flagos tensors seen as vendor tensors and back (retag.h says how).
#include "dispatch/retag.h"
#include "compat/torch_compat.h"
#include "dispatch/alias_objects.h"
#include "dispatch/data_movement.h"
#include "dispatch/router.h"
#include "runtime/runtime.h"

#include <ATen/core/Generator.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/UndefinedTensorImpl.h>

#include <array>
#include <atomic>
#include <typeinfo>

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
// Building an alias (a StorageImpl and a TensorImpl, construction and destruction each) was most of what a
// re-tag cost, and objects that outlive their call are cold by the time the next step asks for them. So a
// call's aliases go back to a small pool of this thread when it ends, and the next call, whatever tensors
// it has, takes them from there while they are still in cache: re-pointed at its tensors, not rebuilt.
// A pooled tensor alias keeps its own storage alias, so taking one re-points that storage at the caller's
// bytes in place; only a tensor whose storage the call already has an alias of (arguments sharing storage)
// is moved onto that one, and its own storage waits among the spares. Only an alias nothing else holds goes
// back (no other reference, no Python object, no autograd data), and taking one sets everything a fresh
// alias gets from its caller (bytes, size, device, dtype, layout, version counter); an alias whose dispatch
// keys differ from what the caller needs (conjugate, negative, ...) is made anew. A pooled tensor has a
// disabled version counter, so it keeps no caller's objects alive; its storage keeps the last address,
// never read before it is re-pointed.
std::atomic<bool> g_alias_reuse{true};

template <class T>
bool exposed_to_python(const T& impl) {
  // A vendor kernel written in Python gave it a PyObject: dropping that later,
  // at thread exit, would need an interpreter that may be gone.
  return compat::has_pyobj(*impl.pyobj_slot());
}

// Counts read without touching them (reclaim and release move no count).
bool only_reference(c10::StorageImpl* impl) {
  auto p = c10::intrusive_ptr<c10::StorageImpl>::reclaim(impl);
  const bool only = p.use_count() == 1 && p.weak_use_count() == 1;
  p.release();
  return only;
}

// A storage alias pointing nowhere yet.
c10::Storage empty_storage_alias() {
  const c10::DeviceType vendor = runtime().vendor_type();
  return c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::unsafe_steal_from_new(new AliasStorageImpl(
      c10::StorageImpl::use_byte_size_t(), 0, c10::DataPtr(nullptr, c10::Device(vendor)), c10::GetAllocator(vendor),
      /*resizable=*/true)));
}

bool same_layout(const c10::TensorImpl& a, const c10::TensorImpl& b) {
  if (a.storage_offset() != b.storage_offset()) return false;
  const c10::IntArrayRef as = a.sizes(), bs = b.sizes(), at = a.strides(), bt = b.strides();
  if (as.size() != bs.size()) return false;
  for (size_t d = 0; d < as.size(); ++d) { // a few dims: a loop beats a call to memcmp
    if (as[d] != bs[d] || at[d] != bt[d]) return false;
  }
  return true;
}

} // namespace

class AliasPool {
 public:
  // The alias of `like` for one call: over `shared` (the call's alias of like's storage, when it has one),
  // else over the alias's own storage, re-pointed at like's bytes.
  at::Tensor tensor(const at::Tensor& like, c10::StorageImpl* original, c10::StorageImpl* shared) {
    c10::TensorImpl* caller = like.unsafeGetTensorImpl();
    if (tensors_.empty() || caller->key_set() != caller_keys_ || tensors_.back().key_set() != alias_keys_) {
      at::Tensor fresh = make_vendor_alias(
          shared != nullptr ? c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(shared))
                            : alias_storage_of(like),
          like);
      caller_keys_ = caller->key_set();
      alias_keys_ = fresh.key_set();
      return fresh;
    }
    at::Tensor alias = std::move(tensors_.back());
    tensors_.pop_back();
    c10::TensorImpl* impl = alias.unsafeGetTensorImpl();
    const c10::Device device = runtime().vendor_device(like.device().index());
    if (shared == nullptr) {
      c10::StorageImpl* own = impl->unsafe_storage().unsafeGetStorageImpl();
      // mutable_data(): a copy-on-write storage materializes first, exactly as for a fresh alias.
      own->set_data_ptr_noswap(c10::DataPtr(original->mutable_data(), device));
      own->set_nbytes(original->nbytes());
      if (impl->dtype() != caller->dtype() || impl->device() != device) {
        impl->set_storage_and_dtype(impl->unsafe_storage(), caller->dtype()); // also takes the storage's device
      }
    } else {
      if (spares_.size() < kCapacity) spares_.push_back(impl->unsafe_storage());
      impl->set_storage_and_dtype(c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(shared)),
          caller->dtype());
    }
    // Calls repeat their shapes (an optimizer's lists, a layer's activations), and the pool hands a call's
    // aliases out in the order the last call took them: often the layout is already the caller's.
    if (!same_layout(*impl, *caller)) {
      impl->set_sizes_and_strides(caller->sizes(), caller->strides(), caller->storage_offset());
    }
    impl->set_version_counter(caller->version_counter());
    return alias;
  }

  // At the end of a call: keep what nothing else holds, drop the rest.
  void give_back(at::Tensor&& alias) {
    c10::TensorImpl* impl = alias.unsafeGetTensorImpl();
    if (tensors_.size() >= kCapacity || alias.use_count() != 1 || alias.weak_use_count() != 1 ||
        exposed_to_python(*impl) || impl->autograd_meta() != nullptr || !impl->allow_tensor_metadata_change()) {
      return;
    }
    c10::StorageImpl* storage = impl->unsafe_storage().unsafeGetStorageImpl();
    // Its storage goes back with it only if it is still the tensor's own alias storage: not shared with
    // another alias, not one a vendor kernel put there, not resized into vendor memory (a DataPtr with a
    // context owns that memory). Otherwise the tensor takes a spare, and the other storage goes its way.
    if (storage == nullptr || typeid(*storage) != typeid(AliasStorageImpl) || !only_reference(storage) ||
        exposed_to_python(*storage) || storage->data_ptr().get_context() != nullptr) {
      c10::Storage spare = spares_.empty() ? empty_storage_alias() : std::move(spares_.back());
      if (!spares_.empty()) spares_.pop_back();
      impl->set_storage_keep_dtype(std::move(spare));
    }
    impl->set_version_counter(c10::VariableVersion(c10::VariableVersion::DISABLED));
    tensors_.push_back(std::move(alias));
  }

  // A list op's storages, this call's index into its Retagger's list of them: found without a search of
  // that list (quadratic for the 24 to 96 tensors of an optimizer's lists). Stamped with the call, so a
  // new call needs no clearing.
  uint64_t new_call() { return ++calls_; }
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

// This thread's pool (never shared, so it needs no lock).
static AliasPool& alias_pool() {
  thread_local AliasPool pool;
  return pool;
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
    : op_(op), reuse_(alias_reuse()), pool_(reuse_ ? &alias_pool() : nullptr) {}

Retagger::~Retagger() {
  if (!reuse_) return;
  // Last first, so the pool (a stack) hands them out again in this call's order, and of tensors sharing a
  // storage alias the first keeps it.
  for (auto a = tensors_.rbegin(); a != tensors_.rend(); ++a) pool_->give_back(std::move(a->alias));
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
  c10::StorageImpl* original = t.storage().unsafeGetStorageImpl(); // refuses a tensor without storage
  size_t* position = nullptr;
  const StorageAlias* seen = seen_storage(original, &position);
  c10::StorageImpl* shared = seen != nullptr ? seen->alias : nullptr;
  at::Tensor v = reuse_ ? pool_->tensor(t, original, shared)
                        : make_vendor_alias(shared != nullptr
                                  ? c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(shared))
                                  : alias_storage_of(t),
                              t);
  if (shared == nullptr) add_storage(original, v.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl(), position);
  tensors_.push_back({v, std::move(owned_or_borrowed), written});
  return v;
}

const Retagger::StorageAlias* Retagger::seen_storage(const c10::StorageImpl* original, size_t** position) {
  if (call_ != 0) {
    // A list op: its storages are found through the pool's index (see prepare_list).
    size_t* p = pool_->index_of(original, call_);
    if (p != nullptr) {
      if (*p != SIZE_MAX) return &storages_[*p];
      *position = p;
      return nullptr;
    }
  }
  // Newest first: an op's arguments that share storage (x.add_(x[1:])) are usually adjacent.
  for (auto s = storages_.rbegin(); s != storages_.rend(); ++s) {
    if (s->original == original) return &*s;
  }
  return nullptr;
}

void Retagger::add_storage(c10::StorageImpl* original, c10::StorageImpl* alias, size_t* position) {
  if (position != nullptr) *position = storages_.size();
  void* data = original->mutable_data();
  storages_.push_back({original, alias, data});
  access_.open(data); // the vendor kernel may touch these bytes (FLAGOS_EMU_TRAP)
}

void Retagger::prepare_list(at::TensorList list) {
  storages_.reserve(storages_.size() + list.size());
  tensors_.reserve(tensors_.size() + list.size());
  // The storages found so far were searched linearly: index them too, so a tensor of the list sharing
  // storage with one of them still gets its alias.
  if (reuse_ && call_ == 0) {
    call_ = pool_->new_call();
    for (size_t i = 0; i < storages_.size(); ++i) {
      size_t* position = pool_->index_of(storages_[i].original, call_);
      if (position == nullptr) {
        call_ = 0; // the index is full: back to searching
        return;
      }
      if (*position == SIZE_MAX) *position = i;
    }
  }
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
    if (s.alias == storage && storage->data() == s.original_data) {
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
    c10::StorageImpl* alias_storage = alias->unsafe_storage().unsafeGetStorageImpl();
    // Still the caller's bytes (the common case): not resized, nothing to search for.
    if (alias_storage->data() != original->unsafe_storage().unsafeGetStorageImpl()->data()) {
      adopt_resized(alias_storage);
    }
    if (!same_layout(*alias, *original)) {
      original->set_sizes_and_strides(alias->sizes(), alias->strides(), alias->storage_offset());
    }
  }
}

// The vendor kernel resized a written argument into vendor memory: the caller's
// storage takes those bytes over, so every view of it sees them.
void Retagger::adopt_resized(c10::StorageImpl* alias_storage) {
  for (auto& s : storages_) {
    if (s.alias != alias_storage || alias_storage->data() == s.original_data) continue;
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
