// JunitSink's cost per record within one long case (a convergence run writes ~1,100 records into
// one testcase): 1,000 and 10,000 records, every record passing or every one failing. A write
// costs its record's line and the case's bounded tail, so the time per record (and the bytes per
// record, a counter) is the same at both lengths; when each write rewrote the whole case, it grew
// tenfold from 1,000 to 10,000. Run by hand, e.g.
//   build/bench/junit_sink_bench --benchmark_repetitions=3
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "results/junit_sink.h"
#include "results/record.h"

namespace {

dts::Record convergence_record(dts::Verdict verdict) {
  dts::Record r;
  r.run_id = "bench";
  r.timestamp = "2024-05-01T12:00:00.000Z";
  r.suite = "convergence";
  r.case_id = "gossip/f32/sgd";
  r.metric = "loss";
  r.value = 0.125;
  r.verdict = verdict;
  r.detail = "epoch 17";
  r.labels.backend = "mpi";
  r.labels.world_size = 3;
  r.labels.nodes = 1;
  r.labels.ranks_per_node = 3;
  r.labels.host = "bench";
  return r;
}

void write_one_case(benchmark::State& state, dts::Verdict verdict) {
  const auto records = static_cast<int>(state.range(0));
  const std::string path =
      (std::filesystem::temp_directory_path() / ("junit_sink_bench_" + std::to_string(::getpid()) + ".xml")).string();
  const dts::Record record = convergence_record(verdict);
  int64_t bytes = 0;
  for (auto _ : state) {
    dts::JunitSink sink(path);
    for (int i = 0; i < records; ++i) sink.write(record);
    sink.close();
    bytes += sink.bytes_written();
  }
  std::filesystem::remove(path);
  state.SetItemsProcessed(state.iterations() * records);
  state.counters["bytes_per_record"] =
      benchmark::Counter(static_cast<double>(bytes) / static_cast<double>(state.iterations() * records));
  // Seconds per record (an inverted rate): the figure to compare between 1,000 and 10,000.
  state.counters["time_per_record"] = benchmark::Counter(static_cast<double>(state.iterations() * records),
                                                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_JunitOneCasePassing(benchmark::State& state) { write_one_case(state, dts::Verdict::info); }
void BM_JunitOneCaseFailing(benchmark::State& state) { write_one_case(state, dts::Verdict::fail); }

}  // namespace

BENCHMARK(BM_JunitOneCasePassing)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_JunitOneCaseFailing)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
