// DDP's training step on model A (training_step_bench.cpp) under MPI: the step's wall time, its
// compute (forward, backward, optimizer) and the communication it leaves exposed (the time
// inside the communicator's calls during backward, where MPI does the all_reduce's work, and the
// wait for it after backward), at dtsuite's default buckets (a quarter of the
// gradient), at PyTorch's 25 MiB (model A's 16.8 MB of gradients in a 1 MiB-capped first bucket and
// one more that starts when backward ends) and at fixed smaller ones. Run, e.g.
//   mpirun -np 2 build-dir/strategies/ddp_step_bench [--benchmark_repetitions=5]
// Every rank runs the same fixed iteration counts (the steps are collective); rank 0 reports its
// own StepReport, as the equivalence suite's step_time and exposed_comm_time do.
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "strategies/ddp/ddp_strategy.h"
#include "strategies/workload.h"

namespace dts {
namespace {

// Model A with 64 rows per rank, SGD as the equivalence suite runs it.
const ModelSpec kModelA{.layers = 5, .width = 1024, .input = 1024, .classes = 10};
constexpr int64_t kRowsPerRank = 64;

std::unique_ptr<Communicator> comm;  // made after MPI_Init, freed before MPI_Finalize (main)

void bm_ddp_step(benchmark::State& state) {
  ParallelConfig config;
  config.dp = comm->size();
  config.train.optimizer = OptimizerKind::sgd;
  config.train.sgd = {.lr = 0.05, .momentum = 0.9, .weight_decay = 0};
  config.bucket_bytes = static_cast<size_t>(state.range(0));
  DdpStrategy<float> ddp(kModelA, config, *comm);
  const int64_t rows = kRowsPerRank * comm->size();
  const Batch batch = make_batch(kModelA, 0, rows);
  ddp.step(batch);  // first touch of every buffer, outside the timing
  double compute = 0, exposed = 0, comm_time = 0, step = 0;
  for (auto _ : state) {
    MPI_Barrier(MPI_COMM_WORLD);  // every rank starts the step together
    const StepReport report = ddp.step(batch);
    state.SetIterationTime(report.step_time);
    step += report.step_time;
    compute += report.compute_time;
    exposed += report.exposed_comm_time;
    comm_time += report.comm_time;
  }
  const double iterations = static_cast<double>(state.iterations());
  state.counters["compute_ms"] = 1e3 * compute / iterations;
  state.counters["comm_ms"] = 1e3 * comm_time / iterations;
  state.counters["exposed_ms"] = 1e3 * exposed / iterations;
  state.counters["exposed_fraction"] = exposed / step;
  state.counters["buckets"] = static_cast<double>(ddp.buckets().size());
}

// Fixed iteration counts: adaptive counts could differ between ranks and deadlock the job.
BENCHMARK(bm_ddp_step)
    ->Name("ddp_step/A/f32/sgd/bucket_bytes")
    ->Arg(0)                  // dtsuite's default: a quarter of the gradient (4.2 MB: 3 buckets)
    ->Arg(int64_t{25} << 20)  // PyTorch's default: model A's gradients in two buckets
    ->Arg(int64_t{8} << 20)   // two 1024 x 1024 layers per bucket
    ->Arg(int64_t{4} << 20)   // one layer per bucket (a bucket closes at a parameter's end)
    ->Iterations(20)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

class SilentReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace
}  // namespace dts

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  benchmark::Initialize(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  dts::comm = dts::make_communicator("mpi");
  if (rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    dts::SilentReporter silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  dts::comm.reset();
  benchmark::Shutdown();
  MPI_Finalize();
  return 0;
}
