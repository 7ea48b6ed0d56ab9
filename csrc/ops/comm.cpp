// torch.ops.flagos: the collectives' operator. torch.distributed takes a backend object from a creator function
// (torch_fl/distributed.py); the flagos backend is a C++ object (comm/backend.h), and a c10d ProcessGroup is the one
// c10d type that crosses between C++ and Python as an operator argument. So Python registers the vendor's backend
// in a scratch process group, this operator registers the flagos backend that wraps it in the same group under the
// flagos device, and Python takes it from there.
#include "comm/backend.h"
#include "comm/work_keeper.h"
#include "runtime/runtime.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(flagos, m) {
  using namespace torch_fl;
  m.def("comm_wrap(__torch__.torch.classes.c10d.ProcessGroup group) -> ()",
      [](const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
        group->setBackend(c10::DeviceType::PrivateUse1, c10d::ProcessGroup::BackendType::CUSTOM,
            wrap_vendor_backend(group->getBackend(runtime().vendor_type())));
      });
  // torch_fl/distributed.py hands over each Gloo work that Python's collectives return (work_keeper.h)
  m.def("comm_keep(__torch__.torch.classes.c10d.Work work) -> ()",
      [](c10::intrusive_ptr<c10d::Work> work) { keep_until_released(std::move(work)); });
}
