// End-to-end tests of `dtsuite ab`: two commands run round by round (real runs under the launcher,
// and commands that copy prepared files), judged on the paired rounds; the folder judged again;
// a session never written over; a failing command stops with one line and keeps the rounds. The
// AbHang tests (their own ctest, with a short timeout: harness/CMakeLists.txt) hold a round that
// never ends: past -T, and with ab signalled, no process of the round's group may be left.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <string>
#include <vector>

#include "harness/testing/e2e.h"

namespace {

using namespace dts::e2e;

const std::string kPlan = "run collectives --collective all_gather -d f32 -b 64K -e 256K -f 4 -c 0 -n 5";

std::string launcher() { return std::string(DTS_MPIEXEC) + " -np 2 " + DTS_MPIEXEC_FLAGS + " " + DTS_BINARY + " "; }

// Lines of `text` that start with `prefix`.
std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> found;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) found.push_back(line);
  }
  return found;
}

// A 2 ms delay on one rank (the faulty backend) against the plain stack: every timed row of B is
// different and worse, the rounds alternate AB, BA, AB, BA, and the outputs agree (4 rounds: with
// 3, a small message's 5x machine state in one of A's runs leaves the interval at 2 degrees of
// freedom wide enough to hold no change, measured here); judged again from
// the folder, the same verdict; a new session into that folder is refused and changes nothing.
TEST(Ab, ADelayedStackIsDifferentAndWorseAndTheFolderIsKept) {
  const fs::path dir = scratch_dir() / "delay";
  const fs::path csv = scratch_dir() / "delay.csv", xml = scratch_dir() / "delay.xml", html = scratch_dir() / "delay.html";
  const std::string a = launcher() + kPlan + " --csv {csv}";
  const std::string b = launcher() + kPlan + " --backend 'faulty(delay(2),mpi)' --csv {csv}";
  const RunResult r = run_dtsuite(0, "ab --a \"" + a + "\" --b \"" + b + "\" --rounds 4 --out " + dir.string() + " --csv " +
                                         csv.string() + " --junit " + xml.string() + " --report " + html.string());
  ASSERT_EQ(r.exit_code, 1) << r.err << r.out.substr(0, 3000);
  const std::vector<std::string> order = lines_starting(r.out, "# round ");
  ASSERT_EQ(order.size(), 8u) << r.out.substr(0, 2000);
  for (size_t i = 0; i < order.size(); ++i) {
    const char side = (i / 2) % 2 == 0 ? (i % 2 == 0 ? 'A' : 'B') : (i % 2 == 0 ? 'B' : 'A');
    EXPECT_NE(order[i].find(std::string(": ") + side + " exit 0"), std::string::npos) << order[i];
  }
  // The time rows (the sizes of the sweep, 2 placements): none B better or the same; most B
  // worse (a 1000x change needs few rounds, but one machine state of 5x in a round of A widens a
  // small message's interval at 3 degrees of freedom; measured here: all 10 in 4 sessions).
  size_t times = 0, worse = 0;
  for (const std::string& line : lines_starting(r.out, "  all_gather")) {
    if (line.find(" time ") == std::string::npos) continue;
    ++times;
    worse += line.find("B WORSE") != std::string::npos;
    EXPECT_EQ(line.find("B better"), std::string::npos) << line;
    EXPECT_EQ(line.find(" same "), std::string::npos) << line;
  }
  EXPECT_GE(times, 6u);  // 64 KiB, 256 KiB and what the sweep adds, in and out of place
  EXPECT_GE(worse * 10, times * 8) << worse << " of " << times;
  EXPECT_NE(r.out.find("# verdict: B WORSE than A"), std::string::npos);
  const std::string table = read_file(csv);
  EXPECT_EQ(table.rfind("suite,case,op,dtype,bytes,placement,strategy,config,world_size,metric,unit,a,b,change_percent", 0), 0u);
  EXPECT_NE(table.find(",time,seconds,"), std::string::npos);
  const std::string junit = read_file(xml);
  EXPECT_NE(junit.find("<failure"), std::string::npos);
  const std::string page = read_file(html);
  EXPECT_NE(page.find("A/B: interleaved rounds"), std::string::npos);
  EXPECT_NE(page.find("different, B worse"), std::string::npos);

  const RunResult again = run_dtsuite(0, "ab --out " + dir.string());
  EXPECT_EQ(again.exit_code, 1) << again.err;
  EXPECT_NE(again.out.find("# B: " + b), std::string::npos) << again.out.substr(0, 800);  // from commands.txt

  const std::string before = read_file(dir / "round-001-a.csv");
  const RunResult refused = run_dtsuite(0, "ab --a \"" + a + "\" --b \"" + a + "\" --rounds 2 --out " + dir.string());
  EXPECT_EQ(refused.exit_code, 2);
  const std::vector<std::string> ours = our_lines(refused.err);
  ASSERT_EQ(ours.size(), 1u) << refused.err;
  EXPECT_NE(ours[0].find("is not empty"), std::string::npos) << ours[0];
  EXPECT_EQ(read_file(dir / "round-001-a.csv"), before);
  // Judging again, an output inside the folder (over a round's file, or commands.txt) is refused.
  for (const std::string target : {"round-001-a.csv", "commands.txt"}) {
    const std::string kept = read_file(dir / target);
    const RunResult over = run_dtsuite(0, "ab --out " + dir.string() + " --report " + (dir / target).string());
    EXPECT_EQ(over.exit_code, 2) << target;
    ASSERT_EQ(our_lines(over.err).size(), 1u) << over.err;
    EXPECT_NE(our_lines(over.err)[0].find("is inside --out"), std::string::npos) << over.err;
    EXPECT_EQ(read_file(dir / target), kept) << target;
  }
}

// Two commands that write the same file every round: each row's ratio is 1 in every round, no
// spread, so every timed row is `same` and the exit code 0.
TEST(Ab, IdenticalFilesAreTheSame) {
  const fs::path source = scratch_dir() / "one_run.csv";
  ASSERT_EQ(run_dtsuite(2, kPlan + " --csv " + source.string()).exit_code, 0);
  const fs::path dir = scratch_dir() / "copies";
  const std::string copy = "cp " + source.string() + " {csv}";
  const RunResult r = run_dtsuite(0, "ab --a '" + copy + "' --b '" + copy + "' --rounds 2 --out " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 2000);
  for (const std::string& line : lines_starting(r.out, "  all_gather")) {
    if (line.find(" time ") != std::string::npos) {
      EXPECT_NE(line.find(" same "), std::string::npos) << line;
    }
  }
  EXPECT_NE(r.out.find(" 0 different (B worse in 0)"), std::string::npos);
}

// A command that fails (exit 7), or exits 0 without writing its CSV, stops the session with one
// line that names the round, the side and its log; the rounds before stay and can be judged.
TEST(Ab, AFailingCommandStopsWithOneLineAndKeepsTheRounds) {
  const fs::path source = scratch_dir() / "for_failures.csv";
  ASSERT_EQ(run_dtsuite(2, kPlan + " --csv " + source.string()).exit_code, 0);
  const std::string copy = "cp " + source.string() + " {csv}";
  const fs::path dir = scratch_dir() / "failing";
  // B fails in round 3 (the third time it runs): a counter file in the scratch folder.
  const fs::path counter = scratch_dir() / "b_runs";
  const std::string b = "echo x >> " + counter.string() + "; [ $(wc -l < " + counter.string() + ") -lt 3 ] && " + copy +
                        " || { echo broken; exit 7; } # {csv}";
  const RunResult r = run_dtsuite(0, "ab --a '" + copy + "' --b '" + b + "' --rounds 4 --out " + dir.string());
  EXPECT_EQ(r.exit_code, 2);
  std::vector<std::string> ours = our_lines(r.err);
  ASSERT_EQ(ours.size(), 1u) << r.err;
  EXPECT_NE(ours[0].find("round 3: B exited 7"), std::string::npos) << ours[0];
  EXPECT_NE(ours[0].find("round-003-b.log"), std::string::npos) << ours[0];
  EXPECT_NE(ours[0].find("the 2 finished rounds stay there"), std::string::npos) << ours[0];
  EXPECT_NE(read_file(dir / "round-003-b.log").find("broken"), std::string::npos);
  const RunResult judged = run_dtsuite(0, "ab --out " + dir.string());
  EXPECT_EQ(judged.exit_code, 0) << judged.err;
  EXPECT_NE(judged.out.find("# dtsuite ab: 2 rounds"), std::string::npos) << judged.out.substr(0, 400);

  const RunResult silent = run_dtsuite(0, "ab --a '" + copy + "' --b 'true {csv}' --rounds 2 --out " +
                                               (scratch_dir() / "silent").string());
  EXPECT_EQ(silent.exit_code, 2);
  ours = our_lines(silent.err);
  ASSERT_EQ(ours.size(), 1u) << silent.err;
  EXPECT_NE(ours[0].find("round 1: B exited 0 without writing its CSV"), std::string::npos) << ours[0];
}

// B's CSV is a link to /dev/zero: named as the device it is, not as a CSV never written; exit 2.
TEST(Ab, ARoundsCsvThatIsADeviceIsNamedAsOne) {
  const RunResult r = run_dtsuite(0, "ab --a 'echo a > {csv}' --b 'ln -s /dev/zero {csv}' --rounds 2 --out " +
                                         (scratch_dir() / "device").string());
  EXPECT_EQ(r.exit_code, 2);
  const std::vector<std::string> ours = our_lines(r.err);
  ASSERT_EQ(ours.size(), 1u) << r.err;
  EXPECT_NE(ours[0].find("round 1: B exited 0, but its CSV "), std::string::npos) << ours[0];
  EXPECT_NE(ours[0].find("is a character device (a link to '/dev/zero'), not a regular file"), std::string::npos) << ours[0];
  // The round that did not finish is set aside, so that judging the folder reads finished rounds only.
  EXPECT_TRUE(fs::is_symlink(scratch_dir() / "device" / "round-001-b.csv.unfinished"));
  EXPECT_FALSE(fs::exists(fs::symlink_status(scratch_dir() / "device" / "round-001-b.csv")));
}

// A round's command: a shell that writes its process group to `pgid_file`, then waits on a sleep
// (`stubborn`: both ignore SIGTERM, so only the SIGKILL after the grace ends them).
std::string hanging_command(const fs::path& pgid_file, bool stubborn) {
  const fs::path script = scratch_dir() / (pgid_file.stem().string() + ".sh");
  std::ofstream(script) << "cut -d' ' -f5 /proc/$$/stat > " << pgid_file.string() << ".tmp && mv " << pgid_file.string()
                        << ".tmp " << pgid_file.string() << "\n"
                        << (stubborn ? "trap '' TERM\n" : "") << "sleep 300 & wait; wait\n";
  return "sh " + script.string() + " {csv}";
}

// Kills what a regression left of a round's group (sleeping 300 s), whatever the test's outcome.
struct GroupReaper {
  pid_t group = 0;
  ~GroupReaper() {
    if (group > 0 && running_in_group(group) > 0) ::kill(-group, SIGKILL);
  }
};

pid_t group_in(const fs::path& pgid_file) {
  std::ifstream in(pgid_file);
  pid_t group = 0;
  in >> group;
  return group;
}

// A side that never ends: past -T it is stopped with its group; exit 3, one line. `timeout`
// bounds ab here, so that a regression fails (exit 124) rather than hangs.
TEST(AbHang, ARoundPastTheTimeoutIsStoppedWithItsGroup) {
  const fs::path pgid_file = scratch_dir() / "past_timeout.pgid";
  const RunResult r = run_shell("timeout -k 10 60 " + std::string(DTS_BINARY) + " ab -T 2 --a \"" +
                                hanging_command(pgid_file, false) + "\" --b 'echo b > {csv}' --rounds 2 --out " +
                                (scratch_dir() / "past_timeout").string());
  const GroupReaper round{group_in(pgid_file)};
  ASSERT_GT(round.group, 0);
  EXPECT_EQ(running_in_group(round.group), 0u);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  const std::vector<std::string> ours = our_lines(r.err);
  ASSERT_EQ(ours.size(), 1u) << r.err;
  EXPECT_NE(ours[0].find("round 1: A ran past -T (2 s) and was stopped with its process group"), std::string::npos)
      << ours[0];
}

// SIGTERM to ab while a round runs whose processes ignore SIGTERM: ab forwards it, SIGKILLs the
// group after the grace, says so in one line and exits 143; no process of the round is left.
TEST(AbHang, SigtermToAbEndsTheRoundsGroup) {
  const fs::path pgid_file = scratch_dir() / "signalled.pgid";
  const fs::path out = scratch_dir() / "signalled.out", err = scratch_dir() / "signalled.err";
  const pid_t ab = start_shell("exec " + std::string(DTS_BINARY) + " ab --a \"" + hanging_command(pgid_file, true) +
                               "\" --b 'echo b > {csv}' --rounds 2 --out " + (scratch_dir() / "signalled").string() +
                               " >" + out.string() + " 2>" + err.string());
  ASSERT_GT(ab, 0);
  pid_t group = 0;
  for (int tries = 0; tries < 300 && group == 0; ++tries) {  // 30 s for the round to start
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    group = group_in(pgid_file);
  }
  ASSERT_GT(group, 0);
  const GroupReaper round{group};
  ASSERT_EQ(::kill(ab, SIGTERM), 0);
  int status = 0;
  pid_t waited = 0;
  for (int tries = 0; tries < 600 && waited == 0; ++tries) {  // 60 s: the grace is 5
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    waited = ::waitpid(ab, &status, WNOHANG);
  }
  if (waited == 0) {
    ::kill(ab, SIGKILL);
    ::waitpid(ab, &status, 0);
    FAIL() << "ab did not end after SIGTERM";
  }
  EXPECT_EQ(running_in_group(group), 0u);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  const std::vector<std::string> ours = our_lines(read_file(err));
  ASSERT_EQ(ours.size(), 1u) << read_file(err);
  EXPECT_NE(ours[0].find("round 1: A was stopped with its process group: ab was interrupted by SIGTERM"),
            std::string::npos) << ours[0];
}

// Bad flags: one line, exit 2, nothing run.
TEST(Ab, BadFlagsAreOneLineAndExitTwo) {
  const std::string out = (scratch_dir() / "never").string();
  for (const std::string& flags : {"ab --a 'true {csv}' --rounds 2 --out " + out, "ab --a 'true' --b 'true {csv}' --rounds 2 --out " + out,
                                   "ab --a 'true {csv}' --b 'true {csv}' --rounds 1 --out " + out,
                                   "ab --a 'true {csv}' --b 'true {csv}' --out " + out, "ab --out " + out}) {
    const RunResult r = run_dtsuite(0, flags);
    EXPECT_EQ(r.exit_code, 2) << flags << ": " << r.out;
    EXPECT_EQ(our_lines(r.err).size(), 1u) << flags << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
