// See alias_pool.h: how a vendor alias is built, and how the pool of a thread reuses them.
#include "dispatch/alias_pool.h"
#include "compat/torch_compat.h"
#include "dispatch/alias_objects.h"
#include "dispatch/router.h"
#include "runtime/runtime.h"

#include <c10/core/UndefinedTensorImpl.h>

#include <atomic>
#include <typeinfo>

namespace torch_fl {
namespace {

std::atomic<bool> g_alias_reuse{true};

// A vendor alias lives below autograd, for one call. It is built as torch builds its own views (the VIEW
// constructor, the caller's keys with the backend swapped) and shares the caller's version counter instead of
// allocating one. Sharing is also what a nested in-place op inside a vendor kernel (a host foreach loop) needs
// to count as a write to the caller's tensor.
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
  // Resizable through the vendor allocator, so an out= argument that a vendor kernel resizes gets vendor memory,
  // which the caller's storage adopts afterwards (Retagger::written_from_vendor).
  return c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::unsafe_steal_from_new(new AliasStorageImpl(
      c10::StorageImpl::use_byte_size_t(), impl->nbytes(),
      c10::DataPtr(impl->mutable_data(), rt.vendor_device(t.device().index())),
      c10::GetAllocator(rt.vendor_type()), /*resizable=*/true)));
}

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

} // namespace

at::Tensor vendor_alias(const at::Tensor& flagos) {
  if (!is_flagos(flagos)) return flagos;
  return make_vendor_alias(alias_storage_of(flagos), flagos);
}

void set_alias_reuse(bool on) { g_alias_reuse.store(on, std::memory_order_relaxed); }
bool alias_reuse() { return g_alias_reuse.load(std::memory_order_relaxed); }

at::Tensor new_vendor_alias(const at::Tensor& like, c10::StorageImpl* shared) {
  return make_vendor_alias(
      shared != nullptr ? c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(shared)) : alias_storage_of(like),
      like);
}

void copy_layout(c10::TensorImpl& impl, const at::Tensor& like) {
  impl.set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  if (like.is_conj()) impl._set_conj(true);
  if (like.is_neg()) impl._set_neg(true);
}

AliasPool& AliasPool::of_this_thread() {
  thread_local AliasPool pool;
  return pool;
}

at::Tensor AliasPool::tensor(const at::Tensor& like, c10::StorageImpl* original, c10::StorageImpl* shared) {
  c10::TensorImpl* caller = like.unsafeGetTensorImpl();
  if (tensors_.empty() || caller->key_set() != caller_keys_ || tensors_.back().key_set() != alias_keys_) {
    at::Tensor fresh = new_vendor_alias(like, shared);
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

void AliasPool::give_back(at::Tensor&& alias) {
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

} // namespace torch_fl
