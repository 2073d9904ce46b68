// run_child and StopSignals: the exit status passes through; a child past its time, a child
// whose caller is signalled, and what a child leaves running when it exits are all ended with
// their whole group, a grandchild that ignores SIGTERM included (SIGKILL after the grace).
#include "core/child_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "core/error.h"

namespace dts {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("dts_child_process_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

ChildSpec shell(const std::string& script, double timeout_seconds = 0) {
  ChildSpec spec;
  spec.argv = {"sh", "-c", script};
  spec.stdout_path = scratch("out.txt").string();
  spec.timeout_seconds = timeout_seconds;
  spec.grace_seconds = 0.5;  // the grandchildren below ignore SIGTERM or die of it at once
  return spec;
}

// The pid a script wrote to `path`, waited for (at most 30 s: a child that never starts).
pid_t pid_in(const fs::path& path) {
  for (int tries = 0; tries < 3000; ++tries) {
    std::ifstream in(path);
    pid_t pid = 0;
    if (in >> pid && pid > 0) return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

// True when no process has `pid`, or it has ended (a zombie runs nothing).
bool gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string id, name, state;
  if (!(stat >> id >> name >> state)) return ::kill(pid, 0) != 0 && errno == ESRCH;
  return state == "Z";
}

TEST(RunChild, PassesTheExitStatusAndOutputThrough) {
  const ChildResult r = run_child(shell("echo hello; exit 7"));
  EXPECT_EQ(r.end, ChildResult::End::exited);
  EXPECT_EQ(r.code, 7);
  std::ifstream out(scratch("out.txt"));
  std::string word;
  out >> word;
  EXPECT_EQ(word, "hello");
  const ChildResult unbounded = run_child(shell("sleep 0.1", 0));  // 0: no limit
  EXPECT_EQ(unbounded.end, ChildResult::End::exited);
  EXPECT_EQ(unbounded.code, 0);
}

TEST(RunChild, AProgramThatCannotStartIsAnIoErrorNamingIt) {
  ChildSpec spec;
  spec.argv = {"dts-no-such-program"};
  spec.stdout_path = scratch("none.txt").string();
  try {
    run_child(spec);
    FAIL() << "started";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::io);
    EXPECT_NE(std::string(e.what()).find("dts-no-such-program"), std::string::npos) << e.what();
  }
}

// The shell and its grandchild both ignore SIGTERM: only the SIGKILL after the grace ends them.
TEST(RunChild, PastItsTimeTheWholeGroupIsEnded) {
  const fs::path pidfile = scratch("stubborn.pid");
  const ChildResult r = run_child(shell("trap '' TERM; sleep 300 & echo $! > " + pidfile.string() + "; wait; wait", 0.5));
  EXPECT_EQ(r.end, ChildResult::End::timed_out);
  const pid_t grandchild = pid_in(pidfile);
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(gone(grandchild));
}

TEST(RunChild, WhatAChildLeavesRunningIsEnded) {
  const fs::path pidfile = scratch("stray.pid");
  const ChildResult r = run_child(shell("sleep 300 & echo $! > " + pidfile.string()));
  EXPECT_EQ(r.end, ChildResult::End::exited);
  EXPECT_EQ(r.code, 0);
  const pid_t stray = pid_in(pidfile);
  ASSERT_GT(stray, 0);
  EXPECT_TRUE(gone(stray));
}

TEST(StopSignals, ASignalToThisProcessEndsTheChildsGroup) {
  const fs::path pidfile = scratch("stopped.pid");
  StopSignals watching;
  std::thread signaller([&] {
    if (pid_in(pidfile) > 0) ::kill(::getpid(), SIGTERM);
  });
  const ChildResult r = run_child(shell("sleep 300 & echo $! > " + pidfile.string() + "; wait"));
  signaller.join();
  EXPECT_EQ(r.end, ChildResult::End::stopped);
  EXPECT_EQ(r.code, SIGTERM);
  EXPECT_EQ(StopSignals::received(), SIGTERM);
  EXPECT_TRUE(gone(pid_in(pidfile)));
}

// With no StopSignals living (`dtsuite report` drawing), a signal still ends the child's group
// first, then this process by that signal, as it would without run_child: a terminal's Ctrl-C,
// which no longer reaches the child's own group, leaves no gnuplot behind. In a forked process
// (which the signal ends), not a death test: the grandchild would hold the test's pipe open.
TEST(RunChild, ASignalNobodyWatchesEndsTheGroupThenThisProcess) {
  const fs::path pidfile = scratch("unwatched.pid");
  fs::remove(pidfile);
  const pid_t process = ::fork();
  ASSERT_GE(process, 0);
  if (process == 0) {
    std::thread([&] {
      if (pid_in(pidfile) > 0) ::kill(::getpid(), SIGTERM);
    }).detach();
    run_child(shell("sleep 300 & echo $! > " + pidfile.string() + "; wait"));
    std::_Exit(0);  // not reached: the signal ends the process after the group
  }
  int status = 0;
  ASSERT_EQ(::waitpid(process, &status, 0), process);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "wait status " << status;
  const pid_t grandchild = pid_in(pidfile);
  ASSERT_GT(grandchild, 0);
  const bool ended = gone(grandchild);
  if (!ended) ::kill(grandchild, SIGKILL);  // left running: the fault this test is for
  EXPECT_TRUE(ended);
}

// A signal the process ignores (a shell's background job has SIGINT ignored) stays ignored while
// a StopSignals lives: it stops nothing. SIGTERM, not ignored, is still caught.
TEST(StopSignals, ASignalThisProcessIgnoresStaysIgnored) {
  struct sigaction ignore {}, previous {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &ignore, &previous);
  {
    StopSignals watching;
    ::kill(::getpid(), SIGINT);
    EXPECT_EQ(StopSignals::received(), 0);
    ::kill(::getpid(), SIGTERM);
    EXPECT_EQ(StopSignals::received(), SIGTERM);
  }
  struct sigaction after {};
  ::sigaction(SIGINT, &previous, &after);
  EXPECT_EQ(after.sa_handler, SIG_IGN);  // as it was while the StopSignals lived
}

}  // namespace
}  // namespace dts
