// Waiting out the autograd engine's flagos threads before the interpreter finalises (autograd_threads.cpp).
#pragma once

namespace torch_fl {

// Returns once every device thread of the autograd engine that flagos used has finished its work. Called at exit
// with the GIL released (torch_fl._core.settle_autograd_threads).
void settle_autograd_threads();

} // namespace torch_fl
