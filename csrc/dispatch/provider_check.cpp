// See provider_check.h.
#include "dispatch/provider_check.h"
#include "dispatch/router.h"

#include <ATen/ATen.h>

namespace torch_fl {
namespace {

c10::IValue to_meta(const c10::IValue& v) {
  auto meta = [](const at::Tensor& t) {
    return t.defined() ? at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta)) : t;
  };
  if (v.isTensor()) return meta(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(meta(t));
    return out;
  }
  if (v.isList()) {
    bool tensors = false;
    for (const c10::IValue& item : v.toList()) tensors = tensors || item.isTensor();
    if (!tensors) return v;
    c10::List<std::optional<at::Tensor>> out;
    for (const c10::IValue& item : v.toList()) {
      out.push_back(item.isTensor() ? std::optional<at::Tensor>(meta(item.toTensor())) : std::nullopt);
    }
    return out;
  }
  return v;
}

bool has_device_argument(const c10::FunctionSchema& schema) {
  for (const auto& arg : schema.arguments()) {
    c10::TypePtr type = arg.real_type();
    if (auto opt = type->castRaw<c10::OptionalType>()) type = opt->getElementType();
    if (type->kind() == c10::TypeKind::DeviceObjType) return true;
  }
  return false;
}

// What the op gives for these arguments, from its Meta kernel; empty when torch has none for it.
std::vector<c10::IValue> expected_returns(const c10::OperatorHandle& op, const std::vector<c10::IValue>& arguments) {
  if (!op.hasKernelForDispatchKey(c10::DispatchKey::Meta)) return {};
  torch::jit::Stack meta;
  for (const c10::IValue& v : arguments) meta.push_back(to_meta(v));
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
  } catch (const c10::Error&) {
    return {}; // the meta kernel refuses what the vendor kernel takes: compare what we can
  }
  return meta;
}

template <class... T>
[[noreturn]] void mismatch(const c10::OperatorHandle& op, const std::string& provider, const T&... what) {
  fail_provider_result(provider, op.operator_name(), c10::str(what...));
}

void check_tensor(const c10::OperatorHandle& op, const std::string& provider, size_t index, const at::Tensor& got,
    const c10::IValue* expected, bool check_device, c10::Device vendor_device) {
  if (!got.defined()) {
    if (expected != nullptr && expected->isTensor() && expected->toTensor().defined()) {
      mismatch(op, provider, "result ", index, " is undefined");
    }
    return;
  }
  if (check_device && got.device() != vendor_device) {
    mismatch(op, provider, "result ", index, " is on ", got.device(), ", not on the call's device ", vendor_device);
  }
  if (expected == nullptr || !expected->isTensor() || !expected->toTensor().defined()) return;
  const at::Tensor& want = expected->toTensor();
  if (got.sizes() != want.sizes()) {
    mismatch(op, provider, "result ", index, " has shape ", got.sizes(), " where the op gives ", want.sizes());
  }
  if (got.scalar_type() != want.scalar_type()) {
    mismatch(op, provider, "result ", index, " has dtype ", got.scalar_type(), " where the op gives ",
        want.scalar_type());
  }
}

} // namespace

void fail_provider_result(const std::string& provider, const c10::OperatorName& op, const std::string& what) {
  const std::string name = short_op_name(op);
  TORCH_CHECK(false, "provider '", provider, "' returned a wrong result for ", name, ": ", what,
      ". Fix the provider's kernel for ", name, ", or route the op elsewhere (", override_variable(name), "=native)");
}

void check_provider_results(const c10::OperatorHandle& op, const std::string& provider,
    const std::vector<c10::IValue>& arguments, const torch::jit::Stack& stack, c10::Device vendor_device) {
  const auto& schema = op.schema();
  const auto& returns = schema.returns();
  if (stack.size() < returns.size()) mismatch(op, provider, "it left ", stack.size(), " values, the schema has ", returns.size());
  const std::vector<c10::IValue> expected = expected_returns(op, arguments);
  const bool check_device = !has_device_argument(schema);
  const size_t first = stack.size() - returns.size();
  for (size_t r = 0; r < returns.size(); ++r) {
    const c10::IValue& got = stack[first + r];
    const c10::AliasInfo* alias = returns[r].alias_info();
    if (alias != nullptr && alias->isWrite()) {
      // In-place and out=: the result is the argument the op writes, nothing else.
      for (size_t i = 0; i < schema.arguments().size(); ++i) {
        const c10::AliasInfo* arg_alias = schema.arguments()[i].alias_info();
        if (arg_alias == nullptr || !(*arg_alias == *alias) || !arguments[i].isTensor()) continue;
        if (!got.isTensor() || !got.toTensor().is_same(arguments[i].toTensor())) {
          mismatch(op, provider, "result ", r, " must be its argument '", schema.arguments()[i].name(),
              "' (written in place), but it is another tensor");
        }
      }
      continue;
    }
    const c10::IValue* want = r < expected.size() ? &expected[r] : nullptr;
    if (got.isTensor()) {
      check_tensor(op, provider, r, got.toTensor(), want, check_device, vendor_device);
    } else if (got.isTensorList()) {
      auto list = got.toTensorList();
      if (want != nullptr && want->isTensorList() && want->toTensorList().size() != list.size()) {
        mismatch(op, provider, "result ", r, " holds ", list.size(), " tensors where the op gives ",
            want->toTensorList().size());
      }
      for (size_t k = 0; k < list.size(); ++k) {
        const c10::IValue item = want != nullptr && want->isTensorList() ? c10::IValue(want->toTensorList().get(k)) : c10::IValue();
        check_tensor(op, provider, r, list.get(k), want != nullptr ? &item : nullptr, check_device, vendor_device);
      }
    } else if (returns[r].type()->kind() == c10::TypeKind::TensorType) {
      mismatch(op, provider, "result ", r, " is not a tensor");
    }
  }
}

} // namespace torch_fl
