// The hardware suite: each rank's own part measured on every rank, first all at once and then one
// rank at a time (contention between ranks of a node shows as the difference), and the rank that
// falls short of its peers named (results/outliers.h). This half measures the host: sgemm and
// dgemm through OpenBLAS (kernels/cpu), and a STREAM triad (McCalpin's a = b + s c over arrays far
// larger than the caches). Each figure comes with its spread over the iterations.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "comm/text.h"
#include "core/cpus.h"
#include "core/error.h"
#include "kernels/cpu/cpu_kernels.h"
#include "results/outliers.h"
#include "suites/suite.h"
#include "suites/training_flags.h"

namespace dts {

namespace {

class HardwareFlags final : public FlagGroup {
 public:
  static constexpr const char* kGroup = "hardware";
  int64_t gemm_size = 1024;                 // m = n = k of the timed gemm
  int64_t triad_bytes = int64_t{96} << 20;  // the triad's three arrays together, per rank

  void declare(CLI::App& g) override {
    g.add_option("--gemm-size", gemm_text_, "m = n = k of the hardware suite's matrix multiply")->capture_default_str();
    g.add_option("--triad-bytes", triad_text_,
                 "bytes of the hardware suite's STREAM triad arrays, the three together, per rank (suffixes K, M, G)")
        ->capture_default_str();
  }
  void finish(const RunOptions& common) override {
    gemm_size = parse_size(gemm_text_);
    triad_bytes = parse_size(triad_text_);
    if (gemm_size < 1 || gemm_size > 65536) throw Error(Error::Kind::invalid_argument, "--gemm-size must be 1..65536");
    if (triad_bytes < 24) {
      throw Error(Error::Kind::invalid_argument, "--triad-bytes must hold at least one element of each array (24)");
    }
    if (common.quick) {
      // Still long enough per call (~10 ms) that a rank sharing a core is timed over many of the
      // scheduler's slices, not caught inside one.
      gemm_size = std::min<int64_t>(gemm_size, 512);
    }
  }
  std::string describe() const override {
    return "hardware: gemm " + std::to_string(gemm_size) + "^3, triad " + std::to_string(triad_bytes) + " bytes per rank";
  }

 private:
  std::string gemm_text_ = "1024";
  std::string triad_text_ = "96M";
};

DTS_REGISTER_FLAGS(HardwareFlags, "Hardware suite");

// What runs around each call: the alone mode's turn taking; nothing when every rank runs at once.
struct Pacer {
  std::function<void()> before, after;
};

struct HardwareCase {
  enum class Kind { gemm, triad } kind = Kind::gemm;
  DType dtype = DType::f32;
  bool alone = false;  // one rank at a time; else every rank at once
  int64_t size = 0;    // gemm: m = n = k; triad: elements per array
  std::string skip;    // why a rank's part cannot hold the test ("": it can)
};

class HardwareSuite final : public Suite {
 public:
  std::string_view name() const override { return "hardware"; }

  std::vector<Case> plan(const RunOptions& options) const override {
    const auto& f = options.flags<HardwareFlags>();
    options.flags<TrainingFlags>().check_straggler(options.world_size, "the job's");
    std::vector<Case> cases;
    const MemoryAvailable memory = options.memory_per_rank();
    for (bool alone : {false, true}) {
      for (DType dtype : {DType::f32, DType::f64}) {
        HardwareCase h{HardwareCase::Kind::gemm, dtype, alone, f.gemm_size, ""};
        cases.push_back(make_case(h, memory, options));
      }
      HardwareCase t{HardwareCase::Kind::triad, DType::f64, alone, f.triad_bytes / 24, ""};
      cases.push_back(make_case(t, memory, options));
    }
    return cases;
  }

  void run(const Case& c, RunContext& ctx) override {
    const auto& h = std::any_cast<const HardwareCase&>(c.params);
    if (!h.skip.empty()) throw Error(Error::Kind::unsupported, h.skip);
    const RunOptions& o = ctx.options();
    const auto& training = o.flags<TrainingFlags>();
    Communicator& control = ctx.control();
    const int rank = control.rank(), world = control.size();
    const double slow = rank == training.straggler_rank ? training.straggler_factor : 1.0;

    // Alone: a baton goes from rank to rank once per iteration, so the ranks take turns call by
    // call and a passing disturbance of the machine slows one call of one rank, which the median
    // over the iterations leaves out, rather than every call of whichever rank it hit. The ranks
    // not measuring wait asleep (a test of the message every 200 us), not in a barrier, which
    // spins: on a node with more ranks than cores a spinning neighbour would take the core.
    int32_t baton = 0;
    const int total = o.warmup + o.iters;
    int done = 0;
    Pacer pacer;
    if (h.alone && world > 1) {
      pacer.before = [&] {
        if (rank > 0 || done > 0) wait_quietly(*control.irecv(&baton, 1, DType::i32, (rank + world - 1) % world));
      };
      pacer.after = [&] {
        ++done;
        if (rank + 1 < world || done < total) control.send(&baton, 1, DType::i32, (rank + 1) % world);
      };
    }
    control.barrier();
    std::vector<double> seconds;
    if (h.kind == HardwareCase::Kind::gemm) {
      seconds = h.dtype == DType::f32 ? time_gemm<float>(h.size, o.warmup, o.iters, slow, pacer)
                                      : time_gemm<double>(h.size, o.warmup, o.iters, slow, pacer);
    } else {
      seconds = time_triad(h.size, o.warmup, o.iters, slow, pacer);
    }
    control.barrier();

    // Each iteration's rate: flop/s (2 m n k) or bytes/s (three arrays of 8 bytes per element).
    const double n = static_cast<double>(h.size);
    const double work = h.kind == HardwareCase::Kind::gemm ? 2.0 * n * n * n : 24.0 * n;
    std::vector<double> rates;
    for (double s : seconds) rates.push_back(work / s);
    const Stats stats = compute_stats(rates);
    // The iterations' spread as a standard deviation, 1.4826 x their median absolute deviation:
    // a machine busy with something else slows a few calls, which this leaves out and the
    // 5th..95th percentiles would not.
    double mine[7] = {stats.median, stats.p05, stats.p95, stats.min, stats.max, static_cast<double>(stats.n),
                      mad_spread(rates)};
    std::vector<double> all(static_cast<size_t>(world) * 7);
    control.all_gather(mine, all.data(), 7, DType::f64);
    const std::string cpus = allowed_cpus();
    std::vector<std::string> cpus_of(static_cast<size_t>(world));
    for (int r = 0; r < world; ++r) cpus_of[static_cast<size_t>(r)] = text_to_root(control, r, cpus);
    if (rank != 0) return;

    std::vector<PeerValue> subjects;
    std::vector<Stats> per_rank;
    for (int r = 0; r < world; ++r) {
      const double* v = &all[static_cast<size_t>(r) * 7];
      Stats s;
      s.median = v[0], s.p05 = v[1], s.p95 = v[2], s.min = v[3], s.max = v[4], s.n = static_cast<int64_t>(v[5]);
      per_rank.push_back(s);
      subjects.push_back({s.median, v[6]});
    }
    // At once, on a node with more ranks than the CPUs they may use, who gets a core when is the
    // scheduler's doing, not the part's: those rows are measured, not judged (alone they are).
    const auto& names = ctx.topology().nodes.names;
    const std::vector<CpuSharing> sharing = cpu_sharing(names, cpus_of);
    std::map<std::string, int> first_rank_of_node;
    for (int r = 0; r < world; ++r) first_rank_of_node.emplace(names[static_cast<size_t>(r)], r);
    std::string crowded;
    for (const auto& [node, first] : first_rank_of_node) {
      const CpuSharing& share = sharing[static_cast<size_t>(first)];
      if (!h.alone && share.ranks > share.cpus) {
        crowded = "node " + node + "'s " + std::to_string(share.ranks) + " ranks share " + std::to_string(share.cpus) +
                  " CPUs";
        for (int r = 0; r < world; ++r) {
          if (names[static_cast<size_t>(r)] == node) subjects[static_cast<size_t>(r)].value = std::nan("");
        }
      }
    }
    std::vector<OutlierVerdict> verdicts = judge_outliers(subjects, /*higher_is_better=*/true);
    const bool gemm = h.kind == HardwareCase::Kind::gemm;
    const char* unit = gemm ? "FLOP/s" : "B/s";
    const std::string what = gemm ? std::string(h.dtype == DType::f32 ? "sgemm" : "dgemm") : "triad";
    for (int r = 0; r < world; ++r) {
      const OutlierVerdict& v = verdicts[static_cast<size_t>(r)];
      Record row;
      row.suite = "hardware";
      row.case_id = c.id;
      row.labels = c.labels;
      row.labels.config = c.labels.config + ";rank=" + std::to_string(r) + ";node=" + names[static_cast<size_t>(r)];
      row.metric = gemm ? "matmul_throughput" : "memory_bandwidth";
      row.unit = gemm ? "flop_per_second" : "bytes_per_second";
      row.value = per_rank[static_cast<size_t>(r)].median;
      row.stats = per_rank[static_cast<size_t>(r)];
      const std::string who = "rank " + std::to_string(r) + " (node " + names[static_cast<size_t>(r)] + ", " +
                              ctx.topology().device + ", CPUs " + cpus_of[static_cast<size_t>(r)] + ")";
      row.detail = who + ": " + what + " " + format_si(row.value, unit);
      if (v.judged) {
        row.threshold = v.bound;
        row.verdict = v.named ? Verdict::fail : Verdict::pass;
        row.detail += ", " + describe_shortfall(v, true, format_si(v.peer_median, unit)) + "; named below " +
                      format_si(v.bound, unit) + " (rule: results/outliers.h, noise " + format_si(v.noise, unit) + ")";
      } else if (!crowded.empty() && !std::isfinite(subjects[static_cast<size_t>(r)].value)) {
        row.verdict = Verdict::info;
        row.detail += "; not judged: " + crowded + ", so at once the scheduler decides who runs (alone is judged)";
      } else {
        row.verdict = Verdict::info;
        row.detail += "; not judged against peers: " + std::to_string(v.peers) + " peer" + (v.peers == 1 ? "" : "s") +
                      ", the rule needs " + std::to_string(OutlierRule::kMinPeers);
      }
      if (training.straggler_rank == r) {
        row.labels.config += ";straggler=" + std::to_string(r) + ":" + format_number(training.straggler_factor, "%g");
      }
      ctx.emit(row);
    }
  }

 private:
  static Case make_case(const HardwareCase& h, const MemoryAvailable& memory, const RunOptions& options) {
    Case c;
    const bool gemm = h.kind == HardwareCase::Kind::gemm;
    const std::string mode = h.alone ? "alone" : "concurrent";
    c.id = std::string(gemm ? "gemm" : "triad") + "/" + std::string(dts::name(h.dtype)) + "/" + mode;
    c.labels.dtype = std::string(dts::name(h.dtype));
    c.labels.config = "mode=" + mode + ";size=" + std::to_string(h.size);
    const double n = static_cast<double>(h.size);
    const double bytes = gemm ? 3.0 * n * n * static_cast<double>(size_of(h.dtype)) : 24.0 * n;
    c.labels.bytes = static_cast<int64_t>(bytes);
    // A rank's part too small for the test is a skip row, said before anything runs.
    HardwareCase planned = h;
    if (bytes > memory.bytes / 2) {
      planned.skip = std::string(gemm ? "gemm" : "triad") + " needs " + format_si(bytes, "B") + " per rank, more than half " +
                     "of the " + format_si(memory.bytes, "B") + " a rank may use (" + memory.source + "); give a smaller " +
                     (gemm ? "--gemm-size" : "--triad-bytes");
    }
    (void)options;
    c.params = planned;
    return c;
  }

  template <class T>
  static std::vector<double> time_gemm(int64_t n, int warmup, int iters, double slow, const Pacer& pacer) {
    std::vector<T> a(static_cast<size_t>(n * n)), b(a.size()), out(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = static_cast<T>(static_cast<double>(i % 7) * 0.125);
      b[i] = static_cast<T>(static_cast<double>(i % 5) * 0.25);
    }
    kernels::GemmShape shape;
    shape.m = shape.n = shape.k = n;
    shape.lda = shape.ldb = shape.ldc = n;
    auto once = [&] { kernels::cpu::gemm<T>(shape, T(1), a.data(), b.data(), T(0), out.data()); };
    return timed(once, warmup, iters, slow, pacer);
  }

  static std::vector<double> time_triad(int64_t n, int warmup, int iters, double slow, const Pacer& pacer) {
    std::vector<double> a(static_cast<size_t>(n), 0.0), b(a.size(), 1.0), c(a.size(), 2.0);
    const double s = 3.0;
    auto once = [&] {
      double* __restrict pa = a.data();
      const double* __restrict pb = b.data();
      const double* __restrict pc = c.data();
      for (int64_t i = 0; i < n; ++i) pa[i] = pb[i] + s * pc[i];
    };
    std::vector<double> seconds = timed(once, warmup, iters, slow, pacer);
    // The result is used, so the loop cannot be dropped: every a[i] is 1 + 3 * 2.
    if (n > 0 && a[static_cast<size_t>(n) - 1] != 7.0) {
      throw Error(Error::Kind::mismatch, "triad: a[n-1] is " + format_number(a[static_cast<size_t>(n) - 1]) +
                                             " where b + 3 c is 7");
    }
    return seconds;
  }

  // Per iteration: the work, and on a --straggler rank a wait of (FACTOR - 1) times its time.
  template <class F>
  static std::vector<double> timed(F&& once, int warmup, int iters, double slow, const Pacer& pacer) {
    std::vector<double> seconds;
    for (int i = 0; i < warmup + iters; ++i) {
      if (pacer.before) pacer.before();
      const auto start = std::chrono::steady_clock::now();
      once();
      const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (slow > 1) kernels::cpu::delay((slow - 1) * took);
      if (i >= warmup) seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      if (pacer.after) pacer.after();
    }
    return seconds;
  }
};

SuiteInfo hardware_info() {
  SuiteInfo info;
  info.name = "hardware";
  info.per_rank_figures = true;
  info.label_keys = {"mode", "rank", "node"};
  info.summary = "each rank's own part, every rank at once and one at a time: sgemm/dgemm (OpenBLAS), STREAM "
                 "triad; the rank short of its peers named";
  info.metrics = {
      {"matmul_throughput", "flop_per_second", "2 m n k / time of one gemm, per rank (config rank, node, mode)"},
      {"memory_bandwidth", "bytes_per_second", "STREAM triad: 24 bytes per element / time, per rank"},
  };
  PlotSpec gemm;
  gemm.metric = "matmul_throughput";
  gemm.x = PlotSpec::X::config;
  gemm.x_key = "rank";
  gemm.split = "mode";
  gemm.series = {"dtype"};
  gemm.id = "hardware-gemm-{split}";
  gemm.title = "Matrix multiply per rank, {split} (GFLOP/s)";
  gemm.x_label = "rank";
  gemm.y_label = "GFLOP/s";
  gemm.y_scale = 1e9;
  gemm.draw_threshold = true;
  PlotSpec triad = gemm;
  triad.metric = "memory_bandwidth";
  triad.series = {};
  triad.id = "hardware-triad-{split}";
  triad.title = "STREAM triad per rank, {split} (GB/s)";
  triad.y_label = "GB/s";
  info.sections = {{70, "hardware", "Hardware",
                    "Each rank's own part: every rank at once (concurrent) and one at a time (alone). A rank "
                    "more than the run's noise short of the median of its peers fails (results/outliers.h); "
                    "the line is the bound it is named below.",
                    "No hardware rows in these results (the hardware suite did not run).",
                    {gemm, triad}}};
  return info;
}

}  // namespace

DTS_REGISTER_SUITE(HardwareSuite, hardware_info());

}  // namespace dts
