// The timed loop. Each mark costs one clock read (host) or one event record (device), and the
// reduction across ranks comes after the loop, which keeps it within noise of a bare loop
// (measured in bench/harness_overhead_bench.cpp).
#include "harness/timing.h"

#include <string>

namespace dts {

std::vector<double> time_iterations(Communicator& control, Communicator& timed, int warmup, int iters,
                                    const std::function<void()>& iteration) {
  control.barrier();
  for (int i = 0; i < warmup; ++i) iteration();
  // The warm-up's work must be done before the first mark, or an asynchronous library's first
  // iteration would carry it.
  timed.synchronize();
  const std::unique_ptr<Timer> timer = timed.timer(static_cast<size_t>(iters) + 1);
  timer->mark();
  for (int i = 0; i < iters; ++i) {
    iteration();
    timer->mark();
  }
  std::vector<double> local = timer->intervals();
  if (local.size() != static_cast<size_t>(iters)) {
    throw Error(Error::Kind::backend, "the timer of " + std::string(timed.backend()) + " gave " +
                                          std::to_string(local.size()) + " intervals for " + std::to_string(iters) +
                                          " iterations");
  }
  std::vector<double> slowest(control.rank() == 0 ? local.size() : 0);
  control.reduce(local.data(), control.rank() == 0 ? slowest.data() : nullptr, local.size(), DType::f64, ReduceOp::max, 0);
  return slowest;
}

}  // namespace dts
