// Zero-copy re-tagging between flagos tensors and vendor tensors.
//
// A flagos tensor is viewed as a tensor of the vendor device (CPU under emulation, CUDA on NVIDIA and DCU) by
// a vendor alias: a TensorImpl of its own over a non-owning storage on the same bytes (alias_pool.h builds and
// reuses them). Converting the arguments never modifies a caller's TensorImpl, so a tensor that another thread
// reads is never seen half re-tagged. Two steps after the vendor kernel ran do modify the caller's tensor, and
// only a tensor the op's schema says it writes (Tensor(a!): in-place and out= arguments), as torch's own kernel
// would: written_from_vendor gives it the sizes and strides the kernel set on its alias (an out= argument
// resized or restrided), and adopt_resized gives its storage the vendor memory the kernel resized the alias
// into, so every view of that storage sees the new bytes. Results the vendor made are relabelled as flagos in
// place only when nothing else holds them (relabel_fresh).
#pragma once

#include "dispatch/alias_pool.h"
#include "runtime/host_access.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/MaybeOwned.h>
#include <c10/util/SmallVector.h>

namespace torch_fl {

// Re-tags the arguments of one operator call and maps its results back.
class Retagger {
 public:
  explicit Retagger(const c10::OperatorHandle& op);
  ~Retagger();
  Retagger(const Retagger&) = delete;
  Retagger& operator=(const Retagger&) = delete;

  // Replace flagos tensors, devices and generators among the operator's
  // arguments (the top `num_args` entries of the stack) with vendor ones.
  void arguments_to_vendor(torch::jit::Stack* stack);
  // After the vendor kernel ran: push back what it did to written arguments
  // (resizes, restrides) and turn its returns into flagos tensors.
  void returns_from_vendor(torch::jit::Stack* stack);

  // The unboxed fast path (dispatch/fast_kernel.h) borrows arguments instead
  // of taking stack references: a vendor alias for a flagos tensor, the tensor
  // itself otherwise. `t` must outlive the Retagger; `argument` is its position in the
  // schema (named when a host tensor is refused).
  c10::MaybeOwned<at::Tensor> borrow_to_vendor(const at::Tensor& t, bool written = false, int argument = -1);
  // The same for one element of a tensor list: the vendor tensor itself, which
  // the list the vendor kernel gets holds. `prepare_list` sizes the bookkeeping
  // for a list up front and has the call's storages found through an index.
  at::Tensor list_element_to_vendor(const at::Tensor& t, bool written, int argument, int element);
  // A flagos tensor the caller's list holds only inside IValues (Tensor?[]): the Retagger keeps its own
  // reference, as the boxed path does.
  at::Tensor owned_to_vendor(at::Tensor t, bool written) {
    return to_vendor(c10::MaybeOwned<at::Tensor>::owned(std::move(t)), written);
  }
  void prepare_list(at::TensorList list) { prepare_list(list.size()); }
  void prepare_list(size_t size);
  // Apply the device rules to what borrow_to_vendor saw (arguments_to_vendor
  // does this itself).
  void check_arguments() const;
  // A provider's kernels read device memory only, on every vendor: a host tensor among the arguments is
  // refused as torch's device kernels refuse one, before the provider could be handed its host address.
  void refuse_host_tensors() const;
  // After the vendor kernel ran: what it did to written arguments (resizes,
  // restrides) reaches the caller's tensors (returns_from_vendor does this itself).
  // This is where a caller's TensorImpl and StorageImpl are modified (see above).
  void written_from_vendor();
  // A vendor result as the caller sees it: the caller's own tensor, a view of
  // its storage, or a fresh flagos tensor that adopts the vendor memory.
  at::Tensor from_vendor(const at::Tensor& t);
  // The caller's tensor behind a borrowed written argument's alias (the
  // `Tensor&` an in-place or out= kernel returns); `t` itself if it is none.
  at::Tensor& caller_tensor(at::Tensor& t);

  // The flagos device the call runs on, or -1 when nothing names one.
  c10::DeviceIndex device() const { return device_; }

 private:
  struct StorageAlias {
    c10::StorageImpl* original;
    // Held by this call's tensor aliases over it. A vendor kernel that put another storage under one of them
    // may have freed it, so once the kernel ran it is only compared with live storages, never followed.
    c10::StorageImpl* alias;
    void* original_data;
  };
  struct TensorAlias {
    // Held, not just pointed at: a boxed kernel returning `Tensor&` results
    // reads them after its arguments left the stack, so the stack must not
    // hold the only reference (and a freed address must never match again).
    at::Tensor alias;
    c10::MaybeOwned<at::Tensor> original; // owned from a stack, borrowed by the fast path
    bool written;
  };

  at::Tensor to_vendor(c10::MaybeOwned<at::Tensor> t, bool written);
  // The alias this call already made of `original` (arguments sharing a storage share one alias, so the
  // vendor's overlap checks still see it), or null; `position` then says where a list op's index notes
  // the new one (null: no index).
  const StorageAlias* seen_storage(const c10::StorageImpl* original, size_t** position);
  void add_storage(c10::StorageImpl* original, c10::StorageImpl* alias, size_t* position);
  c10::IValue value_to_vendor(c10::IValue value, bool written, int argument);
  // A tensor of the host among the arguments: the device rule (check_arguments) refuses it when CUDA would.
  void note_host_tensor(const at::Tensor& t, bool written, int argument, int element = -1);
  [[noreturn]] void refuse_host_tensor(c10::DeviceIndex flagos_index) const;
  c10::IValue value_from_vendor(c10::IValue value);
  void note_device(c10::DeviceIndex index);
  bool is_transfer() const; // a copy between devices (data_movement.h)
  c10::Storage adopt_storage(const c10::Storage& vendor);
  void adopt_resized(c10::StorageImpl* alias_storage);
  at::Tensor relabel_fresh(const at::Tensor& t);
  c10::DeviceIndex results_index() const; // the flagos device new results belong to

  const c10::OperatorHandle& op_;
  const bool reuse_;    // alias_reuse() when the call began
  AliasPool* const pool_; // this thread's alias pool, looked up once per call (null without reuse)
  // A list op's number in the pool's storage index (0: storages are searched). Read only while the arguments
  // are converted, before any nested router call can stamp the index anew (alias_pool.h).
  uint64_t call_ = 0;
  c10::DeviceIndex device_ = -1;
  c10::SmallVector<StorageAlias, 4> storages_;
  c10::SmallVector<TensorAlias, 4> tensors_;
  c10::SmallVector<std::pair<c10::StorageImpl*, c10::Storage>, 2> adopted_;
  c10::SmallVector<size_t, 1> unset_generators_;
  // The first host tensor among the arguments that CUDA refuses beside device tensors (held by the stack or the
  // caller while the arguments are checked), and where it was.
  const c10::TensorImpl* host_tensor_ = nullptr;
  int host_argument_ = -1; // its position in the schema (-1: not known)
  int host_element_ = -1;  // its position in a list argument (-1: not in a list)
  bool results_elsewhere_ = false;           // a Device argument names a device other than flagos
  c10::DeviceIndex results_device_ = -1;     // the flagos device a Device argument names (-1: none)
  c10::SmallVector<const c10::TensorImpl*, 2> host_arguments_;
  host_access::Scope access_;                // flagos blocks open while the call runs (last: closed first)
};

} // namespace torch_fl
