// `dtsuite ab --a CMD --b CMD --rounds K --out DIR`: interleaved A/B. Runs the two commands round
// by round, alternating their order (AB in odd rounds, BA in even ones, so that a drift within a
// round falls on both), each writing its results CSV into DIR; then judges every row on the
// paired rounds (results/ab.h) and prints the table, optionally as CSV, JUnit and an HTML report.
// `dtsuite ab --out DIR` judges the rounds DIR already holds (a session cut short, or judged again
// at another tolerance). Exit 0: no row of B is worse than A beyond the paired noise; 1: some is;
// 2: bad input or a command that failed (one line; the finished rounds stay in DIR); 3: a side's
// run, or a rounds file's bytes, past -T; 128 + N: signal N (SIGINT, SIGTERM) stopped the session.
// Each run is a process group of its own, ended whole (core/child_process.h) when it passes -T,
// when ab is signalled, or when it exits leaving something running. Runs without MPI: each
// command is its own job (`mpirun ... dtsuite run ...`), so A and B can be two builds, two MPI
// libraries, two environments.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/child_process.h"
#include "core/error.h"
#include "harness/commands.h"
#include "harness/runner.h"
#include "results/ab.h"
#include "results/csv_reader.h"
#include "results/csv_sink.h"
#include "results/junit_sink.h"
#include "results/output_paths.h"
#include "results/report.h"

namespace dts {

namespace {

namespace fs = std::filesystem;

std::string round_file(const std::string& dir, size_t round, char side, const char* extension) {
  char name[64];
  std::snprintf(name, sizeof name, "round-%03zu-%c.%s", round, side, extension);
  return (fs::path(dir) / name).string();
}

// `text` as one word of sh: single-quoted, each quote closed, escaped and reopened.
std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (const char ch : text) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return quoted + "'";
}

std::string with_csv(std::string command, const std::string& csv) {
  const std::string quoted = shell_quote(csv);
  for (size_t at = command.find("{csv}"); at != std::string::npos; at = command.find("{csv}", at + quoted.size())) {
    command.replace(at, 5, quoted);
  }
  return command;
}

// Runs `command` with sh -c, its output and errors into `log`, in a process group of its own.
ChildResult run_shell(const std::string& command, const std::string& log, double timeout_seconds) {
  ChildSpec shell;
  shell.argv = {"/bin/sh", "-c", command};
  shell.stdout_path = log;
  shell.timeout_seconds = timeout_seconds;
  return run_child(shell);
}

// Why a side's CSV cannot be a round's file ("" when it is a regular file): stat(2) follows a
// link, so a link to /dev/zero is named as the device it is.
std::string csv_problem(const std::string& csv) {
  struct stat info {};
  if (::stat(csv.c_str(), &info) != 0) {
    return errno == ENOENT ? " without writing its CSV" : ", and its CSV " + csv + " cannot be read (" + std::strerror(errno) + ")";
  }
  if (S_ISREG(info.st_mode)) return "";
  const char* kind = S_ISCHR(info.st_mode)    ? "a character device"
                     : S_ISBLK(info.st_mode)  ? "a block device"
                     : S_ISFIFO(info.st_mode) ? "a FIFO"
                     : S_ISDIR(info.st_mode)  ? "a directory"
                     : S_ISSOCK(info.st_mode) ? "a socket"
                                              : "not a file";
  std::error_code error;
  const fs::path target = fs::read_symlink(csv, error);
  return ", but its CSV " + csv + " is " + kind + (error ? "" : " (a link to " + quoted_input(target.string()) + ")") +
         ", not a regular file";
}

// The files of a round that did not finish, renamed *.unfinished: kept, and not judged as a round.
void set_aside(const std::string& dir, size_t round) {
  for (const char side : {'a', 'b'}) {
    const std::string csv = round_file(dir, round, side, "csv");
    std::error_code error;
    if (fs::exists(fs::symlink_status(csv, error))) fs::rename(csv, csv + ".unfinished", error);
  }
}

// The rounds in `dir` that have both sides' files: round number -> (A path, B path).
std::map<size_t, std::pair<std::string, std::string>> rounds_in(const std::string& dir) {
  std::map<size_t, std::pair<std::string, std::string>> found;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    // round-NNN-a.csv or round-NNN-b.csv, NNN three digits or more.
    const std::string name = entry.path().filename().string();
    const std::string_view prefix = "round-";
    if (name.size() < prefix.size() + 3 + 6 || name.compare(0, prefix.size(), prefix) != 0) continue;
    const size_t digits_end = name.find_first_not_of("0123456789", prefix.size());
    if (digits_end == std::string::npos || digits_end - prefix.size() < 3 || digits_end - prefix.size() > 9) continue;
    const std::string tail = name.substr(digits_end);
    if (tail != "-a.csv" && tail != "-b.csv") continue;
    auto& pair = found[std::stoul(name.substr(prefix.size(), digits_end - prefix.size()))];
    (tail[1] == 'a' ? pair.first : pair.second) = entry.path().string();
  }
  if (error) throw Error(Error::Kind::invalid_argument, "cannot list the folder '" + dir + "': " + error.message());
  std::erase_if(found, [](const auto& item) { return item.second.first.empty() || item.second.second.empty(); });
  return found;
}

std::string percent(double fraction) {
  if (std::isnan(fraction)) return "";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%+.1f%%", fraction * 100);
  return buffer;
}

std::string verdict_text(const AbRow& row) {
  if (row.verdict != AbVerdict::different) return std::string(name(row.verdict));
  return row.b_worse ? "B WORSE" : "B better";
}

void print_table(const AbComparison& c, const AbOptions& options, const std::string& a, const std::string& b) {
  std::printf("# dtsuite ab: %zu rounds in %s, A and B alternating (AB, BA, ...)\n# A: %s\n# B: %s\n", c.rounds,
              options.out_dir.c_str(), a.c_str(), b.c_str());
  std::printf("# each row on its paired rounds: ln(B/A) per round, paired t, two-sided at %s per measurement (%g%% "
              "shared by %zu measurements); different: beyond that and the %g%% tolerance; same: the interval within "
              "the tolerance; unknown: neither\n",
              format_number(c.row_alpha, "%.3g").c_str(), options.false_alarm_percent, c.measurements,
              options.tolerance_percent);
  size_t case_width = 4, metric_width = 6;
  for (const AbRow& row : c.rows) {
    case_width = std::max(case_width, row.label.size());
    metric_width = std::max(metric_width, row.a.metric.size());
  }
  const int cw = static_cast<int>(case_width), mw = static_cast<int>(metric_width);
  std::printf("#\n# %-*s  %-*s  %11s  %11s  %8s  %-19s  %-9s  %s\n", cw, "case", mw, "metric", "A", "B", "B vs A",
              "interval", "verdict", "why");
  for (const AbRow& row : c.rows) {
    const std::string interval = std::isnan(row.low) ? "" : percent(row.low) + ".." + percent(row.high);
    std::printf("  %-*s  %-*s  %11s  %11s  %8s  %-19s  %-9s  %s\n", cw, row.label.c_str(), mw, row.a.metric.c_str(),
                format_number(row.a.value).c_str(), format_number(row.b.value).c_str(), percent(row.change).c_str(),
                interval.c_str(), verdict_text(row).c_str(), row.reason.c_str());
  }
  std::printf("#\n# %zu rows: %zu different (B worse in %zu), %zu same, %zu unknown, %zu not judged; %zu only in A, %zu "
              "only in B (not judged)\n",
              c.rows.size(), c.different, c.b_worse, c.same, c.unknown, c.not_judged, c.only_a, c.only_b);
  if (c.failed_a + c.failed_b > 0) {
    std::printf("# failed checks: %zu rows in A, %zu in B, not timed (JUnit: skipped); each run's own CSV and exit code "
                "report them (the rounds' files in %s)\n",
                c.failed_a, c.failed_b, options.out_dir.c_str());
  }
  if (c.unknown > 0) {
    std::vector<size_t> needed;
    for (const AbRow& row : c.rows) {
      if (row.verdict == AbVerdict::unknown) needed.push_back(row.rounds_needed);
    }
    std::sort(needed.begin(), needed.end());
    std::printf("# unknown: %zu rows; about %zu rounds in all would decide half of them, %zu all (--rounds, in a new "
                "--out folder)\n",
                c.unknown, needed[(needed.size() - 1) / 2], needed.back());
  }
  std::printf("# verdict: %s\n", c.b_worse > 0 ? "B WORSE than A" : "B not worse than A beyond the paired noise");
  std::fflush(stdout);
}

void write_csv(const AbComparison& c, const std::string& path) {
  std::ostringstream out;
  out << "suite,case,op,dtype,bytes,placement,strategy,config,world_size,metric,unit,a,b,change_percent,low_percent,"
         "high_percent,p_value,rounds,verdict,b_worse,rounds_needed,reason\n";
  const auto number = [](double v) { return std::isnan(v) ? std::string() : format_number(v, "%.6g"); };
  for (const AbRow& row : c.rows) {
    const Record& r = row.a;
    const Labels& l = r.labels;
    out << csv_escape(r.suite) << ',' << csv_escape(r.case_id) << ',' << csv_escape(l.op) << ',' << csv_escape(l.dtype)
        << ',' << (l.bytes >= 0 ? std::to_string(l.bytes) : "") << ',' << csv_escape(l.placement) << ','
        << csv_escape(l.strategy) << ',' << csv_escape(l.config) << ',' << l.world_size << ',' << csv_escape(r.metric)
        << ',' << csv_escape(r.unit) << ',' << number(row.a.value) << ',' << number(row.b.value) << ','
        << number(row.change * 100) << ',' << number(row.low * 100) << ',' << number(row.high * 100) << ','
        << number(row.p_value) << ',' << row.rounds << ',' << name(row.verdict) << ',' << (row.b_worse ? 1 : 0) << ','
        << (row.rounds_needed > 0 ? std::to_string(row.rounds_needed) : "") << ',' << csv_escape(row.reason) << '\n';
  }
  replace_file_atomically({"--csv", path}, out.str());
}

// One testcase per row (suite "ab.<suite>"): failed when B is worse beyond the noise, skipped when
// unknown (not shown either way), passed otherwise.
void write_junit(const AbComparison& c, const std::string& path) {
  JunitSink sink(path);
  for (const AbRow& row : c.rows) {
    Record r = row.a;
    r.samples.clear();
    r.suite = "ab." + r.suite;
    r.case_id = row.label + " " + r.metric;
    r.value = row.change;
    r.threshold = std::nan("");
    r.verdict = row.b_worse                                               ? Verdict::fail
                : row.verdict == AbVerdict::unknown || row.failed_side != 0 ? Verdict::skip
                                                                            : Verdict::pass;
    r.detail = verdict_text(row) + (row.reason.empty() ? "" : ": " + row.reason);
    r.labels.placement.clear();
    sink.write(r);
  }
  sink.close();
}

const char* signal_name(int signal) { return signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "a signal"; }

// Runs the session's rounds into --out. A side that fails throws one line (Error{invalid_argument};
// Error{timeout} past -T); a signal (SIGINT, SIGTERM) ends the running side's group and the
// session: one line, and 128 + N returned. A round that did not finish is set aside.
int run_rounds(const AbOptions& options, const std::string& a, const std::string& b) {
  const std::string& dir = options.out_dir;
  StopSignals stop;
  for (size_t round = 1; round <= options.rounds; ++round) {
    const char order[2] = {round % 2 == 1 ? 'a' : 'b', round % 2 == 1 ? 'b' : 'a'};
    for (const char side : order) {
      const std::string who = "round " + std::to_string(round) + ": " + (side == 'a' ? "A" : "B");
      const std::string kept = "; the " + std::to_string(round - 1) + " finished rounds stay there: `dtsuite ab --out " +
                               dir + "` judges them";
      // Absolute: a command that changes folder still writes where the session reads.
      const std::string csv = fs::absolute(round_file(dir, round, side, "csv")).string();
      const std::string log = round_file(dir, round, side, "log");
      const auto start = std::chrono::steady_clock::now();
      ChildResult ended;
      if (const int signal = StopSignals::received(); signal != 0) {
        ended = {ChildResult::End::stopped, signal};  // it came between two runs
      } else {
        ended = run_shell(with_csv(side == 'a' ? a : b, csv), log, options.timeout_seconds);
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (ended.end == ChildResult::End::stopped) {
        set_aside(dir, round);
        std::fflush(stdout);
        std::fprintf(stderr, "dtsuite: error: %s was stopped with its process group: ab was interrupted by %s (its output: %s)%s\n",
                     who.c_str(), signal_name(ended.code), log.c_str(), kept.c_str());
        return kExitSignalBase + ended.code;
      }
      if (ended.end == ChildResult::End::timed_out) {
        set_aside(dir, round);
        throw Error(Error::Kind::timeout, who + " ran past -T (" + format_number(options.timeout_seconds, "%g") +
                                              " s) and was stopped with its process group (its output: " + log + ")" + kept);
      }
      const int status = ended.end == ChildResult::End::exited ? ended.code : kExitSignalBase + ended.code;
      std::printf("# round %zu/%zu: %c exit %d in %.1f s\n", round, options.rounds, side == 'a' ? 'A' : 'B', status, seconds);
      std::fflush(stdout);
      // 0 and 1 (checks failed) measured; anything else did not, or not wholly.
      const std::string problem = csv_problem(csv);
      if ((status != kExitPass && status != kExitFail) || !problem.empty()) {
        set_aside(dir, round);
        throw Error(Error::Kind::invalid_argument,
                    who + " exited " + std::to_string(status) + problem + " (its output: " + log + ")" + kept);
      }
    }
  }
  // A signal after the last side's exit, while its CSV was read: every round finished, but the
  // session was asked to stop all the same.
  if (const int signal = StopSignals::received(); signal != 0) {
    std::fflush(stdout);
    std::fprintf(stderr, "dtsuite: error: ab was interrupted by %s after its last round; its %zu rounds stay in %s: "
                         "`dtsuite ab --out %s` judges them\n",
                 signal_name(signal), options.rounds, dir.c_str(), dir.c_str());
    return kExitSignalBase + signal;
  }
  return 0;
}

}  // namespace

int run_ab(const AbOptions& options) {
  try {
    const std::string& dir = options.out_dir;
    const bool running = !options.a_command.empty();
    std::vector<NamedPath> outputs{{"--csv", options.csv_path}, {"--junit", options.junit_path}, {"--report", options.report_path}};
    std::error_code error;
    if (running) {
      fs::create_directories(dir, error);
      if (error || !fs::is_directory(dir)) {
        throw Error(Error::Kind::invalid_argument, "--out " + dir + ": cannot make the folder" +
                                                       (error ? " (" + error.message() + ")" : std::string()));
      }
      // A session never writes over another's files: it starts in an empty folder.
      if (!fs::is_empty(dir, error)) {
        throw Error(Error::Kind::invalid_argument, "--out " + dir + " is not empty (a session's rounds?): judge them with "
                                                   "`dtsuite ab --out " + dir + "`, or give an empty folder");
      }
    } else if (!fs::is_directory(dir, error)) {
      throw Error(Error::Kind::invalid_argument, "--out " + dir + " is not a folder of rounds");
    }
    // The folder holds the session's inputs (rounds, logs, commands.txt): no output goes there.
    // Each where opening it lands (resolved_path): a dangling link into the folder is inside it.
    const fs::path folder = resolved_path({"--out", dir});
    for (const NamedPath& output : outputs) {
      if (output.path.empty()) continue;
      const fs::path parent = resolved_path(output).parent_path();
      const auto [end, unused] = std::mismatch(folder.begin(), folder.end(), parent.begin(), parent.end());
      if (end == folder.end()) {
        throw Error(Error::Kind::invalid_argument, output.flag + " " + output.path + " is inside --out " + dir +
                                                       ", the session's own files: write it elsewhere");
      }
    }
    std::vector<NamedPath> inputs;
    for (const auto& [round, files] : rounds_in(dir)) {
      inputs.push_back({"a rounds file", files.first});
      inputs.push_back({"a rounds file", files.second});
    }
    check_outputs(inputs, outputs);

    std::string a = options.a_command, b = options.b_command;
    const fs::path commands_file = fs::path(dir) / "commands.txt";
    if (running) {
      {
        // O_EXCL: of two sessions started into one folder at once, the second stops here.
        const int fd = ::open(commands_file.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0) throw Error(Error::Kind::invalid_argument, "--out " + dir + ": cannot create commands.txt (" +
                                                                   std::strerror(errno) + "): another session there?");
        const std::string text = "A: " + a + "\nB: " + b + "\n";
        const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
        ::close(fd);
        if (!written) throw Error(Error::Kind::io, "cannot write " + commands_file.string());
      }
      if (const int code = run_rounds(options, a, b); code != 0) return code;
    } else if (fs::is_regular_file(commands_file, error)) {
      // What A and B were, for the table: its first 64 KiB, shown as printable text.
      std::ifstream in(commands_file);
      std::string text(64 * 1024, '\0');
      in.read(text.data(), static_cast<std::streamsize>(text.size()));
      text.resize(static_cast<size_t>(in.gcount()));
      std::istringstream lines(text);
      for (std::string line; std::getline(lines, line);) {
        if (line.rfind("A: ", 0) == 0) a = printable(line.substr(3));
        if (line.rfind("B: ", 0) == 0) b = printable(line.substr(3));
      }
    }

    const CsvReadOptions reading = csv_read_options(options.timeout_seconds);
    std::vector<AbRound> rounds;
    std::vector<ResultsFile> first_round;
    for (const auto& [round, files] : rounds_in(dir)) {
      AbRound r{read_results_csv(files.first, reading), read_results_csv(files.second, reading)};
      if (first_round.empty()) {
        first_round.push_back({files.first, r.a});
        first_round.push_back({files.second, r.b});
      }
      for (std::vector<Record>* side : {&r.a, &r.b}) {
        for (Record& rec : *side) rec.samples.clear();  // the judgement reads values only
      }
      rounds.push_back(std::move(r));
    }
    if (a.empty()) a = "(not recorded)";
    if (b.empty()) b = "(not recorded)";
    AbSettings settings;
    settings.tolerance = options.tolerance_percent / 100;
    settings.false_alarm = options.false_alarm_percent / 100;
    const AbComparison comparison = compare_ab(rounds, settings);
    print_table(comparison, options, a, b);
    if (!options.csv_path.empty()) write_csv(comparison, options.csv_path);
    if (!options.junit_path.empty()) write_junit(comparison, options.junit_path);
    if (!options.report_path.empty()) {
      write_report(first_round, options.report_path, &comparison, a, b, nullptr, options.timeout_seconds);
    }
    return comparison.b_worse > 0 ? kExitFail : kExitPass;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "dtsuite: error: %s\n", e.what());
    return exit_code_of(e);
  }
}

}  // namespace dts
