// The training suites' shared flags (suites/training_flags.h).
#include "suites/training_flags.h"

#include <CLI/CLI.hpp>

#include <cmath>
#include <optional>
#include <string_view>
#include <tuple>

#include "core/dtype.h"
#include "core/error.h"
#include "strategies/strategy_spec.h"
#include "suites/flag_checks.h"

namespace dts {

void TrainingFlags::declare(CLI::App& g) {
  g.add_option("--strategy", strategies_text_,
               "training strategies, comma-separated, or all (dtsuite list; the convergence suite takes all as ddp); "
               "each NAME or NAME(key=value,...) pinning a layout, e.g. tp(tp=3), 1f1b(pp=2,mb=8), "
               "hybrid(dp=2,tp=2,zero=1); none twice")
      // Checked here as well as in finish(), so that a profile's [run] strategy is refused at its line.
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            try {
              if (value != "all") parse_strategy_list(value);
            } catch (const Error& e) {
              return e.what();
            }
            return {};
          },
          ""))
      ->capture_default_str();
  g.add_option("--steps", steps, "training steps per equivalence case")->check(CLI::Range(1, 100000))->capture_default_str();
  g.add_option("--batch", batch, "global batch rows")->check(CLI::Range(1, 1 << 24))->capture_default_str();
  g.add_option("--layers", layers, "MLP Linear layers")->check(CLI::Range(1, 1000))->capture_default_str();
  g.add_option("--width", width, "MLP hidden width")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  g.add_option("--input", input, "features per sample")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  g.add_option("--classes", classes, "classes")->check(CLI::Range(2, 1 << 20))->capture_default_str();
  g.add_option("--accumulation", accumulation, "micro-batches per step of ddp, zero1-3 and tp (gradient accumulation)")
      ->check(CLI::Range(1, 1 << 16))->capture_default_str();
  g.add_option("--microbatches", microbatches, "micro-batches per step of the pipelines (gpipe, 1f1b, hybrid)")
      ->check(CLI::Range(1, 1 << 16))->capture_default_str();
  g.add_option("--optimizer", optimizer_text_, "optimizers the equivalence suite trains with, comma-separated: sgd,adamw")
      ->check(NameList({"sgd", "adamw"}))->capture_default_str();
  g.add_option("--straggler", straggler_text_,
               "RANK:FACTOR: rank RANK of every layout computes FACTOR (1 to 1000) times as long, waiting after each "
               "of its compute phases (ddp, zero1-3, ps-*, gossip; the others SKIP): a slow processor, not a slow link; "
               "a layout without that rank has no straggler; a RANK outside the job (convergence: its groups) is refused");
}

namespace {

// "2:1.5" -> {2, 1.5}. Error{invalid_argument} naming what is wrong.
std::pair<int, double> parse_straggler(const std::string& text) {
  const size_t colon = text.find(':');
  const auto bad = [&](const std::string& why) {
    return Error(Error::Kind::invalid_argument, "--straggler " + quoted_input(text) + ": " + why + " (RANK:FACTOR, e.g. 1:2)");
  };
  if (colon == std::string::npos) throw bad("expected RANK:FACTOR");
  // Decimal only (decimal_of): strtod read "0x10" as 16 and " 2" as 2.
  const std::optional<int> rank = decimal_of<int>(std::string_view(text).substr(0, colon));
  if (!rank || *rank < 0) throw bad("RANK must be an integer >= 0");
  const std::optional<double> factor = decimal_of<double>(std::string_view(text).substr(colon + 1));
  if (!factor || !std::isfinite(*factor) || *factor < 1 || *factor > 1000) throw bad("FACTOR must be a number from 1 to 1000");
  return {*rank, *factor};
}

}  // namespace

void TrainingFlags::finish(const RunOptions&) {
  straggler_rank = -1;
  straggler_factor = 1;
  if (!straggler_text_.empty()) {
    std::tie(straggler_rank, straggler_factor) = parse_straggler(straggler_text_);
  }
  strategies.clear();
  if (strategies_text_ != "all") {
    // Parsed here, before MPI starts, so an unknown strategy or a bad layout is a usage error.
    for (const StrategySpec& spec : parse_strategy_list(strategies_text_)) strategies.push_back(spec.text);
  }
  optimizers.clear();
  for (const std::string& item : parse_list(optimizer_text_)) {
    optimizers.push_back(item == "sgd" ? OptimizerKind::sgd : OptimizerKind::adamw);  // NameList let no other through
  }
}

ModelSpec TrainingFlags::model(const RunOptions& common) const {
  return {layers, width, input, classes, common.seed, common.seed + 1};
}

void TrainingFlags::require_layout(const StrategySpec& spec, size_t layouts, const std::string& ranks, int world,
                                   const LayoutDefaults& defaults) const {
  if (layouts > 0 || strategies.empty()) return;
  const std::string why = why_no_layout(spec, world, defaults);
  throw Error(Error::Kind::invalid_argument,
              "strategy '" + spec.text + "' has no layout on " + ranks + " with a " + std::to_string(defaults.layers) +
                  "-layer model of width " + std::to_string(defaults.width) +
                  (why.empty() ? "" : " (on " + std::to_string(world) + ": " + why + ")"));
}

void TrainingFlags::check_straggler(int ranks, const std::string& whose) const {
  if (straggler_rank < ranks) return;
  throw Error(Error::Kind::invalid_argument,
              "--straggler " + quoted_input(straggler_text_) + ": rank " + std::to_string(straggler_rank) + " is outside " +
                  whose + " " + std::to_string(ranks) + " ranks (0 to " + std::to_string(ranks - 1) +
                  "): no layout would have the straggler");
}

DTS_REGISTER_FLAGS(TrainingFlags, "Training suites (equivalence, scaling)");

}  // namespace dts
