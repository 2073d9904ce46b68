// dtsuite's case loop. Only rank 0 writes results; every rank runs every case. Errors a case
// throws are agreed on across ranks (over a communicator of their own) so all ranks stay in
// step: unsupported becomes SKIP, anything else FAIL, and the run goes on. A hang is the
// watchdog's: it writes the timeout record, closes the sinks and aborts the job with exit 3.
#include "harness/runner.h"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <mutex>
#include <optional>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/text.h"
#include "core/buffer.h"
#include "core/error.h"
#include "dts/config.h"
#include "harness/cli.h"
#include "harness/commands.h"
#include "harness/progress.h"
#include "harness/stack_info.h"
#include "harness/timing.h"
#include "harness/watchdog.h"
#include "results/console_table.h"
#include "results/csv_sink.h"
#include "results/junit_sink.h"
#include "results/output_paths.h"
#include "strategies/strategy.h"
#include "strategies/strategy_spec.h"
#include "suites/profiles/profile.h"
#include "suites/suite.h"

namespace dts {

namespace {

// Before MPI_Init the rank is only known from the launcher's environment; rank 0 alone prints
// usage errors so an N-rank job shows one line, not N.
bool is_launcher_rank_zero() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* value = std::getenv(var)) return std::string(value) == "0";
  }
  return true;
}

std::string utc_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const auto seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[96];  // generous: the compiler cannot bound tm_year
  std::snprintf(text, sizeof(text), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900, utc.tm_mon + 1,
                utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<int>(millis));
  return text;
}

std::string new_run_id() {
  const auto seconds = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &utc);
  std::random_device random;
  char suffix[16];
  std::snprintf(suffix, sizeof(suffix), "%06x", random() & 0xffffff);
  return std::string(stamp) + "-" + suffix;
}

// Rank 0's fan-out to the sinks. Thread-safe: the watchdog thread writes the timeout record.
class Results {
 public:
  void add(std::unique_ptr<Sink> sink) { sinks_.push_back(std::move(sink)); }
  // --profile: every record is judged against the profile's thresholds before any sink sees it.
  void judge_with(const Profile& profile) { judge_.emplace(profile); }
  // One check record per threshold (matched, failed, or matched nothing), for the end of the run.
  std::vector<Record> profile_summary() {
    std::lock_guard lock(mutex_);
    return judge_ ? judge_->summary() : std::vector<Record>{};
  }

  void write(Record record) {
    std::lock_guard lock(mutex_);
    if (judge_) judge_->apply(record);
    if (record.verdict == Verdict::fail || record.verdict == Verdict::timeout) failed_cases_.insert(record.case_id);
    for (auto& sink : sinks_) {
      if (!sink) continue;
      try {
        sink->write(record);
      } catch (const std::exception& e) {
        // Keep measuring and keep the other sinks: one line, and exit 2 at the end.
        std::fprintf(stderr, "dtsuite: results sink dropped: %s\n", e.what());
        sink.reset();
        sink_failed_ = true;
      }
    }
  }

  void close() {
    std::lock_guard lock(mutex_);
    for (auto& sink : sinks_) {
      if (!sink) continue;
      try {
        sink->close();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "dtsuite: results sink failed to close: %s\n", e.what());
        sink_failed_ = true;
      }
    }
    sinks_.clear();
  }

  size_t failed_cases() {
    std::lock_guard lock(mutex_);
    return failed_cases_.size();
  }
  bool sink_failed() {
    std::lock_guard lock(mutex_);
    return sink_failed_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<Sink>> sinks_;
  std::set<std::string> failed_cases_;
  bool sink_failed_ = false;
  std::optional<ProfileJudge> judge_;
};

class HarnessContext final : public RunContext {
 public:
  HarnessContext(Communicator& tested, Communicator& control, const RunOptions& options, Memory memory,
                 const StackInfo& stack, std::string run_id, Results* results, const OpObserver* observer)
      : tested_(tested), control_(control), options_(options), memory_(memory), stack_(stack),
        run_id_(std::move(run_id)), results_(results), observer_(observer) {}

  Communicator& comm() override { return tested_; }
  Communicator& control() override { return control_; }
  const RunOptions& options() const override { return options_; }
  Memory memory() const override { return memory_; }
  const Topology& topology() const override { return stack_.topology; }
  Traffic traffic() const override { return {observer_->bytes_sent.load(), observer_->opaque_collectives.load()}; }
  std::vector<double> time_iterations(int warmup, int iters, const std::function<void()>& iteration) override {
    return dts::time_iterations(control_, warmup, iters, iteration);
  }
  Participants participants(bool member) override {
    const int flag = member ? 1 : 0;
    std::vector<int> members(static_cast<size_t>(control_.size()), 0);
    control_.all_gather(&flag, members.data(), 1, DType::i32);
    const Participants who = participants_of(stack_.topology.nodes.node_of_rank, members);
    std::lock_guard lock(case_mutex_);
    if (who.world_size > 0) case_participants_ = who;
    return who;
  }
  void emit(Record record) override {
    if (control_.rank() != 0) return;
    stamp(record);
    results_->write(record);
  }

  // Who took part is the case's to say (participants()), and holds until the case's end: the
  // records after the loop (profile summary) are about the whole job.
  void forget_participants() {
    std::lock_guard lock(case_mutex_);
    case_participants_.reset();
  }
  // For the record the harness writes for a case that did not finish (check: skip, fail,
  // timeout): the sub-world the case declared before it stopped, where the case's labels leave
  // who took part open, so the row says the same ranks as the case's rows would have.
  void label_unfinished(Labels& l) {
    std::lock_guard lock(case_mutex_);
    if (!case_participants_ || l.world_size != 0) return;
    l.world_size = case_participants_->world_size;
    l.nodes = case_participants_->nodes;
    l.ranks_per_node = case_participants_->ranks_per_node;
  }

  // Labels a suite left at 0 describe the whole job: the collectives run on every rank.
  void stamp(Record& record) const {
    record.run_id = run_id_;
    record.timestamp = utc_timestamp();
    Labels& l = record.labels;
    l.backend = stack_.backend;
    l.backend_version = stack_.backend_version;
    l.mpi_version = stack_.mpi_version;
    l.device = stack_.device;
    l.host = stack_.host;
    if (l.world_size == 0) l.world_size = stack_.world_size;
    if (l.nodes == 0) l.nodes = stack_.nodes;
    if (l.ranks_per_node == 0) l.ranks_per_node = stack_.ranks_per_node;
  }

 private:
  Communicator& tested_;
  Communicator& control_;
  const RunOptions& options_;
  Memory memory_;
  const StackInfo& stack_;
  std::string run_id_;
  Results* results_;
  const OpObserver* observer_;
  std::mutex case_mutex_;  // participants() on the main thread; label_unfinished() on the watchdog's too
  std::optional<Participants> case_participants_;
};

// Runs a set-up step on every rank and agrees on the outcome, so that when any rank fails all
// ranks leave together. Returns the failure (its text on rank 0), or nothing.
std::optional<std::string> agreed_failure(Communicator& agreement, const std::function<void()>& step) {
  int status = 0;
  std::string message;
  try {
    step();
  } catch (const std::exception& e) {
    status = 1;
    message = e.what();
  }
  auto [worst, text] = agree(agreement, status, message);
  if (worst == 0) return std::nullopt;
  return text;
}

void print_preamble(const Command& cmd, const StackInfo& stack, const std::string& run_id, const std::string& csv,
                    size_t cases) {
  const RunOptions& o = cmd.run;
  std::string suites;
  for (const auto& s : o.suites) suites += (suites.empty() ? "" : ",") + s;
  std::printf("# dtsuite %s  run %s  suites %s\n", DTS_VERSION, run_id.c_str(), suites.c_str());
  std::printf("# backend %s (%s)  device %s\n", stack.backend.c_str(), stack.backend_version.c_str(), stack.device.c_str());
  std::printf("# %d ranks on %d node(s), %d per node, host %s\n", stack.world_size, stack.nodes, stack.ranks_per_node,
              stack.host.c_str());
  // Each suite's own flags, as it describes them (collectives: nccl-tests' "minBytes ... step").
  for (const auto& name : o.suites) {
    auto group = o.flags_by_group.find(name);
    if (group == o.flags_by_group.end()) continue;
    const std::string line = group->second->describe();
    if (!line.empty()) std::printf("# %s\n", line.c_str());
  }
  std::printf("# warmup iters: %d iters: %d validation: %d timeout: %g s\n", o.warmup, o.iters, o.check ? 1 : 0,
              o.timeout_seconds);
  if (cmd.profile) {
    std::printf("# profile %s: %zu thresholds\n", cmd.profile->path.c_str(), cmd.profile->thresholds.size());
  }
  std::printf("# %zu cases; results: %s\n#\n", cases, csv.c_str());
  std::fflush(stdout);
}

int run_with_mpi(Command& cmd) {
  RunOptions& o = cmd.run;
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  o.world_size = size;
  const bool leader = rank == 0;
  auto say = [&](const std::string& line) {
    if (leader) std::fprintf(stderr, "dtsuite: %s\n", line.c_str());
  };

  // The harness's own communicators: untampered MPI, observed separately from the stack under test.
  auto control_observer = std::make_shared<OpObserver>();
  CommOptions control_options;
  control_options.observer = control_observer;
  std::unique_ptr<Communicator> control = make_communicator("mpi", control_options);
  std::unique_ptr<Communicator> agreement = make_communicator("mpi", control_options);

  // Everything that can fail at set-up, on every rank; then agree, so all ranks leave together.
  auto observer = std::make_shared<OpObserver>();
  CommOptions comm_options;
  comm_options.timeout_seconds = o.timeout_seconds;
  comm_options.chunk_bytes = cmd.chunk_bytes;
  comm_options.fault_rank = cmd.fault_rank;
  comm_options.fault_after_calls = cmd.fault_after;
  comm_options.observer = observer;
  comm_options.node_name = o.node;
  std::unique_ptr<Communicator> tested;
  std::vector<std::unique_ptr<Suite>> suites;
  std::vector<std::pair<Suite*, Case>> cases;
  if (auto failure = agreed_failure(*agreement, [&] {
        for (const auto& name : o.suites) suites.push_back(make_suite(name));
        tested = make_communicator(o.backend, comm_options);
        for (auto& suite : suites) {
          for (auto& c : suite->plan(o)) cases.emplace_back(suite.get(), std::move(c));
        }
      })) {
    say("error: " + *failure);
    return kExitUsage;
  }

  const StackInfo stack = discover_stack(*tested, *control, o.device, o.node);
  char id_buffer[64] = {};
  if (leader) std::snprintf(id_buffer, sizeof(id_buffer), "%s", new_run_id().c_str());
  control->broadcast(id_buffer, id_buffer, sizeof(id_buffer), DType::u8, 0);
  const std::string run_id = id_buffer;
  const std::string csv_path = cmd.csv_path.empty() ? "out/dtsuite-" + run_id + ".csv" : cmd.csv_path;

  Results results;
  if (cmd.profile) results.judge_with(*cmd.profile);
  CaseProgress progress;  // rank 0's live outputs (--metrics-port, --prom) follow the case loop
  if (auto failure = agreed_failure(*agreement, [&] {
        if (!leader) return;
        // Before any sink opens its file: a refused output leaves every path as it was.
        check_outputs({{"--profile", cmd.profile_path}},
                      {{"--csv", csv_path}, {"--junit", cmd.junit_path}, {"--prom", cmd.prom_path}});
        results.add(std::make_unique<ConsoleTable>(stdout));
        results.add(std::make_unique<CsvSink>(csv_path));
        if (!cmd.junit_path.empty()) results.add(std::make_unique<JunitSink>(cmd.junit_path));
        if (auto prom = make_prometheus_sink(cmd, stack, run_id, cases.size(), progress)) results.add(std::move(prom));
      })) {
    say("error: " + *failure);
    return kExitUsage;
  }
  if (leader) print_preamble(cmd, stack, run_id, csv_path, cases.size());

  const Memory memory = o.device == "cuda" ? Memory::device : Memory::host;
  HarnessContext context(*tested, *control, o, memory, stack, run_id, &results, observer.get());
  std::string current_suite;
  const Case* current_case = nullptr;
  std::mutex current_mutex;
  Watchdog watchdog(observer, control_observer, o.timeout_seconds, [&](const std::string& why) {
    // Rank 0's watchdog thread: the main threads are stuck. Write what we know, then end the job.
    Record r;
    {
      std::lock_guard lock(current_mutex);
      r.suite = current_suite;
      if (current_case) {
        r.case_id = current_case->id;
        r.labels = current_case->labels;
      }
    }
    context.label_unfinished(r.labels);
    r.metric = "check";
    r.value = 0;  // the check did not hold
    r.verdict = Verdict::timeout;
    {
      std::lock_guard lock(current_mutex);
      r.threshold = current_case && current_case->time_budget_seconds > 0 ? current_case->time_budget_seconds
                                                                           : o.timeout_seconds;
    }
    r.detail = why;
    context.stamp(r);
    results.write(r);
    results.close();
    std::fprintf(stderr, "dtsuite: timeout: %s\n", why.c_str());
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, kExitTimeout);
  });

  watchdog.set_nodes(stack.topology.nodes.names);
  for (size_t i = 0; i < cases.size(); ++i) {
    auto& [suite, the_case] = cases[i];
    {
      std::lock_guard lock(current_mutex);
      current_case = &the_case;
      current_suite = std::string(suite->name());
    }
    watchdog.begin_case(static_cast<int64_t>(i), the_case.id, the_case.time_budget_seconds);
    progress.begin(i, suite->name(), the_case.id);
    int status = 0;
    std::string message;
    try {
      suite->run(the_case, context);
    } catch (const Error& e) {
      status = e.kind() == Error::Kind::unsupported ? 1 : 2;
      message = std::string(e.what()) + " (" + e.where() + ")";
    } catch (const std::exception& e) {
      status = 2;
      message = e.what();
    }
    auto [worst, text] = agree(*agreement, status, message);
    watchdog.end_case();
    if (worst != 0 && leader) {
      Record r;
      r.suite = std::string(suite->name());
      r.case_id = the_case.id;
      r.labels = the_case.labels;
      context.label_unfinished(r.labels);
      r.metric = "check";
      r.value = 0;  // not run (skip) or failed to run
      r.verdict = worst == 1 ? Verdict::skip : Verdict::fail;
      r.detail = text;
      context.emit(r);
    }
    context.forget_participants();
    progress.end(i);
  }

  int exit_code = kExitPass;
  if (leader) {
    for (Record& r : results.profile_summary()) context.emit(std::move(r));
    results.close();
    if (results.failed_cases() > 0) exit_code = kExitFail;
    if (results.sink_failed() && exit_code == kExitPass) exit_code = kExitUsage;
  }
  agreement->broadcast(&exit_code, &exit_code, 1, DType::i32, 0);
  watchdog.stop();
  return exit_code;
}

void print_list() {
  std::printf("suites:\n");
  for (const SuiteInfo& info : suite_catalog()) std::printf("  %-22s %s\n", info.name.c_str(), info.summary.c_str());
  std::printf("backends:\n");
  for (const auto& b : registered_backends()) std::printf("  %-22s %s\n", b.usage.c_str(), b.summary.c_str());
  std::printf("collectives: all_reduce reduce_scatter all_gather broadcast reduce all_to_all send_recv\n");
  std::printf("dtypes: f32 f64 f16 bf16 i8 u8 i32 i64\nops: sum prod min max avg\n");
  std::printf("strategies (NAME or NAME(key=value,...); keys it takes in brackets):\n");
  for (const auto& name : registered_strategies()) {
    const StrategyTraits& t = strategy_traits(name);
    std::string keys;
    for (const std::string& key : spec_keys(t)) keys += (keys.empty() ? "" : ",") + key;
    std::printf("  %-22s %s [%s]\n", name.c_str(), t.summary.c_str(), keys.c_str());
  }
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(mpi, &length);  // allowed before MPI_Init (MPI-3)
  std::string mpi_line(mpi, static_cast<size_t>(length));
  mpi_line = mpi_line.substr(0, mpi_line.find('\n'));
  std::printf("build: CUDA %s, NCCL %s, MPI %s\n", DTS_HAVE_CUDA ? "on" : "off",
              DTS_HAVE_NCCL ? DTS_NCCL_HEADER_VERSION : "off", mpi_line.c_str());
  std::printf("devices: %d CUDA device(s) visible\n", cuda_device_count());
}

}  // namespace

int harness_main(int argc, char** argv) {
  Command cmd;
  try {
    cmd = parse_command_line(argc, argv);
  } catch (const UsageError& e) {
    if (is_launcher_rank_zero()) std::fprintf(stderr, "dtsuite: error: %s (see dtsuite --help)\n", e.what());
    return kExitUsage;
  }
  const bool speak = is_launcher_rank_zero();
  switch (cmd.kind) {
    case Command::Kind::help:
      if (speak) std::printf("%s", cmd.help_text.c_str());
      return kExitPass;
    case Command::Kind::version:
      if (speak) std::printf("dtsuite %s\n", DTS_VERSION);
      return kExitPass;
    case Command::Kind::list:
      if (speak) print_list();
      return kExitPass;
    case Command::Kind::compare:
      return run_compare(cmd.compare);
    case Command::Kind::report:
      return run_report(cmd.report);
    case Command::Kind::run: break;
  }

  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int exit_code = kExitUsage;
  if (provided < MPI_THREAD_MULTIPLE && cmd.run.timeout_seconds > 0) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) std::fprintf(stderr, "dtsuite: error: the MPI library does not provide MPI_THREAD_MULTIPLE, which the watchdog (-T) needs; run with -T 0\n");
  } else {
    try {
      exit_code = run_with_mpi(cmd);
    } catch (const std::exception& e) {
      // An error outside any case (stack discovery, sinks): one line, and no rank left waiting.
      std::fprintf(stderr, "dtsuite: error: %s\n", e.what());
      MPI_Abort(MPI_COMM_WORLD, kExitUsage);
    }
  }
  MPI_Finalize();
  return exit_code;
}

}  // namespace dts
