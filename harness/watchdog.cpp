// Watchdog protocol. Followers (ranks 1..n-1) wait for queries from rank 0 and answer with
// their state: the case they are in and whether their main thread is inside a communication
// call (OpObserver). Rank 0 polls its own case's age; past the timeout it queries everyone,
// waits a bounded time for answers, and reports: ranks in an earlier case, or not inside a call
// while others are, did not arrive; ranks that do not answer are named as unresponsive.
#include "harness/watchdog.h"

#include <algorithm>
#include <cstring>
#include <array>
#include <set>
#include <sstream>
#include <vector>

#include "results/record.h"

namespace dts {

namespace {
constexpr int kQueryTag = 7101, kStateTag = 7102, kErrorTag = 7103;
constexpr int64_t kStopQuery = -1;  // a query is its sequence number, 1, 2, ...
constexpr auto kPoll = std::chrono::milliseconds(10);
// How long rank 0 waits for the others' answers once a timeout fired: their watchdog threads
// answer within a poll period unless the process is gone.
constexpr auto kAnswerWait = std::chrono::seconds(3);
// After a rank reports an error, how long rank 0 leaves the others to reach the agreement before
// it looks, and then between looks: a rank is stuck when it sits inside a call and made no call in
// the last look's interval, so a case ends about two of these after the error.
constexpr auto kErrorGrace = std::chrono::seconds(1);
constexpr size_t kErrorTextLimit = 1000;  // bytes of an error's text sent to rank 0


std::string join(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ",") + std::to_string(r);
  return out;
}
}  // namespace

Watchdog::Watchdog(std::shared_ptr<OpObserver> tested, std::shared_ptr<OpObserver> control, double timeout_seconds,
                   std::function<void(const std::string&)> on_timeout)
    : tested_(std::move(tested)),
      control_(std::move(control)),
      timeout_seconds_(timeout_seconds),
      on_timeout_(std::move(on_timeout)) {
  MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  thread_ = std::thread([this] { rank_ == 0 ? run_leader() : run_follower(); });
}

Watchdog::~Watchdog() {
  if (!stopped_) stop();
}

void Watchdog::begin_case(int64_t index, const std::string& id, double budget_seconds) {
  {
    std::lock_guard lock(case_mutex_);
    case_id_ = id;
    case_start_ = std::chrono::steady_clock::now();
    case_budget_ = budget_seconds;
  }
  entered_at_case_start_.store(tested_ ? tested_->entered.load() : 0);
  body_done_.store(false);
  case_index_.store(index);
  case_active_.store(true);
}

void Watchdog::end_case() { case_active_.store(false); }

void Watchdog::body_done(int status, const std::string& message) {
  body_done_.store(true);
  if (status != 0) report_error(status, message);
}

void Watchdog::report_error(int status, const std::string& message) {
  const std::string text = message.substr(0, kErrorTextLimit);
  if (rank_ == 0) {
    std::lock_guard lock(error_mutex_);
    if (!error_ || error_->case_index < case_index_.load() || status > error_->status) {
      error_ = ErrorReport{case_index_.load(), 0, status, text, std::chrono::steady_clock::now()};
    }
    return;
  }
  // [case index, status] and the text, in one message to rank 0's watchdog thread.
  std::vector<char> packet(2 * sizeof(int64_t) + text.size());
  const int64_t header[2] = {case_index_.load(), status};
  std::memcpy(packet.data(), header, sizeof header);
  std::memcpy(packet.data() + sizeof header, text.data(), text.size());
  MPI_Send(packet.data(), static_cast<int>(packet.size()), MPI_BYTE, 0, kErrorTag, comm_);
}

void Watchdog::on_stuck_error(std::function<void(int, const std::string&, const std::string&)> callback) {
  on_stuck_error_ = std::move(callback);
}

bool Watchdog::watch_errors() {
  const auto now = std::chrono::steady_clock::now();
  // Take in every report that arrived: the current case's worst status, its lowest rank first.
  while (true) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kErrorTag, comm_, &flag, &status);
    if (!flag) break;
    int bytes = 0;
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    std::vector<char> packet(static_cast<size_t>(std::max(bytes, 0)));
    MPI_Recv(packet.data(), bytes, MPI_BYTE, status.MPI_SOURCE, kErrorTag, comm_, MPI_STATUS_IGNORE);
    if (packet.size() < 2 * sizeof(int64_t)) continue;
    int64_t header[2];
    std::memcpy(header, packet.data(), sizeof header);
    ErrorReport report{header[0], status.MPI_SOURCE, static_cast<int>(header[1]),
                       std::string(packet.begin() + sizeof header, packet.end()), now};
    std::lock_guard lock(error_mutex_);
    if (!error_ || report.case_index > error_->case_index) {
      error_ = report;
    } else if (report.case_index == error_->case_index) {
      const bool first = report.status > error_->status || (report.status == error_->status && report.rank < error_->rank);
      report.seen = std::min(report.seen, error_->seen);
      if (first) error_ = report;
    }
  }
  if (!on_stuck_error_ || !case_active_.load()) return false;
  std::optional<ErrorReport> error;
  {
    std::lock_guard lock(error_mutex_);
    error = error_;
  }
  const int64_t current = case_index_.load();
  if (!error || error->case_index != current || now - error->seen < kErrorGrace) {
    calls_at_error_check_.clear();
    return false;
  }
  const Answers answers = query_states();
  // The ranks still in the case body: stuck when every one of them sits inside a call and made no
  // call since the last look (a rank computing, or still calling, may yet reach the agreement).
  bool anyone_in_body = false, all_stuck = !calls_at_error_check_.empty();
  calls_at_error_check_.resize(static_cast<size_t>(size_), -1);
  for (int r = 0; r < size_; ++r) {
    const State& s = answers.states[static_cast<size_t>(r)];
    if (!answers.answered[static_cast<size_t>(r)]) {
      anyone_in_body = true;  // gone, or stuck outside MPI: it will not agree either
      continue;
    }
    if (s[0] != current || s[6] != 0) continue;
    anyone_in_body = true;
    if (s[1] == 0 || s[3] != calls_at_error_check_[static_cast<size_t>(r)]) all_stuck = false;
    calls_at_error_check_[static_cast<size_t>(r)] = s[3];
  }
  if (!anyone_in_body || !all_stuck) {
    std::this_thread::sleep_for(kErrorGrace);  // the next look, one interval later
    return false;
  }
  const std::string text = error->rank == 0 ? error->text : "rank " + std::to_string(error->rank) + ": " + error->text;
  on_stuck_error_(error->status, text, describe_waiting(answers));
  return true;
}

// "ranks 0,2 wait inside all_reduce (...), rank 3 not answering": the ranks that did not reach the
// case's agreement, and where they are.
std::string Watchdog::describe_waiting(const Answers& answers) const {
  std::ostringstream out;
  bool first = true;
  for (int r = 0; r < size_; ++r) {
    const State& s = answers.states[static_cast<size_t>(r)];
    if (answers.answered[static_cast<size_t>(r)] && s[6] != 0) continue;
    out << (first ? "" : ", ") << "rank " << r;
    first = false;
    if (!answers.answered[static_cast<size_t>(r)]) out << " not answering";
    else if (s[4] >= kHarnessOp) out << " in the harness's " << name(observed_op_of(s[4] - kHarnessOp));
    else if (s[4] > 0) out << " in " << name(observed_op_of(s[4]));
    else out << " outside any call";
  }
  return out.str();
}

// [case index, calls in progress (stack under test or harness), calls into the stack this case,
//  calls into the stack or the harness's communicators since the start, the call in progress
//  (an ObservedOp of the stack, or kHarnessOp + one of the harness's), the stack's last completed,
//  1 once the case body is over (body_done)]
Watchdog::State Watchdog::local_state() const {
  const int64_t inside = (tested_ ? tested_->inside.load() : 0) + (control_ ? control_->inside.load() : 0);
  const int64_t entered = tested_ ? tested_->entered.load() - entered_at_case_start_.load() : 0;
  const int64_t calls = (tested_ ? tested_->entered.load() : 0) + (control_ ? control_->entered.load() : 0);
  int64_t op = tested_ ? tested_->current.load() : 0;
  if (op == 0 && control_ && control_->current.load() != 0) op = kHarnessOp + control_->current.load();
  const int64_t last = tested_ ? tested_->last_completed.load() : 0;
  return {case_index_.load(), inside, entered, calls, op, last, body_done_.load() ? 1 : 0, 0};
}

void Watchdog::set_nodes(std::vector<std::string> node_of_rank) {
  std::lock_guard lock(case_mutex_);
  nodes_ = std::move(node_of_rank);
}

void Watchdog::stop() {
  if (stopped_) return;
  stopped_ = true;
  stopping_.store(true);
  if (thread_.joinable()) thread_.join();
  MPI_Comm_free(&comm_);
}

void Watchdog::run_follower() {
  int64_t query = 0;
  MPI_Request request;
  MPI_Irecv(&query, 1, MPI_INT64_T, 0, kQueryTag, comm_, &request);
  while (true) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (!done) {
      std::this_thread::sleep_for(kPoll);
      continue;
    }
    if (query == kStopQuery) return;
    State state = local_state();
    state[kStateSize - 1] = query;  // the query's sequence number, echoed
    MPI_Send(state.data(), kStateSize, MPI_INT64_T, 0, kStateTag, comm_);
    MPI_Irecv(&query, 1, MPI_INT64_T, 0, kQueryTag, comm_, &request);
  }
}

void Watchdog::run_leader() {
  // Progress of a case with a budget: the most calls each rank was seen to have made, and when
  // any of those counts last grew. Rank 0's own count is read every poll; the others' are asked
  // for only when rank 0's has not grown for -T (rank 0 may wait while another group trains).
  std::vector<int64_t> calls_seen(static_cast<size_t>(size_), -1);
  int64_t case_seen = -1;
  auto last_progress = std::chrono::steady_clock::now();
  while (!stopping_.load()) {
    std::this_thread::sleep_for(kPoll);
    if (watch_errors()) return;  // on_stuck_error ends the job
    if (timeout_seconds_ <= 0 || !case_active_.load()) continue;
    std::chrono::steady_clock::time_point start;
    double budget = 0;
    {
      std::lock_guard lock(case_mutex_);
      start = case_start_;
      budget = case_budget_;
    }
    const auto now = std::chrono::steady_clock::now();
    const double age = std::chrono::duration<double>(now - start).count();
    std::ostringstream why;
    if (budget <= 0) {
      if (age < timeout_seconds_) continue;
      why << "timed out after " << timeout_seconds_ << " s";
    } else {
      const auto grew = [&](int rank, int64_t calls) {
        int64_t& seen = calls_seen[static_cast<size_t>(rank)];
        const bool more = calls > seen;
        seen = std::max(seen, calls);
        return more;
      };
      if (case_index_.load() != case_seen) {
        case_seen = case_index_.load();
        last_progress = now;
      }
      if (grew(0, local_state()[3])) last_progress = now;
      if (age >= budget) {
        why << "ran past its time budget of " << budget << " s";
      } else if (std::chrono::duration<double>(now - last_progress).count() >= timeout_seconds_) {
        const Answers answers = query_states();
        bool progress = false;
        for (int r = 1; r < size_; ++r) {
          if (answers.answered[static_cast<size_t>(r)]) progress = grew(r, answers.states[static_cast<size_t>(r)][3]) || progress;
        }
        if (progress) {
          last_progress = std::chrono::steady_clock::now();
          continue;
        }
        on_timeout_(diagnose("made no progress on any rank for " + format_number(timeout_seconds_, "%g") +
                                 " s (-T; its budget is " + format_number(budget, "%g") + " s)",
                             answers));
        return;
      } else {
        continue;
      }
    }
    on_timeout_(diagnose(why.str(), query_states()));
    return;  // on_timeout ends the job; nothing more to watch
  }
  watch_errors();  // take in reports of the last case, so none is left unreceived
  // Orderly stop: release every follower.
  std::vector<MPI_Request> requests(static_cast<size_t>(size_));
  const int64_t stop_query = kStopQuery;
  for (int r = 1; r < size_; ++r) MPI_Isend(&stop_query, 1, MPI_INT64_T, r, kQueryTag, comm_, &requests[static_cast<size_t>(r)]);
  for (int r = 1; r < size_; ++r) MPI_Wait(&requests[static_cast<size_t>(r)], MPI_STATUS_IGNORE);
}

// Asks every rank for its state and waits a bounded time for the answers. Each query carries a
// sequence number its answer echoes: an answer to an earlier query that arrives late (a slow
// rank) is recognised and waited past, never taken for this one. A receive still open at the
// deadline is cancelled and completed (MPI_Wait), so no buffer of it outlives this call; if the
// answer raced in before the cancel, it is used.
Watchdog::Answers Watchdog::query_states() {
  Answers a;
  a.states.assign(static_cast<size_t>(size_), State{});
  a.answered.assign(static_cast<size_t>(size_), false);
  a.states[0] = local_state();
  a.answered[0] = true;
  const int64_t seq = ++query_seq_;
  query_buffer_.assign(static_cast<size_t>(size_), seq);  // outlives a send freed below (a dead rank's)
  std::vector<MPI_Request> sends(static_cast<size_t>(size_), MPI_REQUEST_NULL), receives(static_cast<size_t>(size_), MPI_REQUEST_NULL);
  const auto post = [&](int r) {
    MPI_Irecv(a.states[static_cast<size_t>(r)].data(), kStateSize, MPI_INT64_T, r, kStateTag, comm_,
              &receives[static_cast<size_t>(r)]);
  };
  for (int r = 1; r < size_; ++r) {
    MPI_Isend(&query_buffer_[static_cast<size_t>(r)], 1, MPI_INT64_T, r, kQueryTag, comm_, &sends[static_cast<size_t>(r)]);
    post(r);
  }
  const auto deadline = std::chrono::steady_clock::now() + kAnswerWait;
  int pending = size_ - 1;
  while (pending > 0 && std::chrono::steady_clock::now() < deadline) {
    for (int r = 1; r < size_; ++r) {
      if (a.answered[static_cast<size_t>(r)]) continue;
      int done = 0;
      MPI_Test(&receives[static_cast<size_t>(r)], &done, MPI_STATUS_IGNORE);
      if (!done) continue;
      if (a.states[static_cast<size_t>(r)][kStateSize - 1] != seq) {
        post(r);  // a late answer to an earlier query: wait for this one's
        continue;
      }
      a.answered[static_cast<size_t>(r)] = true;
      --pending;
    }
    if (pending > 0) std::this_thread::sleep_for(kPoll);
  }
  for (int r = 1; r < size_; ++r) {
    if (!a.answered[static_cast<size_t>(r)]) {
      MPI_Status status;
      MPI_Cancel(&receives[static_cast<size_t>(r)]);
      MPI_Wait(&receives[static_cast<size_t>(r)], &status);
      int cancelled = 0;
      MPI_Test_cancelled(&status, &cancelled);
      a.answered[static_cast<size_t>(r)] = !cancelled && a.states[static_cast<size_t>(r)][kStateSize - 1] == seq;
    }
    // A dead rank never takes its query: free the send rather than wait on it.
    MPI_Request_free(&sends[static_cast<size_t>(r)]);
  }
  return a;
}

std::string Watchdog::diagnose(const std::string& why, const Answers& answers) {
  const int64_t current = case_index_.load();
  std::string id;
  {
    std::lock_guard lock(case_mutex_);
    id = case_id_;
  }
  const std::vector<State>& states = answers.states;
  const std::vector<bool>& answered = answers.answered;
  // A rank did not arrive if it is still in an earlier case, or if it is outside every call
  // while others wait inside one. When nobody is inside a call (all stuck elsewhere), the ranks
  // that made fewer calls into the stack this case than the others are the ones behind.
  std::vector<int> missing, inside, unresponsive;
  bool anyone_inside = false;
  int64_t most_entered = 0;
  for (int r = 0; r < size_; ++r) {
    const auto& s = states[static_cast<size_t>(r)];
    if (!answered[static_cast<size_t>(r)] || s[0] != current) continue;
    anyone_inside = anyone_inside || s[1] > 0;
    most_entered = std::max(most_entered, s[2]);
  }
  for (int r = 0; r < size_; ++r) {
    const auto& s = states[static_cast<size_t>(r)];
    if (!answered[static_cast<size_t>(r)]) {
      unresponsive.push_back(r);
    } else if (s[0] < current || (anyone_inside ? s[1] == 0 : s[2] < most_entered)) {
      missing.push_back(r);
    } else if (s[1] > 0) {
      inside.push_back(r);
    }
  }
  std::vector<std::string> nodes;
  {
    std::lock_guard lock(case_mutex_);
    nodes = nodes_;
  }
  // "1 (node b)" when the job spans nodes: a missing rank is looked for on its node.
  const auto with_nodes = [&](const std::vector<int>& ranks) {
    std::set<std::string> distinct(nodes.begin(), nodes.end());
    if (distinct.size() < 2) return join(ranks);
    std::string text;
    for (int r : ranks) {
      text += (text.empty() ? "" : ", ") + std::to_string(r);
      if (static_cast<size_t>(r) < nodes.size()) text += " (node " + nodes[static_cast<size_t>(r)] + ")";
    }
    return text;
  };
  std::ostringstream out;
  out << "case " << id << " " << why << ": ";
  if (!missing.empty()) {
    out << "ranks that did not arrive: " << with_nodes(missing);
    if (!inside.empty()) out << " (ranks waiting for them: " << join(inside) << ")";
  } else if (!unresponsive.empty()) {
    // Everyone who answered is inside the operation: the silent ones are what it waits for.
    out << "ranks that did not arrive (not answering the watchdog: gone, or stuck outside MPI): "
        << with_nodes(unresponsive);
    if (!inside.empty()) out << " (ranks waiting for them: " << join(inside) << ")";
    unresponsive.clear();
  } else if (!inside.empty()) {
    out << "every rank arrived; still inside the operation: " << join(inside);
  } else {
    out << "no rank is inside a communication call (a stall outside the stack)";
  }
  if (!unresponsive.empty()) out << "; ranks not answering the watchdog: " << with_nodes(unresponsive);
  // What each rank that answered was doing: the call it waits in and the last one it completed.
  out << "; per rank:";
  for (int r = 0; r < size_; ++r) {
    if (!answered[static_cast<size_t>(r)]) continue;
    const State& st = states[static_cast<size_t>(r)];
    out << ' ' << r;
    if (static_cast<size_t>(r) < nodes.size() && with_nodes({r}) != std::to_string(r)) {
      out << '@' << nodes[static_cast<size_t>(r)];
    }
    if (st[4] >= kHarnessOp) out << " in the harness's " << name(observed_op_of(st[4] - kHarnessOp));
    else if (st[4] > 0) out << " in " << name(observed_op_of(st[4]));
    else out << " outside any call";
    out << " (last completed " << name(observed_op_of(st[5])) << ")";
    if (r + 1 < size_) out << ',';
  }
  return out.str();
}

}  // namespace dts
