// The harness's own overhead: dtsuite's timed loop (harness/timing.cpp, through the `mpi`
// backend with its watchdog observer, as `dtsuite run` does) against a bare MPI_Allreduce loop,
// at 4 KiB and 64 MiB. Run under MPI, e.g.
//   mpirun -np 2 build/bench/harness_overhead_bench --benchmark_repetitions=5
// Every rank runs the same fixed iteration counts (collectives need all ranks in step); rank 0
// reports. Time is per all_reduce, wall clock, manual timing.
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "harness/timing.h"

namespace {

// Operations per benchmark iteration: ~20 ms of work at 4 KiB (5000 x ~4 us) so the clock reads
// and the loop's barrier vanish in the average; at 64 MiB (~0.1 s each here) 3 are plenty.
int operations_for(int64_t bytes) { return bytes <= (int64_t{1} << 12) ? 5000 : 3; }

struct Fixture {
  std::unique_ptr<dts::Communicator> tested, control;
  Fixture() {
    dts::CommOptions options;
    options.observer = std::make_shared<dts::OpObserver>();
    tested = dts::make_communicator("mpi", options);
    control = dts::make_communicator("mpi");
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

void BM_BareMpiAllreduce(benchmark::State& state) {
  const auto count = static_cast<int>(state.range(0) / 4);
  std::vector<float> in(static_cast<size_t>(count), 1.0f), out(static_cast<size_t>(count));
  const int ops = operations_for(state.range(0));
  for (auto _ : state) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < ops; ++i) MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    state.SetIterationTime(elapsed.count() / ops);
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_DtsuiteTimedAllreduce(benchmark::State& state) {
  Fixture& f = fixture();
  const auto count = static_cast<size_t>(state.range(0) / 4);
  std::vector<float> in(count, 1.0f), out(count);
  const int ops = operations_for(state.range(0));
  double median_sum = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<double> times = dts::time_iterations(*f.control, *f.tested, 0, ops, [&] {
      f.tested->all_reduce(in.data(), out.data(), count, dts::DType::f32, dts::ReduceOp::sum);
    });
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    state.SetIterationTime(elapsed.count() / ops);
    if (!times.empty()) {
      std::vector<double> sorted = times;
      std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>(sorted.size() / 2), sorted.end());
      median_sum += sorted[sorted.size() / 2];
    }
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
  // What dtsuite would report (median of slowest-rank iteration times), for comparison.
  state.counters["reported_median_us"] = median_sum / static_cast<double>(state.iterations()) * 1e6;
}

// Fixed iteration counts: adaptive counts could differ between ranks and deadlock the job.
// Bare and dtsuite loops alternate per size, so slow drift of a shared machine hits both alike.
BENCHMARK(BM_BareMpiAllreduce)->Arg(4 << 10)->UseManualTime()->Iterations(20)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DtsuiteTimedAllreduce)->Arg(4 << 10)->UseManualTime()->Iterations(20)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BareMpiAllreduce)->Arg(64 << 20)->UseManualTime()->Iterations(10)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DtsuiteTimedAllreduce)->Arg(64 << 20)->UseManualTime()->Iterations(10)->Unit(benchmark::kMicrosecond);

class SilentReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  benchmark::Initialize(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    SilentReporter silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  fixture().tested.reset();
  fixture().control.reset();
  benchmark::Shutdown();
  MPI_Finalize();
  return 0;
}
