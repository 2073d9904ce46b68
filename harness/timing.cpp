// Host timing with std::chrono::steady_clock (CUDA events come with device backends). Two clock
// reads per iteration and one reduction at the end keep the loop within noise of a bare loop
// (measured in bench/harness_overhead_bench.cpp).
#include "harness/timing.h"

#include <chrono>

namespace dts {

std::vector<double> time_iterations(Communicator& control, int warmup, int iters, const std::function<void()>& iteration) {
  control.barrier();
  for (int i = 0; i < warmup; ++i) iteration();
  std::vector<double> local(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    iteration();
    local[static_cast<size_t>(i)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  std::vector<double> slowest(control.rank() == 0 ? local.size() : 0);
  control.reduce(local.data(), control.rank() == 0 ? slowest.data() : nullptr, local.size(), DType::f64, ReduceOp::max, 0);
  return slowest;
}

}  // namespace dts
