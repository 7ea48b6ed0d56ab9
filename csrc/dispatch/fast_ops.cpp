// Unboxed router entries for hot operators.
//
// The boxed router (router.cpp) serves every operator, but a boxed call costs
// a stack, an IValue per argument and, for a tensor held only by Python, a GIL
// round trip on its first C++ reference. For the operators below the router
// also registers a typed kernel. When the op's route is native it re-tags the
// borrowed arguments and calls the vendor kernel directly; any other route, or
// an argument the fast path does not know, goes through the boxed router, so
// routes, overrides, logging and errors are the same on both paths.
#include "dispatch/retag.h"
#include "dispatch/router.h"
#include "runtime/runtime.h"

#include <ATen/core/boxing/impl/boxing.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_softmax_ops.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/native_layer_norm_ops.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/pow_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/rsqrt_ops.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/silu_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/sum_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/where_ops.h>
#include <torch/library.h>

#include <array>
#include <string_view>
#include <tuple>
#include <type_traits>

namespace torch_fl {
namespace {

// Argument types the fast path handles. Tensors are read-only inputs (the
// written ones, devices, generators and tensor lists need the boxed router's
// bookkeeping); everything else passes through unchanged. An op with any other
// argument type fails to compile here rather than misbehave at run time.
template <class T>
struct Handled : std::false_type {};
template <>
struct Handled<const at::Tensor&> : std::true_type {};
template <>
struct Handled<const std::optional<at::Tensor>&> : std::true_type {};
template <class T>
struct PassedThrough
    : std::bool_constant<std::is_same_v<T, const at::Scalar&> || std::is_same_v<T, bool> ||
                         std::is_same_v<T, int64_t> || std::is_same_v<T, double> ||
                         std::is_same_v<T, c10::IntArrayRef> || std::is_same_v<T, c10::SymIntArrayRef> ||
                         std::is_same_v<T, at::OptionalIntArrayRef> ||
                         std::is_same_v<T, std::optional<c10::ScalarType>> ||
                         std::is_same_v<T, std::string_view> || std::is_same_v<T, c10::string_view> ||
                         std::is_same_v<T, std::optional<double>>> {};

// What a vendor argument is held as while the call runs.
template <class T>
struct Vendor {
  using type = T;
  static T convert(Retagger&, T value) { return value; }
  static T unwrap(T value) { return value; }
};
template <>
struct Vendor<const at::Tensor&> {
  using type = c10::MaybeOwned<at::Tensor>;
  static type convert(Retagger& r, const at::Tensor& t) { return r.borrow_to_vendor(t); }
  static const at::Tensor& unwrap(const type& held) { return *held; }
};
template <>
struct Vendor<const std::optional<at::Tensor>&> {
  using type = std::optional<at::Tensor>;
  static type convert(Retagger& r, const std::optional<at::Tensor>& t) {
    if (!t.has_value()) return std::nullopt;
    return *r.borrow_to_vendor(*t); // optional tensors are weights and biases: a copy is cheap
  }
  static const type& unwrap(const type& held) { return held; }
};

at::Tensor results_from_vendor(Retagger& r, at::Tensor&& t) {
  return r.from_vendor(t);
}
template <class... T>
std::tuple<T...> results_from_vendor(Retagger& r, std::tuple<T...>&& results) {
  return std::apply([&](auto&&... t) { return std::tuple<T...>(r.from_vendor(t)...); }, std::move(results));
}

template <class Op, class Schema = typename Op::schema>
struct FastKernel;

template <class Op, class Ret, class... Args>
struct FastKernel<Op, Ret(Args...)> {
  static_assert(((Handled<Args>::value || PassedThrough<Args>::value) && ...),
      "an argument type the fast path cannot re-tag: leave this op to the boxed router");

  static FastEntry& entry() {
    static FastEntry e{c10::OperatorName(Op::name, Op::overload_name)};
    return e;
  }
  static const c10::OperatorHandle& handle() {
    static const c10::OperatorHandle h = c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name);
    return h;
  }

  static Ret call(Args... args) {
    if (!entry().native.load(std::memory_order_acquire)) {
      return c10::impl::BoxedKernelWrapper<Ret(Args...)>::call(c10::BoxedKernel::makeFromFunction<&route_boxed>(),
          handle(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), args...);
    }
    if (log_dispatch()) log_route(handle(), "native");
    Retagger retag(handle());
    // Braced initialisation converts the arguments left to right.
    std::tuple<typename Vendor<Args>::type...> vendor{Vendor<Args>::convert(retag, args)...};
    retag.check_arguments();
    // No device guard: the vendor's kernels set their own from their tensors,
    // as they do when plain torch calls them.
    Ret out = std::apply(
        [](const auto&... held) {
          return Op::redispatch(
              c10::DispatchKeySet(runtime().vendor_key()), Vendor<Args>::unwrap(held)...);
        },
        vendor);
    return results_from_vendor(retag, std::move(out));
  }
};

template <class Op>
void register_fast(torch::Library& m, const char* name) {
  register_fast_entry(&FastKernel<Op>::entry());
  m.impl(name, TORCH_FN(FastKernel<Op>::call));
}

} // namespace

// Functional ops that dominate inference and training steps. Each must have its
// own autograd formula (never CompositeImplicitAutograd, which torch decomposes
// above the device); tests/routing/test_fast_path.py checks that, and that
// every op here still honours its route.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_fast<at::_ops::add_Tensor>(m, "add.Tensor");
  register_fast<at::_ops::sub_Tensor>(m, "sub.Tensor");
  register_fast<at::_ops::mul_Tensor>(m, "mul.Tensor");
  register_fast<at::_ops::div_Tensor>(m, "div.Tensor");
  register_fast<at::_ops::where_self>(m, "where.self");
  register_fast<at::_ops::pow_Tensor_Scalar>(m, "pow.Tensor_Scalar");
  register_fast<at::_ops::neg>(m, "neg");
  register_fast<at::_ops::exp>(m, "exp");
  register_fast<at::_ops::rsqrt>(m, "rsqrt");
  register_fast<at::_ops::tanh>(m, "tanh");
  register_fast<at::_ops::sigmoid>(m, "sigmoid");
  register_fast<at::_ops::relu>(m, "relu");
  register_fast<at::_ops::silu>(m, "silu");
  register_fast<at::_ops::gelu>(m, "gelu");
  register_fast<at::_ops::mm>(m, "mm");
  register_fast<at::_ops::bmm>(m, "bmm");
  register_fast<at::_ops::addmm>(m, "addmm");
  register_fast<at::_ops::sum_dim_IntList>(m, "sum.dim_IntList");
  register_fast<at::_ops::mean_dim>(m, "mean.dim");
  register_fast<at::_ops::_softmax>(m, "_softmax");
  register_fast<at::_ops::_log_softmax>(m, "_log_softmax");
  register_fast<at::_ops::native_layer_norm>(m, "native_layer_norm");
}

} // namespace torch_fl
