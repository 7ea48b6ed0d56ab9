// The provider route's call into Python, through the dispatcher. torch_fl/routing/publish.py registers two Python
// kernels for every operator a provider route serves, on dispatch keys no backend of torch uses: the one on
// kProviderCallKey runs the provider's kernel, the one on kProviderRecordKey runs it while the replay recorder
// watches and hands the recording back through the `flagos::replay_submit` operator (csrc/ops/replay.cpp). The router redispatches the call, with the vendor
// tensors on the stack, to one of those keys; torch's own Python bridge converts the boxed arguments and the
// results, so the core needs no CPython header.
#pragma once

#include <c10/core/DispatchKey.h>

namespace torch_fl {

namespace replay {
struct Recording;
}

inline constexpr c10::DispatchKey kProviderCallKey = c10::DispatchKey::PrivateUse3;
inline constexpr c10::DispatchKey kProviderRecordKey = c10::DispatchKey::PrivateUse2;

// Install the redispatch as the router's provider hook (once Python has registered the kernels).
void enable_provider_calls();

// The recording the provider call on this thread is filling in, or nullptr when it records nothing.
replay::Recording* pending_recording();

} // namespace torch_fl
