#include "runtime/autograd_threads.h"

#include "runtime/runtime.h"

#include <ATen/ops/zeros.h>
#include <torch/csrc/autograd/autograd.h>

namespace torch_fl {

// The autograd engine runs flagos backward work on one thread per device index. Such a thread can still be
// releasing Python objects (or first taking the GIL) just after backward() has returned; if the interpreter is
// finalising by then, that thread aborts the process. A tiny backward on every device in use waits until each
// thread has finished what it had and is idle again. Called at exit with the GIL released.
void settle_autograd_threads() {
  if (!runtime_ready()) return;
  for (c10::DeviceIndex i = 0; i < runtime().device_count(); ++i) {
    if (!runtime().in_use(i)) continue;
    at::Tensor x = at::zeros({1}, at::TensorOptions().device(flagos_device(i))).requires_grad_(true);
    torch::autograd::backward({x.sum()});
  }
}

} // namespace torch_fl
