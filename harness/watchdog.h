// The watchdog: a thread on every rank that lets rank 0 notice a case running past its timeout
// and find out which ranks never arrived at the collective, even while every main thread is
// blocked inside MPI. It talks over its own duplicate of MPI_COMM_WORLD (MPI_THREAD_MULTIPLE).
#pragma once
#include <mpi.h>

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"

namespace dts {

class Watchdog {
 public:
  // `on_timeout` runs on rank 0's watchdog thread with a one-line description naming the case
  // and the ranks that did not arrive; it must end the job (the harness writes what it has and
  // aborts). timeout_seconds == 0 disables the timeout but keeps the thread protocol uniform.
  // `tested` observes the stack under test, `control` the harness's own communicators (a rank
  // waiting there for its peers' verification results has arrived too).
  Watchdog(std::shared_ptr<OpObserver> tested, std::shared_ptr<OpObserver> control, double timeout_seconds,
           std::function<void(const std::string&)> on_timeout);
  ~Watchdog();  // stop() if not yet stopped
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Main thread, every rank. budget_seconds > 0: a long case's own budget (suites/suite.h, Case):
  // it times out past the budget, or after timeout_seconds in which rank 0 made no call into the
  // stack or the harness's communicators (a hang), whichever comes first. 0: timeout_seconds of age.
  void begin_case(int64_t index, const std::string& id, double budget_seconds = 0);
  void end_case();
  // Main thread, every rank: the case's clock stops from pause_case() to resume_case(), while this
  // rank checks a result on the host and calls nothing: -T bounds the stack's calls, not the
  // host's checking of a large result (minutes for 8 GiB). Rank 0's clock is the one that counts,
  // so a slower check on another rank, which rank 0 then waits for, is on the clock.
  void pause_case();
  void resume_case();
  // Main thread, every rank, when the case body is over and the rank goes to agree on its outcome:
  // `status` 0 if the body returned, otherwise the harness's status of the error it threw (1
  // unsupported, 2 failure, 3 set-up error) and the error's text. An error goes to rank 0's
  // watchdog thread at once: if the other ranks then stay inside a call that the failed ranks will
  // never make (so the agreement can never complete), `on_stuck_error` ends the job within about
  // kErrorGrace * 2, instead of the job waiting for the timeout. Works with timeout_seconds == 0 too.
  void body_done(int status, const std::string& message = {});
  // Main thread, any rank: an error this rank will agree on inside the case (a suite's own
  // agreement, comm/text.h leave_together), sent to rank 0 as body_done sends one.
  void report_error(int status, const std::string& message);
  // Set before the case loop (rank 0): called on rank 0's watchdog thread with the status and
  // text of the first failed rank ("rank N: ...") and a description of where the others wait; it
  // must end the job.
  void on_stuck_error(std::function<void(int status, const std::string& error, const std::string& where)> callback);
  // The node of each rank (comm/topology.h), named in the diagnosis of ranks that did not arrive.
  void set_nodes(std::vector<std::string> node_of_rank);
  // Any rank, from the thread that caught SIGINT or SIGTERM: says so to rank 0 (a rank other than
  // 0 has its watchdog thread send it at once, whatever its main thread does; on rank 0 it does
  // nothing). A rank that said so is alive when the signal came, and one that then ends the job
  // itself has left on a signal, not been lost.
  void note_signal(int signal);
  // What lost_ranks found. `ranks`: the ranks gone without a word; `held_up`: nobody could be asked
  // (rank 0's MPI calls did not return, as when the library reports a lost peer) and no rank had
  // said it got a signal.
  struct Lost {
    std::vector<int> ranks;
    bool held_up = false;
    bool any() const { return !ranks.empty() || held_up; }
  };
  // Rank 0, the thread that caught SIGINT or SIGTERM, before the job ends: which ranks are gone.
  // A launcher signals every rank together, both when it is told to stop and when the job lost a
  // process (Open MPI's mpirun sends SIGTERM, and SIGKILL 1 s later): the ranks still there say so
  // (note_signal), and with `from_launcher` those that do not within kSignalWindow are gone, and
  // rank 0 sends nothing (Open MPI's TCP transport ends a process that sends to a lost peer). A
  // signal from elsewhere may have come to rank 0 alone: unless every rank said so, rank 0 asks
  // every rank and waits kAnswerWindow for the answers. Every MPI call is made on a thread of its
  // own, so lost_ranks returns within about kSignalWindow + kAnswerWindow + 0.3 s whatever MPI
  // does (the same transport holds every call while it reports a lost peer), leaving a thread
  // still held up inside MPI behind: the caller must end the job next. The windows leave more than
  // a third of the launcher's second for writing the row and closing the outputs, while a live
  // rank's watchdog thread answers within a poll (10 ms): 20 and 30 polls. A rank that said so
  // kEarlierSignal or more before rank 0's own signal had a signal of its own and ended the job on
  // it (3 s later): an interruption, and the ranks its leaving holds up are not lost.
  static constexpr std::chrono::milliseconds kSignalWindow{200}, kAnswerWindow{300};
  static constexpr std::chrono::seconds kEarlierSignal{1};
  Lost lost_ranks(bool from_launcher);
  // "rank 3 (node n1)", "ranks 1 (node n0), 3 (node n1)": each with its node when known.
  std::string describe_ranks(const std::vector<int>& ranks) const;
  // Collective: every rank calls it before MPI_Finalize.
  void stop();

 private:
  void run_leader();
  void run_follower();
  static constexpr int kStateSize = 9;  // local_state() and, last, the query it answers
  static constexpr int64_t kHarnessOp = 1000;  // a call of the harness's communicators, not the stack's
  using State = std::array<int64_t, kStateSize>;
  struct Answers {
    std::vector<State> states;
    std::vector<bool> answered;
  };
  // A query and its answers travel on a channel's own tags, so that the watchdog thread's queries
  // and lost_ranks (another thread) never take each other's answers.
  struct Channel {
    int query_tag = 0, state_tag = 0;
    int64_t seq = 0;                  // the last query's sequence number
    std::vector<int64_t> buffer;      // the last queries' send buffers
  };
  Answers query_states(Channel& channel, std::chrono::steady_clock::duration wait);
  Answers query_states();  // the watchdog thread's channel, kAnswerWait
  std::string diagnose(const std::string& why, const Answers& answers);
  // Rank 0's watchdog thread: takes in the errors other ranks reported (body_done), and ends the
  // job when the ranks that did not fail are stuck inside a call. Returns true when it did.
  bool watch_errors();
  std::string describe_waiting(const Answers& answers) const;
  struct ErrorReport {
    int64_t case_index = -1;
    int rank = -1;
    int status = 0;
    std::string text;
    std::chrono::steady_clock::time_point seen;
  };

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  State local_state() const;

  std::shared_ptr<OpObserver> tested_, control_;
  std::atomic<int64_t> entered_at_case_start_{0};
  double timeout_seconds_;
  std::function<void(const std::string&)> on_timeout_;
  std::atomic<int64_t> case_index_{-1};
  std::atomic<bool> case_active_{false};
  std::atomic<bool> body_done_{false};
  std::mutex error_mutex_;
  std::optional<ErrorReport> error_;  // the current case's first reported error (rank 0)
  std::function<void(int, const std::string&, const std::string&)> on_stuck_error_;
  std::vector<int64_t> calls_at_error_check_;  // leader thread only
  std::atomic<bool> stopping_{false};
  mutable std::mutex case_mutex_;
  std::string case_id_;
  std::chrono::steady_clock::time_point case_start_;  // moved on by each pause's length
  std::optional<std::chrono::steady_clock::time_point> paused_since_;
  double case_budget_ = 0;
  std::vector<std::string> nodes_;
  Channel watch_channel_;                 // leader thread only
  Channel liveness_channel_;              // lost_ranks' thread, under liveness_mutex_
  std::mutex liveness_mutex_;
  // Rank 0: takes in note_signal's messages (matched probes, so that any thread may).
  void take_signal_notes();
  std::mutex signalled_mutex_;
  // Rank 0: when each rank said it got a signal (taken in by the watchdog thread within a poll).
  std::vector<std::optional<std::chrono::steady_clock::time_point>> signalled_;
  std::atomic<int> signal_{0};            // a follower: the signal it caught, for its watchdog thread
  int64_t signal_note_ = 0;               // a follower: the note's send buffer
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace dts
