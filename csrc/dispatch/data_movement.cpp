// See data_movement.h.
#include "dispatch/data_movement.h"
#include "dispatch/alias_pool.h"
#include "dispatch/counters.h"
#include "dispatch/retag.h"
#include "dispatch/router.h"
#include "runtime/host_access.h"
#include "runtime/runtime.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ops/_neg_view.h>
#include <ATen/ops/copy_native.h>
#include <c10/core/DeviceGuard.h>

#include <array>
#include <string_view>

namespace torch_fl {
namespace {

constexpr std::array<std::string_view, 6> kTransfers = {
    "_to_copy", "copy_", "copy", "_copy_from", "_copy_from_and_resize", "_to_cpu"};

// Strides a fresh copy of `t` keeps: its own when it is dense and non-overlapping (as .to() keeps
// them), contiguous otherwise (expanded or overlapping tensors cannot be written element-wise).
c10::SmallVector<int64_t, 6> copy_strides(const at::Tensor& t) {
  if (t.is_non_overlapping_and_dense()) return c10::SmallVector<int64_t, 6>(t.strides().begin(), t.strides().end());
  c10::SmallVector<int64_t, 6> strides(t.dim());
  int64_t step = 1;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    strides[d] = step;
    step *= std::max<int64_t>(t.size(d), 1);
  }
  return strides;
}

bool shares_storage(const at::Tensor& a, const at::Tensor& b) {
  return a.device().is_privateuseone() && b.device().is_privateuseone() && a.storage().is_alias_of(b.storage());
}

} // namespace

bool is_transfer_op(const c10::OperatorName& name) {
  if (name.name.rfind("aten::", 0) != 0) return false;
  const std::string_view base = std::string_view(name.name).substr(6);
  for (std::string_view t : kTransfers) {
    if (t == base) return true;
  }
  return false;
}

std::vector<std::string> transfer_ops() {
  return {kTransfers.begin(), kTransfers.end()};
}

namespace {

// A copy's vendor views of its two sides: a flagos side's alias, a host side itself. Every .to(), .float() and
// .contiguous() of a flagos tensor is such a copy (a decode step of a small LLM makes a dozen per token), so the
// aliases come from this thread's pool, as a routed call's do (alias_pool.h), and go back when the copy is done,
// instead of being built anew (a TensorImpl and a StorageImpl each) and freed every time.
class CopyAliases {
 public:
  CopyAliases(const at::Tensor& dst, const at::Tensor& src)
      : pool_(alias_reuse() ? &AliasPool::of_this_thread() : nullptr) {
    dst_ = alias_of(dst, nullptr, dst_pooled_);
    // Two views of one flagos storage are viewed over one vendor storage, so the vendor's copy sees that they
    // share memory: it refuses a partial overlap (a silent smear otherwise) and skips a copy of a tensor onto
    // itself.
    src_ = alias_of(src,
        shares_storage(dst, src) ? dst_.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl() : nullptr,
        src_pooled_);
  }
  ~CopyAliases() {
    // Last first, as a Retagger gives its aliases back. A host side is the caller's tensor: never pooled.
    if (pool_ == nullptr) return;
    if (src_pooled_) pool_->give_back(std::move(src_));
    if (dst_pooled_) pool_->give_back(std::move(dst_));
  }
  CopyAliases(const CopyAliases&) = delete;
  CopyAliases& operator=(const CopyAliases&) = delete;

  const at::Tensor& dst() const { return dst_; }
  const at::Tensor& src() const { return src_; }

 private:
  at::Tensor alias_of(const at::Tensor& t, c10::StorageImpl* shared, bool& pooled) {
    if (!is_flagos(t)) return t;
    if (pool_ == nullptr) return shared != nullptr ? new_vendor_alias(t, shared) : vendor_alias(t);
    pooled = true;
    return pool_->tensor(t, t.storage().unsafeGetStorageImpl(), shared);
  }

  AliasPool* const pool_; // this thread's pool, or null without reuse
  at::Tensor dst_;
  at::Tensor src_;
  bool dst_pooled_ = false;
  bool src_pooled_ = false;
};

} // namespace

void copy_between(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  static const c10::OperatorName kCopy("aten::_copy_from", "");
  counters::Timer timer(kCopy, "copy");
  // Declared before the views below, so destroyed after them: the pool takes back only an alias nothing else holds.
  const CopyAliases aliases(dst, src);
  at::Tensor dst_vendor = aliases.dst();
  at::Tensor src_vendor = aliases.src();
  c10::OptionalDeviceGuard guard;
  if (dst.device().is_privateuseone()) guard.reset_device(dst.device());
  else if (src.device().is_privateuseone()) guard.reset_device(src.device());
  host_access::Scope access;
  if (dst.device().is_privateuseone()) access.open(dst.storage().data());
  if (src.device().is_privateuseone()) access.open(src.storage().data());
  if (dst_vendor.is_conj() || dst_vendor.is_neg() || src_vendor.is_conj() || src_vendor.is_neg()) {
    // A copy between host and device moves raw bytes and settles conjugate and negative bits afterwards, and
    // torch's CUDA copy gets that wrong for some layouts (a non-dense conjugate source into a plain host tensor
    // arrives unconjugated: the cpu route's complex gradients on the H200). So the bits are settled first, each
    // on its own side: the destination is viewed without its bits (the source takes them on as views), then the
    // source resolves them where it lives. Every copy with bits takes this one path, emulation's included.
    if (dst_vendor.is_conj()) {
      dst_vendor = dst_vendor.conj();
      src_vendor = src_vendor.conj();
    }
    if (dst_vendor.is_neg()) {
      dst_vendor = at::_neg_view(dst_vendor);
      src_vendor = at::_neg_view(src_vendor);
    }
    src_vendor = src_vendor.resolve_conj().resolve_neg();
  }
  timer.mark(counters::kArguments);
  at::native::copy_(dst_vendor, src_vendor, non_blocking);
  timer.mark(counters::kKernel);
}

at::Tensor host_copy(const at::Tensor& t) {
  at::Tensor host = at::detail::empty_strided_cpu(t.sizes(), copy_strides(t), t.scalar_type());
  copy_between(host, t, /*non_blocking=*/false);
  return host;
}

at::Tensor flagos_copy(const at::Tensor& t, c10::DeviceIndex index) {
  const c10::DeviceGuard guard(flagos_device(index));
  at::Tensor out = at::detail::empty_strided_generic(t.sizes(), copy_strides(t),
      c10::GetAllocator(c10::DeviceType::PrivateUse1), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      t.scalar_type());
  copy_between(out, t, /*non_blocking=*/false);
  return out;
}

} // namespace torch_fl
