// The unboxed router entry, one template for every operator it serves.
//
// The boxed router (router.cpp) serves every operator, but a boxed call costs
// a stack, an IValue per argument and, for a tensor held only by Python, a GIL
// round trip on its first C++ reference. For the operators registered with
// register_fast (the fast_ops*.cpp files) the router also installs
// this typed kernel. When the op's route is native it re-tags the borrowed
// arguments and calls the vendor kernel directly; any other route goes through
// the boxed router, so routes, overrides, logging and errors are the same on
// both paths. What an argument is (read, written, a list) comes from the C++
// signature and the schema, never from per-op code.
#pragma once

#include "dispatch/counters.h"
#include "dispatch/retag.h"
#include "dispatch/router.h"
#include "runtime/runtime.h"

#include <ATen/core/boxing/impl/boxing.h>
#include <torch/library.h>

#include <array>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace torch_fl::fast {

// Argument types passed to the vendor kernel unchanged. Devices and generators
// need the boxed router's bookkeeping: an op taking one fails to compile here
// rather than misbehave at run time.
template <class T>
struct PassedThrough
    : std::bool_constant<std::is_same_v<T, const at::Scalar&> || std::is_same_v<T, bool> ||
                         std::is_same_v<T, int64_t> || std::is_same_v<T, double> ||
                         std::is_same_v<T, c10::SymInt> || std::is_same_v<T, c10::IntArrayRef> ||
                         std::is_same_v<T, c10::SymIntArrayRef> || std::is_same_v<T, at::OptionalIntArrayRef> ||
                         std::is_same_v<T, at::OptionalSymIntArrayRef> || std::is_same_v<T, at::ArrayRef<at::Scalar>> ||
                         std::is_same_v<T, at::ArrayRef<double>> || std::is_same_v<T, std::array<bool, 3>> ||
                         std::is_same_v<T, std::array<bool, 4>> ||
                         std::is_same_v<T, std::optional<c10::ScalarType>> || std::is_same_v<T, c10::ScalarType> ||
                         std::is_same_v<T, std::optional<c10::MemoryFormat>> ||
                         std::is_same_v<T, std::optional<bool>> || std::is_same_v<T, std::optional<int64_t>> ||
                         std::is_same_v<T, const std::optional<at::Scalar>&> ||
                         std::is_same_v<T, std::string_view> || std::is_same_v<T, c10::string_view> ||
                         std::is_same_v<T, std::optional<double>>> {};

// What a vendor argument is held as while the call runs: `convert` makes it,
// `unwrap` hands it to the vendor kernel.
template <class T>
struct Vendor {
  static_assert(PassedThrough<T>::value, "an argument type the fast path cannot re-tag: leave this op to the boxed router");
  using type = T;
  static T convert(Retagger&, T value, bool, int) { return value; }
  static T unwrap(T value) { return value; }
};
template <>
struct Vendor<const at::Tensor&> {
  using type = c10::MaybeOwned<at::Tensor>;
  static type convert(Retagger& r, const at::Tensor& t, bool written, int argument) {
    return r.borrow_to_vendor(t, written, argument);
  }
  static const at::Tensor& unwrap(const type& held) { return *held; }
};
// In-place and out= arguments: written by the vendor kernel, then returned as the caller's own tensor.
template <>
struct Vendor<at::Tensor&> {
  using type = c10::MaybeOwned<at::Tensor>;
  static type convert(Retagger& r, at::Tensor& t, bool, int argument) {
    return r.borrow_to_vendor(t, /*written=*/true, argument);
  }
  static at::Tensor& unwrap(const type& held) { return const_cast<at::Tensor&>(*held); }
};
template <>
struct Vendor<const std::optional<at::Tensor>&> {
  using type = std::optional<at::Tensor>;
  static type convert(Retagger& r, const std::optional<at::Tensor>& t, bool written, int argument) {
    if (!t.has_value()) return std::nullopt;
    return *r.borrow_to_vendor(*t, written, argument); // optional tensors are weights and biases: a copy is cheap
  }
  static const type& unwrap(const type& held) { return held; }
};
template <>
struct Vendor<at::TensorList> { // the lists of the _foreach_ ops and fused optimizers
  using type = std::vector<at::Tensor>;
  static type convert(Retagger& r, at::TensorList list, bool written, int argument) {
    type out;
    out.reserve(list.size());
    r.prepare_list(list);
    for (size_t k = 0; k < list.size(); ++k) {
      out.push_back(r.list_element_to_vendor(list[k], written, argument, static_cast<int>(k)));
    }
    return out;
  }
  static at::TensorList unwrap(const type& held) { return held; }
};

template <>
struct Vendor<const at::ITensorListRef&> { // cat's list: boxed or not, its tensors live as long as the call
  using type = std::vector<at::Tensor>;
  static type convert(Retagger& r, const at::ITensorListRef& list, bool written, int argument) {
    type out;
    out.reserve(list.size());
    r.prepare_list(list.size());
    int k = 0;
    for (const at::Tensor& t : list) out.push_back(r.list_element_to_vendor(t, written, argument, k++));
    return out;
  }
  static at::ITensorListRef unwrap(const type& held) { return at::ITensorListRef(held); }
};

// Tensor?[] (index_put's indices): the boxed router's rule (retag.cpp, value_to_vendor). A flagos index is
// re-tagged; a host one passes as it is, as CUDA moves its indices to the indexed tensor's device
// (TensorAdvancedIndexing.cpp, make_info). A list with no flagos index goes to the vendor as it came.
template <>
struct Vendor<const c10::List<std::optional<at::Tensor>>&> {
  using type = c10::List<std::optional<at::Tensor>>;
  static type convert(Retagger& r, const type& list, bool written, int) {
    bool any = false;
    for (size_t k = 0; k < list.size() && !any; ++k) {
      const std::optional<at::Tensor> t = list[k];
      any = t.has_value() && is_flagos(*t);
    }
    if (!any) return list;
    type out;
    out.reserve(list.size());
    for (size_t k = 0; k < list.size(); ++k) {
      std::optional<at::Tensor> t = list[k];
      if (t.has_value() && is_flagos(*t)) t = r.owned_to_vendor(std::move(*t), written);
      out.push_back(std::move(t));
    }
    return out;
  }
  static const type& unwrap(const type& held) { return held; }
};

// Results as the caller sees them: a fresh flagos tensor for a new result, the
// caller's own tensor for an in-place or out= result.
template <class R>
struct Result {
  static R convert(Retagger& r, R&& t) { return r.from_vendor(t); }
};
template <>
struct Result<at::Scalar> { // a tensor's value read on the host (_local_scalar_dense: .item(), .tolist())
  static at::Scalar convert(Retagger&, at::Scalar&& value) { return std::move(value); }
};
template <>
struct Result<at::Tensor&> {
  static at::Tensor& convert(Retagger& r, at::Tensor& t) { return r.caller_tensor(t); }
};
template <>
struct Result<std::vector<at::Tensor>> {
  static std::vector<at::Tensor> convert(Retagger& r, std::vector<at::Tensor>&& list) {
    for (at::Tensor& t : list) t = r.from_vendor(t);
    return std::move(list);
  }
};
template <class... T>
struct Result<std::tuple<T...>> {
  static std::tuple<T...> convert(Retagger& r, std::tuple<T...>&& results) {
    return std::apply([&](auto&&... t) { return std::tuple<T...>(Result<T>::convert(r, std::forward<T>(t))...); },
        std::move(results));
  }
};

// What a fast entry runs on the vendor: the op itself, through the router's boxed entry for other routes. The
// convolution hooks torch offers an out-of-tree device specialise it (fast_ops_convolution.cpp): their vendor
// kernel is the ordinary op they stand for (`target`).
template <class Op>
struct VendorOp {
  using target = Op;
  static constexpr auto boxed = &route_boxed;
  template <class... A>
  static decltype(auto) call(c10::DispatchKeySet keys, A&&... args) {
    return Op::redispatch(keys, std::forward<A>(args)...);
  }
};

// An op whose fast entry serves only some of its native calls (copy_: fast_ops_copies.cpp) specialises this
// with `takes(args...)`, whether a call is one of them, and `otherwise(args...)`, the op's own composite kernel for
// the rest: what runs for them without the fast entry.
template <class Op>
struct Narrowed : std::false_type {};

template <class Op, class Schema = typename Op::schema>
struct Kernel;

template <class Op, class Ret, class... Args>
struct Kernel<Op, Ret(Args...)> {
  static FastEntry& entry() {
    static FastEntry e{c10::OperatorName(Op::name, Op::overload_name)};
    return e;
  }
  static const c10::OperatorHandle& handle() {
    static const c10::OperatorHandle h = c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name);
    return h;
  }
  // Which arguments the op writes, from its schema (Tensor(a!), Tensor(a!)[]).
  static const std::array<bool, sizeof...(Args)>& written() {
    static const std::array<bool, sizeof...(Args)> w = [] {
      std::array<bool, sizeof...(Args)> out{};
      const auto& args = handle().schema().arguments();
      TORCH_INTERNAL_ASSERT(args.size() == sizeof...(Args), "fast path: schema and signature of ",
          Op::name, ".", Op::overload_name, " disagree");
      for (size_t i = 0; i < out.size(); ++i) out[i] = args[i].alias_info() != nullptr && args[i].alias_info()->isWrite();
      return out;
    }();
    return w;
  }

  // The argument an in-place or out= op returns (the one sharing its return's alias set), or -1.
  static int returned_argument() {
    static const int index = [] {
      const auto& schema = handle().schema();
      if (schema.returns().size() != 1 || schema.returns()[0].alias_info() == nullptr) return -1;
      const auto& args = schema.arguments();
      for (size_t i = 0; i < args.size(); ++i) {
        if (args[i].alias_info() != nullptr && *args[i].alias_info() == *schema.returns()[0].alias_info()) {
          return static_cast<int>(i);
        }
      }
      return -1;
    }();
    return index;
  }
  // `T` is the argument's type in the signature; `arg` the lvalue the kernel holds it as (an int64_t or a
  // double argument beside the written tensor is one too).
  template <class T, class Held>
  static at::Tensor* caller_reference(Held& arg) {
    if constexpr (std::is_same_v<T, at::Tensor&>) {
      return &arg;
    } else {
      return nullptr;
    }
  }

  template <size_t... I>
  static Ret native(std::index_sequence<I...>, Args... args) {
    if (log_dispatch()) log_route(handle(), "native");
    counters::Timer timer(entry().name, "fast"); // first made, last gone: see counters.h
    Retagger retag(handle());
    const auto& w = written();
    // Braced initialisation converts the arguments left to right.
    std::tuple<typename Vendor<Args>::type...> vendor{Vendor<Args>::convert(retag, args, w[I], static_cast<int>(I))...};
    retag.check_arguments();
    timer.mark(counters::kArguments);
    // No device guard: the vendor's kernels set their own from their tensors,
    // as they do when plain torch calls them.
    if constexpr (std::is_void_v<Ret>) {
      VendorOp<Op>::call(c10::DispatchKeySet(runtime().vendor_key()), Vendor<Args>::unwrap(std::get<I>(vendor))...);
      timer.mark(counters::kKernel);
      retag.written_from_vendor();
      timer.mark(counters::kResults);
    } else {
      decltype(auto) out = VendorOp<Op>::call(
          c10::DispatchKeySet(runtime().vendor_key()), Vendor<Args>::unwrap(std::get<I>(vendor))...);
      timer.mark(counters::kKernel);
      retag.written_from_vendor();
      if constexpr (std::is_same_v<Ret, at::Tensor&>) {
        timer.mark(counters::kResults);
        // The caller's own argument, by the schema: never a reference into this frame.
        const std::array<at::Tensor*, sizeof...(Args)> refs{caller_reference<Args>(args)...};
        const int i = returned_argument();
        TORCH_INTERNAL_ASSERT(i >= 0 && refs[i] != nullptr, "fast path: ", Op::name, ".", Op::overload_name,
            " returns Tensor& but no written argument shares its alias set");
        (void)out;
        return *refs[i];
      } else {
        Ret result = Result<Ret>::convert(retag, std::forward<Ret>(out));
        timer.mark(counters::kResults);
        return result;
      }
    }
  }

  // Whether the vendor's torch has a kernel for the op (a CUDA-only op under the emulation has none): the
  // boxed router then says so, or runs the op's decomposition, as for any op without a fast entry.
  static bool vendor_has_kernel() {
    using Target = typename VendorOp<Op>::target;
    static const bool has = c10::Dispatcher::singleton()
                                .findSchemaOrThrow(Target::name, Target::overload_name)
                                .hasComputedKernelForDispatchKey(runtime().vendor_key());
    return has;
  }

  static Ret call(Args... args) {
    if (!entry().native.load(std::memory_order_acquire) || !vendor_has_kernel()) {
      return c10::impl::BoxedKernelWrapper<Ret(Args...)>::call(
          c10::BoxedKernel::makeFromFunction<VendorOp<Op>::boxed>(), handle(),
          c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), std::forward<Args>(args)...);
    }
    if constexpr (Narrowed<Op>::value) {
      if (!Narrowed<Op>::takes(args...)) return Narrowed<Op>::otherwise(std::forward<Args>(args)...);
    }
    return native(std::index_sequence_for<Args...>{}, std::forward<Args>(args)...);
  }
};

// The op's name comes from its at::_ops struct, so the kernel can only be
// registered for the operator whose signature it was built from.
template <class Op>
void register_one(torch::Library& m) {
  register_fast_entry(&Kernel<Op>::entry());
  const std::string overload = Op::overload_name;
  m.impl((std::string(Op::name) + (overload.empty() ? "" : "." + overload)).c_str(), TORCH_FN(Kernel<Op>::call));
}

// The fast entry for each of these ops (at::_ops structs), registered in the order given.
template <class... Ops>
void register_fast(torch::Library& m) {
  (register_one<Ops>(m), ...);
}

} // namespace torch_fl::fast
