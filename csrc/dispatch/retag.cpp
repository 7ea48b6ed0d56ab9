// Re-tagging: flagos tensors seen as vendor tensors and back (retag.h says how).
#include "dispatch/retag.h"
#include "dispatch/data_movement.h"
#include "dispatch/host_scalars.h"
#include "dispatch/layouts.h"
#include "dispatch/router.h"
#include "runtime/runtime.h"

#include <ATen/core/Generator.h>
#include <c10/core/TensorImpl.h>

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

// A tensor the caller keeps (a result): flagos keys plus the autograd keys and
// version counter every user-visible tensor has.
at::Tensor make_tensor_on(const c10::Storage& storage, c10::DispatchKeySet keys, const at::Tensor& like) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(storage), keys, like.dtype());
  copy_layout(*impl, like);
  return at::Tensor(std::move(impl));
}

} // namespace

Retagger::Retagger(const c10::OperatorHandle& op)
    : op_(op), reuse_(alias_reuse()), pool_(reuse_ ? &AliasPool::of_this_thread() : nullptr) {}

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
  at::Tensor v = reuse_ ? pool_->tensor(t, original, shared) : new_vendor_alias(t, shared);
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

void Retagger::prepare_list(size_t size) {
  storages_.reserve(storages_.size() + size);
  tensors_.reserve(tensors_.size() + size);
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

at::Tensor Retagger::list_element_to_vendor(const at::Tensor& t, bool written, int argument, int element) {
  if (!is_flagos(t)) {
    note_host_tensor(t, written, argument, element);
    return t;
  }
  return to_vendor(c10::MaybeOwned<at::Tensor>::borrowed(t), written);
}

c10::MaybeOwned<at::Tensor> Retagger::borrow_to_vendor(const at::Tensor& t, bool written, int argument) {
  if (!is_flagos(t)) {
    note_host_tensor(t, written, argument);
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

// CUDA's rule (TensorIterator's allow_cpu_scalars): a 0-dim host tensor may join device tensors as an input,
// read once as a scalar, except where the kernel wants every tensor on its device (host_scalars.h); a host
// tensor with dimensions, or one the op writes (in-place, out=), may not. The same holds for each tensor of a
// list (cat, stack, the _foreach_ ops run elementwise). Only the first one found is kept: the message names one.
void Retagger::note_host_tensor(const at::Tensor& t, bool written, int argument, int element) {
  if (host_tensor_ != nullptr || !t.defined() || !t.is_cpu()) return;
  if (t.dim() == 0 && !written) {
    const auto& args = op_.schema().arguments();
    const std::string_view name =
        argument >= 0 && static_cast<size_t>(argument) < args.size() ? args[argument].name() : std::string_view();
    if (!refuses_host_scalar(op_.operator_name(), name)) return;
  }
  host_tensor_ = t.unsafeGetTensorImpl();
  host_argument_ = argument;
  host_element_ = element;
}

// Names the argument and what to do; only a refused call pays for the words.
void Retagger::refuse_host_tensor(c10::DeviceIndex flagos_index) const {
  const auto& args = op_.schema().arguments();
  std::string name = host_argument_ >= 0 && static_cast<size_t>(host_argument_) < args.size()
      ? "'" + args[host_argument_].name() + (host_element_ >= 0 ? c10::str("[", host_element_, "]") : "") + "' "
      : std::string();
  const bool written = host_argument_ >= 0 && static_cast<size_t>(host_argument_) < args.size() &&
      is_written(args[host_argument_]);
  fail_two_devices(flagos_index, "cpu", op_, c10::str("move the host tensor ", name, "of shape ", host_tensor_->sizes(),
      written ? ", which the op writes," : "", " with .to('flagos')"));
}

void Retagger::check_arguments() const {
  // Under emulation the vendor kernels are CPU kernels and would happily take a host tensor beside flagos ones;
  // an accelerator refuses, so we do too. Copies join host and device by definition.
  if (host_tensor_ != nullptr && device_ >= 0 && runtime().vendor_type() == c10::DeviceType::CPU && !is_transfer()) {
    refuse_host_tensor(device_);
  }
}

void Retagger::refuse_host_tensors() const {
  if (host_tensor_ != nullptr && !is_transfer()) {
    refuse_host_tensor(device_ < 0 ? runtime().current_device() : device_);
  }
}

c10::IValue Retagger::value_to_vendor(c10::IValue value, bool written, int argument) {
  using Owned = c10::MaybeOwned<at::Tensor>;
  if (value.isTensor()) return to_vendor(Owned::owned(std::move(value).toTensor()), written);
  if (value.isTensorList()) {
    auto list = value.toTensorList();
    c10::List<at::Tensor> out;
    out.reserve(list.size());
    for (size_t k = 0; k < list.size(); ++k) {
      const at::Tensor& t = list[k];
      if (is_flagos(t)) {
        out.push_back(to_vendor(Owned::owned(at::Tensor(t)), written));
      } else {
        note_host_tensor(t, written, argument, static_cast<int>(k));
        out.push_back(t);
      }
    }
    return out;
  }
  // List[Optional[Tensor]] (index, index_put): host index tensors are accepted, as CUDA moves its indices to
  // the device of the indexed tensor (TensorAdvancedIndexing.cpp, make_info).
  if (value.isList()) {
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
    // A copy onto another flagos device (x.to("flagos:1")) puts its results there, not on its arguments' device.
    results_device_ = d.index() < 0 ? runtime().current_device() : d.index();
    return runtime().vendor_device(results_device_);
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
      note_host_tensor(slot.toTensor(), is_written(args[i]), static_cast<int>(i));
      if (slot.toTensor().defined()) host_arguments_.push_back(slot.toTensor().unsafeGetTensorImpl());
      continue;
    }
    slot = value_to_vendor(std::move(slot), is_written(args[i]), static_cast<int>(i));
  }
  check_arguments();
  // A kernel given no generator draws from the vendor default; give it this
  // flagos device's own so seeding torch.flagos reproduces results.
  for (size_t slot : unset_generators_) {
    (*stack)[slot] = runtime().vendor_generator(device_ < 0 ? runtime().current_device() : device_);
  }
}

c10::DeviceIndex Retagger::results_index() const {
  if (results_device_ >= 0) return results_device_;
  return device_ < 0 ? runtime().current_device() : device_;
}

c10::Storage Retagger::adopt_storage(const c10::Storage& vendor) {
  c10::StorageImpl* impl = vendor.unsafeGetStorageImpl();
  for (const auto& [seen, flagos] : adopted_) {
    if (seen == impl) return flagos; // outputs sharing one buffer keep sharing it
  }
  const c10::DeviceIndex index = results_index();
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
  if (t.layout() != c10::Layout::Strided) refuse_layout(c10::toString(op_.operator_name()), t.layout());
  if (t.is_quantized()) refuse_quantized(c10::toString(op_.operator_name()));
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
  const c10::DeviceIndex index = results_index();
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  c10::StorageImpl* storage = impl->storage().unsafeGetStorageImpl();
  const size_t nbytes = storage->nbytes();
  c10::DataPtr vendor = storage->set_data_ptr(c10::DataPtr(nullptr, storage->device()));
  storage->set_data_ptr_noswap(runtime().adopt(std::move(vendor), nbytes, index));
  storage->set_allocator(c10::GetAllocator(c10::DeviceType::PrivateUse1)); // later resizes get flagos memory
  // The device comes from the storage. The tensor's own storage is moved out and back in: a copy would cost an
  // atomic increment and decrement on every fresh result. A tensor refusing metadata changes gets a copy, so the
  // refusal leaves it whole.
  if (impl->allow_tensor_metadata_change()) {
    impl->set_storage_keep_dtype(std::move(const_cast<c10::Storage&>(impl->storage())));
  } else {
    impl->set_storage_keep_dtype(impl->storage());
  }
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
    // The alias points at the caller's bytes again (without owning them), so later checks see an alias of the
    // caller's storage, not a resized one.
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
