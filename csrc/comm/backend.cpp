// Collectives on flagos tensors. The vendor's own c10d backend does the work (Gloo under emulation, NCCL on CUDA,
// RCCL through a DTK torch's "nccl" backend on DCU): it is created in Python (torch_fl/distributed.py) and
// wrapped here. Each call hands it vendor views of the caller's tensors (same memory, no copy), so the library
// reads and writes the user's storage. This file names no vendor API, so it builds unchanged for every runtime.
#include "comm/backend.h"

#include "comm/work_keeper.h"
#include "compat/torch_compat.h"
#include "runtime/host_access.h"
#include "runtime/runtime.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <utility>
#include <vector>

namespace torch_fl {
namespace {

using c10d::Work;
using WorkPtr = c10::intrusive_ptr<Work>;

bool is_flagos(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

// What a view's memory holds on to: the flagos storage (so memory that an asynchronous collective still uses
// stays alive while the backend keeps the view; backends keep their tensors until the work completes) and, under
// the emulation's host-read trap, the block opened for as long as the library may read or write it.
struct ViewHold {
  explicit ViewHold(const c10::Storage& s) : storage(s) { open.open(s.data()); }
  c10::Storage storage;
  host_access::Scope open;
};

// A vendor tensor over the flagos tensor's bytes, holding them (ViewHold).
at::Tensor view(const at::Tensor& t) {
  if (!is_flagos(t)) return t;
  Runtime& rt = runtime();
  c10::StorageImpl* original = t.storage().unsafeGetStorageImpl();
  auto* hold = new ViewHold(t.storage());
  c10::DataPtr data(original->mutable_data(), hold, [](void* ctx) { delete static_cast<ViewHold*>(ctx); },
                    rt.vendor_device(t.device().index()));
  auto storage = c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), original->nbytes(), std::move(data), nullptr, /*resizable=*/false);
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      c10::Storage(std::move(storage)), c10::DispatchKeySet(rt.vendor_key()), t.dtype());
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  if (t.is_conj()) impl->_set_conj(true);
  if (t.is_neg()) impl->_set_neg(true);
  return at::Tensor(std::move(impl));
}

// Vendor tensors for one collective. Contiguous flagos tensors are passed as views of their memory (no copy).
// A strided one goes through a contiguous vendor copy, since libraries read strided tensors wrongly or refuse
// them (Gloo's reduce_scatter and send do); results written to such a copy are copied back at wait().
class Staging {
 public:
  at::Tensor in(const at::Tensor& t) {
    at::Tensor v = view(t);
    return v.is_contiguous() ? v : v.contiguous();
  }
  at::Tensor inout(const at::Tensor& t) { return staged(t, /*keep_contents=*/true); }
  at::Tensor out(const at::Tensor& t) { return staged(t, /*keep_contents=*/false); }

  // `f` (in, inout or out) for a tensor, a list or a list of lists, keeping the shape of the argument.
  template <class F>
  at::Tensor each(const at::Tensor& t, F f) {
    return (this->*f)(t);
  }
  template <class F>
  std::vector<at::Tensor> each(const std::vector<at::Tensor>& ts, F f) {
    std::vector<at::Tensor> r;
    r.reserve(ts.size());
    for (const auto& t : ts) r.push_back((this->*f)(t));
    return r;
  }
  template <class F>
  std::vector<std::vector<at::Tensor>> each(const std::vector<std::vector<at::Tensor>>& lists, F f) {
    std::vector<std::vector<at::Tensor>> r;
    r.reserve(lists.size());
    for (const auto& l : lists) r.push_back(each(l, f));
    return r;
  }

  // (destination view, contiguous copy) pairs to write back once the collective is done
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back;

 private:
  at::Tensor staged(const at::Tensor& t, bool keep_contents) {
    at::Tensor v = view(t);
    if (v.is_contiguous()) return v;
    at::Tensor c = keep_contents ? v.contiguous() : at::empty_like(v, at::MemoryFormat::Contiguous);
    copy_back.emplace_back(v, c);
    return c;
  }
};

std::string message(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
  return e.what();
}

// The vendor's work under the collective's name: wait() failures (a peer that died, a timeout) say which
// collective on which rank failed, with the library's own message.
class NamedWork final : public Work {
 public:
  NamedWork(WorkPtr vendor, const char* what, int rank, int size, std::string library,
            std::vector<std::pair<at::Tensor, at::Tensor>> copy_back)
      : Work(rank), vendor_(std::move(vendor)), what_(what), size_(size), library_(std::move(library)),
        copy_back_(std::move(copy_back)) {}
  // Gloo's worker thread may still hold the vendor's work, and with it the views whose holds reach Python-owned
  // storages: the keeper makes sure that thread never drops the last reference (work_keeper.cpp says why).
  ~NamedWork() override {
    if (library_ == "gloo") keep_until_released(std::move(vendor_));
  }

  bool wait(std::chrono::milliseconds timeout) override {
    try {
      const bool done = vendor_->wait(timeout);
      std::lock_guard<std::mutex> lock(copy_mutex_);
      for (auto& [dst, src] : copy_back_) dst.copy_(src); // on the current stream, which wait() ordered after
      copy_back_.clear();
      return done;
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "flagos collective ", what_, " failed on rank ", rank_, " of ", size_, " (", library_,
                  "): ", message(e));
    }
  }
  bool isCompleted() override { return vendor_->isCompleted(); }
  bool isSuccess() const override { return vendor_->isSuccess(); }
  std::exception_ptr exception() const override { return vendor_->exception(); }
  int sourceRank() const override { return vendor_->sourceRank(); }
  void synchronize() override { vendor_->synchronize(); }
  void blockCurrentStream() override { vendor_->blockCurrentStream(); }
  void abort() override { vendor_->abort(); }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return vendor_->getFuture(); }
  float getDuration() const override { return vendor_->getDuration(); }
  uint64_t getSequencenumber() const override { return vendor_->getSequencenumber(); }

 private:
  WorkPtr vendor_;
  const char* what_;
  int size_;
  std::string library_;
  std::mutex copy_mutex_;
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back_;
};

class FlagosBackend final : public c10d::Backend {
 public:
  explicit FlagosBackend(c10::intrusive_ptr<c10d::Backend> vendor)
      : Backend(vendor->getRank(), vendor->getSize()), vendor_(std::move(vendor)) {}

  const std::string getBackendName() const override { return "flagos"; }
  const c10::intrusive_ptr<c10d::Backend>& vendor() const { return vendor_; }

  WorkPtr broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override {
    return staged("broadcast", &Backend::broadcast, &Staging::inout, tensors, opts);
  }
  WorkPtr allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override {
    return staged("all_reduce", &Backend::allreduce, &Staging::inout, tensors, opts);
  }
  WorkPtr allreduce_coalesced(std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override {
    return staged("all_reduce_coalesced", &Backend::allreduce_coalesced, &Staging::inout, tensors, opts);
  }
  WorkPtr reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override {
    return staged("reduce", &Backend::reduce, &Staging::inout, tensors, opts);
  }
  WorkPtr allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                    const c10d::AllgatherOptions& opts) override {
    return written_from("all_gather", &Backend::allgather, outputs, inputs, opts);
  }
  WorkPtr _allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) override {
    return written_from("all_gather_into_tensor", &Backend::_allgather_base, output, input, opts);
  }
  WorkPtr allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                              const c10d::AllgatherOptions& opts) override {
    return written_from("all_gather_coalesced", &Backend::allgather_coalesced, outputs, inputs, opts);
  }
  WorkPtr allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllgatherOptions& opts) override {
    return written_from(
        "all_gather_into_tensor_coalesced", &Backend::allgather_into_tensor_coalesced, outputs, inputs, opts);
  }
  WorkPtr gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                 const c10d::GatherOptions& opts) override {
    return written_from("gather", &Backend::gather, outputs, inputs, opts);
  }
  WorkPtr scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                  const c10d::ScatterOptions& opts) override {
    return written_from("scatter", &Backend::scatter, outputs, inputs, opts);
  }
  WorkPtr reduce_scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                         const c10d::ReduceScatterOptions& opts) override {
    return written_from("reduce_scatter", &Backend::reduce_scatter, outputs, inputs, opts);
  }
  WorkPtr _reduce_scatter_base(at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override {
    return written_from("reduce_scatter_tensor", &Backend::_reduce_scatter_base, output, input, opts);
  }
  WorkPtr reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::ReduceScatterOptions& opts) override {
    return written_from(
        "reduce_scatter_tensor_coalesced", &Backend::reduce_scatter_tensor_coalesced, outputs, inputs, opts);
  }
  WorkPtr alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split,
                        std::vector<int64_t>& input_split, const c10d::AllToAllOptions& opts) override {
    return written_from("all_to_all_single", &Backend::alltoall_base, output, input, output_split, input_split, opts);
  }
  WorkPtr alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                   const c10d::AllToAllOptions& opts) override {
    return written_from("all_to_all", &Backend::alltoall, outputs, inputs, opts);
  }
  WorkPtr send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    return staged("send", &Backend::send, &Staging::in, tensors, dst, tag);
  }
  WorkPtr recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    return staged("recv", &Backend::recv, &Staging::out, tensors, src, tag);
  }
  WorkPtr recvAnysource(std::vector<at::Tensor>& tensors, int tag) override {
    return staged("recv", &Backend::recvAnysource, &Staging::out, tensors, tag);
  }
  WorkPtr barrier(const c10d::BarrierOptions& opts) override {
    Staging s;
    return run("barrier", s, [&] { return vendor_->barrier(opts); });
  }

  bool supportsCoalescing() const override { return vendor_->supportsCoalescing(); }
  void startCoalescing() override { vendor_->startCoalescing(); }
  WorkPtr endCoalescing() override {
    Staging s;
    return run("coalesced collectives", s, [&] { return vendor_->endCoalescing(); });
  }
  void setTimeout(std::chrono::milliseconds timeout) override { vendor_->setTimeout(timeout); }
#if TORCH_FL_BACKEND_SET_GROUP_UID_VIRTUAL
  void setGroupUid(const std::string& uid) override {
    Backend::setGroupUid(uid);
    vendor_->setGroupUid(uid);
  }
#endif
  c10d::ErrorType getError() override { return vendor_->getError(); }

 private:
  // A collective `call` of the vendor on one list of tensors, each staged by `stage` (in, inout or out).
  template <class Call, class... Rest>
  WorkPtr staged(const char* what, Call call, at::Tensor (Staging::*stage)(const at::Tensor&),
      std::vector<at::Tensor>& tensors, Rest&... rest) {
    Staging s;
    auto v = s.each(tensors, stage);
    return run(what, s, [&] { return (vendor_.get()->*call)(v, rest...); });
  }
  // A collective `call` of the vendor that writes `outputs` from `inputs` (each a tensor, a list or a list of
  // lists).
  template <class Call, class Out, class In, class... Rest>
  WorkPtr written_from(const char* what, Call call, Out& outputs, In& inputs, Rest&... rest) {
    Staging s;
    auto o = s.each(outputs, &Staging::out);
    auto i = s.each(inputs, &Staging::in);
    return run(what, s, [&] { return (vendor_.get()->*call)(o, i, rest...); });
  }

  // Starts the vendor's collective and wraps its work, so that a failure, at the start or at wait(), names the
  // collective, the rank and the library.
  template <class Start>
  WorkPtr run(const char* what, Staging& staging, Start&& start) {
    WorkPtr work;
    try {
      work = start();
    } catch (const std::exception& e) {
      fail(what, e);
    }
    if (!work) {
      // No work: torch's NCCL backend (2.8 and later) ran a synchronous collective on the current stream and
      // returns none, as the caller asked for none. Staged results are copied back on that stream, after it.
      for (auto& [dst, src] : staging.copy_back) dst.copy_(src);
      return work;
    }
    return c10::make_intrusive<NamedWork>(
        std::move(work), what, getRank(), getSize(), vendor_->getBackendName(), std::move(staging.copy_back));
  }

  [[noreturn]] void fail(const char* what, const std::exception& e) const {
    TORCH_CHECK(false, "flagos collective ", what, " failed on rank ", getRank(), " of ", getSize(), " (",
                vendor_->getBackendName(), "): ", message(e));
  }

  c10::intrusive_ptr<c10d::Backend> vendor_;
};

} // namespace

c10::intrusive_ptr<c10d::Backend> wrap_vendor_backend(c10::intrusive_ptr<c10d::Backend> vendor) {
  TORCH_CHECK(vendor, "comm_wrap: no vendor backend given");
  return c10::make_intrusive<FlagosBackend>(std::move(vendor));
}

} // namespace torch_fl
