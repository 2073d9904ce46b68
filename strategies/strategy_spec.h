// Strategy specs, parsed in one place: "ddp", "tp(tp=3)", "1f1b(pp=2,mb=8)", "hybrid(dp=2,tp=2,zero=1)".
// A spec names a registered strategy and may pin its layout; the equivalence suite expands an
// unpinned spec into every layout the job's ranks allow (layouts_of).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strategies/strategy.h"

namespace dts {

// What a parameter server's spec leaves open takes: ps-ssp's bound s, ps-backup's b.
inline constexpr int kDefaultStaleness = 1, kDefaultBackup = 1;
// The largest value a spec's number takes (dp, tp, pp, mb, servers, staleness, backup): far past
// any layout of a real job, and its products (dp x tp x pp, dp x mb) stay within an int64.
inline constexpr int kMaxSpecValue = 1 << 20;

struct StrategySpec {
  std::string name;                   // a registered strategy
  std::map<std::string, int> pinned;  // dp, tp, pp, zero, mb; servers, staleness, backup
  std::optional<PipelineSchedule> schedule;  // schedule=gpipe|1f1b (hybrid)
  std::string text;                   // as written
};

// The keys a strategy's spec takes ("dp", "tp", "pp", "zero", "mb", "schedule", "servers",
// "staleness", "backup"), in that order.
std::vector<std::string> spec_keys(const StrategyTraits& traits);

// One spec. Error{invalid_argument} with one line naming the problem: an unknown strategy (listing
// the known ones), an unknown key, a key the strategy does not take, a value that is not a
// positive integer, or a layout its traits refuse.
StrategySpec parse_strategy_spec(std::string_view text);
// A comma-separated list whose items may hold commas inside parentheses:
// "ddp,hybrid(dp=2,tp=2)" -> {"ddp", "hybrid(dp=2,tp=2)"}. Empty items are errors.
std::vector<StrategySpec> parse_strategy_list(std::string_view text);

// What layouts_of fills in where a spec leaves it open.
struct LayoutDefaults {
  int accumulation = 1;  // micro-batches of strategies without a pipeline (ddp, zero, tp)
  int microbatches = 4;  // the pipeline's m (gpipe, 1f1b, hybrid)
  int layers = 3;        // the model's layers: a pipeline has at most one stage per layer
  int width = 64;        // the hidden width: tp splits it, so tp <= width
};

// Every layout of `spec` on exactly `world` ranks, in a fixed order (empty when there is none: a
// pipeline deeper than the model, a hybrid on a prime number of ranks). Pinned keys are fixed and
// the rest enumerated: hybrid(dp=2,tp=2) on 4 ranks gives its layout with and without ZeRO-1.
std::vector<ParallelConfig> layouts_of(const StrategySpec& spec, int world, const LayoutDefaults& defaults);
// Why layouts_of(spec, world, defaults) is empty, in words naming the cause and the flag behind it
// ("3 layers cannot be split into 4 pipeline stages (a stage holds at least one layer; --layers)");
// "" when it is not empty.
std::string why_no_layout(const StrategySpec& spec, int world, const LayoutDefaults& defaults);

// The part of a case id that names the layout: "dp3" (ddp, zero), "tp3", "pp2-mb4",
// "dp2-tp2-pp1-zero1"; parameter servers "s1-w3", "s1-w3-st1" (ps-ssp), "s1-w3-b1" (ps-backup).
std::string layout_id(const StrategySpec& spec, const ParallelConfig& config);

}  // namespace dts
