// dtsuite's timed loop (DESIGN.md, Timing): barrier, warm-up iterations discarded, then timed
// iterations; the time of an iteration is the slowest rank's.
#pragma once
#include <functional>
#include <vector>

#include "comm/communicator.h"

namespace dts {

// Returns the per-iteration times (seconds, slowest rank) on rank 0 of `control`; an empty vector
// elsewhere. Collective over `control`. The iterations are timed by `timed`'s own Timer: the host
// clock for host backends, events on the library's stream for device ones (nccl-tests' way), so
// an asynchronous library is timed by when its work ran, not when its calls returned.
std::vector<double> time_iterations(Communicator& control, Communicator& timed, int warmup, int iters,
                                    const std::function<void()>& iteration);

}  // namespace dts
