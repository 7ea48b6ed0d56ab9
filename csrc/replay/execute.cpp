// Running a recorded plan: the provider's allocations, fills and copies through torch's own kernels, its launches
// through the vendor runtime (runtime/module_launch.h), in the recorded order, on the current stream.
#include "replay/plan.h"
#include "runtime/runtime.h"

#include <ATen/ops/as_strided.h>
#include <ATen/ops/empty_strided.h>
#include <c10/util/SmallVector.h>

namespace torch_fl::replay {
namespace {

at::Tensor allocate(const Alloc& a, const c10::TensorOptions& options) {
  if (a.storage_offset == 0) return at::empty_strided(a.sizes, a.strides, options.dtype(a.dtype));
  // A view the provider made of a larger buffer before its first use: allocate the buffer, view it the same way.
  int64_t extent = a.storage_offset + 1;
  for (size_t d = 0; d < a.sizes.size(); ++d) {
    if (a.sizes[d] == 0) return at::empty_strided(a.sizes, a.strides, options.dtype(a.dtype));
    extent += (a.sizes[d] - 1) * a.strides[d];
  }
  at::Tensor base = at::empty_strided({extent}, {1}, options.dtype(a.dtype));
  return at::as_strided(base, a.sizes, a.strides, a.storage_offset);
}

uint64_t pointer_bits(const void* p, int64_t offset) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p) + offset);
}

bool empty_grid(const ModuleLaunch& l) { return l.grid[0] == 0 || l.grid[1] == 0 || l.grid[2] == 0; }

void launch(const Launch& l, const std::vector<at::Tensor>& slots, const c10::SmallVector<at::Tensor, 4>& allocs,
    c10::DeviceIndex device) {
  if (empty_grid(l.config)) return; // as Triton's launcher: an empty grid launches nothing
  c10::SmallVector<uint64_t, 32> values(l.params.size());
  c10::SmallVector<void*, 32> params(l.params.size());
  for (size_t i = 0; i < l.params.size(); ++i) {
    const Param& p = l.params[i];
    switch (p.kind) {
      case Param::Kind::ArgPointer: values[i] = pointer_bits(slots[p.index].data_ptr(), p.offset); break;
      case Param::Kind::AllocPointer: values[i] = pointer_bits(allocs[p.index].data_ptr(), p.offset); break;
      case Param::Kind::Bytes: values[i] = p.bits; break;
    }
    params[i] = &values[i]; // the driver reads each parameter's own size from the start of its slot (little-endian)
  }
  runtime().launch_module(l.config, device, params.data());
}

at::Tensor view_of(
    const View& v, const std::vector<at::Tensor>& slots, const c10::SmallVector<at::Tensor, 4>& allocs) {
  if (v.kind == View::Kind::Arg) {
    const at::Tensor& arg = slots[v.index];
    return at::as_strided(arg, v.sizes, v.strides, arg.storage_offset() + v.offset);
  }
  return at::as_strided(allocs[v.index], v.sizes, v.strides, v.offset);
}

} // namespace

void run_plan(const Plan& plan, const std::vector<at::Tensor>& slots, c10::DeviceIndex device,
    torch::jit::Stack* stack) {
  const c10::TensorOptions options = c10::TensorOptions().device(runtime().vendor_device(device));
  c10::SmallVector<at::Tensor, 4> allocs(plan.allocs.size());
  for (const Step& step : plan.steps) {
    switch (step.kind) {
      case Step::Kind::Alloc: allocs[step.index] = allocate(plan.allocs[step.index], options); break;
      case Step::Kind::Fill: allocs[step.index].fill_(step.fill_value); break;
      case Step::Kind::Launch: launch(plan.launches[step.index], slots, allocs, device); break;
      case Step::Kind::Copy: {
        const Copy& c = plan.copies[step.index];
        view_of(c.dst, slots, allocs).copy_(view_of(c.src, slots, allocs));
        break;
      }
    }
  }
  for (const Output& out : plan.outputs) {
    if (out.kind == Output::Kind::Arg) {
      stack->emplace_back(slots[out.index]);
    } else if (out.whole) {
      stack->emplace_back(allocs[out.index]);
    } else {
      stack->emplace_back(at::as_strided(allocs[out.index], out.sizes, out.strides, out.storage_offset));
    }
  }
}

void launch_values(const ModuleLaunch& config, const std::vector<uint64_t>& values, c10::DeviceIndex device) {
  if (empty_grid(config)) return;
  std::vector<uint64_t> held(values);
  std::vector<void*> params(held.size());
  for (size_t i = 0; i < held.size(); ++i) params[i] = &held[i];
  runtime().launch_module(config, device, params.data());
}

bool Launch::operator==(const Launch& o) const {
  const ModuleLaunch& a = config;
  const ModuleLaunch& b = o.config;
  return a.function == b.function && a.shared_bytes == b.shared_bytes && std::equal(a.grid, a.grid + 3, b.grid) &&
      std::equal(a.block, a.block + 3, b.block) && params == o.params;
}

bool Step::operator==(const Step& o) const {
  if (kind != o.kind || index != o.index) return false;
  if (kind != Kind::Fill) return true;
  const c10::Scalar& a = fill_value;
  const c10::Scalar& b = o.fill_value;
  if (a.type() != b.type()) return false;
  if (a.isBoolean()) return a.toBool() == b.toBool();
  if (a.isIntegral(false)) return a.toLong() == b.toLong();
  return a.toDouble() == b.toDouble() || (a.toDouble() != a.toDouble() && b.toDouble() != b.toDouble());
}

} // namespace torch_fl::replay
