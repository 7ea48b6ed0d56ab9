// The cpu route: copy the flagos arguments to the host, run the CPU kernel, copy results back.
//
// The moves are the device's own (data_movement.h), made without the dispatcher, so this route
// never re-enters the router, whatever the routes of _to_copy or copy_ are. Around the moves it
// applies what a generic CPU fallback cannot know about flagos: the device rule, Device arguments
// (factories), generators, and where results go (the flagos device of the call, unless a Device
// argument names another device).
#include "dispatch/data_movement.h"
#include "dispatch/decompositions.h"
#include "dispatch/router.h"
#include "runtime/runtime.h"

#include <ATen/core/Generator.h>
#include <ATen/ops/_copy_from_and_resize.h>

namespace torch_fl {

at::Generator vendor_generator_of(const at::Generator& gen); // runtime/generator.cpp

namespace {

struct MovedTensor {
  at::Tensor original;
  at::Tensor host;
  uint32_t host_version; // the copy's write count before the kernel ran
};

uint32_t version_of(const at::Tensor& t) {
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  return impl->is_inference() ? 0 : impl->version_counter().current_version(); // inference tensors count nothing
}

// A written argument's host copy goes back into the caller's flagos tensor (resized when the
// kernel resized it), by the device's own copy kernel. The writes the kernel counted on the copy
// count on the caller's tensor too: list ops count their own (autograd's check that a saved
// tensor was not modified reads it); ops that torch counts above the router count none here.
void write_back(const MovedTensor& moved) {
  if (moved.original.sizes() != moved.host.sizes()) {
    at::_copy_from_and_resize(moved.host, moved.original); // the device's kernel (aten/kernels.cpp), not the router
  } else {
    copy_between(moved.original, moved.host, /*non_blocking=*/false);
  }
  for (uint32_t n = version_of(moved.host) - moved.host_version; n > 0; --n) {
    moved.original.unsafeGetTensorImpl()->bump_version();
  }
}

at::Tensor to_host(const at::Tensor& t, std::vector<MovedTensor>& moved) {
  if (!is_flagos(t)) return t;
  at::Tensor host = host_copy(t);
  moved.push_back({t, host, version_of(host)});
  return host;
}

} // namespace

void run_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& args = op.schema().arguments();
  const size_t first = stack->size() - args.size();
  c10::DeviceIndex device = -1;
  bool results_elsewhere = false; // a Device argument names a device other than flagos
  c10::SmallVector<size_t, 1> unset_generators;
  const bool host_vendor = runtime().vendor_type() == c10::DeviceType::CPU;
  // Per argument slot: the tensors moved to the host (a list argument moves several).
  std::vector<std::vector<MovedTensor>> moved(args.size());
  std::vector<c10::IValue> originals(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    c10::IValue& v = (*stack)[first + i];
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (!is_flagos(t)) continue;
      check_same_device(device, t.device().index(), op);
      originals[i] = v;
      v = to_host(t, moved[i]);
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> host;
      for (const at::Tensor& t : v.toTensorList()) {
        if (is_flagos(t)) check_same_device(device, t.device().index(), op);
        host.push_back(to_host(t, moved[i]));
      }
      if (moved[i].empty()) continue;
      originals[i] = v;
      v = host;
    } else if (v.isList()) { // List[Optional[Tensor]] (index, index_put)
      c10::List<std::optional<at::Tensor>> host;
      bool any = false;
      for (const c10::IValue& item : v.toList()) {
        if (item.isTensor()) {
          const at::Tensor& t = item.toTensor();
          if (is_flagos(t)) check_same_device(device, t.device().index(), op);
          any = any || is_flagos(t);
          host.push_back(to_host(t, moved[i]));
        } else {
          host.push_back(std::nullopt);
        }
      }
      if (!any) continue;
      originals[i] = v;
      v = host;
    } else if (v.isDevice()) {
      if (v.toDevice().type() == c10::DeviceType::PrivateUse1) {
        check_same_device(device, v.toDevice().index(), op);
        v = c10::Device(c10::DeviceType::CPU);
      } else {
        results_elsewhere = true;
      }
    } else if (v.isGenerator() && v.toGenerator().device().type() == c10::DeviceType::PrivateUse1) {
      TORCH_CHECK(host_vendor, "the cpu route of ", short_op_name(op.operator_name()),
          " cannot draw from a flagos generator on ", runtime().name(),
          " (its state lives on the accelerator); pass a CPU generator or route the op natively");
      v = vendor_generator_of(v.toGenerator());
    } else if (v.isNone() && is_generator_argument(args[i])) {
      unset_generators.push_back(first + i);
    }
  }
  if (host_vendor) { // emulation: the flagos generator is a CPU one, so seeding flagos still applies
    for (size_t slot : unset_generators) {
      (*stack)[slot] = runtime().vendor_generator(device < 0 ? runtime().current_device() : device);
    }
  }

  Decomposition decomposed = op.hasKernelForDispatchKey(c10::DispatchKey::CPU) ? nullptr
                                                                                : find_decomposition(op.operator_name());
  if (decomposed != nullptr) {
    decomposed(stack); // torch has no CPU kernel for it (fused RNN cells): its parts run on the host
  } else {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  }

  for (size_t i = 0; i < args.size(); ++i) {
    const c10::AliasInfo* alias = args[i].alias_info();
    if (alias == nullptr || !alias->isWrite()) continue;
    for (const MovedTensor& m : moved[i]) write_back(m);
  }

  const auto& returns = op.schema().returns();
  const size_t n = returns.size();
  for (size_t r = 0; r < n; ++r) {
    c10::IValue& value = (*stack)[stack->size() - n + r];
    const c10::AliasInfo* alias = returns[r].alias_info();
    if (alias != nullptr && alias->isWrite()) {
      // In-place and out=: the caller's own argument, as the kernel returned its host copy.
      for (size_t i = 0; i < args.size(); ++i) {
        const c10::AliasInfo* arg_alias = args[i].alias_info();
        if (arg_alias != nullptr && *arg_alias == *alias && !originals[i].isNone()) value = originals[i];
      }
      continue;
    }
    TORCH_CHECK(alias == nullptr, short_op_name(op.operator_name()),
        " returns a view of its input, and the cpu route computes on a host copy, so it cannot return one; "
        "route it natively (FLAGOS_OP_<op>=native)");
    if (device < 0 || results_elsewhere) continue;
    if (value.isTensor()) {
      const at::Tensor& t = value.toTensor();
      if (t.defined() && t.is_cpu()) value = flagos_copy(t, device);
    } else if (value.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : value.toTensorList()) out.push_back(t.defined() && t.is_cpu() ? flagos_copy(t, device) : t);
      value = out;
    }
  }
}

} // namespace torch_fl
