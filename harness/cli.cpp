// dtsuite's command line, built on CLI11. Every value is validated here, before MPI starts, so
// that a typo costs one line on stderr and exit code 2, never a half-started job.
#include "harness/cli.h"

#include <CLI/CLI.hpp>
#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <sstream>

#include "comm/topology.h"
#include "core/error.h"
#include "core/input_file.h"
#include "dts/config.h"
#include "suites/flag_checks.h"

namespace dts {


namespace {

// A profile's [run] table: each entry fills the flag of that long name where the command line
// left it out, through CLI11 itself so the flag's own checks apply. Where the command line gave
// the flag, it wins, but the profile's value is still put through the same checks (then the
// command line's value is restored): a profile with `iters = -5` is wrong whatever -n says.
// Only the profile's keys (profile_run_keys: the loader refuses the rest at their line) are
// applied: outputs, listeners and the node name stay the command line's.
void apply_run_defaults(const Profile& profile, CLI::App& run) {
  const std::vector<std::string_view> keys = profile_run_keys();
  for (const RunDefault& d : profile.run) {
    const std::string where = profile.path + ":" + std::to_string(d.line) + ": [run] " + d.flag;
    if (std::find(keys.begin(), keys.end(), d.flag) == keys.end()) throw UsageError(where + " is not a profile key");
    CLI::Option* option = run.get_option_no_throw(d.flag == "suites" ? d.flag : "--" + d.flag);
    if (!option) throw UsageError(where + " is not a run flag of this build");
    const bool given = option->count() > 0;
    const CLI::results_t command_line = option->results();
    try {
      option->clear();
      if (d.flag == "suites") {
        option->add_result(d.items);
      } else {
        option->add_result(d.value);
      }
      option->run_callback();
    } catch (const CLI::Error& e) {
      throw UsageError(where + ": " + e.what());
    }
    if (given) {  // the command line wins
      option->clear();
      option->add_result(command_line);
      option->run_callback();
    }
  }
}

// --metrics-address: an IPv4 dotted quad (four decimal parts, each 0..255) or an IPv6 address,
// with or without its brackets, as inet_pton reads them. Checked here because civetweb reads an
// address loosely: 999.1.1.1 bound 231.1.1.1 (each part taken modulo 256), and a malformed one
// failed at set-up as "null context when constructing CivetServer". Host names are refused too:
// where /metrics listens is a choice of interface, not a name lookup.
CLI::Validator ListenAddress() {
  return CLI::Validator(
      [](const std::string& value) -> std::string {
        std::string address = value;
        if (address.size() >= 2 && address.front() == '[' && address.back() == ']') {
          address = address.substr(1, address.size() - 2);
          in6_addr v6{};
          if (inet_pton(AF_INET6, address.c_str(), &v6) == 1) return {};
        } else {
          in_addr v4{};
          in6_addr v6{};
          if (inet_pton(AF_INET, address.c_str(), &v4) == 1 || inet_pton(AF_INET6, address.c_str(), &v6) == 1) return {};
        }
        return quoted_input(value) + " is not an IPv4 or IPv6 address (e.g. 127.0.0.1, 0.0.0.0, ::1, [::])";
      },
      "ADDRESS");
}

// --seed: a decimal whole number of 64 bits. CLI11 reads an unsigned through strtoull, which took
// "-1" as 2^64 - 1 and 99999999999999999999 as 2^64 - 1 (saturated): both ran with that seed.
CLI::Validator SeedValue() {
  return CLI::Validator(
      [](const std::string& value) -> std::string {
        if (decimal_of<uint64_t>(value)) return {};
        return quoted_input(value) + " is not a whole number from 0 to " + std::to_string(UINT64_MAX);
      },
      "UINT64");
}

}  // namespace

std::string read_profile_file(const std::string& path) { return read_input_file(path, "profile", profile_limits()); }

namespace {

// `plan ... --verify K` runs on the stack: it is `run plan ...` (the plan suite), so the stack,
// the watchdog and the outputs are run's. The flags only the offline plan takes are refused: the
// job it runs in is the cluster it plans.
std::vector<std::string> plan_verify_as_run(int argc, char** argv) {
  if (argc < 2 || std::string_view(argv[1]) != "plan") return {};
  const auto is = [](std::string_view arg, std::string_view flag) {
    return arg == flag || (arg.size() > flag.size() && arg.substr(0, flag.size()) == flag && arg[flag.size()] == '=');
  };
  bool verify = false;
  for (int i = 2; i < argc; ++i) verify = verify || is(argv[i], "--verify");
  if (!verify) return {};
  std::vector<std::string> args{argv[0], "run", "plan"};
  for (int i = 2; i < argc; ++i) {
    for (const char* offline : {"--ranks", "--ranks-per-node", "--top", "--parameters", "--extend", "--optimizer"}) {
      if (is(argv[i], offline)) {
        throw UsageError(std::string("plan --verify plans the job it runs in (mpirun -np N sets its ranks): ") +
                         offline + " is the offline plan's alone");
      }
    }
    args.emplace_back(argv[i]);
  }
  return args;
}

}  // namespace

Command parse_command_line(int argc, char** argv, const ProfileText& profile_text) {
  std::vector<std::string> as_run = plan_verify_as_run(argc, argv);
  std::vector<char*> as_run_argv;
  for (std::string& arg : as_run) as_run_argv.push_back(arg.data());
  if (!as_run.empty()) {
    argc = static_cast<int>(as_run_argv.size());
    argv = as_run_argv.data();
  }
  CLI::App app{"dtsuite: benchmark and conformance suite for distributed training stacks", "dtsuite"};
  app.set_version_flag("--version", std::string("dtsuite ") + DTS_VERSION);
  app.require_subcommand(0, 1);

  Command cmd;
  RunOptions& o = cmd.run;
  std::string chunk = "auto";
  int check = 1;

  CLI::App* run = app.add_subcommand("run", "run suites (default: collectives) on every rank of this job");
  run->add_option("suites", o.suites, "suites to run (see dtsuite list); default: collectives");
  run->add_option("--backend", o.backend, "communication stack: mpi, ring(mpi), faulty(KIND,INNER), ...")
      ->capture_default_str();
  run->add_option("--node", o.node, "this rank's node name (default: $DTS_NODE, else the host name); ranks with one "
                                   "name form one node")
      ->check([](const std::string& v) { return v.empty() || v.size() > kMaxNodeName ? "a node name of 1 to 255 bytes" : ""; });
  run->add_option("--device", o.device,
                  "where buffers live: auto takes the backend's memory (nccl, staged(INNER): cuda; the others: "
                  "cpu); emulated: device memory that host code cannot read, in host memory (staged(INNER), any "
                  "machine)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "emulated"}))
      ->capture_default_str();
  run->add_option("-n,--iters", o.iters, "timed iterations per case")->check(CLI::Range(1, 1000000))->capture_default_str();
  run->add_option("-w,--warmup_iters", o.warmup, "untimed warm-up iterations per case")
      ->check(CLI::Range(0, 1000000))->capture_default_str();
  run->add_option("-c,--check", check,
                  "checked iterations per case (nccl-tests' -c): 0 none; 1 each input kind once after the timed "
                  "iterations; N: the collectives suite checks N times, interleaved with the timed iterations, on "
                  "fresh inputs each time (an intermittent fault); the other suites check once")
      ->check(CLI::Range(0, 1000000))->capture_default_str();
  run->add_option("-T,--timeout", o.timeout_seconds,
                  "seconds a case may take before it is reported as hung; 0: never. The clock stops while a rank "
                  "checks a result on the host: -T bounds the stack, not the check of a large result")
      ->check(FiniteRange(0.0, 1e9))->capture_default_str();
  run->add_option("--seed", o.seed, "seed of every generated input")->check(SeedValue())->capture_default_str();
  run->add_option("--repeat", o.repeat,
                  "run the whole plan R times, each pass in an order shuffled by the seed (rows carry their repetition)")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  run->add_flag("--quick", o.quick, "each suite's short plan, for smoke tests (collectives: up to 64K, f32/f16/i32, sum/max)");
  run->add_option("--csv", cmd.csv_path, "CSV results file (default out/dtsuite-<run id>.csv)");
  run->add_option("--junit", cmd.junit_path, "JUnit XML results file (one testcase per case)");
  run->add_option("--prom", cmd.prom_path, "Prometheus textfile for node_exporter's textfile collector");
  run->add_option("--push", cmd.push_url, "Pushgateway URL to push the run's metrics to (job dtsuite)");
  run->add_option("--metrics-port", cmd.metrics_port, "serve /metrics on this port while the run goes; 0: off")
      ->check(CLI::Range(0, 65535))->capture_default_str();
  run->add_option("--metrics-address", cmd.metrics_address,
                  "address /metrics listens on (0.0.0.0 or :: for every interface; IPv6 with or without [])")
      ->check(ListenAddress())
      ->capture_default_str();
  run->add_option("--profile", cmd.profile_path,
                  "acceptance profile (suites/profiles/*.toml): thresholds per metric; auto: the shipped profile for "
                  "the part every rank runs on (its GPU, else its CPU model)");
  run->add_option("--expect", cmd.expect_paths,
                  "expectation file (results/expectations/*.toml), repeatable: the stack's known deviations, cited; "
                  "a failure they name is xfail, a deviation they name that no longer shows is xpass (fails the run)")
      ->allow_extra_args(false);
  run->add_option("--chunk-bytes", chunk,
                  "chunk size of the pipelined reference algorithms (ring); auto: chosen from the size and ranks")
      ->capture_default_str();
  run->add_option("--record-trace", cmd.record_trace_dir,
                  "write every call this run makes of the stack under test to DIR/rank-R.jsonl (a trace: "
                  "`dtsuite trace stats DIR`, `dtsuite run replay --trace DIR` on another stack)");
  run->add_option("--fault-rank", cmd.fault_rank, "rank that faulty(...) backends target; -1: the last")
      ->check(CLI::Range(-1, 1 << 20))->capture_default_str();

  // Each suite's own flags, in an option group of its own (suites/suite.h, FlagGroup).
  for (const FlagGroupEntry& entry : registered_flag_groups()) {
    std::shared_ptr<FlagGroup> group = entry.make();
    group->declare(*run->add_option_group(entry.title));
    o.flags_by_group[entry.name] = std::move(group);
  }
  run->add_option("--fault-after", cmd.fault_after, "collectives that faulty(...) lets through before injecting")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 50))->capture_default_str();
  run->add_option("--fault-rate", cmd.fault_rate,
                  "fraction of the armed calls that faulty(...) faults, picked by a hash of the call's number and "
                  "--seed (alike on every rank): an intermittent fault; 1: every call")
      ->check(FiniteRange(1e-9, 1.0))->capture_default_str();

  app.add_subcommand("list", "list the suites, backends, collectives, dtypes and ops of this build");

  CompareOptions& co = cmd.compare;
  CLI::App* compare = app.add_subcommand("compare", "gate CURRENT against BASELINE run(s): exit 1 on a regression");
  compare->add_option("runs", co.inputs, "BASELINE.csv [BASELINE2.csv ...] CURRENT.csv (a folder: its *.csv files)")
      ->required()->expected(2, 1 << 20);
  compare->add_option("--tolerance", co.tolerance_percent, "percent change always tolerated")
      ->check(FiniteRange(0.0, 1e6))->capture_default_str();
  compare->add_option("--false-alarm", co.false_alarm_percent,
                      "with 2+ baseline runs: percent chance that a run of an unchanged stack fails the gate")
      ->check(FiniteRange(1e-6, 50.0))->capture_default_str();
  compare->add_option("--min-runs", co.min_runs,
                      "baseline runs a timing verdict needs (default: the least for --false-alarm, 7 at 5%); "
                      "1: judge one baseline run by the runs' own noise")
      ->check(CLI::Range(size_t{1}, size_t{100000}));
  compare->add_flag("--samples", co.samples, "judge noise from per-iteration samples (one-sided Mann-Whitney U, alpha 0.01) rather than p05/p95");
  compare->add_option("--expect", co.expect_paths,
                      "expectation file(s) as run --expect takes: the runs' known deviations are xfail, a stale entry fails")
      ->allow_extra_args(false);
  compare->add_option("--csv", co.csv_path, "write the comparison as CSV");
  compare->add_option("--junit", co.junit_path, "write the comparison as JUnit XML");
  compare->add_option("--report", co.report_path,
                      "write the current run's HTML report with the gate's verdicts (regressed, blind, ...) and "
                      "each row's detectable change");
  compare->add_option("-T,--timeout", co.timeout_seconds,
                      "seconds to wait for the bytes of an input that is a FIFO or pipe (--expect's too), and for "
                      "each plot's gnuplot of --report; 0: never give up")
      ->check(FiniteRange(0.0, 1e9))->capture_default_str();

  AbOptions& abo = cmd.ab;
  CLI::App* ab = app.add_subcommand(
      "ab", "interleaved A/B: run two commands round by round (AB, BA, ...) and judge each row on the paired rounds");
  ab->add_option("--a", abo.a_command, "shell command of side A; {csv} stands for the round's results file")->allow_extra_args(false);
  ab->add_option("--b", abo.b_command, "shell command of side B; {csv} as for --a")->allow_extra_args(false);
  ab->add_option("--rounds", abo.rounds, "rounds to run (one run of each side per round; 2 or more)")
      ->check(CLI::Range(size_t{2}, size_t{10000}));
  ab->add_option("--out", abo.out_dir, "folder of the rounds' files and logs; without --a/--b: judge the rounds it holds")
      ->required();
  ab->add_option("--tolerance", abo.tolerance_percent, "percent change either way that is `same`")
      ->check(FiniteRange(0.0, 1e6))->capture_default_str();
  ab->add_option("--false-alarm", abo.false_alarm_percent, "percent chance that identical stacks get a `different` row")
      ->check(FiniteRange(1e-6, 50.0))->capture_default_str();
  ab->add_option("--csv", abo.csv_path, "write the judgement as CSV");
  ab->add_option("--junit", abo.junit_path, "write the judgement as JUnit XML (B worse: failure; unknown: skipped)");
  ab->add_option("--report", abo.report_path, "write an HTML report: the first round's runs side by side, and the judgement");
  ab->add_option("-T,--timeout", abo.timeout_seconds,
                 "seconds a side's run of a round may take (then it is stopped with its process group, exit 3), "
                 "and to wait for the bytes of a rounds file that is a FIFO; 0: never")
      ->check(FiniteRange(0.0, 1e9))->capture_default_str();

  ReportOptions& ro = cmd.report;
  CLI::App* report = app.add_subcommand("report", "one self-contained HTML report with plots from results CSVs");
  report->add_option("results", ro.inputs, "results CSVs (several stacks are drawn side by side)")->required();
  report->add_option("-o,--output", ro.output_path, "HTML file to write")->capture_default_str();
  report->add_option("-T,--timeout", ro.timeout_seconds,
                     "seconds to wait for the bytes of an input that is a FIFO or pipe, and for each plot's gnuplot; "
                     "0: never give up")
      ->check(FiniteRange(0.0, 1e9))->capture_default_str();

  TraceOptions& to = cmd.trace;
  CLI::App* trace = app.add_subcommand("trace", "check, describe and import communication traces (docs/trace.md)");
  trace->require_subcommand(1);
  CLI::App* trace_check = trace->add_subcommand(
      "check", "check a trace as a replay would before launching: every group's ranks issue the same collectives in "
               "the same order, sends and receives pair up, every wait names an op in flight (exit 2 if not)");
  trace_check->add_option("trace", to.inputs, "the trace folder (rank-R.jsonl files)")->required()->expected(1);
  CLI::App* trace_stats = trace->add_subcommand("stats", "the operations of a trace by op, dtype, size and group");
  trace_stats->add_option("trace", to.inputs, "the trace folder (rank-R.jsonl files)")->required()->expected(1);
  CLI::App* trace_import = trace->add_subcommand(
      "import", "convert PyTorch execution traces, Kineto (Chrome) traces or Chakra traces, one file per rank, into "
                "a dtsuite trace folder");
  trace_import->add_option("files", to.inputs, "the source files, one per rank")->required()->expected(1, 1 << 20);
  trace_import->add_option("--to", to.to_dir, "the trace folder to write")->required();
  trace_import->add_option("--format", to.format, "the sources' format; auto: from each file's first bytes")
      ->check(CLI::IsMember({"auto", "pytorch-et", "kineto", "chakra"}))->capture_default_str();
  trace_import->add_option("--world", to.world,
                           "the job's world size, for sources that do not say it (Chakra); the files then are ranks "
                           "0.. in the order given")
      ->check(CLI::Range(1, 1 << 20));
  CLI::App* trace_predict = trace->add_subcommand(
      "predict", "price each operation class of a replay (run replay --csv) by the planner's alpha-beta fits of the "
                 "stack's measurements, and say the error per class and its median per op");
  trace_predict->add_option("replay", to.inputs, "the replay's results CSV")->required()->expected(1);
  trace_predict->add_option("--measurements", to.measurements,
                            "results CSVs of the same stack: collectives (each collective, dtype and group size the "
                            "replay has), topology (point-to-point)")
      ->required();
  for (CLI::App* sub : {trace_check, trace_stats, trace_import, trace_predict}) {
    sub->add_option("-T,--timeout", to.timeout_seconds,
                    "seconds to wait for the bytes of an input that is a FIFO or pipe; 0: never give up")
        ->check(FiniteRange(0.0, 1e9))->capture_default_str();
  }

  PlanOptions& po = cmd.plan;
  CLI::App* plan = app.add_subcommand(
      "plan", "rank every layout of a model on N ranks by step time predicted from the stack's measured CSVs");
  plan->add_option("--measurements", po.measurements,
                   "results CSVs of one stack: collectives (every collective and group the layouts use), topology "
                   "(point-to-point), scaling (one rank's ddp step: compute)")
      ->required();
  plan->add_option("--ranks", po.ranks, "ranks of the job planned")->required()->check(CLI::Range(1, 1 << 20));
  plan->add_option("--ranks-per-node", po.ranks_per_node, "ranks per node (default: all on one node)")
      ->check(CLI::Range(1, 1 << 20));
  plan->add_option("--batch", po.batch, "global batch rows")->check(CLI::Range(int64_t{1}, int64_t{1} << 30))->capture_default_str();
  plan->add_option("--layers", po.layers, "MLP Linear layers")->check(CLI::Range(1, 1000))->capture_default_str();
  plan->add_option("--width", po.width, "MLP hidden width")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  plan->add_option("--input", po.input, "features per sample")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  plan->add_option("--classes", po.classes, "classes")->check(CLI::Range(2, 1 << 20))->capture_default_str();
  plan->add_option("--parameters", po.parameters,
                   "the model's size instead of --width: the width whose MLP of --layers has about this many parameters")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 50));
  plan->add_option("--memory-per-rank", po.memory_per_rank, "bytes a rank may hold (e.g. 16G); layouts above it are marked")
      ->check(NotEmpty("a size such as 16G"));
  plan->add_option("--strategy", po.strategies, "strategies (and pinned layouts, as run --strategy takes them)")
      ->capture_default_str();
  plan->add_option("--csv", po.csv_path, "write plan_* rows (one set per layout) as a results CSV");
  plan->add_option("--optimizer", po.optimizer,
                   "what the layouts train with (its state counts in memory); sgd, as the scaling suite times the "
                   "compute and as --verify runs")
      ->check(CLI::IsMember({"sgd", "adamw"}))->capture_default_str();
  plan->add_flag("--extend", po.extend,
                 "plan a cluster larger than the measurements: a group shape not measured is extended from a "
                 "measured one by the ring model (latency x (n-1)/(n0-1), bus bandwidth kept), and named");
  plan->add_option("--verify", po.verify,
                   "under mpirun, a job of the planned size: time the K layouts predicted fastest and the K slowest "
                   "on the stack, predicted against measured (the same as run plan; the run flags apply)")
      ->check(CLI::Range(1, 1000));
  plan->add_option("--top", po.top, "layouts printed (0: all)")->check(CLI::Range(0, 1 << 20))->capture_default_str();
  plan->add_option("-T,--timeout", po.timeout_seconds,
                   "seconds to wait for the bytes of an input that is a FIFO or pipe; 0: never give up")
      ->check(FiniteRange(0.0, 1e9))->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    cmd.kind = Command::Kind::help;
    cmd.help_text = app.help();
    return cmd;
  } catch (const CLI::CallForAllHelp&) {
    cmd.kind = Command::Kind::help;
    cmd.help_text = app.help("", CLI::AppFormatMode::All);
    return cmd;
  } catch (const CLI::CallForVersion&) {
    cmd.kind = Command::Kind::version;
    return cmd;
  } catch (const CLI::ParseError& e) {
    std::string message = e.what();
    for (char& ch : message) {
      if (ch == '\n') ch = ' ';
    }
    throw UsageError(message);
  }

  if (app.got_subcommand("list")) {
    cmd.kind = Command::Kind::list;
    return cmd;
  }
  if (app.got_subcommand("compare")) {
    cmd.kind = Command::Kind::compare;
    return cmd;
  }
  if (app.got_subcommand("ab")) {
    if (abo.a_command.empty() != abo.b_command.empty()) throw UsageError("ab: give both --a and --b, or neither (to judge --out)");
    if (!abo.a_command.empty() && abo.rounds == 0) throw UsageError("ab: --rounds K (2 or more) is needed with --a and --b");
    if (abo.a_command.empty() && abo.rounds > 0) throw UsageError("ab: --rounds needs --a and --b");
    for (const std::string* command : {&abo.a_command, &abo.b_command}) {
      if (!command->empty() && command->find("{csv}") == std::string::npos) {
        throw UsageError("ab: each command must write its results to {csv} (e.g. 'mpirun -np 2 dtsuite run --csv {csv}')");
      }
    }
    cmd.kind = Command::Kind::ab;
    return cmd;
  }
  if (app.got_subcommand("report")) {
    cmd.kind = Command::Kind::report;
    return cmd;
  }
  if (app.got_subcommand("trace")) {
    to.action = trace->get_subcommands().front()->get_name();
    cmd.kind = Command::Kind::trace;
    return cmd;
  }
  if (app.got_subcommand("plan")) {
    if (po.ranks_per_node == 0) po.ranks_per_node = po.ranks;
    if (po.ranks % po.ranks_per_node != 0) {
      throw UsageError("plan: --ranks " + std::to_string(po.ranks) + " is not whole nodes of --ranks-per-node " +
                       std::to_string(po.ranks_per_node));
    }
    cmd.kind = Command::Kind::plan;
    return cmd;
  }
  if (!app.got_subcommand("run")) throw UsageError("no command given (expected run, list, compare, ab, report, plan or trace)");
  cmd.kind = Command::Kind::run;

  try {
    // A bad profile stops the job before anything runs (its text read once: harness/runner.cpp).
    if (!cmd.profile_path.empty() && profile_text) {
      cmd.profile = parse_profile(profile_text(cmd.profile_path), cmd.profile_path);
      apply_run_defaults(*cmd.profile, *run);
    }
    cmd.chunk_bytes = chunk == "auto" ? 0 : static_cast<size_t>(parse_size(chunk));
    if (chunk != "auto" && cmd.chunk_bytes == 0) throw UsageError("--chunk-bytes must be positive or auto");
    o.check = check != 0;
    o.checks = check;
    if (o.quick) {
      o.iters = std::min(o.iters, 5);
      o.warmup = std::min(o.warmup, 1);
    }
    for (auto& [name, group] : o.flags_by_group) group->finish(o);
    // Said of the suite: left to the plan, every case of it was "asked for twice".
    for (auto s = o.suites.begin(); s != o.suites.end(); ++s) {
      if (std::find(o.suites.begin(), s, *s) != s) throw UsageError("suite " + quoted_input(*s) + " named twice");
    }
    if (o.suites.empty()) o.suites.push_back("collectives");
  } catch (const Error& e) {
    if (e.kind() == Error::Kind::timeout) throw;  // a hang, not a usage error (exit 3)
    throw UsageError(e.what());
  }
  return cmd;
}

}  // namespace dts
