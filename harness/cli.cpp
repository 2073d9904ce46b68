// dtsuite's command line, built on CLI11. Every value is validated here, before MPI starts, so
// that a typo costs one line on stderr and exit code 2, never a half-started job.
#include "harness/cli.h"

#include <CLI/CLI.hpp>

#include <cctype>
#include <sstream>

#include "core/error.h"
#include "dts/config.h"
#include "strategies/strategy_spec.h"
#include "suites/collectives/collective.h"

namespace dts {

int64_t parse_size(const std::string& text) {
  if (text.empty()) throw UsageError("empty size");
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0) throw UsageError("bad size '" + text + "' (expected e.g. 8, 64K, 16M, 1G)");
  const std::string suffix = text.substr(digits);
  int shift = 0;
  if (suffix.empty() || suffix == "B") shift = 0;
  else if (suffix == "K" || suffix == "k" || suffix == "KB" || suffix == "KiB") shift = 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MB" || suffix == "MiB") shift = 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GB" || suffix == "GiB") shift = 30;
  else throw UsageError("bad size '" + text + "' (expected e.g. 8, 64K, 16M, 1G)");
  const std::string number = text.substr(0, digits);
  if (number.size() > 12) throw UsageError("size '" + text + "' is too large");
  const int64_t value = std::stoll(number);
  if (value > (int64_t{1} << (50 - shift))) throw UsageError("size '" + text + "' is too large");
  return value << shift;
}

namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) throw UsageError("empty item in list '" + text + "'");
    items.push_back(item);
  }
  if (items.empty()) throw UsageError("empty list");
  return items;
}

// A profile's [run] table: each entry fills the flag of that long name where the command line
// left it out, through CLI11 itself so the flag's own checks apply.
void apply_run_defaults(const Profile& profile, CLI::App& run) {
  for (const RunDefault& d : profile.run) {
    const std::string where = profile.path + ":" + std::to_string(d.line) + ": [run] " + d.flag;
    CLI::Option* option = run.get_option_no_throw(d.flag == "suites" ? d.flag : "--" + d.flag);
    if (!option) throw UsageError(where + " is not a run flag of this build");
    if (option->count() > 0) continue;  // the command line wins
    try {
      if (d.flag == "suites") {
        option->add_result(d.items);
      } else {
        option->add_result(d.value);
      }
      option->run_callback();
    } catch (const CLI::Error& e) {
      throw UsageError(where + ": " + e.what());
    }
  }
}

}  // namespace

Command parse_command_line(int argc, char** argv) {
  CLI::App app{"dtsuite: benchmark and conformance suite for distributed training stacks", "dtsuite"};
  app.set_version_flag("--version", std::string("dtsuite ") + DTS_VERSION);
  app.require_subcommand(0, 1);

  Command cmd;
  RunOptions& o = cmd.run;
  std::string min_bytes = "8", max_bytes = "1M", datatypes = "all", ops = "all", collectives = "all",
              chunk = "128K", strategies_text = "all";
  int check = 1;

  CLI::App* run = app.add_subcommand("run", "run suites (default: collectives) on every rank of this job");
  run->add_option("suites", o.suites, "suites to run: collectives (see dtsuite list)");
  run->add_option("--backend", o.backend, "communication stack: mpi, ring(mpi), faulty(KIND,INNER), ...")
      ->capture_default_str();
  run->add_option("--device", o.device, "where buffers live")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  run->add_option("-b,--minbytes", min_bytes, "smallest message size (suffixes K, M, G)")->capture_default_str();
  run->add_option("-e,--maxbytes", max_bytes, "largest message size (suffixes K, M, G)")->capture_default_str();
  run->add_option("-f,--stepfactor", o.factor, "multiplication factor between sizes")
      ->check(CLI::Range(1.0001, 1e6))->capture_default_str();
  run->add_option("-n,--iters", o.iters, "timed iterations per case")->check(CLI::Range(1, 1000000))->capture_default_str();
  run->add_option("-w,--warmup_iters", o.warmup, "untimed warm-up iterations per case")
      ->check(CLI::Range(0, 1000000))->capture_default_str();
  run->add_option("-d,--datatype", datatypes, "dtypes, comma-separated, or all: f32,f64,f16,bf16,i8,u8,i32,i64")
      ->capture_default_str();
  run->add_option("-o,--op", ops, "reduction ops, comma-separated, or all: sum,prod,min,max,avg")->capture_default_str();
  run->add_option("--collective", collectives,
                  "collectives, comma-separated, or all: all_reduce,reduce_scatter,all_gather,broadcast,reduce,"
                  "all_to_all,send_recv")
      ->capture_default_str();
  run->add_option("-r,--root", o.root, "root of broadcast/reduce; -1 sweeps every root")
      ->check(CLI::Range(-1, 1 << 20))->capture_default_str();
  run->add_option("-c,--check", check, "check results on every case (1) or not (0)")
      ->check(CLI::Range(0, 1))->capture_default_str();
  run->add_option("-T,--timeout", o.timeout_seconds, "seconds a case may take before it is reported as hung; 0: never")
      ->check(CLI::Range(0.0, 1e9))->capture_default_str();
  run->add_option("--seed", o.seed, "seed of every generated input")->capture_default_str();
  run->add_flag("--quick", o.quick, "a short sweep (up to 64K, f32/f16/i32, sum/max) for smoke tests");
  run->add_option("--csv", cmd.csv_path, "CSV results file (default out/dtsuite-<run id>.csv)");
  run->add_option("--junit", cmd.junit_path, "JUnit XML results file (one testcase per case)");
  run->add_option("--prom", cmd.prom_path, "Prometheus textfile for node_exporter's textfile collector");
  run->add_option("--push", cmd.push_url, "Pushgateway URL to push the run's metrics to (job dtsuite)");
  run->add_option("--metrics-port", cmd.metrics_port, "serve /metrics on this port while the run goes; 0: off")
      ->check(CLI::Range(0, 65535))->capture_default_str();
  run->add_option("--profile", cmd.profile_path, "acceptance profile (suites/profiles/*.toml): thresholds per metric");
  run->add_option("--chunk-bytes", chunk, "chunk size of the pipelined reference algorithms (ring)")
      ->capture_default_str();
  run->add_option("--fault-rank", cmd.fault_rank, "rank that faulty(...) backends target; -1: the last")
      ->check(CLI::Range(-1, 1 << 20))->capture_default_str();

  run->add_option("--strategy", strategies_text,
                  "training strategies, comma-separated, or all (dtsuite list); each NAME or NAME(key=value,...) "
                  "pinning a layout, e.g. tp(tp=3), 1f1b(pp=2,mb=8), hybrid(dp=2,tp=2,zero=1)")
      ->capture_default_str();
  run->add_option("--steps", o.steps, "training steps per equivalence case")->check(CLI::Range(1, 100000))->capture_default_str();
  run->add_option("--batch", o.batch, "global batch rows")->check(CLI::Range(1, 1 << 24))->capture_default_str();
  run->add_option("--layers", o.layers, "MLP Linear layers")->check(CLI::Range(1, 1000))->capture_default_str();
  run->add_option("--width", o.width, "MLP hidden width")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  run->add_option("--input", o.input, "features per sample")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  run->add_option("--classes", o.classes, "classes")->check(CLI::Range(2, 1 << 20))->capture_default_str();
  run->add_option("--accumulation", o.accumulation, "micro-batches per step of ddp, zero1-3 and tp (gradient accumulation)")
      ->check(CLI::Range(1, 1 << 16))->capture_default_str();
  run->add_option("--microbatches", o.microbatches, "micro-batches per step of the pipelines (gpipe, 1f1b, hybrid)")
      ->check(CLI::Range(1, 1 << 16))->capture_default_str();
  run->add_option("--optimizer", o.optimizer, "optimizers of the training suites, comma-separated: sgd,adamw")
      ->check(CLI::IsMember({"sgd", "adamw", "sgd,adamw", "adamw,sgd"}))->capture_default_str();
  run->add_option("--fault-after", cmd.fault_after, "collectives that faulty(...) lets through before injecting")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 50))->capture_default_str();

  app.add_subcommand("list", "list the suites, backends, collectives, dtypes and ops of this build");

  CompareOptions& co = cmd.compare;
  CLI::App* compare = app.add_subcommand("compare", "gate CURRENT against BASELINE: exit 1 on a regression");
  compare->add_option("baseline", co.baseline_path, "baseline results CSV")->required();
  compare->add_option("current", co.current_path, "current results CSV")->required();
  compare->add_option("--tolerance", co.tolerance_percent, "percent change always tolerated")
      ->check(CLI::Range(0.0, 1e6))->capture_default_str();
  compare->add_flag("--samples", co.samples, "judge noise from per-iteration samples (one-sided Mann-Whitney U, alpha 0.01) rather than p05/p95");
  compare->add_option("--csv", co.csv_path, "write the comparison as CSV");
  compare->add_option("--junit", co.junit_path, "write the comparison as JUnit XML");

  ReportOptions& ro = cmd.report;
  CLI::App* report = app.add_subcommand("report", "one self-contained HTML report with plots from results CSVs");
  report->add_option("results", ro.inputs, "results CSVs (several stacks are drawn side by side)")->required();
  report->add_option("-o,--output", ro.output_path, "HTML file to write")->capture_default_str();

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
  if (app.got_subcommand("report")) {
    cmd.kind = Command::Kind::report;
    return cmd;
  }
  if (!app.got_subcommand("run")) throw UsageError("no command given (expected run, list, compare or report)");
  cmd.kind = Command::Kind::run;

  try {
    // Every rank reads the profile here, before MPI starts, so a bad one stops the job at once.
    if (!cmd.profile_path.empty()) {
      cmd.profile = load_profile(cmd.profile_path);
      apply_run_defaults(*cmd.profile, *run);
    }
    o.min_bytes = parse_size(min_bytes);
    o.max_bytes = parse_size(max_bytes);
    if (o.min_bytes > o.max_bytes) throw UsageError("-b " + min_bytes + " is larger than -e " + max_bytes);
    cmd.chunk_bytes = static_cast<size_t>(parse_size(chunk));
    if (cmd.chunk_bytes == 0) throw UsageError("--chunk-bytes must be positive");
    o.check = check != 0;
    if (o.quick) {
      // A smoke run: small sizes, three dtypes that cover float/narrow/int paths, two ops.
      o.max_bytes = std::min<int64_t>(o.max_bytes, 64 << 10);
      o.min_bytes = std::min(o.min_bytes, o.max_bytes);
      o.iters = std::min(o.iters, 5);
      o.warmup = std::min(o.warmup, 1);
      if (datatypes == "all") datatypes = "f32,f16,i32";
      if (ops == "all") ops = "sum,max";
    }
    o.dtypes.clear();
    if (datatypes == "all") {
      o.dtypes.assign(kAllDTypes.begin(), kAllDTypes.end());
    } else {
      for (const auto& d : split_list(datatypes)) o.dtypes.push_back(parse_dtype(d));
    }
    o.ops.clear();
    if (ops == "all") {
      o.ops.assign(kAllReduceOps.begin(), kAllReduceOps.end());
    } else {
      for (const auto& op : split_list(ops)) o.ops.push_back(parse_reduce_op(op));
    }
    o.collectives.clear();
    if (collectives != "all") {
      for (const auto& c : split_list(collectives)) o.collectives.push_back(std::string(name(parse_collective(c))));
    }
    o.strategies.clear();
    if (strategies_text != "all") {
      // Parsed here, before MPI starts, so an unknown strategy or a bad layout is a usage error.
      for (const StrategySpec& spec : parse_strategy_list(strategies_text)) o.strategies.push_back(spec.text);
    }
    if (o.suites.empty()) o.suites.push_back("collectives");
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  return cmd;
}

}  // namespace dts
