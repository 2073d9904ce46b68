// run_child: posix_spawnp into a new process group (the group's id is the child's pid), then a
// wait that wakes for the child's exit (a pidfd where the kernel has one, else short sleeps), the
// deadline and a StopSignals signal. The group is ended as a whole: SIGTERM to every member, the
// grace, SIGKILL. This process is made a child subreaper, so that what a shell leaves behind is
// adopted here and reaped, not left a zombie under an init that does not reap.
#include "core/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "core/error.h"

extern char** environ;

namespace dts {

namespace {

using Clock = std::chrono::steady_clock;

// What the signal handler reads and writes: lock-free atomics, safe in a handler.
std::atomic<pid_t> g_group{0};      // the group run_child waits on; 0: none
std::atomic<int> g_received{0};     // the first SIGINT or SIGTERM a StopSignals caught
std::atomic<bool> g_forwarded{false};  // whether the handler sent it to g_group already
std::atomic<bool> g_watching{false};   // a StopSignals lives
static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free);

extern "C" void on_stop_signal(int signal) {
  const int saved = errno;
  int none = 0;
  if (g_received.compare_exchange_strong(none, signal)) {
    const pid_t group = g_group.load();
    if (group > 0 && ::kill(-group, signal) == 0) g_forwarded.store(true);
  }
  errno = saved;
}

// Seconds a killed group is waited on to die (end()).
constexpr double kKilledWaitSeconds = 10;

// `seconds` from now, at most a year: past about 9.2e9 s the cast to the clock's count is undefined.
Clock::time_point after(double seconds) {
  const double bounded = std::clamp(seconds, 0.0, 365.0 * 24 * 3600);
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(bounded));
}

// The child's group, as run_child tracks it.
struct Group {
  pid_t leader = 0;  // also the group's id
  bool leader_done = false;
  int status = 0;  // the leader's wait status, once done

  // Reaps, without waiting, every child of this process in the group: the leader (its status
  // kept) and what was adopted from it.
  void reap() {
    for (;;) {
      int status_of = 0;
      const pid_t pid = ::waitpid(-leader, &status_of, WNOHANG);
      if (pid <= 0) return;
      if (pid == leader) {
        leader_done = true;
        status = status_of;
      }
    }
  }
  // Whether any process of the group is left (a zombie not ours counts: it cannot be told apart).
  bool alive() const { return ::kill(-leader, 0) == 0 || errno == EPERM; }

  // Ends every process of the group: `first` (0: it was sent already), the grace, then SIGKILL.
  void end(int first, double grace_seconds) {
    if (first != 0) ::kill(-leader, first);
    for (const auto deadline = after(grace_seconds); Clock::now() < deadline;) {
      reap();
      if (leader_done && !alive()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(-leader, SIGKILL);
    // A SIGKILL is delivered, not yet acted on, when kill returns: reap the leader and the adopted
    // as they die. Dying takes long only on a loaded machine or in uninterruptible sleep (which
    // no signal ends): a bounded wait, after which what is left is left.
    for (const auto deadline = after(kKilledWaitSeconds); Clock::now() < deadline;) {
      reap();
      if (leader_done && !alive()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
};

// Waits until the leader may have exited, a signal came, or `limit` passed.
void wait_a_while(int pidfd, std::chrono::milliseconds limit) {
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(limit.count()));  // EINTR: a signal, checked by the caller
  } else {
    std::this_thread::sleep_for(std::min(limit, std::chrono::milliseconds(20)));
  }
}

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

pid_t spawn(const ChildSpec& spec) {
  if (spec.argv.empty()) throw Error(Error::Kind::invalid_argument, "run_child: no program");
#ifdef __linux__
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);  // best effort: without it, a zombie orphan only slows end()
#endif
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, spec.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (spec.stderr_path.empty()) {
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
  } else {
    posix_spawn_file_actions_addopen(&actions, 2, spec.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // A group of its own (id: its pid); the stop signals at their default actions and unblocked,
  // whatever this process does with them.
  posix_spawnattr_setpgroup(&attributes, 0);
  sigset_t defaults, none;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  std::vector<std::string> words = spec.argv;
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int failed = posix_spawnp(&pid, argv[0], &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (failed != 0) throw Error(Error::Kind::io, "cannot start " + spec.argv[0] + ": " + std::strerror(failed));
  return pid;
}

ChildResult ended_by(const Group& group) {
  if (WIFEXITED(group.status)) return {ChildResult::End::exited, WEXITSTATUS(group.status)};
  return {ChildResult::End::signalled, WIFSIGNALED(group.status) ? WTERMSIG(group.status) : 0};
}

}  // namespace

namespace {

ChildResult run_watched(const ChildSpec& spec) {
  Group group{spawn(spec)};
  g_group.store(group.leader);
  struct Untrack {
    ~Untrack() { g_group.store(0); }
  } untrack;
  const int pidfd = open_pidfd(group.leader);
  struct Close {
    int fd;
    ~Close() {
      if (fd >= 0) ::close(fd);
    }
  } close_pidfd{pidfd};
  const bool bounded = spec.timeout_seconds > 0;
  const auto deadline = after(bounded ? spec.timeout_seconds : 0);
  for (;;) {
    group.reap();
    // Before the leader's end: the forwarded signal may have ended it already.
    if (const int signal = g_watching.load() ? g_received.load() : 0; signal != 0) {
      group.end(g_forwarded.load() ? 0 : signal, spec.grace_seconds);
      return {ChildResult::End::stopped, signal};
    }
    if (group.leader_done) break;
    auto limit = std::chrono::milliseconds(1000);  // how often the stop flag is read at the least
    if (bounded) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        group.end(SIGTERM, spec.grace_seconds);
        return {ChildResult::End::timed_out, 0};
      }
      limit = std::min(limit, left);
    }
    wait_a_while(pidfd, limit);
  }
  const ChildResult result = ended_by(group);
  if (group.alive()) group.end(SIGTERM, spec.grace_seconds);  // what it left running
  return result;
}

}  // namespace

ChildResult run_child(const ChildSpec& spec) {
  if (g_watching.load()) return run_watched(spec);
  // No caller watches for SIGINT and SIGTERM: the child's group, which a terminal's Ctrl-C no
  // longer reaches, is ended first, and then the signal is delivered here as it would have been
  // (the previous handler, or the default action: the process ends by it).
  ChildResult result;
  {
    StopSignals watch;
    result = run_watched(spec);
  }
  if (result.end == ChildResult::End::stopped) ::raise(result.code);
  return result;
}

namespace {
struct sigaction g_previous_int {}, g_previous_term {};
}  // namespace

StopSignals::StopSignals() {
  g_received.store(0);
  g_forwarded.store(false);
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // poll and sleeps return early all the same
  // A signal this process ignores stays ignored (a shell starts a background job with SIGINT
  // ignored): it was not meant to stop anything.
  for (auto [signal, previous] : {std::pair{SIGINT, &g_previous_int}, std::pair{SIGTERM, &g_previous_term}}) {
    ::sigaction(signal, nullptr, previous);
    if (previous->sa_handler != SIG_IGN) ::sigaction(signal, &action, nullptr);
  }
  g_watching.store(true);
}

StopSignals::~StopSignals() {
  ::sigaction(SIGINT, &g_previous_int, nullptr);
  ::sigaction(SIGTERM, &g_previous_term, nullptr);
  g_watching.store(false);
}

int StopSignals::received() { return g_received.load(); }

}  // namespace dts
