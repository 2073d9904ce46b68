// dtsuite's case loop. Only rank 0 writes results; every rank runs every case. Errors a case
// throws are agreed on across ranks (over a communicator of their own) so all ranks stay in
// step: unsupported becomes SKIP, anything else FAIL, and the run goes on. A hang is the
// watchdog's: it writes the timeout record, closes the sinks and aborts the job with exit 3.
#include "harness/runner.h"

#include <fcntl.h>
#include <mpi.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/text.h"
#include "comm/topology.h"
#include "core/buffer.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/philox.h"
#include "dts/config.h"
#include "harness/cli.h"
#include "harness/commands.h"
#include "harness/fatal_signal.h"
#include "harness/inventory.h"
#include "harness/progress.h"
#include "harness/stack_info.h"
#include "harness/timing.h"
#include "harness/watchdog.h"
#include "results/console_table.h"
#include "results/csv_sink.h"
#include "results/junit_sink.h"
#include "results/output_paths.h"
#include "results/record.h"
#include "strategies/strategy.h"
#include "strategies/strategy_spec.h"
#include "results/expectations.h"
#include "suites/profiles/profile.h"
#include "suites/suite.h"
#include "trace/recorder.h"

namespace dts {

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

namespace {

// Before MPI_Init the rank is only known from the launcher's environment; rank 0 alone prints
// usage errors so an N-rank job shows one line, not N.
bool is_launcher_rank_zero() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* value = std::getenv(var)) return std::string(value) == "0";
  }
  return true;
}

// The ranks the launcher says it started, the variable that says so, and whether this process is
// the launcher's rank 0 (ranks 0: no variable says). Open MPI's mpirun and MPICH's mpiexec
// (Hydra, and any launcher speaking PMI) export these to every rank before MPI_Init. A binary
// built against the other library does not read them: each rank starts as a singleton, world
// size 1, and the job becomes N jobs of one rank that measure nothing between ranks and write the
// same outputs. The rank is read from the same launcher's variable: a singleton's own MPI may set
// others (Open MPI sets PMIX_RANK=0 in every singleton).
struct Launch {
  long ranks = 0;
  const char* variable = nullptr;
  bool rank_zero = true;
};
Launch launcher_world_size() {
  for (const auto& [size_var, rank_var] : {std::pair{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
                                           std::pair{"PMI_SIZE", "PMI_RANK"}}) {
    const char* value = std::getenv(size_var);
    if (!value) continue;
    char* end = nullptr;
    const long ranks = std::strtol(value, &end, 10);
    if (end == value || *end != '\0' || ranks <= 0) continue;
    const char* rank = std::getenv(rank_var);
    return {ranks, size_var, !rank || std::string(rank) == "0"};
  }
  return {};
}

// The steps of a run: the plan's cases in order (repeat 1), or `repeat` passes over them, each
// pass a permutation shuffled by the seed (Fisher-Yates on Philox bits: every rank computes the
// same order), so that a drift of the machine during the run falls on every case alike.
std::vector<size_t> case_order(size_t cases, int repeat, uint64_t seed) {
  constexpr uint64_t kRepeatStream = 0x7265706561740000;  // "repeat": apart from the inputs' streams
  std::vector<size_t> order;
  for (int r = 0; r < repeat; ++r) {
    std::vector<size_t> pass(cases);
    std::iota(pass.begin(), pass.end(), size_t{0});
    for (size_t k = cases; repeat > 1 && k > 1; --k) {
      const uint64_t bits = philox_bits(seed, kRepeatStream, static_cast<uint64_t>(r) * cases + k);
      std::swap(pass[k - 1], pass[bits % k]);
    }
    order.insert(order.end(), pass.begin(), pass.end());
  }
  return order;
}

// A descriptor made non-blocking while this lives, when it is a pipe (a launcher's, which may have
// stopped reading it), and put back after: a terminal's description is shared with the shell.
class NonBlockingPipe {
 public:
  explicit NonBlockingPipe(int fd) : fd_(fd) {
    struct stat info {};
    if (::fstat(fd_, &info) != 0 || !S_ISFIFO(info.st_mode)) return;
    flags_ = ::fcntl(fd_, F_GETFL);
    if (flags_ >= 0) ::fcntl(fd_, F_SETFL, flags_ | O_NONBLOCK);
  }
  ~NonBlockingPipe() {
    if (flags_ >= 0) ::fcntl(fd_, F_SETFL, flags_);
  }
  NonBlockingPipe(const NonBlockingPipe&) = delete;
  NonBlockingPipe& operator=(const NonBlockingPipe&) = delete;

 private:
  int fd_;
  int flags_ = -1;
};

// Rank 0's fan-out to the sinks. Thread-safe: the watchdog's and the signal thread's ending
// writes the job's last row while the main thread may be inside a sink.
class Results {
 public:
  // `stream`: the FILE a sink writes to (the console's stdout), or none (a file sink).
  void add(std::unique_ptr<Sink> sink, FILE* stream = nullptr) {
    sinks_.push_back(Guarded{std::move(sink), std::make_unique<std::timed_mutex>(), stream});
  }
  // --profile: every record is judged against the profile's thresholds before any sink sees it.
  void judge_with(const Profile& profile) { judge_.emplace(profile); }
  // --expect: then every record is judged against the known deviations (results/expectations.h).
  void expect(std::vector<ExpectationFile> files) { expected_.emplace(std::move(files)); }
  std::vector<Record> expectation_summary() {
    std::lock_guard lock(mutex_);
    return expected_ ? expected_->summary() : std::vector<Record>{};
  }
  // One check record per threshold (matched, failed, or matched nothing), for the end of the run.
  std::vector<Record> profile_summary() {
    std::lock_guard lock(mutex_);
    return judge_ ? judge_->summary() : std::vector<Record>{};
  }

  // The job is ending (end_job, on the watchdog's or the signal thread), and the launcher's
  // SIGKILL follows its SIGTERM by a second. From here on the main thread's writes wait; the one
  // record being written goes on sink by sink, so in a sink the ending reaches first it comes
  // after the ending's row, or not at all once that sink is closed (a suite emits its rows at the
  // end of a case: 1,100 for a long convergence run). The ending aborts the job: they never resume.
  void begin_ending() { ending_.store(true); }

  void write(Record record) {
    while (ending_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    write_to_sinks(std::move(record), false);
  }

  // The ending's row (after begin_ending), and its closing of the outputs: the file sinks first,
  // each waited for kEndingWait at most; a sink the main thread is stuck in is passed over, named
  // on stderr. The console last: a launcher may stop reading ranks' stdout once a rank is lost,
  // which once held the one lock of every sink until the launcher's SIGKILL, and a lost rank left
  // no row in any output. So the console is passed over while another thread holds stdout's FILE
  // lock, and the ending's caller makes a piped stdout non-blocking (NonBlockingPipe: a full pipe
  // drops the console's lines, the job ends next). A pty (Open MPI's mpirun gives ranks one) is
  // left as it is: a full one can still hold the console's write, after the file sinks are written.
  void write_final(Record record) { write_to_sinks(std::move(record), true); }

  // fflush of a stream no other thread holds (its FILE lock): the ending's last flush.
  static void flush_if_free(FILE* stream) {
    if (::ftrylockfile(stream) != 0) return;
    std::fflush(stream);
    ::funlockfile(stream);
  }

  // At the end of the run (main thread), or of an ending (ending = true: as write_final; a sink
  // still in use is left open, not destroyed under its user, and one passed over is not waited
  // for again).
  void close(bool ending = false) {
    for (Guarded& g : ending_order()) {
      std::unique_lock lock(g.mutex(), std::defer_lock);
      if (!ending) {
        lock.lock();
      } else if (g.passed_over || !lock.try_lock_for(kEndingWait) || !g.stream_free()) {
        continue;
      }
      const StreamHold hold(g, ending);
      if (!g.sink) continue;
      try {
        g.sink->close();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "dtsuite: results sink failed to close: %s\n", e.what());
        sink_failed_ = true;
      }
      g.sink.reset();
    }
  }

  size_t failed_cases() {
    std::lock_guard lock(mutex_);
    return failed_cases_.size();
  }
  bool sink_failed() const { return sink_failed_.load(); }

 private:
  struct Guarded {
    std::unique_ptr<Sink> sink;
    std::unique_ptr<std::timed_mutex> lock;  // held while the sink writes: no other lock is
    FILE* stream = nullptr;                  // the console's stdout
    bool passed_over = false;                // the ending found it busy: the ending's thread only
    std::timed_mutex& mutex() { return *lock; }
    // The ending's test of a stream sink: its FILE lock free, then held (StreamHold) while it writes.
    bool stream_free() const { return !stream || ::ftrylockfile(stream) == 0; }
  };
  // Releases the FILE lock stream_free took (the ending's, on a stream sink).
  struct StreamHold {
    FILE* stream;
    StreamHold(const Guarded& g, bool ending) : stream(ending ? g.stream : nullptr) {}
    ~StreamHold() {
      if (stream) ::funlockfile(stream);
    }
    StreamHold(const StreamHold&) = delete;
    StreamHold& operator=(const StreamHold&) = delete;
  };
  // The file sinks, then the stream sinks: the order of an ending.
  std::vector<std::reference_wrapper<Guarded>> ending_order() {
    std::vector<std::reference_wrapper<Guarded>> order;
    for (Guarded& g : sinks_) if (!g.stream) order.emplace_back(g);
    for (Guarded& g : sinks_) if (g.stream) order.emplace_back(g);
    return order;
  }
  // Long enough for a sink's write of one record (JUnit and CSV: microseconds; a full disk's
  // error: one syscall), short enough to leave most of the launcher's second to the rest of the
  // ending after the lost ranks are found (Watchdog::lost_ranks: about half of it). The sinks that
  // are free get the row first; only then is a busy one waited for.
  static constexpr std::chrono::milliseconds kEndingWait{100};

  void write_one(Guarded& g, const Record& record) {
    if (!g.sink) return;
    try {
      g.sink->write(record);
    } catch (const std::exception& e) {
      // Keep measuring and keep the other sinks: one line, and exit 2 at the end.
      std::fprintf(stderr, "dtsuite: results sink dropped: %s\n", e.what());
      g.sink.reset();
      sink_failed_ = true;
    }
  }

  void write_to_sinks(Record record, bool ending) {
    {
      std::lock_guard lock(mutex_);  // the judges and the count: no I/O under this lock
      if (judge_) judge_->apply(record);
      if (expected_) expected_->apply(record);
      if (is_failure(record.verdict)) failed_cases_.insert(record.case_id);
    }
    if (!ending) {
      for (Guarded& g : sinks_) {
        std::lock_guard lock(g.mutex());
        write_one(g, record);
      }
      return;
    }
    // The free file sinks get the row first; then a busy one is waited for, and the console last.
    std::vector<Guarded*> busy;
    for (Guarded& g : ending_order()) {
      std::unique_lock lock(g.mutex(), std::defer_lock);
      if (g.stream || !lock.try_lock()) {
        busy.push_back(&g);
        continue;
      }
      write_one(g, record);
    }
    for (Guarded* g : busy) {
      std::unique_lock lock(g->mutex(), std::defer_lock);
      if (lock.try_lock_for(kEndingWait) && g->stream_free()) {
        const StreamHold hold(*g, true);
        write_one(*g, record);
        continue;
      }
      g->passed_over = true;
      std::fprintf(stderr, "dtsuite: a results sink is still busy (a blocked write: a full pipe or disk); the "
                           "job's last row passes it over\n");
    }
  }

  std::mutex mutex_;
  std::vector<Guarded> sinks_;
  std::set<std::string> failed_cases_;
  std::atomic<bool> sink_failed_{false};
  std::optional<ProfileJudge> judge_;
  std::optional<ExpectationJudge> expected_;
  std::atomic<bool> ending_{false};
};

class HarnessContext final : public RunContext {
 public:
  HarnessContext(Communicator& tested, Communicator& control, const RunOptions& options, Memory memory,
                 const StackInfo& stack, std::string run_id, Results* results, OpObserver* observer)
      : tested_(&tested), control_(control), options_(options), memory_(memory), stack_(stack),
        run_id_(std::move(run_id)), results_(results), observer_(observer) {}

  Communicator& comm() override { return *tested_; }
  // The communicator the cases run on from here (the last was aborted and is being dropped), and
  // why: `note` leads the detail of every row of the next case, where a reader of the results
  // sees that it ran on a new one.
  void use_tested(Communicator& tested, std::string note) {
    tested_ = &tested;
    note_ = std::move(note);
  }
  Communicator& control() override { return control_; }
  void set_repetition(int repetition) { repetition_ = repetition; }
  const RunOptions& options() const override { return options_; }
  Memory memory() const override { return memory_; }
  const Topology& topology() const override { return stack_.topology; }
  Traffic traffic() const override {
    return {observer_->bytes_sent.load(), observer_->opaque_collectives.load(), observer_->bytes_received.load()};
  }
  void at_position(int64_t index) override { observer_->position.store(index, std::memory_order_relaxed); }
  // The watchdog whose clock off_the_clock() stops; none: the clock runs (before the case loop).
  void set_watchdog(Watchdog* watchdog) { watchdog_ = watchdog; }
  double off_the_clock(const std::function<void()>& host_work) override {
    if (!watchdog_) return RunContext::off_the_clock(host_work);
    struct Paused {
      Watchdog& watchdog;
      explicit Paused(Watchdog& w) : watchdog(w) { watchdog.pause_case(); }
      ~Paused() { watchdog.resume_case(); }  // an exception out of the check resumes it too
    } paused(*watchdog_);
    return RunContext::off_the_clock(host_work);
  }
  std::vector<double> time_iterations(int warmup, int iters, const std::function<void()>& iteration) override {
    return dts::time_iterations(control_, *tested_, warmup, iters, iteration);
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
    if (!note_.empty()) record.detail = note_ + (record.detail.empty() ? "" : "; " + record.detail);
    stamp(record);
    results_->write(record);
  }

  // The case's end. Who took part is the case's to say (participants()), and holds until then: the
  // records after the loop (profile summary) are about the whole job.
  void end_case() {
    std::lock_guard lock(case_mutex_);
    case_participants_.reset();
    note_.clear();  // use_tested's note is the next case's only
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
    record.repetition = repetition_;
    record.timestamp = utc_timestamp();
    record.seed = std::to_string(options_.seed);
    Labels& l = record.labels;
    l.backend = stack_.backend;
    l.backend_version = stack_.backend_version;
    l.mpi_version = stack_.mpi_version;
    l.mpi_config = stack_.mpi_config;
    l.device = stack_.device;
    l.host = stack_.host;
    if (l.world_size == 0) l.world_size = stack_.world_size;
    if (l.nodes == 0) l.nodes = stack_.nodes;
    if (l.ranks_per_node == 0) l.ranks_per_node = stack_.ranks_per_node;
  }

 private:
  Communicator* tested_;
  Communicator& control_;
  const RunOptions& options_;
  Memory memory_;
  const StackInfo& stack_;
  int repetition_ = 1;
  std::string run_id_;
  Results* results_;
  OpObserver* observer_;
  std::mutex case_mutex_;  // participants() on the main thread; label_unfinished() on the watchdog's too
  std::optional<Participants> case_participants_;
  std::string note_;  // main thread only
  Watchdog* watchdog_ = nullptr;
};

// SIGINT and SIGTERM: a handler (whichever thread the kernel picks: MPI's and BLAS's threads
// have masks of their own) writes the signal's number and its sender to a pipe; a thread of ours
// reads them and hands the first to `on_signal`, which ends the job.
struct CaughtSignal {
  int signal = 0;
  pid_t sender = 0;  // 0: the kernel's (a terminal's Ctrl-C)
};
int g_signal_pipe[2] = {-1, -1};
extern "C" void forward_stop_signal(int signal, siginfo_t* info, void* /*context*/) {
  const int saved = errno;
  const CaughtSignal caught{signal, info && info->si_code <= 0 ? info->si_pid : 0};  // si_code <= 0: sent by a process
  // One write of a few bytes, below PIPE_BUF: whole or not at all; async-signal-safe.
  [[maybe_unused]] const ssize_t written = ::write(g_signal_pipe[1], &caught, sizeof caught);
  errno = saved;
}

class SignalWatcher {
 public:
  explicit SignalWatcher(std::function<void(const CaughtSignal&)> on_signal) {
    if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;  // no pipe: the default action stays
    struct sigaction action {};
    action.sa_sigaction = forward_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART | SA_SIGINFO;
    ::sigaction(SIGINT, &action, &previous_int_);
    ::sigaction(SIGTERM, &action, &previous_term_);
    installed_ = true;
    thread_ = std::thread([this, on_signal = std::move(on_signal)] {
      while (!stopping_.load()) {
        pollfd fd{g_signal_pipe[0], POLLIN, 0};
        if (::poll(&fd, 1, 100) <= 0) continue;  // 0.1 s: how soon stop() returns
        CaughtSignal caught;
        if (::read(g_signal_pipe[0], &caught, sizeof caught) == static_cast<ssize_t>(sizeof caught)) {
          on_signal(caught);
          return;
        }
      }
    });
  }
  ~SignalWatcher() { stop(); }
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;
  // From here on a signal has its previous action again (MPI_Finalize and exit are near).
  void stop() {
    stopping_.store(true);
    if (thread_.joinable()) thread_.join();
    if (installed_) {
      ::sigaction(SIGINT, &previous_int_, nullptr);
      ::sigaction(SIGTERM, &previous_term_, nullptr);
      installed_ = false;
    }
  }

 private:
  std::atomic<bool> stopping_{false};
  bool installed_ = false;
  struct sigaction previous_int_ {}, previous_term_ {};
  std::thread thread_;
};

// A case's outcome on one rank, agreed on as the largest: the row is a SKIP for unsupported on
// every rank, a FAIL otherwise.
constexpr int kStatusUnsupported = 1, kStatusFailed = 2, kStatusSetup = 3;

// The status and text of a case's error (status 0 and no text for none).
std::pair<int, std::string> classify(const std::exception_ptr& failure) {
  if (!failure) return {0, {}};
  try {
    std::rethrow_exception(failure);
  } catch (const Error& e) {
    const int status = e.kind() == Error::Kind::unsupported        ? kStatusUnsupported
                       : e.kind() == Error::Kind::invalid_argument ? kStatusSetup
                                                                   : kStatusFailed;
    return {status, std::string(e.what()) + " (" + e.where() + ")"};
  } catch (const std::exception& e) {
    return {kStatusFailed, e.what()};
  }
}

// A set-up step's failure: the exit code (2, or 3 for an input that never came: a hang) and the
// text (rank 0's).
struct SetupFailure {
  int exit_code = kExitUsage;
  std::string text;
};

// Runs a set-up step on every rank and agrees on the outcome, so that when any rank fails all
// ranks leave together. Returns the failure, or nothing.
std::optional<SetupFailure> agreed_failure(Communicator& agreement, const std::function<void()>& step) {
  constexpr int kFailed = 1, kTimedOut = 2;
  int status = 0;
  std::string message;
  try {
    step();
  } catch (const Error& e) {
    status = e.kind() == Error::Kind::timeout ? kTimedOut : kFailed;
    message = e.what();
  } catch (const std::exception& e) {
    status = kFailed;
    message = e.what();
  }
  auto [worst, text] = agree(agreement, status, message);
  if (worst == 0) return std::nullopt;
  return SetupFailure{worst == kTimedOut ? kExitTimeout : kExitUsage, text};
}

// Reads `path` on `comm`'s rank 0 and gives every rank of it the same bytes, or the same Error
// (collective): an input is read once for the job, so a FIFO or pipe is not split between ranks.
std::string read_on_rank_zero(Communicator& comm, const std::string& path, const std::string& what, InputLimits limits) {
  std::string text, error;
  int64_t header[3] = {0, 0, 0};  // failed, bytes that follow (the text or the error's), the error's kind
  if (comm.rank() == 0) {
    try {
      text = read_input_file(path, what, limits);
      header[1] = static_cast<int64_t>(text.size());
    } catch (const Error& e) {
      error = e.what();
      header[0] = 1;
      header[1] = static_cast<int64_t>(error.size());
      header[2] = static_cast<int64_t>(e.kind());
    }
  }
  comm.broadcast(header, header, 3, DType::i64, 0);
  std::string& payload = header[0] != 0 ? error : text;
  payload.resize(static_cast<size_t>(header[1]));
  if (header[1] > 0) comm.broadcast(payload.data(), payload.data(), payload.size(), DType::u8, 0);
  if (header[0] != 0) throw Error(static_cast<Error::Kind>(header[2]), payload);
  return text;
}

// The ranks that share this rank's memory (one node, whatever --node says).
int ranks_sharing_memory() {
  MPI_Comm local = MPI_COMM_NULL;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) != MPI_SUCCESS) return 1;
  int size = 1;
  MPI_Comm_size(local, &size);
  MPI_Comm_free(&local);
  return size;
}

// The least of the ranks' memory_available_per_rank, with the words of the lowest rank that has it:
// one bound for the job (RunOptions::memory_available). Collective over `comm`.
MemoryAvailable least_memory_available(Communicator& comm, int ranks_on_node) {
  const MemoryAvailable mine = memory_available_per_rank(ranks_on_node);
  double least = mine.bytes;
  comm.all_reduce(&least, &least, 1, DType::f64, ReduceOp::min);
  int32_t holder = mine.bytes == least ? comm.rank() : comm.size();
  comm.all_reduce(&holder, &holder, 1, DType::i32, ReduceOp::min);
  char source[256] = {};
  if (comm.rank() == holder) std::snprintf(source, sizeof(source), "%s", mine.source.c_str());
  comm.broadcast(source, source, sizeof(source), DType::u8, holder);
  return {least, source};
}

// Why `device` (--device: auto, cpu, cuda, emulated) cannot run `tested`, or nothing. Collective
// over `control`: whether a CUDA device answers is every rank's question, and all ranks refuse
// alike (the least count decides).
std::optional<std::string> device_refusal(Communicator& tested, Communicator& control, const std::string& backend,
                                          const std::string& device) {
  const bool device_backend = tested.memory() == Memory::device;
  const std::string staged = "staged(" + backend + ")";
  if (device == "cpu" && device_backend) {
    return "backend " + backend + " takes device memory; it cannot run with --device cpu (leave --device out, or " +
           "pass --device cuda)";
  }
  if ((device == "cuda" || device == "emulated") && !device_backend) {
    return "backend " + backend + " takes host memory; --device " + device + " needs a device backend: nccl (one " +
           "GPU per rank) or " + staged + " (device memory carried through " + backend + ", for ranks that share a GPU)";
  }
  if (device == "emulated" && !tested.reaches_device_by_copies()) {
    return "backend " + backend + " hands device pointers to its library, which needs CUDA memory; --device " +
           "emulated runs staged(INNER) backends, such as staged(mpi)";
  }
  if ((device == "cuda" || device == "auto") && device_backend && tested.reaches_device_by_copies()) {
    int32_t devices = cuda_device_count();
    control.all_reduce(&devices, &devices, 1, DType::i32, ReduceOp::min);
    if (devices == 0) {
      return "backend " + backend + " takes CUDA device memory and a rank sees no CUDA device (no GPU, no driver, " +
             "or CUDA_VISIBLE_DEVICES hides them); --device emulated runs the device path in host memory";
    }
  }
  return std::nullopt;
}

// An acceptance run (the hardware suite) writes the inventory as rows, its findings as failed
// checks; every other run keeps its files to the suites it ran and shows the inventory, findings
// included, in the console only: scripts that read a collectives CSV see collectives rows.
bool writes_inventory_rows(const RunOptions& o) {
  return std::find(o.suites.begin(), o.suites.end(), "hardware") != o.suites.end();
}

void print_preamble(const Command& cmd, const StackInfo& stack, const std::string& run_id, const std::string& csv,
                    size_t cases) {
  const RunOptions& o = cmd.run;
  std::string suites;
  for (const auto& s : o.suites) suites += (suites.empty() ? "" : ",") + s;
  std::printf("# dtsuite %s  run %s  suites %s\n", DTS_VERSION, run_id.c_str(), suites.c_str());
  std::printf("# backend %s (%s)  device %s\n", stack.backend.c_str(), stack.backend_version.c_str(), stack.device.c_str());
  if (!stack.mpi_config.empty()) std::printf("# MPI settings: %s\n", stack.mpi_config.c_str());
  std::printf("# %d ranks on %d node(s), %d per node, host %s\n", stack.world_size, stack.nodes, stack.ranks_per_node,
              stack.host.c_str());
  // With the hardware suite the findings follow as the inventory's check rows (inventory_records).
  for (const std::string& line :
       describe_inventory(stack.inventory, writes_inventory_rows(o) ? std::vector<InventoryFinding>{}
                                                                    : stack.inventory_findings)) {
    std::printf("# %s\n", line.c_str());
  }
  // Each suite's own flags, as it describes them (collectives: nccl-tests' "minBytes ... step").
  for (const auto& name : o.suites) {
    auto group = o.flags_by_group.find(name);
    if (group == o.flags_by_group.end()) continue;
    const std::string line = group->second->describe();
    if (!line.empty()) std::printf("# %s\n", line.c_str());
  }
  std::printf("# warmup iters: %d iters: %d validation: %d timeout: %g s seed: %llu\n", o.warmup, o.iters,
              o.check ? 1 : 0, o.timeout_seconds, static_cast<unsigned long long>(o.seed));
  if (cmd.profile) {
    std::printf("# profile %s: %zu thresholds\n", cmd.profile->path.c_str(), cmd.profile->thresholds.size());
  }
  for (const std::string& path : cmd.expect_paths) std::printf("# expect %s: known deviations, cited\n", path.c_str());
  if (o.repeat > 1) {
    std::printf("# %zu cases, %d repetitions of the plan, each in an order shuffled by the seed; results: %s\n#\n",
                cases, o.repeat, csv.c_str());
  } else {
    std::printf("# %zu cases; results: %s\n#\n", cases, csv.c_str());
  }
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
  // A rank that dies of a signal (a library crashing inside a call) says which, where and in what
  // case before it goes; the node is the topology's name once that is known.
  install_fatal_signal_report(rank, o.node, o.backend);

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
  comm_options.fault_rate = cmd.fault_rate;
  comm_options.fault_seed = cmd.run.seed;
  comm_options.observer = observer;
  comm_options.node_name = o.node;
  std::unique_ptr<Communicator> tested;
  // --record-trace: the stack under test behind the recorder (trace/recorder.h), one file per rank;
  // a communicator made anew after an abort writes into the same file.
  std::shared_ptr<trace::Recording> recording;
  auto make_tested = [&] {
    std::unique_ptr<Communicator> made = make_communicator(o.backend, comm_options);
    if (cmd.record_trace_dir.empty()) return made;
    if (!recording) recording = trace::start_recording(cmd.record_trace_dir, rank, size, o.backend);
    return trace::record_calls(std::move(made), recording);
  };
  std::vector<std::unique_ptr<Suite>> suites;
  std::vector<std::pair<Suite*, Case>> cases;
  // The suites' plans read their inputs (--data) once for the job, through `control`.
  o.read_input = [&control, timeout = o.timeout_seconds](const std::string& path, const std::string& what,
                                                         InputLimits limits) {
    limits.timeout_seconds = timeout;
    return read_on_rank_zero(*control, path, what, limits);
  };
  o.ranks_on_node = ranks_sharing_memory();
  o.memory_available = least_memory_available(*control, o.ranks_on_node);
  auto planned = agreed_failure(*agreement, [&] {
    for (const auto& name : o.suites) suites.push_back(make_suite(name));
    tested = make_tested();
    std::set<std::pair<std::string, std::string>> planned_ids;
    for (auto& suite : suites) {
      for (auto& c : suite->plan(o)) {
        // Two flags that ask for one case (--strategy ddp,ddp(dp=2) at 2 ranks) would write rows
        // that no reader can tell apart, and compare refuses such a file.
        if (!planned_ids.emplace(std::string(suite->name()), c.id).second) {
          throw Error(Error::Kind::invalid_argument, std::string(suite->name()) + " case " + quoted_input(c.id) +
                                                         " is asked for twice (by two items of one list)");
        }
        cases.emplace_back(suite.get(), std::move(c));
      }
    }
  });
  o.read_input = nullptr;  // plan() is over; `control` must not outlive what captured it
  if (planned) {
    say("error: " + planned->text);
    return planned->exit_code;
  }

  // Where buffers live is the backend's to say; --device only asks, and a device the backend
  // cannot use is the user's error, said before any case runs.
  if (auto refused = device_refusal(*tested, *control, o.backend, o.device)) {
    say("error: " + *refused);
    return kExitUsage;
  }
  if (o.device == "auto") o.device = tested->memory() == Memory::device ? "cuda" : "cpu";
  if (o.device == "emulated") use_device_kind(DeviceKind::emulated);
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
        // Before any sink opens its file: a refused output leaves every path as it was, and no
        // output is a file the run reads (the profile, every suite flag's input).
        std::vector<NamedPath> inputs{{"--profile", cmd.profile_path}};
        for (const std::string& path : cmd.expect_paths) inputs.push_back({"--expect", path});
        for (const auto& [name, group] : o.flags_by_group) {
          for (NamedPath& input : group->input_files()) inputs.push_back(std::move(input));
        }
        check_outputs(inputs, {{"--csv", csv_path}, {"--junit", cmd.junit_path}, {"--prom", cmd.prom_path}});
        if (!cmd.expect_paths.empty()) {
          std::vector<ExpectationFile> files;
          for (const std::string& path : cmd.expect_paths) files.push_back(load_expectations(path, o.timeout_seconds));
          results.expect(std::move(files));
        }
        results.add(std::make_unique<ConsoleTable>(stdout), stdout);
        results.add(std::make_unique<CsvSink>(csv_path));
        if (!cmd.junit_path.empty()) results.add(std::make_unique<JunitSink>(cmd.junit_path));
        if (auto prom = make_prometheus_sink(cmd, stack, run_id, cases.size() * static_cast<size_t>(o.repeat), progress)) {
          results.add(std::move(prom));
        }
      })) {
    say("error: " + failure->text);
    return failure->exit_code;
  }
  if (leader) print_preamble(cmd, stack, run_id, csv_path, cases.size());

  HarnessContext context(*tested, *control, o, tested->memory(), stack, run_id, &results, observer.get());
  if (writes_inventory_rows(o)) {
    for (Record& r : inventory_records(stack.inventory, stack.inventory_findings)) context.emit(std::move(r));
  }
  std::string current_suite;
  const Case* current_case = nullptr;
  std::string previous_case;  // the last case whose rows are all written: where a row between cases goes
  std::mutex current_mutex;
  // The last word of a job that ends while a case runs (rank 0, from the watchdog's or the
  // signal thread): the case's row, then the sinks closed, one line on stderr, and the job ended
  // with `exit_code`. Rows already written stay as they are. `error_type`: the row's (Record).
  std::mutex ending_mutex;  // one ending only: a signal during a timeout's write waits for it
  auto end_job = [&](Verdict verdict, const std::string& detail, double threshold, const std::string& line,
                     int exit_code, const std::string& error_type) {
    std::lock_guard ending(ending_mutex);
    results.begin_ending();
    Record r;
    bool in_case = false;
    {
      std::lock_guard lock(current_mutex);
      r.suite = current_suite;
      in_case = current_case != nullptr;
      if (in_case) {
        r.case_id = current_case->id;
        r.labels = current_case->labels;
      } else {
        // Between cases, before the first or after the last (the summaries, the outputs' closing):
        // the row still says how the job ended, under the run's own name, so that no output of a
        // job that lost a rank or was stopped reads as complete and green.
        r.suite = "run";
        r.case_id = previous_case.empty() ? "before the first case" : "after " + previous_case;
      }
    }
    if (in_case) context.label_unfinished(r.labels);
    r.metric = "check";
    r.value = 0;  // the check did not hold, or did not finish
    r.verdict = verdict;
    r.threshold = threshold;
    r.detail = detail;
    r.error_type = error_type;
    context.stamp(r);
    {
      const NonBlockingPipe console(STDOUT_FILENO);
      results.write_final(r);
      results.close(/*ending=*/true);
      Results::flush_if_free(stdout);  // the main thread may be stuck inside a write to it
    }
    std::fprintf(stderr, "dtsuite: %s\n", line.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  };
  Watchdog watchdog(observer, control_observer, o.timeout_seconds, [&](const std::string& why) {
    // Rank 0's watchdog thread: the main threads are stuck. Write what we know, then end the job.
    double threshold = o.timeout_seconds;
    {
      std::lock_guard lock(current_mutex);
      if (current_case && current_case->time_budget_seconds > 0) threshold = current_case->time_budget_seconds;
    }
    end_job(Verdict::timeout, why, threshold, "timeout: " + why, kExitTimeout, "");
  });

  // An error on some ranks while the others wait inside a call that the failed ranks will never
  // make: the case can never agree, so rank 0's watchdog thread writes the case's fail row (the
  // error, and where the others are) and ends the job: exit 2 for a set-up error, 1 otherwise.
  watchdog.on_stuck_error([&](int status, const std::string& error, const std::string& where) {
    std::string case_id;
    {
      std::lock_guard lock(current_mutex);
      if (current_case) case_id = current_case->id;
    }
    end_job(Verdict::fail, error + "; the case cannot end (ranks still in it: " + where + "); the job stops here", 0,
            "error in case " + case_id + ": " + error + "; the job stops (ranks still in the case: " + where + ")",
            status == kStatusSetup ? kExitUsage : kExitFail, "");
  });

  // SIGINT or SIGTERM (Ctrl-C, scancel, a CI job's cancel): rank 0 writes the running case's row
  // (skip: it did not finish), closes the sinks and ends the job with 128 + the signal's number.
  // Another rank that gets one gives rank 0, which a launcher signals too, a moment to do so first.
  // A launcher also sends SIGTERM when the job lost a process (killed, crashed): every rank says
  // it got the signal, and a rank gone without a word makes the row a FAIL naming it and its node
  // (Watchdog::lost_ranks), and the exit code 1. A signal from the rank's parent process is the
  // launcher's (mpirun, its daemon, slurmstepd), which signals every rank.
  SignalWatcher signals([&](const CaughtSignal& caught) {
    const int signal = caught.signal;
    const std::string what = signal == SIGINT ? "SIGINT" : "SIGTERM";
    watchdog.note_signal(signal);
    if (!leader) {
      std::this_thread::sleep_for(std::chrono::seconds(3));
    } else if (const Watchdog::Lost lost = watchdog.lost_ranks(caught.sender != 0 && caught.sender == ::getppid());
               lost.any()) {
      std::string case_id;
      {
        std::lock_guard lock(current_mutex);
        if (current_case) case_id = current_case->id;
      }
      std::string who;
      if (lost.ranks.empty()) {
        who = "a rank of the job was lost (rank 0's MPI calls no longer return, as when the library reports a lost "
              "peer, so it could not ask which)";
      } else {
        who = watchdog.describe_ranks(lost.ranks) +
              (lost.ranks.size() == 1 ? " stopped answering (killed, or crashed)"
                                      : " stopped answering (killed, crashed, or held up by a lost peer)");
      }
      end_job(Verdict::fail, who + " during the case, so it cannot finish; the job was then ended by " + what, 0,
              who + (case_id.empty() ? "" : " during case " + case_id) + "; the job was ended by " + what +
                  "; rows written so far are kept (exit " + std::to_string(kExitFail) + ")",
              kExitFail, "rank_lost");
    }
    const int code = kExitSignalBase + signal;
    end_job(Verdict::skip, "interrupted by " + what + " before the case finished", 0,
            "interrupted by " + what + "; rows written so far are kept (exit " + std::to_string(code) + ")", code, "");
  });

  // A suite that catches an error and agrees on it itself (leave_together) says so here first.
  set_failure_listener([&watchdog](const std::exception_ptr& failure) {
    const auto [status, message] = classify(failure);
    watchdog.report_error(status, message);
  });
  watchdog.set_nodes(stack.topology.nodes.names);
  if (static_cast<size_t>(rank) < stack.topology.nodes.names.size()) {
    install_fatal_signal_report(rank, stack.topology.nodes.names[static_cast<size_t>(rank)], o.backend);
  }
  context.set_watchdog(&watchdog);
  // A communicator that an error or timeout left aborted (nccl's, after its first failure)
  // refuses every later call, which once failed every case after the one that broke it. After
  // each case the ranks agree (collective, over `agreement`) whether any rank's is aborted; if so
  // every rank gives its own up (abort: dropping it then waits for no peer), and all make a new
  // one with the same options. Returns the failure to make one, agreed on, or nothing.
  int renewal_failed = 0;  // the exit code when a new communicator could not be made
  auto renew_if_aborted = [&](const std::string& case_id) -> std::optional<SetupFailure> {
    int32_t aborted = tested->aborted() ? 1 : 0;
    agreement->all_reduce(&aborted, &aborted, 1, DType::i32, ReduceOp::max);
    if (aborted == 0) return std::nullopt;
    tested->abort();
    tested.reset();
    if (auto failure = agreed_failure(*agreement, [&] { tested = make_tested(); })) {
      return failure;
    }
    context.use_tested(*tested, "ran on a new " + o.backend + " communicator (case " + case_id +
                                    " left the last one aborted)");
    say("case " + case_id + " left the " + o.backend + " communicator aborted; the next case runs on a new one");
    return std::nullopt;
  };
  const std::vector<size_t> order = case_order(cases.size(), o.repeat, o.seed);
  for (size_t step = 0; step < order.size(); ++step) {
    const size_t i = order[step];
    context.set_repetition(static_cast<int>(step / std::max<size_t>(cases.size(), 1)) + 1);
    auto& [suite, the_case] = cases[i];
    {
      std::lock_guard lock(current_mutex);
      current_case = &the_case;
      current_suite = std::string(suite->name());
    }
    watchdog.begin_case(static_cast<int64_t>(step), the_case.id, the_case.time_budget_seconds);
    set_fatal_signal_case(the_case.id);
    progress.begin(step, suite->name(), the_case.id);
    std::exception_ptr failure;
    try {
      suite->run(the_case, context);
    } catch (const std::exception&) {
      failure = std::current_exception();
    }
    const auto [status, message] = classify(failure);
    watchdog.body_done(status, message);
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
      r.verdict = worst == kStatusUnsupported ? Verdict::skip : Verdict::fail;
      r.detail = text;
      context.emit(r);
    }
    context.end_case();
    const std::optional<SetupFailure> renewal = renew_if_aborted(the_case.id);
    progress.end(step);
    {
      std::lock_guard lock(current_mutex);
      previous_case = the_case.id;
      current_case = nullptr;  // its rows are written: an ending before the next one writes a row of the run
    }
    set_fatal_signal_case("");
    if (renewal) {
      say("error: case " + the_case.id + " left the " + o.backend + " communicator aborted, and a new one could " +
          "not be made: " + renewal->text + "; the cases after it did not run");
      renewal_failed = renewal->exit_code;
      break;
    }
  }

  set_failure_listener(nullptr);
  int exit_code = kExitPass;
  if (leader) {
    for (Record& r : results.profile_summary()) context.emit(std::move(r));
    for (Record& r : results.expectation_summary()) context.emit(std::move(r));
    results.close();
    if (results.failed_cases() > 0) exit_code = kExitFail;
    if (results.sink_failed() && exit_code == kExitPass) exit_code = kExitUsage;
    if (renewal_failed != 0) exit_code = renewal_failed;
  }
  agreement->broadcast(&exit_code, &exit_code, 1, DType::i32, 0);
  if (recording) {
    // A trace that could not be written whole is said by the rank that wrote it, and the run's
    // rows stay as they are: exit 2, as any output that failed.
    int32_t unwritten = 0;
    try {
      trace::finish_recording(*recording);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dtsuite: error: rank %d: %s\n", rank, e.what());
      unwritten = 1;
    }
    agreement->all_reduce(&unwritten, &unwritten, 1, DType::i32, ReduceOp::max);
    if (unwritten != 0 && exit_code == kExitPass) exit_code = kExitUsage;
    say("trace of every call of the stack: " + cmd.record_trace_dir + "/rank-R.jsonl (dtsuite trace stats " +
        cmd.record_trace_dir + ")");
  }
  signals.stop();
  watchdog.stop();
  return exit_code;
}

void print_list() {
  std::printf("suites:\n");
  for (const SuiteInfo& info : suite_catalog()) std::printf("  %-22s %s\n", info.name.c_str(), info.summary.c_str());
  std::printf("backends:\n");
  for (const auto& b : registered_backends()) std::printf("  %-22s %s\n", b.usage.c_str(), b.summary.c_str());
  std::printf("collectives: all_reduce reduce_scatter all_gather broadcast reduce all_to_all send_recv\n");
  std::string dtypes, fp8;
  for (const DType d : kAllDTypes) dtypes += " " + std::string(name(d));
  for (const DType d : kFp8DTypes) fp8 += " " + std::string(name(d));
  std::printf("dtypes:%s; fp8 (SKIP where nothing carries it):%s\nops: sum prod min max avg\n", dtypes.c_str(), fp8.c_str());
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

// The command line again, now with the profile's text: read once, by rank 0, and the same bytes
// given to every rank (a FIFO is not split between ranks, a bad profile stops every rank alike).
// `--profile auto`: the shipped profile for the part every rank runs on, its GPU (the one its
// place on its node picks, as the nccl backend does) or else its CPU model. Collective: every rank
// gathers every rank's part, so every rank chooses alike, or throws alike when they differ.
BuiltinProfile auto_profile(Communicator& world, const std::string& node_override) {
  const NodeMap nodes = discover_nodes(world, node_override);
  const int devices = cuda_device_count();
  const std::string part = devices > 0 ? cuda_device_name(nodes.local_rank(world.rank()) % devices) : cpu_model();
  // A part name: NVML's are under 96 bytes.
  const std::vector<std::string> parts = all_gather_texts(world, part, 255);
  return choose_builtin_profile(common_part(parts));
}

Command with_profile(int argc, char** argv, const Command& first) {
  std::unique_ptr<Communicator> world = make_communicator("mpi", CommOptions{});
  if (first.profile_path == kAutoProfile) {
    BuiltinProfile chosen;
    try {
      chosen = auto_profile(*world, first.run.node);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
    Command cmd = parse_command_line(argc, argv, [&chosen](const std::string&) { return std::string(chosen.text); });
    // Cited as the file it was built from ("acceptance-h100-sxm.toml [[threshold]] #3").
    cmd.profile->path = std::string(chosen.file_name);
    if (world->rank() == 0) std::printf("profile: auto chose %s\n", std::string(chosen.file_name).c_str());
    return cmd;
  }
  InputLimits limits = profile_limits();
  limits.timeout_seconds = first.run.timeout_seconds;  // -T as given on the command line
  const std::string text = read_on_rank_zero(*world, first.profile_path, "profile", limits);
  return parse_command_line(argc, argv, [&text](const std::string&) { return text; });
}

}  // namespace

int harness_main(int argc, char** argv) {
  // A file past the size limit (ulimit -f) is a write error the sinks report and survive, as a
  // full disk is; SIGXFSZ's default action would end the process and lose the rows still to come.
  std::signal(SIGXFSZ, SIG_IGN);
  Command cmd;
  try {
    // `run --profile` is read once MPI runs (with_profile); everything else is checked here.
    cmd = parse_command_line(argc, argv, ProfileText{});
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
    case Command::Kind::ab:
      return run_ab(cmd.ab);
    case Command::Kind::report:
      return run_report(cmd.report);
    case Command::Kind::plan:
      return run_plan(cmd.plan);
    case Command::Kind::trace:
      return run_trace(cmd.trace);
    case Command::Kind::run: break;
  }

  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int exit_code = kExitUsage;
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const Launch launch = launcher_world_size();
  if (launch.ranks > 0 && launch.ranks != world) {
    // Every process is rank 0 of its own world here: the launcher's rank 0 alone says why.
    if (launch.rank_zero) {
      std::fprintf(stderr,
                   "dtsuite: error: the launcher started %ld ranks (%s=%ld) but MPI sees a world of %d: this dtsuite "
                   "is built against %s, so start it with that library's mpirun/mpiexec; nothing was run\n",
                   launch.ranks, launch.variable, launch.ranks, world, short_mpi(mpi_library_version()).c_str());
    }
  } else if (provided < MPI_THREAD_MULTIPLE && cmd.run.timeout_seconds > 0) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) std::fprintf(stderr, "dtsuite: error: the MPI library does not provide MPI_THREAD_MULTIPLE, which the watchdog (-T) needs; run with -T 0\n");
  } else {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    bool ready = true;
    try {
      if (!cmd.profile_path.empty()) cmd = with_profile(argc, argv, cmd);
    } catch (const UsageError& e) {
      // Every rank parsed the same text, so every rank is here: one line from rank 0.
      if (rank == 0) std::fprintf(stderr, "dtsuite: error: %s (see dtsuite --help)\n", e.what());
      ready = false;
    } catch (const Error& e) {
      // The profile could not be read (every rank throws rank 0's error): nothing ran yet.
      if (rank == 0) std::fprintf(stderr, "dtsuite: error: %s\n", e.what());
      exit_code = e.kind() == Error::Kind::timeout ? kExitTimeout : kExitUsage;
      ready = false;
    }
    if (ready) try {
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
