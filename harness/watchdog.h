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
  // The node of each rank (comm/topology.h), named in the diagnosis of ranks that did not arrive.
  void set_nodes(std::vector<std::string> node_of_rank);
  // Collective: every rank calls it before MPI_Finalize.
  void stop();

 private:
  void run_leader();
  void run_follower();
  static constexpr int kStateSize = 7;  // local_state() and, last, the query it answers
  static constexpr int64_t kHarnessOp = 1000;  // a call of the harness's communicators, not the stack's
  using State = std::array<int64_t, kStateSize>;
  struct Answers {
    std::vector<State> states;
    std::vector<bool> answered;
  };
  Answers query_states();
  std::string diagnose(const std::string& why, const Answers& answers);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  State local_state() const;

  std::shared_ptr<OpObserver> tested_, control_;
  std::atomic<int64_t> entered_at_case_start_{0};
  double timeout_seconds_;
  std::function<void(const std::string&)> on_timeout_;
  std::atomic<int64_t> case_index_{-1};
  std::atomic<bool> case_active_{false};
  std::atomic<bool> stopping_{false};
  std::mutex case_mutex_;
  std::string case_id_;
  std::chrono::steady_clock::time_point case_start_;
  double case_budget_ = 0;
  std::vector<std::string> nodes_;
  int64_t query_seq_ = 0;                 // leader thread only
  std::vector<int64_t> query_buffer_;     // the last queries' send buffers
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace dts
