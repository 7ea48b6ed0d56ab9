// A library's worker thread (Gloo's runLoop) drops its reference to a work once the collective is done, after the
// caller has been woken. Whoever drops the last reference destroys the work and its tensors; a tensor that
// Python also holds then needs the GIL. On a worker thread that is fatal at exit: CPython 3.11 ends a thread that
// waits for the GIL while the interpreter finalises (pthread_exit), the unwind meets a noexcept destructor, and
// the process aborts ("terminate called without an active exception"). Keeping one more reference here until
// the worker has let go makes the last release happen on a caller's thread instead, or never (at exit).
#include "comm/work_keeper.h"

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <mutex>
#include <utility>
#include <vector>

namespace torch_fl {
namespace {

struct Kept {
  std::mutex mutex;
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
};

// Never destroyed: works still held by a worker when the process ends stay referenced, so no worker thread
// releases them while the interpreter finalises.
Kept& kept() {
  static auto* k = new Kept();
  return *k;
}

} // namespace

void keep_until_released(c10::intrusive_ptr<c10d::Work> work) {
  std::vector<c10::intrusive_ptr<c10d::Work>> released; // destroyed after the lock, on this thread
  Kept& k = kept();
  {
    std::lock_guard<std::mutex> lock(k.mutex);
    auto& works = k.works;
    for (auto it = works.begin(); it != works.end();) {
      // use_count 1: this list is the only holder, so no other thread can take a reference any more
      if (it->use_count() == 1) {
        released.push_back(std::move(*it));
        it = works.erase(it);
      } else {
        ++it;
      }
    }
    if (work && work.use_count() > 1) works.push_back(std::move(work));
  }
  // `work`, if only this call held it, and the works released above go here, on a thread that may take the GIL
}

} // namespace torch_fl
