// The pipelined ring against the MPI library's own collectives, measured alternately in one job:
// `mpi` and `ring(mpi)` (or --ring SPEC) take turns on every collective and size, round after
// round, so a shared machine's drift hits both alike. Run under MPI, one job per rank count
// (scripts/bench/ring_vs_mpi.sh runs 2, 3 and 4 ranks), e.g.
//   mpirun -np 2 build/bench/ring_vs_mpi --minbytes 1M --maxbytes 64M --rounds 7
// Timing is dtsuite's (harness/timing.h: back-to-back calls, each the slowest rank's); busbw
// uses nccl-tests' factors. Rank 0 prints one markdown row per collective and size: the median
// busbw of each backend over every round's calls, their ratio, and the range of the per-round
// ratios (how far one round alone could mislead). It asserts nothing.
#include <CLI/CLI.hpp>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/dtype.h"
#include "core/error.h"
#include "harness/timing.h"
#include "suites/collectives/collective.h"

namespace {

using dts::Collective;

struct Settings {
  std::vector<std::string> collectives{"all_reduce", "reduce_scatter", "all_gather"};
  std::string min_bytes = "1M", max_bytes = "64M", ring = "ring(mpi)", chunk_bytes;
  int step_factor = 2, rounds = 7, iters = 5, warmup = 1;
  double timeout_seconds = 300;  // dtsuite's default -T: waits poll with a deadline, as in a run
  bool in_place = false, header = true;
};

struct Series {
  std::vector<double> mpi, ring, ratio;  // per-call busbw of each backend; per-round ratio of medians
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const auto middle = v.begin() + static_cast<long>(v.size() / 2);
  std::nth_element(v.begin(), middle, v.end());
  return *middle;
}

// One call of `c` on `size` bytes (nccl-tests' full-buffer size) in f32/sum, out of place or in
// place (NCCL's convention: reduce_scatter's out and all_gather's in are this rank's slice).
struct Call {
  Collective collective;
  size_t count;  // the API count: per rank for reduce_scatter's output and all_gather's input
  bool in_place;

  void operator()(dts::Communicator& comm, std::vector<float>& in, std::vector<float>& out) const {
    const size_t slice = static_cast<size_t>(comm.rank()) * count;
    switch (collective) {
      case Collective::all_reduce:
        comm.all_reduce(in_place ? out.data() : in.data(), out.data(), count, dts::DType::f32, dts::ReduceOp::sum);
        break;
      case Collective::reduce_scatter:
        if (in_place) {
          comm.reduce_scatter(out.data(), out.data() + slice, count, dts::DType::f32, dts::ReduceOp::sum);
        } else {
          comm.reduce_scatter(in.data(), out.data(), count, dts::DType::f32, dts::ReduceOp::sum);
        }
        break;
      case Collective::all_gather:
        comm.all_gather(in_place ? out.data() + slice : in.data(), out.data(), count, dts::DType::f32);
        break;
      default: throw dts::Error(dts::Error::Kind::invalid_argument, "not a ring collective");
    }
  }
};

std::string size_text(int64_t bytes) {
  if (bytes % (int64_t{1} << 20) == 0) return std::to_string(bytes >> 20) + "M";
  if (bytes % (int64_t{1} << 10) == 0) return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes);
}

int run(const Settings& s) {
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  // As `dtsuite run` builds its stack: an observer and the timeout on the tested communicators,
  // an untampered one for the timing loop's barrier and reduction.
  dts::CommOptions options;
  options.timeout_seconds = s.timeout_seconds;
  options.observer = std::make_shared<dts::OpObserver>();
  if (!s.chunk_bytes.empty()) options.chunk_bytes = static_cast<size_t>(dts::parse_size(s.chunk_bytes));
  auto mpi = dts::make_communicator("mpi", options);
  auto ring = dts::make_communicator(s.ring, options);
  auto control = dts::make_communicator("mpi");

  std::vector<Collective> collectives;
  for (const auto& c : s.collectives) collectives.push_back(dts::parse_collective(c));
  std::vector<int64_t> sizes;
  for (int64_t b = dts::parse_size(s.min_bytes); b <= dts::parse_size(s.max_bytes); b *= s.step_factor) {
    sizes.push_back(b);
  }
  const size_t largest = static_cast<size_t>(sizes.empty() ? 0 : sizes.back()) / sizeof(float);
  std::vector<float> in(largest, 0.0f), out(largest, 0.0f);  // zeros: sums stay finite in place

  // Rounds outermost: every size's samples spread over the whole run.
  std::vector<Series> series(collectives.size() * sizes.size());
  for (int round = 0; round < s.rounds; ++round) {
    for (size_t ci = 0; ci < collectives.size(); ++ci) {
      for (size_t si = 0; si < sizes.size(); ++si) {
        const Collective c = collectives[ci];
        const size_t per_rank = dts::count_is_per_rank(c) ? static_cast<size_t>(n) : 1;
        const Call call{c, static_cast<size_t>(sizes[si]) / sizeof(float) / per_rank, s.in_place};
        const auto bytes = static_cast<double>(
            dts::collective_bytes(c, static_cast<int64_t>(call.count), sizeof(float), n));
        const double factor = dts::bus_bandwidth_factor(c, n);
        Series& out_series = series[ci * sizes.size() + si];
        double round_median[2] = {0, 0};
        // Alternate which backend goes first, so neither always follows the other's traffic.
        for (int turn = 0; turn < 2; ++turn) {
          const bool ring_turn = (turn + round) % 2 == 1;
          dts::Communicator& comm = ring_turn ? *ring : *mpi;
          const std::vector<double> times =
              dts::time_iterations(*control, comm, s.warmup, s.iters, [&] { call(comm, in, out); });
          std::vector<double>& busbw = ring_turn ? out_series.ring : out_series.mpi;
          std::vector<double> this_round;
          for (double t : times) this_round.push_back(bytes / t * factor / 1e9);
          busbw.insert(busbw.end(), this_round.begin(), this_round.end());
          round_median[ring_turn ? 1 : 0] = median(this_round);
        }
        if (rank == 0) out_series.ratio.push_back(round_median[1] / round_median[0]);
      }
    }
  }

  if (rank != 0) return 0;
  if (s.header) {
    std::printf("| collective | ranks | size | busbw mpi (GB/s) | busbw %s (GB/s) | ratio | per-round ratios |\n",
                s.ring.c_str());
    std::printf("|---|---|---|---|---|---|---|\n");
  }
  for (size_t ci = 0; ci < collectives.size(); ++ci) {
    for (size_t si = 0; si < sizes.size(); ++si) {
      const Series& r = series[ci * sizes.size() + si];
      const double mpi_busbw = median(r.mpi), ring_busbw = median(r.ring);
      const auto [lo, hi] = std::minmax_element(r.ratio.begin(), r.ratio.end());
      char ratios[64] = "n/a | n/a";  // one rank moves nothing: busbw 0 for both
      if (mpi_busbw > 0) std::snprintf(ratios, sizeof ratios, "%.2f | %.2f-%.2f", ring_busbw / mpi_busbw, *lo, *hi);
      std::printf("| %s%s | %d | %s | %.2f | %.2f | %s |\n", std::string(name(collectives[ci])).c_str(),
                  s.in_place ? " (in place)" : "", n, size_text(sizes[si]).c_str(), mpi_busbw, ring_busbw, ratios);
    }
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{"mpi against ring(mpi), alternately in one job: busbw per collective and size", "ring_vs_mpi"};
  app.add_option("--collective", s.collectives, "all_reduce, reduce_scatter, all_gather")->delimiter(',')
      ->capture_default_str();
  app.add_option("-b,--minbytes", s.min_bytes, "smallest size (nccl-tests' bytes: the full buffer)")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", s.max_bytes, "largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", s.step_factor, "factor between sizes")->check(CLI::Range(2, 1 << 20))
      ->capture_default_str();
  app.add_option("--rounds", s.rounds, "rounds; each runs both backends on every size")->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("-n,--iters", s.iters, "timed calls per backend per round")->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("-w,--warmup_iters", s.warmup, "untimed calls before each backend's turn")
      ->check(CLI::Range(0, 100000))->capture_default_str();
  app.add_option("--ring", s.ring, "the algorithm measured against mpi")->capture_default_str();
  app.add_option("--chunk-bytes", s.chunk_bytes, "the ring's chunk size (default: the backend's own rule)");
  app.add_flag("--in-place", s.in_place, "measure in place rather than out of place");
  app.add_flag("!--no-header", s.header, "print the rows only (to append to another table)");
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int rc = 0;
  try {
    app.parse(argc, argv);
    rc = run(s);
  } catch (const CLI::ParseError& e) {
    // Every rank parses the same arguments and leaves alike; rank 0 says why.
    if (rank == 0) app.exit(e);
    rc = e.get_exit_code() == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    // Mid-run, on some ranks only: the others wait in a collective, so end the job.
    std::fprintf(stderr, "ring_vs_mpi: rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return rc;
}
