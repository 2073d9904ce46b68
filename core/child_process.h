// A child process that cannot outlive its bound: it runs in a process group of its own, and when
// it passes its time, or the caller is signalled to stop, the whole group is ended (SIGTERM, then
// SIGKILL after a grace), so that nothing a shell started is left running as an orphan. Sits in
// core/: the report draws with gnuplot (results/) and `ab` runs its rounds (harness/).
#pragma once
#include <string>
#include <vector>

namespace dts {

struct ChildSpec {
  std::vector<std::string> argv;  // argv[0] is looked up on PATH
  std::string stdout_path;        // created or truncated; standard input is /dev/null
  std::string stderr_path;        // empty: into stdout_path's file as well
  // Seconds the child may run; 0: no limit. What it leaves running in its group when it exits is
  // ended too (a round's stray process would load the next round).
  double timeout_seconds = 0;
  // Seconds between SIGTERM and SIGKILL: time for an mpirun to end its ranks.
  double grace_seconds = 5;
};

struct ChildResult {
  enum class End {
    exited,     // code: its exit status
    signalled,  // code: the signal that ended it (not one of ours)
    timed_out,  // it ran past timeout_seconds; its group was ended
    stopped,    // a StopSignals signal came (code: its number); its group was ended
  };
  End end = End::exited;
  int code = 0;
};

// Runs the child and waits for it and its group. Throws Error{io} when it cannot be started
// (a missing program names the errno's text). With no StopSignals living, a SIGINT or SIGTERM
// still ends the child's group first (its own group: a terminal's Ctrl-C does not reach it), and
// is then delivered to this process as it would have been: by default, the process ends by it.
ChildResult run_child(const ChildSpec& spec);

// While one lives, SIGINT and SIGTERM do not end this process (one it ignores stays ignored, as a
// shell's background job has SIGINT): the first one is remembered
// (received()) and forwarded at once to the group of the child that run_child is waiting on,
// which run_child then ends (ChildResult::End::stopped). The previous handlers come back with
// its end. One at a time.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // The signal that came (SIGINT or SIGTERM), or 0.
  static int received();
};

}  // namespace dts
