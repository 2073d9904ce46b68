// What every end-to-end test of the dtsuite binary needs: run it (under the launcher, or alone
// for compare and report), capture exit code, stdout and stderr, and a scratch folder per test
// process. DTS_BINARY, DTS_MPIEXEC and DTS_MPIEXEC_FLAGS come from harness/CMakeLists.txt.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace dts::e2e {

namespace fs = std::filesystem;

struct RunResult {
  int exit_code = -1;
  std::string out, err;
};

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// One folder per test process (its pid), made on first use.
inline fs::path scratch_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("dtsuite_e2e_" + std::to_string(getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// Runs a shell command with stdout and stderr captured to files of the scratch folder.
inline RunResult run_shell(const std::string& command) {
  static int counter = 0;
  const fs::path out = scratch_dir() / ("out" + std::to_string(counter) + ".txt");
  const fs::path err = scratch_dir() / ("err" + std::to_string(counter++) + ".txt");
  const int status = std::system((command + " >" + out.string() + " 2>" + err.string()).c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

// The command that starts dtsuite as 4 ranks on two "nodes" of one machine: ranks 0-1 on n0, 2-3
// on n1 (DTS_NODE, set per rank from the launcher's rank variable: Open MPI's, else PMI's). Each
// rank writes its pid to <scratch>/rank<R>.pid before it becomes dtsuite (exec keeps the pid), so
// a test can stop one. Append dtsuite's arguments.
inline std::string two_node_command(const std::string& extra_launcher_flags = "") {
  const std::string dir = scratch_dir().string();
  return std::string(DTS_MPIEXEC) + " -np 4 " + DTS_MPIEXEC_FLAGS + " " + extra_launcher_flags +
         " sh -c 'R=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}; echo $$ > " + dir +
         "/rank$R.pid; DTS_NODE=n$((R / 2)) exec \"$@\"' sh " + DTS_BINARY;
}

// A memory cap on the processes a command starts, so that a reader that grows without bound
// fails the test instead of taking the machine down: ulimit -v (4 GB), or under AddressSanitizer,
// whose shadow memory needs more address space than any such cap, its own RSS limit.
inline std::string memory_cap() {
#if defined(__SANITIZE_ADDRESS__)
  return "ASAN_OPTIONS=${ASAN_OPTIONS}:hard_rss_limit_mb=4000 ";
#else
  return "ulimit -v 4000000; ";
#endif
}

// Starts `command` under /bin/sh in the background (to be signalled or killed while it runs);
// the caller waitpid()s the pid it returns (-1 when fork failed).
inline pid_t start_shell(const std::string& command) {
  const pid_t child = fork();
  if (child == 0) {
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return child;
}

// Waits until `path` has at least `lines` lines, or `limit` has passed; returns the count seen.
inline size_t wait_for_lines(const fs::path& path, size_t lines,
                             std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  size_t seen = 0;
  while (seen < lines && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::string text = read_file(path);
    seen = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  }
  return seen;
}

// Processes of process group `group` that still run (a zombie runs nothing), from /proc: what a
// command that was stopped with its group left behind.
inline size_t running_in_group(pid_t group) {
  size_t running = 0;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/proc", error)) {
    const std::string stat = read_file(entry.path() / "stat");
    const size_t name_end = stat.rfind(')');  // the name may hold spaces and parentheses
    if (name_end == std::string::npos) continue;
    std::istringstream fields(stat.substr(name_end + 1));
    std::string state;
    pid_t parent = 0, pgrp = 0;
    if (fields >> state >> parent >> pgrp && pgrp == group && state != "Z") ++running;
  }
  return running;
}

// Runs `dtsuite ARGS` under the launcher with `np` ranks (np == 0: without a launcher, as
// compare and report run).
inline RunResult run_dtsuite(int np, const std::string& args) {
  std::string command;
  if (np > 0) command = std::string(DTS_MPIEXEC) + " -np " + std::to_string(np) + " " + DTS_MPIEXEC_FLAGS + " ";
  return run_shell(command + DTS_BINARY + " " + args);
}

// dtsuite's own lines on stderr ("dtsuite: ..."); the launcher may add its own after a non-zero
// exit, so bad input is judged on these alone.
inline std::vector<std::string> our_lines(const std::string& err) {
  std::vector<std::string> lines;
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("dtsuite: ", 0) == 0) lines.push_back(line);
  }
  return lines;
}

}  // namespace dts::e2e
