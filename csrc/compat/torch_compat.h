// What differs between the torch lines torch-fl builds against (2.9 and later; torch_fl/_torch_floor.py holds
// the floor): each difference is a wrapper or a feature macro here, picked from torch's own version macros, so a
// source file never tests a torch version itself and a new line's difference has one place to go. Each branch
// names the lines it serves. What a line lacks entirely is supplied beside this header, in compat/.
#pragma once

#include <c10/core/impl/PyObjectSlot.h>
#include <torch/version.h>

// True when the torch being compiled against is major.minor or newer.
#define TORCH_FL_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// c10d::Backend::setGroupUid: virtual from 2.10 on, so a wrapping backend can pass the uid on to the one it
// wraps. On 2.9 it is not virtual and a wrapper has nothing to override (NCCL takes its uid from its options).
#define TORCH_FL_BACKEND_SET_GROUP_UID_VIRTUAL TORCH_FL_TORCH_AT_LEAST(2, 10)

// Whether torch registers an autograd fallback for AutogradPrivateUse1 itself (2.10 and later, as for CPU and
// CUDA). On 2.9 it has none, and compat/autograd_fallback.cpp registers the same one.
#define TORCH_FL_TORCH_HAS_PRIVATEUSE1_AUTOGRAD_FALLBACK TORCH_FL_TORCH_AT_LEAST(2, 10)

// c10::DeviceAllocator::getMemoryInfo (torch.accelerator.get_memory_info): from 2.10 on. On 2.9 torch has no
// such question, and torch.flagos.mem_get_info answers alone.
#define TORCH_FL_DEVICE_ALLOCATOR_HAS_MEMORY_INFO TORCH_FL_TORCH_AT_LEAST(2, 10)

// DeviceGuardImplInterface::getDeviceCapability (torch.accelerator.get_device_capability): from 2.10 on.
#define TORCH_FL_GUARD_HAS_DEVICE_CAPABILITY TORCH_FL_TORCH_AT_LEAST(2, 10)

// torch.profiler's PrivateUse1 activity runs the kineto activity profilers a backend registers: from 2.13 on. Older
// lines time flagos operators through the PrivateUse1 profiler stubs (runtime/profiler_stubs.cpp) instead.
#define TORCH_FL_KINETO_PLUGIN TORCH_FL_TORCH_AT_LEAST(2, 13)

namespace torch_fl::compat {

// Whether a Python object is attached to a TensorImpl or StorageImpl (the slot's raw pointer, no interpreter
// check: a caller asks only whether one exists).
inline bool has_pyobj(const c10::impl::PyObjectSlot& slot) {
#if TORCH_FL_TORCH_AT_LEAST(2, 10)
  // 2.10 and later: the slot holds the pointer alone and reads it inline.
  return slot.load_pyobj() != nullptr;
#else
  // 2.9: the pointer carries an ownership tag bit, which the untagged read strips.
  return slot._unchecked_untagged_pyobj() != nullptr;
#endif
}

} // namespace torch_fl::compat
