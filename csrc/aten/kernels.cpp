// Bookkeeping kernels the flagos device implements itself: allocation, copies,
// resizing, the metadata-only views and record_stream. They never go through the router
// (they are what the routes are built from), so they are always native. Each family is
// registered beside its kernels; the names registered here are exactly what
// torch_fl.routes() reports as pinned native.
#include "dispatch/data_movement.h"
#include "runtime/runtime.h"

#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ResizeCommon.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

namespace torch_fl {

void resize_storage_bytes(const c10::Storage& storage, size_t newsize); // runtime/allocator.cpp

namespace {

constexpr c10::DispatchKeySet kFlagosKeys(c10::DispatchKey::PrivateUse1);

void check_options(std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
      "flagos tensors are strided; layout ", c10::layout_or_default(layout), " is not supported");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory),
      "pin_memory applies to host tensors; create the tensor on the CPU with pin_memory=True instead");
}

// Under torch.use_deterministic_algorithms(True) with torch.utils.deterministic.fill_uninitialized_memory (its
// default), CPU and CUDA fill new memory with NaN (floating and complex) or the largest value (integers and bool),
// so that a read of memory nobody wrote gives the same answer on every run; the flagos kernels keep that promise.
bool fill_uninitialized() {
  const at::Context& ctx = at::globalContext();
  return ctx.deterministicAlgorithms() && ctx.deterministicFillUninitializedMemory();
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout, std::optional<c10::Device> device, std::optional<bool> pin_memory,
    std::optional<c10::MemoryFormat> memory_format) {
  check_options(layout, pin_memory);
  const c10::DeviceGuard guard(c10::device_or_default(device));
  at::Tensor result = at::detail::empty_generic(size, c10::GetAllocator(c10::DeviceType::PrivateUse1), kFlagosKeys,
      c10::dtype_or_default(dtype), memory_format);
  if (C10_UNLIKELY(fill_uninitialized())) at::native::fill_empty_deterministic_(result);
  return result;
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout, std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  check_options(layout, pin_memory);
  const c10::DeviceGuard guard(c10::device_or_default(device));
  at::Tensor result = at::detail::empty_strided_generic(size, stride,
      c10::GetAllocator(c10::DeviceType::PrivateUse1), kFlagosKeys, c10::dtype_or_default(dtype));
  if (C10_UNLIKELY(fill_uninitialized())) at::native::fill_empty_deterministic_(result);
  return result;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
}

// Grow the storage when the new shape needs more bytes; shrinking keeps them.
void ensure_storage(c10::TensorImpl* impl) {
  if (impl->numel() == 0) return;
  const size_t need = at::detail::computeStorageNbytes(impl->sizes(), impl->strides(),
      impl->dtype().itemsize(), impl->storage_offset());
  if (need > impl->storage().nbytes()) resize_storage_bytes(impl->storage(), need);
}

const at::Tensor& resize_(const at::Tensor& self, c10::SymIntArrayRef size,
    std::optional<c10::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  const int64_t old_nbytes = impl->unsafe_storage() ? static_cast<int64_t>(impl->unsafe_storage().nbytes()) : 0;
  at::native::resize_impl_cpu_(impl, C10_AS_INTARRAYREF_SLOW(size), std::nullopt, /*resize_storage=*/false);
  ensure_storage(impl);
  if (memory_format) impl->empty_tensor_restride(*memory_format);
  if (C10_UNLIKELY(fill_uninitialized())) at::native::fill_resize_deterministic_(self, old_nbytes);
  return self;
}

at::Tensor& set_storage_offset_(at::Tensor& result, c10::Storage storage, int64_t offset,
    c10::IntArrayRef size, c10::IntArrayRef stride) {
  at::native::checkSetStorage(result, std::move(storage), offset, size, stride);
  auto* impl = result.unsafeGetTensorImpl();
  impl->set_storage_offset(offset);
  at::OptionalIntArrayRef stride_opt = stride.data() != nullptr ? at::OptionalIntArrayRef(stride) : std::nullopt;
  at::native::resize_impl_cpu_(impl, size, stride_opt, /*resize_storage=*/false);
  ensure_storage(impl);
  return result;
}

at::Tensor& set_storage_(at::Tensor& self, c10::Storage source) {
  const int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage_offset_(self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_tensor_(at::Tensor& self, const at::Tensor& source) {
  return at::native::set_tensor_(self, source);
}

at::Tensor& set_empty_(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, c10::GetAllocator(c10::DeviceType::PrivateUse1),
      /*resizable=*/true);
  return set_storage_offset_(self, std::move(empty), 0, {0}, {});
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage", TORCH_FN(set_storage_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage_offset_));
  m.impl("set_.source_Tensor", TORCH_FN(set_tensor_));
  m.impl("set_", TORCH_FN(set_empty_));
}

at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
    std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("view", TORCH_FN(view));
  m.impl("_reshape_alias", TORCH_FN(reshape_alias));
}

// Every copy that touches a flagos tensor: host<->flagos and flagos<->flagos
// (also across devices). Both sides are viewed as vendor tensors and the
// vendor's copy does the work, with its own stream semantics.
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  copy_between(dst, self, non_blocking);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.device().is_privateuseone()) {
    resize_(dst, self.sym_sizes(), std::nullopt);
  } else {
    dst.resize_(self.sizes());
  }
  return copy_from(self, dst, false);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
}

// The allocator that must see record_stream is the one that owns the flagos storage. Through the router the
// vendor kernel would only see a re-tagged alias storage, which its allocator does not know, and memory could be
// reused while the stream still reads it.
void record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1, "record_stream: a flagos tensor needs a ",
      "flagos stream (torch.flagos.current_stream() or torch.flagos.Stream()), got a stream of ", stream.device());
  TORCH_CHECK(stream.device_index() == self.device().index(), "record_stream: the tensor is on ", self.device(),
      " but the stream belongs to ", stream.device());
  c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)
      ->recordDataPtrOnStream(self.storage().data_ptr(), stream);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("record_stream", TORCH_FN(record_stream));
}

} // namespace
} // namespace torch_fl
