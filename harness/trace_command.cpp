// `dtsuite trace check|stats|import|predict`: the trace commands that run in one process, before
// or after a job (trace/; predict: planner/replay_prediction.h). check and import end 2 on a trace that would hang or corrupt a job, naming the rank
// and operation; 3 when an input never came (a FIFO with no writer).
#include <cstdio>
#include <exception>
#include <memory>
#include <set>
#include <string>

#include "core/error.h"
#include "harness/commands.h"
#include "harness/runner.h"
#include "planner/measurements.h"
#include "planner/replay_prediction.h"
#include "results/csv_reader.h"
#include "trace/check.h"
#include "trace/import.h"
#include "trace/import_chakra.h"
#include "trace/import_pytorch.h"
#include "trace/stats.h"

namespace dts {
namespace {

// Opens the rank's file when the importer says which rank it read, so that the file is named
// by the rank the source declares (and a second source of the same rank is refused).
class ImportWriter final : public trace::TraceSink {
 public:
  ImportWriter(std::string dir, std::set<int>& ranks, int& world) : dir_(std::move(dir)), ranks_(ranks), world_(world) {}
  void header(const trace::Header& header) override {
    if (world_ < 0) world_ = header.world;
    if (header.world != world_) {
      throw Error(Error::Kind::invalid_argument, "the sources disagree on the world size: " +
                                                     std::to_string(world_) + " and " + std::to_string(header.world));
    }
    if (!ranks_.insert(header.rank).second) {
      throw Error(Error::Kind::invalid_argument, "two sources are rank " + std::to_string(header.rank));
    }
    writer_ = std::make_unique<trace::TraceWriter>(dir_, header.rank);
    writer_->header(header);
  }
  void group(const trace::Group& group) override { sink().group(group); }
  void op(const trace::Op& op) override { sink().op(op); }
  void close() {
    if (writer_) writer_->close();
  }

 private:
  trace::TraceWriter& sink() {
    if (!writer_) throw Error(Error::Kind::invalid_argument, "an importer wrote before its header");
    return *writer_;
  }
  std::string dir_;
  std::set<int>& ranks_;
  int& world_;
  std::unique_ptr<trace::TraceWriter> writer_;
};

std::string format_of(const std::string& path, const TraceOptions& options) {
  if (options.format != "auto") return options.format;
  const std::string json = trace::sniff_json_trace(path, options.timeout_seconds);
  return json.empty() ? "chakra" : json;
}

void print_summary(const trace::CheckSummary& s, const std::string& dir) {
  std::printf("trace %s: %d ranks, %lld operations on %lld groups, %lld messages paired; consistent%s\n", dir.c_str(),
              s.world, static_cast<long long>(s.ops), static_cast<long long>(s.groups),
              static_cast<long long>(s.messages),
              s.unwaited > 0 ? (" (" + std::to_string(s.unwaited) +
                                " asynchronous operations no wait names: a replay completes them at the end)")
                                   .c_str()
                             : "");
}

int import_sources(const TraceOptions& options) {
  std::set<int> ranks;
  int world = options.world;
  for (size_t i = 0; i < options.inputs.size(); ++i) {
    const std::string& path = options.inputs[i];
    const std::string format = format_of(path, options);
    trace::ImportOptions io;
    io.timeout_seconds = options.timeout_seconds;
    io.world = options.world;
    if (options.world > 0) io.rank = static_cast<int>(i);
    ImportWriter writer(options.to_dir, ranks, world);
    trace::ImportSummary summary;
    if (format == "pytorch-et") {
      summary = trace::import_pytorch_et(path, writer, io);
    } else if (format == "kineto") {
      summary = trace::import_kineto(path, writer, io);
    } else {
      summary = trace::import_chakra(path, writer, io);
    }
    writer.close();
    std::printf("%s: %s, rank %d of %d: %lld operations\n", path.c_str(), summary.format.c_str(), summary.rank,
                summary.world, static_cast<long long>(summary.ops));
    for (const auto& [reason, count] : summary.skipped) {
      std::printf("  skipped %lld: %s\n", static_cast<long long>(count), reason.c_str());
    }
    for (const std::string& note : summary.notes) std::printf("  note: %s\n", note.c_str());
  }
  if (world > 0 && static_cast<int>(ranks.size()) < world) {
    std::printf("trace %s: %zu of %d ranks imported; give the other ranks' files to check and replay it\n",
                options.to_dir.c_str(), ranks.size(), world);
    return kExitPass;
  }
  print_summary(trace::check_trace(options.to_dir, options.timeout_seconds), options.to_dir);
  return kExitPass;
}

int predict(const TraceOptions& options) {
  planner::refuse_repeated_files(options.measurements, "--measurements");
  planner::Measurements measurements;
  for (const std::string& path : options.measurements) {
    measurements.add(read_results_csv(path, csv_read_options(options.timeout_seconds)), path);
  }
  const std::string& replay_path = options.inputs.front();
  const planner::ReplayPredictions p =
      planner::predict_replay(read_results_csv(replay_path, csv_read_options(options.timeout_seconds)), measurements);
  if (p.priced.empty() && p.unpriced.empty()) {
    throw Error(Error::Kind::invalid_argument, replay_path + " holds no replay time rows (run replay --trace DIR --csv FILE)");
  }
  std::printf("# replay %s priced by the alpha-beta fits of %s (%s)\n", replay_path.c_str(),
              measurements.sources().c_str(), measurements.stack().text().c_str());
  std::printf("%-44s %12s %12s %9s  %s\n", "class", "replayed us", "predicted us", "error", "fit");
  for (const planner::ReplayClassPrediction& c : p.priced) {
    std::printf("%-44s %12.3f %12.3f %+8.1f%%  %s\n", c.case_id.c_str(), c.measured * 1e6, c.predicted * 1e6,
                c.error() * 100, c.basis.c_str());
  }
  for (const auto& [op, median] : p.median_abs_error()) {
    size_t n = 0;
    for (const planner::ReplayClassPrediction& c : p.priced) n += c.op == op;
    std::printf("# median |error| of %s: %.1f%% over %zu classes\n", op.c_str(), median * 100, n);
  }
  for (const std::string& why : p.unpriced) std::printf("# not priced: %s\n", why.c_str());
  return kExitPass;
}

}  // namespace

int run_trace(const TraceOptions& options) {
  try {
    if (options.action == "check") {
      print_summary(trace::check_trace(options.inputs.front(), options.timeout_seconds), options.inputs.front());
      return kExitPass;
    }
    if (options.action == "stats") {
      std::printf("%s", trace::format_stats(trace::trace_stats(options.inputs.front(), options.timeout_seconds)).c_str());
      return kExitPass;
    }
    if (options.action == "predict") return predict(options);
    return import_sources(options);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "dtsuite: error: %s\n", e.what());
    return exit_code_of(e);
  }
}

}  // namespace dts
