// Collective work that a library's own thread still holds, kept until that thread has let go (work_keeper.cpp).
#pragma once

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Work;
} // namespace c10d

namespace torch_fl {

// Holds `work` until every other holder has released it, so that the last release never happens on a
// library's worker thread. Releases, on the calling thread, the works kept earlier that only this holds now.
void keep_until_released(c10::intrusive_ptr<c10d::Work> work);

} // namespace torch_fl
