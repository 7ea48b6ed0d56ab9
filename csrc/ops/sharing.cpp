// torch.ops.flagos: the sharing operators: flagos memory seen by other processes (torch.multiprocessing) and by other
// libraries (DLPack). torch_fl/_sharing.py and torch_fl/_dlpack.py hold the Python side and say when each is used.
//
// Two kinds of zero-copy view, both owning (unlike the router's re-tag, whose aliases live for one call):
//  - a tensor of another device over the same bytes whose storage keeps the source storage alive (DLPack: a
//    vendor tensor for the producer's capsule, a flagos tensor over the memory a consumer's capsule names);
//  - a flagos storage moved into a POSIX shared-memory segment in place (emulation only), as torch's
//    share_memory_() moves a CPU storage, so every process that maps the segment sees the others' writes.
#include "runtime/host_access.h"
#include "runtime/runtime.h"

#include <ATen/MapAllocator.h>
#include <ATen/StorageUtils.h>
#include <ATen/core/Tensor.h>
#include <c10/core/TensorImpl.h>
#include <torch/library.h>

#include <algorithm>
#include <tuple>
#include <cstring>
#include <utility>
#include <vector>
#include <unistd.h>

namespace torch_fl {
namespace sharing {

void release_storage(void* ctx) {
  delete static_cast<c10::Storage*>(ctx);
}

c10::DispatchKey key_of(c10::Device device) {
  return device.type() == c10::DeviceType::PrivateUse1 ? c10::DispatchKey::PrivateUse1
                                                       : c10::computeDispatchKey(std::nullopt, std::nullopt, device);
}

// A tensor on `device` with `src`'s sizes, strides and offset, over a storage whose DataPtr holds `src`'s storage.
at::Tensor owning_view(const at::Tensor& src, c10::Device device) {
  const c10::Storage& held = src.storage();
  auto* owner = new c10::Storage(held);
  c10::DataPtr ptr(const_cast<void*>(held.data()), owner, &release_storage, device);
  auto storage = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), held.nbytes(),
      std::move(ptr), /*allocator=*/nullptr, /*resizable=*/false);
  at::Tensor out = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(std::move(storage)), c10::DispatchKeySet(key_of(device)), src.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(src.sizes(), src.strides(), src.storage_offset());
  return out;
}

// Fresh tensors over `tensors`' bytes on their own device, one new storage per distinct source storage (outputs
// that view one buffer stay views of one storage), each keeping its source alive. A graph runner hands these out
// per replay: flagging their storages unreadable later leaves the graph's own buffers and every other replay's
// tensors alone.
std::vector<at::Tensor> fresh_aliases(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  std::vector<std::pair<const c10::StorageImpl*, at::Tensor>> made; // a graph returns a handful of outputs
  for (const at::Tensor& src : tensors) {
    const c10::StorageImpl* key = src.storage().unsafeGetStorageImpl();
    auto found = std::find_if(made.begin(), made.end(), [&](const auto& m) { return m.first == key; });
    if (found == made.end()) {
      made.emplace_back(key, owning_view(src, src.device()));
      out.push_back(made.back().second);
      continue;
    }
    at::Tensor view = at::detail::make_tensor<c10::TensorImpl>(
        c10::Storage(found->second.storage()), c10::DispatchKeySet(key_of(src.device())), src.dtype());
    view.unsafeGetTensorImpl()->set_sizes_and_strides(src.sizes(), src.strides(), src.storage_offset());
    out.push_back(std::move(view));
  }
  return out;
}

// Every tensor over t's storage (views too) raises `message` on a read or write of its data from now on; the
// memory stays owned as before. torch's CUDA builds bind the same call for their graph trees; CPU builds do not.
void make_unreadable(const at::Tensor& t, const std::string& message) {
  t.storage().unsafeGetStorageImpl()->release_data_and_set_meta_custom_data_ptr_error_msg_(message);
}

void check_flagos(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, what, ": expected a flagos tensor, got one on ",
      t.device());
  TORCH_CHECK(t.layout() == c10::Layout::Strided, what, ": flagos tensors of layout ", t.layout(),
      " are not supported; only strided ones");
}

bool emulated() {
  return runtime().vendor_type() == c10::DeviceType::CPU;
}

// (fd, nbytes) of the shared-memory segment holding t's storage, moving the storage there first if needed.
std::tuple<int64_t, int64_t> share_fd(const at::Tensor& t) {
  check_flagos(t, "share_fd");
  TORCH_CHECK(emulated(), "flagos storages move into shared host memory under the CPU emulation only");
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  if (at::MapAllocator* ctx = at::MapAllocator::fromDataPtr(storage->data_ptr())) {
    return {ctx->fd(), static_cast<int64_t>(storage->nbytes())};
  }
  const size_t nbytes = storage->nbytes();
  TORCH_CHECK(nbytes > 0, "share_fd: an empty storage has nothing to map");
  c10::intrusive_ptr<c10::StorageImpl> shm = at::new_shm_fd_storage(nbytes);
  {
    runtime().synchronize(storage->data_ptr().device().index()); // the bytes as the queued work leaves them
    host_access::Scope open; // the host-read trap's block stays readable for the copy
    open.open(storage->data());
    std::memcpy(shm->mutable_data(), storage->data(), nbytes);
  }
  c10::DataPtr moved = std::move(shm->_mutable_data_ptr_no_checks());
  moved.unsafe_set_device(storage->data_ptr().device());
  storage->set_data_ptr_noswap(std::move(moved)); // frees the device block; the segment takes its place
  at::MapAllocator* ctx = at::MapAllocator::fromDataPtr(storage->data_ptr());
  TORCH_INTERNAL_ASSERT(ctx != nullptr);
  return {ctx->fd(), static_cast<int64_t>(nbytes)};
}

// A flagos uint8 tensor of `nbytes` over the shared-memory segment `fd` names (another process's share_fd); the
// caller keeps its own fd: this maps a duplicate.
at::Tensor from_shared_fd(int64_t fd64, int64_t nbytes64, int64_t index) {
  const int fd = static_cast<int>(fd64);
  const size_t nbytes = static_cast<size_t>(nbytes64);
  TORCH_CHECK(emulated(), "flagos storages come from shared host memory under the CPU emulation only");
  const int own = ::dup(fd);
  TORCH_CHECK(own >= 0, "could not duplicate the shared-memory file descriptor ", fd);
  const int flags = at::ALLOCATOR_MAPPED_SHAREDMEM | at::ALLOCATOR_MAPPED_NOCREATE | at::ALLOCATOR_MAPPED_KEEPFD |
      at::ALLOCATOR_MAPPED_FROMFD;
  c10::DataPtr ptr = at::MapAllocator::makeDataPtr(at::WITH_FD, "", own, flags, nbytes, nullptr);
  ptr.unsafe_set_device(flagos_device(static_cast<c10::DeviceIndex>(index)));
  auto storage = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), nbytes, std::move(ptr),
      runtime().allocator(), /*resizable=*/false);
  at::Tensor out = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(std::move(storage)), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      caffe2::TypeMeta::Make<uint8_t>());
  out.unsafeGetTensorImpl()->set_sizes_contiguous({static_cast<int64_t>(nbytes)});
  return out;
}

} // namespace sharing

} // namespace torch_fl

TORCH_LIBRARY_FRAGMENT(flagos, m) {
  using namespace torch_fl;
  // A vendor tensor over a flagos tensor's bytes that keeps its storage alive (the DLPack producer's view).
  m.def("vendor_view(Tensor tensor) -> Tensor", [](const at::Tensor& t) {
    sharing::check_flagos(t, "vendor_view");
    return sharing::owning_view(t, runtime().vendor_device(t.device().index()));
  });
  // A flagos tensor over a vendor tensor's bytes that keeps its storage alive (the DLPack consumer's view).
  m.def("flagos_view(Tensor tensor, int index=0) -> Tensor", [](const at::Tensor& t, int64_t index) {
    TORCH_CHECK(t.device().type() == runtime().vendor_type(), "flagos_view: expected a tensor of the vendor device (",
        runtime().vendor_device(0).type(), "), got one on ", t.device());
    TORCH_CHECK(t.layout() == c10::Layout::Strided, "flagos_view: only strided tensors, got layout ", t.layout());
    const c10::DeviceIndex dev = t.device().type() == c10::DeviceType::CPU ? static_cast<c10::DeviceIndex>(index)
                                                                           : t.device().index();
    return sharing::owning_view(t, flagos_device(dev));
  });
  // Tensors over the same bytes as `tensors`, on new storages that keep theirs alive (one per shared storage).
  m.def("fresh_aliases(Tensor[] tensors) -> Tensor[]",
      [](std::vector<at::Tensor> tensors) { return sharing::fresh_aliases(tensors); });
  // Reading or writing the data of any tensor over this tensor's storage raises `message` from now on.
  m.def("make_unreadable(Tensor tensor, str message) -> ()",
      [](const at::Tensor& t, std::string message) { sharing::make_unreadable(t, message); });
  // (fd, nbytes) of a flagos storage moved into shared memory (emulation).
  m.def("share_fd(Tensor tensor) -> (int, int)", &sharing::share_fd);
  // A flagos uint8 tensor over another process's shared flagos storage (emulation).
  m.def("from_shared_fd(int fd, int nbytes, int index) -> Tensor", &sharing::from_shared_fd);
}
