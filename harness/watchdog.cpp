// Watchdog protocol. Followers (ranks 1..n-1) wait for queries from rank 0 and answer with
// their state: the case they are in and whether their main thread is inside a communication
// call (OpObserver). Rank 0 polls its own case's age; past the timeout it queries everyone,
// waits a bounded time for answers, and reports: ranks in an earlier case, or not inside a call
// while others are, did not arrive; ranks that do not answer are named as unresponsive. On SIGINT
// or SIGTERM every rank says it got the signal, and rank 0 takes the ranks that did not for lost
// (lost_ranks; it asks, on tags of its own, when the signal may have come to rank 0 alone).
#include "harness/watchdog.h"

#include <algorithm>
#include <cstring>
#include <array>
#include <condition_variable>
#include <set>
#include <sstream>
#include <vector>

#include "results/record.h"

namespace dts {

namespace {
constexpr int kQueryTag = 7101, kStateTag = 7102, kErrorTag = 7103;
constexpr int kLivenessQueryTag = 7104, kLivenessStateTag = 7105, kSignalTag = 7106;
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
// How long lost_ranks waits, past each of its windows, for its thread to finish the step: the
// thread's own calls take microseconds, but a thread of a loaded machine may wait a time slice or
// two. Not finished by then, the thread is held up inside MPI.
constexpr auto kLivenessGrace = std::chrono::milliseconds(150);

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
  // A dead peer must not end rank 0 before it wrote what it knows: errors come back as codes
  // (an MPI that reports a lost process, as ULFM's does), and are taken as no answer.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  watch_channel_.query_tag = kQueryTag;
  watch_channel_.state_tag = kStateTag;
  liveness_channel_.query_tag = kLivenessQueryTag;
  liveness_channel_.state_tag = kLivenessStateTag;
  signalled_.resize(static_cast<size_t>(size_));
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
    paused_since_.reset();
  }
  entered_at_case_start_.store(tested_ ? tested_->entered.load() : 0);
  if (tested_) tested_->position.store(-1);
  body_done_.store(false);
  case_index_.store(index);
  case_active_.store(true);
}

void Watchdog::end_case() { case_active_.store(false); }

void Watchdog::pause_case() {
  std::lock_guard lock(case_mutex_);
  if (!paused_since_) paused_since_ = std::chrono::steady_clock::now();
}

void Watchdog::resume_case() {
  std::lock_guard lock(case_mutex_);
  if (!paused_since_) return;
  case_start_ += std::chrono::steady_clock::now() - *paused_since_;  // the case's age leaves the pause out
  paused_since_.reset();
}

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
//  1 once the case body is over (body_done), the suite's position in the case (-1: none)]
Watchdog::State Watchdog::local_state() const {
  const int64_t inside = (tested_ ? tested_->inside.load() : 0) + (control_ ? control_->inside.load() : 0);
  const int64_t entered = tested_ ? tested_->entered.load() - entered_at_case_start_.load() : 0;
  const int64_t calls = (tested_ ? tested_->entered.load() : 0) + (control_ ? control_->entered.load() : 0);
  int64_t op = tested_ ? tested_->current.load() : 0;
  if (op == 0 && control_ && control_->current.load() != 0) op = kHarnessOp + control_->current.load();
  const int64_t last = tested_ ? tested_->last_completed.load() : 0;
  const int64_t position = tested_ ? tested_->position.load() : -1;
  return {case_index_.load(), inside, entered, calls, op, last, body_done_.load() ? 1 : 0, position, 0};
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

// Answers the watchdog thread's queries and lost_ranks' alike, each on its channel's tags, until
// the stop query (or until rank 0 can no longer be heard: an MPI error).
void Watchdog::run_follower() {
  struct Listener {
    int query_tag, state_tag;
    int64_t query = 0;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  std::array<Listener, 2> listeners{Listener{kQueryTag, kStateTag}, Listener{kLivenessQueryTag, kLivenessStateTag}};
  for (Listener& l : listeners) MPI_Irecv(&l.query, 1, MPI_INT64_T, 0, l.query_tag, comm_, &l.request);
  MPI_Request note = MPI_REQUEST_NULL;  // note_signal's message to rank 0, once
  bool listening = true;
  while (listening) {
    if (signal_note_ == 0 && signal_.load() != 0) {
      signal_note_ = signal_.load();
      MPI_Isend(&signal_note_, 1, MPI_INT64_T, 0, kSignalTag, comm_, &note);
    }
    if (note != MPI_REQUEST_NULL) {
      int sent = 0;
      MPI_Test(&note, &sent, MPI_STATUS_IGNORE);
    }
    bool answered = false;
    for (Listener& l : listeners) {
      int done = 0;
      if (MPI_Test(&l.request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || (done && l.query == kStopQuery)) {
        listening = false;
        break;
      }
      if (!done) continue;
      State state = local_state();
      state[kStateSize - 1] = l.query;  // the query's sequence number, echoed
      MPI_Send(state.data(), kStateSize, MPI_INT64_T, 0, l.state_tag, comm_);
      MPI_Irecv(&l.query, 1, MPI_INT64_T, 0, l.query_tag, comm_, &l.request);
      answered = true;
    }
    if (listening && !answered) std::this_thread::sleep_for(kPoll);
  }
  // No receive outlives this thread's buffers; a note not yet taken goes on alone (its buffer is
  // the object's).
  if (note != MPI_REQUEST_NULL) MPI_Request_free(&note);
  for (Listener& l : listeners) {
    if (l.request == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&l.request);
    MPI_Wait(&l.request, MPI_STATUS_IGNORE);
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
    take_signal_notes();  // at once: a rank's leaving may hold MPI up later (lost_ranks)
    if (watch_errors()) return;  // on_stuck_error ends the job
    if (timeout_seconds_ <= 0 || !case_active_.load()) continue;
    std::chrono::steady_clock::time_point start;
    double budget = 0;
    bool paused = false;
    {
      std::lock_guard lock(case_mutex_);
      start = case_start_;
      budget = case_budget_;
      paused = paused_since_.has_value();
    }
    const auto now = std::chrono::steady_clock::now();
    if (paused) {
      last_progress = now;  // a check on the host is no stall of the stack either
      continue;
    }
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
Watchdog::Answers Watchdog::query_states() { return query_states(watch_channel_, kAnswerWait); }

Watchdog::Answers Watchdog::query_states(Channel& channel, std::chrono::steady_clock::duration wait) {
  Answers a;
  a.states.assign(static_cast<size_t>(size_), State{});
  a.answered.assign(static_cast<size_t>(size_), false);
  a.states[0] = local_state();
  a.answered[0] = true;
  const int64_t seq = ++channel.seq;
  channel.buffer.assign(static_cast<size_t>(size_), seq);  // outlives a send freed below (a dead rank's)
  std::vector<MPI_Request> sends(static_cast<size_t>(size_), MPI_REQUEST_NULL), receives(static_cast<size_t>(size_), MPI_REQUEST_NULL);
  std::vector<bool> failed(static_cast<size_t>(size_), false);  // an MPI error: no answer will come
  const auto post = [&](int r) {
    MPI_Irecv(a.states[static_cast<size_t>(r)].data(), kStateSize, MPI_INT64_T, r, channel.state_tag, comm_,
              &receives[static_cast<size_t>(r)]);
  };
  for (int r = 1; r < size_; ++r) {
    MPI_Isend(&channel.buffer[static_cast<size_t>(r)], 1, MPI_INT64_T, r, channel.query_tag, comm_,
              &sends[static_cast<size_t>(r)]);
    post(r);
  }
  const auto deadline = std::chrono::steady_clock::now() + wait;
  int pending = size_ - 1;
  while (pending > 0 && std::chrono::steady_clock::now() < deadline) {
    for (int r = 1; r < size_; ++r) {
      if (a.answered[static_cast<size_t>(r)] || failed[static_cast<size_t>(r)]) continue;
      int done = 0;
      if (MPI_Test(&receives[static_cast<size_t>(r)], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        failed[static_cast<size_t>(r)] = true;
        --pending;
        continue;
      }
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
    if (!a.answered[static_cast<size_t>(r)] && receives[static_cast<size_t>(r)] != MPI_REQUEST_NULL) {
      MPI_Status status;
      MPI_Cancel(&receives[static_cast<size_t>(r)]);
      const bool waited = MPI_Wait(&receives[static_cast<size_t>(r)], &status) == MPI_SUCCESS;
      int cancelled = 0;
      MPI_Test_cancelled(&status, &cancelled);
      a.answered[static_cast<size_t>(r)] = waited && !failed[static_cast<size_t>(r)] && !cancelled &&
                                           a.states[static_cast<size_t>(r)][kStateSize - 1] == seq;
    }
    // A dead rank never takes its query: free the send rather than wait on it.
    if (sends[static_cast<size_t>(r)] != MPI_REQUEST_NULL) MPI_Request_free(&sends[static_cast<size_t>(r)]);
  }
  return a;
}

void Watchdog::note_signal(int signal) {
  if (rank_ != 0) signal_.store(signal);
}

void Watchdog::take_signal_notes() {
  while (true) {
    int found = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    if (MPI_Improbe(MPI_ANY_SOURCE, kSignalTag, comm_, &found, &message, &status) != MPI_SUCCESS || !found) return;
    int64_t signal = 0;
    MPI_Mrecv(&signal, 1, MPI_INT64_T, &message, MPI_STATUS_IGNORE);
    std::lock_guard lock(signalled_mutex_);
    auto& at = signalled_[static_cast<size_t>(status.MPI_SOURCE)];
    if (!at) at = std::chrono::steady_clock::now();
  }
}

Watchdog::Lost Watchdog::lost_ranks(bool from_launcher) {
  const auto asked = std::chrono::steady_clock::now();
  // What the thread found, step by step; shared, as the thread may outlive this call.
  struct Progress {
    std::mutex mutex;
    std::condition_variable changed;
    bool notes_taken = false;  // the signal window is over (or every rank said so)
    bool done = false;
    std::optional<Answers> answers;  // when it asked
  };
  auto progress = std::make_shared<Progress>();
  const auto signalled_count = [this] {
    std::lock_guard lock(signalled_mutex_);
    return std::count_if(signalled_.begin(), signalled_.end(), [](const auto& at) { return at.has_value(); });
  };
  std::thread([this, progress, signalled_count, from_launcher] {
    std::lock_guard one_at_a_time(liveness_mutex_);
    const auto window_end = std::chrono::steady_clock::now() + kSignalWindow;
    while (true) {
      take_signal_notes();  // the first call is the test that MPI answers
      if (signalled_count() == size_ - 1 || std::chrono::steady_clock::now() >= window_end) break;
      std::this_thread::sleep_for(kPoll);
    }
    {
      std::lock_guard lock(progress->mutex);
      progress->notes_taken = true;
      progress->changed.notify_all();
    }
    std::optional<Answers> answers;
    if (!from_launcher && signalled_count() < size_ - 1) {
      answers = query_states(liveness_channel_, kAnswerWindow);
      take_signal_notes();
    }
    std::lock_guard lock(progress->mutex);
    progress->answers = std::move(answers);
    progress->done = true;
    progress->changed.notify_all();
  }).detach();

  bool done = false;
  std::optional<Answers> answers;
  {
    std::unique_lock lock(progress->mutex);
    const auto start = std::chrono::steady_clock::now();
    if (progress->changed.wait_until(lock, start + kSignalWindow + kLivenessGrace, [&] { return progress->notes_taken; })) {
      done = progress->changed.wait_until(lock, std::chrono::steady_clock::now() + kAnswerWindow + kLivenessGrace,
                                          [&] { return progress->done; });
    }
    if (done) answers = progress->answers;
  }
  Lost lost;
  std::lock_guard lock(signalled_mutex_);
  bool anyone_signalled = false;
  for (const auto& at : signalled_) {
    if (at && *at <= asked - kEarlierSignal) return lost;  // that rank ended the job on its signal
    anyone_signalled = anyone_signalled || at;
  }
  if (!done && !anyone_signalled) {
    lost.held_up = true;
    return lost;
  }
  for (int r = 1; r < size_; ++r) {
    const bool answered = answers && answers->answered[static_cast<size_t>(r)];
    if (!signalled_[static_cast<size_t>(r)] && !answered) lost.ranks.push_back(r);
  }
  return lost;
}

std::string Watchdog::describe_ranks(const std::vector<int>& ranks) const {
  std::vector<std::string> nodes;
  {
    std::lock_guard lock(case_mutex_);
    nodes = nodes_;
  }
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    text += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
    if (static_cast<size_t>(ranks[i]) < nodes.size()) text += " (node " + nodes[static_cast<size_t>(ranks[i])] + ")";
  }
  return text;
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
    if (st[7] >= 0) out << " at operation #" << st[7] << " of its trace";
    if (r + 1 < size_) out << ',';
  }
  return out.str();
}

}  // namespace dts
