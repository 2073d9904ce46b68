// Strategy spec parsing and layout enumeration (strategy_spec.h).
#include "strategies/strategy_spec.h"

#include <charconv>
#include <cstdint>
#include <map>

#include "core/error.h"

namespace dts {

namespace {

// Every quote of the user's text goes through quoted_input: cut when long, escaped, one line.
Error bad_spec(std::string_view text, const std::string& why) {
  return Error(Error::Kind::invalid_argument, "bad strategy " + quoted_input(text) + ": " + why);
}

Error bad_list(std::string_view text, const std::string& why) {
  return Error(Error::Kind::invalid_argument, "bad strategy list " + quoted_input(text) + ": " + why);
}

bool takes(const StrategyTraits& traits, const std::string& key) {
  // A parameter server's workers are the ranks its servers leave: servers, not dp, sets them.
  if (traits.servers) return key == "servers" || (key == "staleness" && traits.staleness) || (key == "backup" && traits.backup);
  if (key == "dp") return traits.dp;
  if (key == "tp") return traits.tp;
  if (key == "pp") return traits.pp;
  if (key == "zero") return traits.zero1_option;
  if (key == "schedule") return traits.pp && traits.dp;  // hybrid; gpipe and 1f1b are schedules
  return key == "mb" && traits.accumulation;
}

}  // namespace

std::vector<std::string> spec_keys(const StrategyTraits& traits) {
  std::vector<std::string> keys;
  for (const char* key : {"dp", "tp", "pp", "zero", "mb", "schedule", "servers", "staleness", "backup"}) {
    if (takes(traits, key)) keys.emplace_back(key);
  }
  return keys;
}

namespace {

std::vector<int> candidates(bool allowed, const StrategySpec& spec, const char* key, int world) {
  if (auto it = spec.pinned.find(key); it != spec.pinned.end()) return {it->second};
  if (!allowed) return {1};
  std::vector<int> values;
  for (int v = 1; v <= world; ++v) {
    if (world % v == 0) values.push_back(v);
  }
  return values;
}

}  // namespace

StrategySpec parse_strategy_spec(std::string_view text) {
  StrategySpec spec;
  spec.text = std::string(text);
  const size_t open = text.find('(');
  spec.name = std::string(text.substr(0, open));
  const StrategyTraits& traits = strategy_traits(spec.name);  // unknown: names the known ones
  if (open == std::string_view::npos) return spec;
  if (text.back() != ')' || open + 2 > text.size()) throw bad_spec(text, "expected NAME(key=value,...)");
  std::string_view inner = text.substr(open + 1, text.size() - open - 2);
  if (inner.empty()) throw bad_spec(text, "empty parentheses (write NAME alone, or NAME(key=value,...))");
  for (bool more = true; more;) {
    const size_t comma = std::min(inner.find(','), inner.size());
    const std::string_view item = inner.substr(0, comma);
    more = comma < inner.size();
    inner = more ? inner.substr(comma + 1) : std::string_view{};
    const size_t equals = item.find('=');
    if (equals == std::string_view::npos || equals == 0) throw bad_spec(text, "expected key=value, got " + quoted_input(item));
    const std::string key(item.substr(0, equals));
    const std::string_view value = item.substr(equals + 1);
    if (key != "dp" && key != "tp" && key != "pp" && key != "zero" && key != "mb" && key != "schedule" &&
        key != "servers" && key != "staleness" && key != "backup") {
      throw bad_spec(text, "unknown key " + quoted_input(key) +
                               " (keys: dp, tp, pp, zero, mb, schedule, servers, staleness, backup)");
    }
    if (!takes(traits, key)) throw bad_spec(text, spec.name + " does not take '" + key + "'");
    if (spec.pinned.count(key) || (key == "schedule" && spec.schedule)) throw bad_spec(text, "'" + key + "' given twice");
    if (key == "schedule") {
      if (value == "gpipe") spec.schedule = PipelineSchedule::gpipe;
      else if (value == "1f1b") spec.schedule = PipelineSchedule::one_f_one_b;
      else throw bad_spec(text, "schedule is gpipe or 1f1b, not " + quoted_input(value));
      continue;
    }
    int number = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
    const int least = key == "zero" || key == "staleness" ? 0 : 1;
    if (value.empty() || error != std::errc{} || end != value.data() + value.size() || number < least ||
        number > kMaxSpecValue) {
      throw bad_spec(text, key + " must be an integer from " + std::to_string(least) + " to " +
                               std::to_string(kMaxSpecValue) + ", not " + quoted_input(value));
    }
    if (key == "zero" && number > 1) throw bad_spec(text, "zero is 0 or 1 (ZeRO-1 across the dp group)");
    spec.pinned[key] = number;
  }
  return spec;
}

std::vector<StrategySpec> parse_strategy_list(std::string_view text) {
  std::vector<StrategySpec> specs;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ',';
    if (c == '(') ++depth;
    if (c == ')' && --depth < 0) throw bad_list(text, "unbalanced parentheses");
    if (c == ',' && depth == 0) {
      if (i == start) throw bad_list(text, "empty item");
      StrategySpec spec = parse_strategy_spec(text.substr(start, i - start));
      // A spec named twice (keys in any order) would run and write its cases twice, which compare
      // then cannot join: refused, as core's parse_list refuses `-d f32,f32`.
      for (const StrategySpec& earlier : specs) {
        if (earlier.name == spec.name && earlier.pinned == spec.pinned && earlier.schedule == spec.schedule) {
          throw bad_list(text, quoted_input(earlier.text) + " twice" +
                                   (earlier.text == spec.text ? "" : " (again as " + quoted_input(spec.text) + ")"));
        }
      }
      specs.push_back(std::move(spec));
      start = i + 1;
    }
  }
  if (depth != 0) throw bad_list(text, "unbalanced parentheses");
  return specs;
}

namespace {

bool is_prime(int n) {
  if (n < 2) return false;
  for (int d = 2; d <= n / d; ++d) {
    if (n % d == 0) return false;
  }
  return true;
}

// layouts_of's enumeration. `why`, when given, collects why a (dp, tp, pp) of `world` ranks was
// left out: one sentence per kind of reason, with the numbers of its first case, in the order met.
std::vector<ParallelConfig> enumerate_layouts(const StrategySpec& spec, int world, const LayoutDefaults& defaults,
                                              std::vector<std::string>* why) {
  const StrategyTraits& traits = strategy_traits(spec.name);
  const bool pinned_layout = spec.pinned.count("dp") || spec.pinned.count("tp") || spec.pinned.count("pp");
  std::map<std::string, std::string> reasons;  // kind -> sentence
  const auto left_out = [&](const std::string& kind, const std::string& sentence) {
    if (why && reasons.emplace(kind, sentence).second) why->push_back(sentence);
  };
  std::vector<ParallelConfig> layouts;
  if (traits.servers) {
    // S servers and W = world - S workers: every S from 1 to world - 1 unless pinned.
    std::vector<int> servers;
    if (auto it = spec.pinned.find("servers"); it != spec.pinned.end()) {
      servers = {it->second};
    } else {
      for (int s = 1; s < world; ++s) servers.push_back(s);
    }
    for (int s : servers) {
      const int workers = world - s;
      if (workers < 1) {
        left_out("servers", std::to_string(s) + " servers leave no worker on " + std::to_string(world) +
                                " ranks (servers must be fewer than the ranks)");
        continue;
      }
      const auto pinned_or = [&](const char* key, int fallback) {
        auto it = spec.pinned.find(key);
        return it != spec.pinned.end() ? it->second : fallback;
      };
      ParallelConfig config;
      config.dp = workers;
      config.servers = s;
      config.staleness = traits.staleness ? pinned_or("staleness", kDefaultStaleness) : 0;
      config.backup = traits.backup ? pinned_or("backup", kDefaultBackup) : 0;
      if (config.backup >= workers) {
        left_out("backup", "backup=" + std::to_string(config.backup) + " needs more workers than that; " +
                               std::to_string(s) + " servers leave " + std::to_string(workers) + " on " +
                               std::to_string(world) + " ranks");
        continue;
      }
      layouts.push_back(config);
    }
    if (why && layouts.empty() && why->empty()) {
      why->push_back("a parameter server needs at least 2 ranks (a server and a worker)");
    }
    return layouts;
  }
  for (int dp : candidates(traits.dp, spec, "dp", world)) {
    for (int tp : candidates(traits.tp, spec, "tp", world)) {
      for (int pp : candidates(traits.pp, spec, "pp", world)) {
        // In 64 bits: each candidate runs up to world, and world^3 overflows int past 1290 ranks.
        if (static_cast<int64_t>(dp) * tp * pp != world) continue;
        const int split = (dp > 1) + (tp > 1) + (pp > 1);
        if (!pinned_layout && split < traits.min_parallel_dimensions) {
          left_out("dimensions", spec.name + " needs at least " + std::to_string(traits.min_parallel_dimensions) +
                                     " of dp, tp, pp above 1" +
                                     (is_prime(world) ? ", and " + std::to_string(world) + " ranks (a prime) split one way only"
                                                      : ""));
          continue;
        }
        // A stage holds at least one layer; a tensor-parallel rank at least one feature.
        if (pp > defaults.layers) {
          left_out("depth", std::to_string(defaults.layers) + " layers cannot be split into " + std::to_string(pp) +
                                " pipeline stages (a stage holds at least one layer; --layers)");
          continue;
        }
        if (tp > defaults.width) {
          left_out("width", "a width of " + std::to_string(defaults.width) + " cannot be split across " +
                                std::to_string(tp) + " tensor-parallel ranks (--width)");
          continue;
        }

        std::vector<int> stages{traits.zero};
        if (auto it = spec.pinned.find("zero"); it != spec.pinned.end()) {
          if (it->second == 1 && dp == 1) {  // ZeRO-1 across a dp group of one is plain
            left_out("zero", "zero=1 shards across dp, and dp is 1 here");
            continue;
          }
          stages = {it->second};
        } else if (traits.zero1_option && dp > 1) {
          stages = {0, 1};
        }
        for (int zero : stages) {
          ParallelConfig config;
          config.dp = dp;
          config.tp = tp;
          config.pp = pp;
          config.zero = zero;
          auto mb = spec.pinned.find("mb");
          config.microbatches = mb != spec.pinned.end() ? mb->second
                                : traits.pp          ? defaults.microbatches
                                : traits.accumulation ? defaults.accumulation
                                                      : 1;
          config.schedule = spec.schedule.value_or(traits.schedule);
          layouts.push_back(config);
        }
      }
    }
  }
  if (why && layouts.empty() && why->empty()) {
    why->push_back("its pinned dp, tp, pp make no split of " + std::to_string(world) + " ranks");
  }
  return layouts;
}

}  // namespace

std::vector<ParallelConfig> layouts_of(const StrategySpec& spec, int world, const LayoutDefaults& defaults) {
  return enumerate_layouts(spec, world, defaults, nullptr);
}

std::string why_no_layout(const StrategySpec& spec, int world, const LayoutDefaults& defaults) {
  std::vector<std::string> why;
  if (!enumerate_layouts(spec, world, defaults, &why).empty()) return {};
  std::string text;
  for (const std::string& sentence : why) text += (text.empty() ? "" : "; ") + sentence;
  return text;
}

std::string layout_id(const StrategySpec& spec, const ParallelConfig& c) {
  const StrategyTraits& traits = strategy_traits(spec.name);
  if (traits.servers) {
    return "s" + std::to_string(c.servers) + "-w" + std::to_string(c.dp) +
           (traits.staleness ? "-st" + std::to_string(c.staleness) : "") +
           (traits.backup ? "-b" + std::to_string(c.backup) : "");
  }
  const int dims = traits.dp + traits.tp + traits.pp;
  std::string id;
  if (dims > 1) {
    id = "dp" + std::to_string(c.dp) + "-tp" + std::to_string(c.tp) + "-pp" + std::to_string(c.pp);
    if (c.zero > 0 && traits.zero1_option) id += "-zero" + std::to_string(c.zero);
  } else if (traits.tp) {
    id = "tp" + std::to_string(c.tp);
  } else if (traits.pp) {
    id = "pp" + std::to_string(c.pp);
  } else {
    id = "dp" + std::to_string(c.dp);
  }
  // Every layout dimension that can differ between cases of one run is in the id: micro-batches
  // (a pipeline's m, or gradient accumulation) and a schedule other than the strategy's own.
  if (c.microbatches > 1) id += "-mb" + std::to_string(c.microbatches);
  if (c.schedule != traits.schedule) id += "-" + std::string(name(c.schedule));
  return id;
}

}  // namespace dts
