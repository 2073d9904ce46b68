// Strategy specs: parsing ("hybrid(dp=2,tp=2)"), its one-line errors, the layouts an unpinned
// spec expands to at each world size, and their case-id names. Uses the strategies that register
// themselves at static init (ddp, zero1-3, tp, gpipe, 1f1b, hybrid); one process, no MPI.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "comm/testing/fake_communicator.h"
#include "core/buffer.h"
#include "core/error.h"
#include "dts/config.h"
#include "strategies/strategy.h"
#include "strategies/strategy_spec.h"

namespace dts {
namespace {

// accumulation 1, m = 4, a 3-layer model of width 64: the equivalence suite's defaults.
const LayoutDefaults kDefaults{1, 4, 3, 64};

// The message of the Error{invalid_argument} that parsing `text` throws ("" if none or another).
std::string parse_error(const std::string& text, bool list = false) {
  try {
    if (list) parse_strategy_list(text);
    else parse_strategy_spec(text);
  } catch (const Error& e) {
    return e.kind() == Error::Kind::invalid_argument ? e.what() : "";
  }
  return "";
}

std::vector<ParallelConfig> layouts(const std::string& text, int world) {
  return layouts_of(parse_strategy_spec(text), world, kDefaults);
}

using Dims = std::tuple<int, int, int, int>;  // dp, tp, pp, zero
std::vector<Dims> dims_of(const std::vector<ParallelConfig>& configs) {
  std::vector<Dims> dims;
  for (const auto& c : configs) dims.emplace_back(c.dp, c.tp, c.pp, c.zero);
  return dims;
}

TEST(StrategySpec, ParsesNameAndPins) {
  const StrategySpec ddp = parse_strategy_spec("ddp");
  EXPECT_EQ(ddp.name, "ddp");
  EXPECT_TRUE(ddp.pinned.empty());
  const StrategySpec hybrid = parse_strategy_spec("hybrid(dp=2,tp=2)");
  EXPECT_EQ(hybrid.name, "hybrid");
  EXPECT_EQ(hybrid.pinned, (std::map<std::string, int>{{"dp", 2}, {"tp", 2}}));
  EXPECT_FALSE(hybrid.schedule.has_value());
  EXPECT_EQ(hybrid.text, "hybrid(dp=2,tp=2)");
  EXPECT_EQ(parse_strategy_spec("hybrid(zero=0,schedule=gpipe)").schedule, PipelineSchedule::gpipe);
  EXPECT_EQ(parse_strategy_spec("1f1b(pp=2,mb=8)").pinned, (std::map<std::string, int>{{"pp", 2}, {"mb", 8}}));
}

TEST(StrategySpec, ErrorsNameTheProblem) {
  // An unknown strategy lists the known ones, so the user sees what to type.
  const std::string unknown = parse_error("bogus");
  EXPECT_NE(unknown.find("bogus"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("ddp"), std::string::npos) << unknown;
  EXPECT_NE(parse_error("tp(pp=2)").find("does not take 'pp'"), std::string::npos);  // tp splits no layers
  EXPECT_NE(parse_error("ddp(zero=1)").find("does not take 'zero'"), std::string::npos);  // ddp: zero1 is a strategy
  for (const char* bad : {"hybrid(dp=0)", "hybrid(dp=-1)", "hybrid(dp=x)", "hybrid(dp=2x)", "hybrid(dp=)",
                          "hybrid(zero=2)", "hybrid(dp=2,dp=2)", "hybrid(bogus=1)", "hybrid(dp)", "hybrid(=2)",
                          "hybrid(schedule=zigzag)", "ddp(", "ddp(dp=2", "", "(dp=2)", "tp()", "tp(tp=2,)",
                          "hybrid(,dp=2)", "gpipe(schedule=1f1b)"}) {
    EXPECT_NE(parse_error(bad), "") << "accepted '" << bad << "'";
  }
  EXPECT_NE(parse_error("hybrid(dp=2,dp=2)").find("twice"), std::string::npos);
}

TEST(StrategySpec, ListsSplitOnlyOutsideParentheses) {
  const std::vector<StrategySpec> specs = parse_strategy_list("ddp,hybrid(dp=2,tp=2),1f1b(pp=2,mb=8)");
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_EQ(specs[0].text, "ddp");
  EXPECT_EQ(specs[1].text, "hybrid(dp=2,tp=2)");
  EXPECT_EQ(specs[2].text, "1f1b(pp=2,mb=8)");
  EXPECT_EQ(specs[2].pinned.at("mb"), 8);
  for (const char* bad : {"", "ddp,", ",ddp", "ddp,,zero1", "hybrid(dp=2", "hybrid(dp=2))", "ddp)", "bogus,ddp"}) {
    EXPECT_NE(parse_error(bad, true), "") << "accepted list '" << bad << "'";
  }
}

// A spec named twice would run (and write) its cases twice, which compare then refuses to join;
// refused as `-d f32,f32` is. The same spec differently spelt (keys reordered) counts as twice.
TEST(StrategySpec, ListsRefuseASpecGivenTwice) {
  for (const char* repeated : {"ddp,ddp", "ddp,zero1,ddp", "tp(tp=2),tp(tp=2)", "hybrid(dp=2,tp=2),hybrid(tp=2,dp=2)",
                               "hybrid(schedule=gpipe),hybrid(schedule=gpipe)"}) {
    const std::string what = parse_error(repeated, true);
    EXPECT_NE(what.find("twice"), std::string::npos) << repeated << ": " << what;
  }
  EXPECT_NE(parse_error("ddp,ddp", true).find("'ddp' twice"), std::string::npos) << parse_error("ddp,ddp", true);
  // Different pins of one strategy are different specs.
  EXPECT_EQ(parse_strategy_list("tp(tp=2),tp(tp=4),hybrid(schedule=gpipe),hybrid(schedule=1f1b)").size(), 4u);
}

// A number out of range names the range the parser takes, both ends: "staleness must be an
// integer >= 0" was said of 2147483647, which is >= 0.
TEST(StrategySpec, ANumberOutOfRangeNamesTheRange) {
  const std::string top = std::to_string(kMaxSpecValue);
  EXPECT_NE(parse_error("ps-ssp(staleness=2147483647)").find("staleness must be an integer from 0 to " + top +
                                                               ", not '2147483647'"),
            std::string::npos)
      << parse_error("ps-ssp(staleness=2147483647)");
  EXPECT_NE(parse_error("ddp(dp=0)").find("dp must be an integer from 1 to " + top), std::string::npos)
      << parse_error("ddp(dp=0)");
  EXPECT_EQ(parse_error("ps-ssp(staleness=" + top + ")"), "");  // the top itself is taken
  EXPECT_NE(parse_error("ps-ssp(staleness=" + std::to_string(kMaxSpecValue + 1) + ")"), "");
}

// Errors quote the spec as backend specs are quoted (core/error.h, quoted_input): cut past
// kQuotedChars with its length, control bytes escaped, so the harness's error stays one short line.
TEST(StrategySpec, MessagesAreOneShortLine) {
  // The quote holds at most kQuotedChars characters (an escape is 2 to 4 bytes: at most 4 x 80),
  // twice (the list and the item), plus the fixed text: 1,000 bounds a message that grew with the input.
  constexpr size_t kShortMessage = 1000;
  const std::string huge_name(100'000, 'x');
  const std::string huge_value = "hybrid(dp=" + std::string(100'000, '7') + ")";
  const std::string huge_key = "hybrid(" + std::string(100'000, 'k') + "=2)";
  const std::string huge_list = "ddp," + std::string(100'000, 'y');
  for (const std::string& text : {huge_name, huge_value, huge_key, huge_list, std::string("dd\np"),
                                  std::string("hybrid(dp=2,\ntp=2)"), std::string("hybrid(dp=\n)"),
                                  std::string("hybrid(\x1b[2J=1)"), std::string("ddp,\n"), std::string("ddp\n,zero1")}) {
    for (bool list : {false, true}) {
      const std::string what = parse_error(text, list);
      ASSERT_NE(what, "") << "accepted '" << text << "'";
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_EQ(what.find('\x1b'), std::string::npos) << what;
      EXPECT_LT(what.size(), kShortMessage) << what.substr(0, 200);
    }
  }
  EXPECT_NE(parse_error("dd\np").find("'dd\\np'"), std::string::npos) << parse_error("dd\np");
  EXPECT_NE(parse_error(huge_name).find("... (100000 characters)"), std::string::npos);
}

TEST(LayoutsOf, SingleDimensionStrategies) {
  ASSERT_EQ(dims_of(layouts("tp", 3)), (std::vector<Dims>{{1, 3, 1, 0}}));
  EXPECT_EQ(layouts("tp", 3)[0].microbatches, kDefaults.accumulation);  // no pipeline: accumulation
  // 4 stages would leave one empty on a 3-layer model.
  EXPECT_TRUE(layouts("gpipe", 4).empty());
  const std::vector<ParallelConfig> gpipe = layouts("gpipe", 3);
  ASSERT_EQ(dims_of(gpipe), (std::vector<Dims>{{1, 1, 3, 0}}));
  EXPECT_EQ(gpipe[0].microbatches, kDefaults.microbatches);
  EXPECT_EQ(gpipe[0].schedule, PipelineSchedule::gpipe);
  EXPECT_EQ(layouts("1f1b", 2).at(0).schedule, PipelineSchedule::one_f_one_b);
  const std::vector<ParallelConfig> ddp = layouts("ddp", 2);
  ASSERT_EQ(dims_of(ddp), (std::vector<Dims>{{2, 1, 1, 0}}));
  EXPECT_EQ(ddp[0].microbatches, kDefaults.accumulation);
  EXPECT_EQ(ddp[0].schedule, PipelineSchedule::none);
  EXPECT_EQ(dims_of(layouts("zero2", 3)), (std::vector<Dims>{{3, 1, 1, 2}}));  // its stage, always
  // tp splits the hidden width: at most one feature per rank.
  EXPECT_TRUE(layouts_of(parse_strategy_spec("tp"), 3, {1, 4, 3, 2}).empty());
  EXPECT_EQ(layouts("ddp(mb=3)", 2).at(0).microbatches, 3);  // a pinned mb wins
}

TEST(LayoutsOf, HybridNeedsTwoSplitDimensions) {
  // World 4: (1,2,2); (2,1,2) and (2,2,1) with and without ZeRO-1 across their dp of 2.
  // (1,1,4) has more stages than layers; (1,4,1) and (4,1,1) split one dimension only.
  const std::vector<ParallelConfig> four = layouts("hybrid", 4);
  EXPECT_EQ(dims_of(four), (std::vector<Dims>{{1, 2, 2, 0}, {2, 1, 2, 0}, {2, 1, 2, 1}, {2, 2, 1, 0}, {2, 2, 1, 1}}));
  for (const auto& c : four) {
    EXPECT_EQ(c.microbatches, kDefaults.microbatches);
    EXPECT_EQ(c.schedule, PipelineSchedule::one_f_one_b);
  }
  // 1, 2 and 3 ranks (1 or prime) cannot split two dimensions.
  for (int world : {1, 2, 3}) EXPECT_TRUE(layouts("hybrid", world).empty()) << world;
  EXPECT_EQ(layouts("hybrid(schedule=gpipe)", 4).at(0).schedule, PipelineSchedule::gpipe);
  // 2^16 ranks, deep and wide enough for any split: a layout is (2^a, 2^b, 2^c) with a+b+c = 16,
  // C(18,2) = 153 of them, less the 3 that split one way; the 135 with dp > 1 and a second
  // split come with and without ZeRO-1: 285. (dp*tp*pp of the candidates reaches 2^48: the
  // product overflowed int, which UBSan reports in the sanitize stage.)
  EXPECT_EQ(layouts_of(parse_strategy_spec("hybrid"), 65536, {1, 4, 65536, 65536}).size(), 285u);
}

TEST(LayoutsOf, PinnedSpecs) {
  // dp and tp pinned, zero not: both ZeRO settings of the one (dp, tp, pp) layout.
  EXPECT_EQ(dims_of(layouts("hybrid(dp=2,tp=2)", 4)), (std::vector<Dims>{{2, 2, 1, 0}, {2, 2, 1, 1}}));
  EXPECT_EQ(dims_of(layouts("hybrid(dp=2,tp=2,zero=1)", 4)), (std::vector<Dims>{{2, 2, 1, 1}}));
  EXPECT_EQ(dims_of(layouts("hybrid(dp=2,tp=2,pp=1,zero=0)", 4)), (std::vector<Dims>{{2, 2, 1, 0}}));
  EXPECT_TRUE(layouts("hybrid(dp=2,tp=2)", 2).empty());  // its ranks are not the world's
  // Pinning the layout lifts hybrid's two-dimension minimum: the user asked for it.
  EXPECT_EQ(dims_of(layouts("hybrid(dp=2,tp=1,pp=1)", 2)), (std::vector<Dims>{{2, 1, 1, 0}, {2, 1, 1, 1}}));
  // ZeRO-1 across a dp group of one is plain data parallelism: no such layout.
  EXPECT_TRUE(layouts("hybrid(tp=2,pp=2,zero=1)", 4).empty());
  EXPECT_EQ(layouts("gpipe(pp=2,mb=8)", 2).at(0).microbatches, 8);
}

// Why a spec has no layout on some ranks, in words naming the model's or the ranks' limit.
TEST(LayoutsOf, WhyNoneNamesTheCause) {
  const auto why = [](const std::string& text, int world, LayoutDefaults defaults = kDefaults) {
    return why_no_layout(parse_strategy_spec(text), world, defaults);
  };
  EXPECT_EQ(why("gpipe", 4), "3 layers cannot be split into 4 pipeline stages (a stage holds at least one layer; --layers)");
  EXPECT_EQ(why("tp", 4, LayoutDefaults{1, 4, 3, 2}), "a width of 2 cannot be split across 4 tensor-parallel ranks (--width)");
  EXPECT_EQ(why("hybrid", 3), "hybrid needs at least 2 of dp, tp, pp above 1, and 3 ranks (a prime) split one way only");
  EXPECT_EQ(why("hybrid", 1), "hybrid needs at least 2 of dp, tp, pp above 1");
  // dp=1 pinned: 1x1x4 is too deep for 3 layers, 1x2x2 and 1x4x1 have no dp for ZeRO-1 to shard across.
  EXPECT_EQ(why("hybrid(dp=1,zero=1)", 4), "3 layers cannot be split into 4 pipeline stages (a stage holds at least one "
                                           "layer; --layers); zero=1 shards across dp, and dp is 1 here");
  EXPECT_EQ(why("hybrid(dp=2,tp=2,pp=1)", 8), "its pinned dp, tp, pp make no split of 8 ranks");
  // Every reason of a mixed refusal: at 4 ranks with 1 layer, hybrid's two-way splits need 2
  // stages or 2 tensor ranks of a width of 1; its one-way splits are too few dimensions.
  const std::string mixed = why("hybrid", 4, LayoutDefaults{1, 4, 1, 1});
  EXPECT_NE(mixed.find("needs at least 2 of dp, tp, pp above 1"), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("1 layers cannot be split into 2 pipeline stages"), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("a width of 1 cannot be split across 2 tensor-parallel ranks"), std::string::npos) << mixed;
  // A spec with layouts has nothing to say.
  EXPECT_EQ(why("gpipe", 3), "");
  EXPECT_EQ(why("hybrid", 4), "");
}

TEST(LayoutId, NamesTheSplitDimensions) {
  const auto id = [](const std::string& text, int world, size_t index = 0) {
    const StrategySpec spec = parse_strategy_spec(text);
    return layout_id(spec, layouts_of(spec, world, kDefaults).at(index));
  };
  EXPECT_EQ(id("tp", 3), "tp3");
  EXPECT_EQ(id("gpipe", 2), "pp2-mb4");
  EXPECT_EQ(id("1f1b(mb=8)", 3), "pp3-mb8");
  EXPECT_EQ(id("ddp", 3), "dp3");
  EXPECT_EQ(id("zero3", 3), "dp3");  // the stage is in the strategy's name already
  EXPECT_EQ(id("hybrid", 4, 0), "dp1-tp2-pp2-mb4");
  EXPECT_EQ(id("hybrid", 4, 2), "dp2-tp1-pp2-zero1-mb4");
  // Without a pipeline the micro-batches are gradient accumulation, still a dimension of the case.
  EXPECT_EQ(id("hybrid", 4, 4), "dp2-tp2-pp1-zero1-mb4");
  EXPECT_EQ(id("tp(mb=2)", 2), "tp2-mb2");  // not the same case as plain tp
  EXPECT_EQ(id("hybrid(schedule=1f1b)", 4, 0), id("hybrid", 4, 0));  // 1F1B is hybrid's own schedule
  // A pinned schedule tells hybrid cases apart from the default (1F1B) ones.
  EXPECT_EQ(id("hybrid(schedule=gpipe)", 4, 0), "dp1-tp2-pp2-mb4-gpipe");
  // Every layout of a spec at one world size gets its own id (case ids must be unique).
  for (const char* text : {"ddp", "tp", "gpipe", "1f1b", "hybrid"}) {
    for (int world = 1; world <= 8; ++world) {
      const StrategySpec spec = parse_strategy_spec(text);
      std::vector<std::string> ids;
      for (const auto& c : layouts_of(spec, world, {1, 4, 8, 64})) ids.push_back(layout_id(spec, c));
      std::sort(ids.begin(), ids.end());
      EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end()) << text << " at " << world;
    }
  }
}

// On a communicator that takes device memory, make_strategy builds a strategy's device class
// (ddp and zero1-3, f32 and bf16) or refuses it as unsupported (a
// SKIP), naming what does run there; it never hands host vectors to a device backend.
std::string unsupported_on_device(const std::string& name, Precision precision) {
  testing::FakeCommunicator device("fakegpu", Memory::device);
  const ModelSpec spec{2, 6, 5, 3, 7, 8};
  const std::vector<ParallelConfig> layouts = layouts_of(parse_strategy_spec(name), 1, kDefaults);
  if (layouts.empty()) return "no layout";  // hybrid: at least two dimensions above 1
  ParallelConfig config = layouts[0];
  ProcessGroups groups = ProcessGroups::split(device, config);
  try {
    make_strategy(name, spec, config, groups, precision);
  } catch (const Error& e) {
    return e.kind() == Error::Kind::unsupported ? e.what() : std::string("other error: ") + e.what();
  }
  return "built";
}

// A layout splits only the groups its strategy calls: a data-parallel one its dp group, never a tp
// or pp group of one rank (on a device stack each split is a library communicator of its own).
TEST(ProcessGroups, ADataParallelLayoutSplitsOnlyItsDpGroup) {
  auto log = std::make_shared<testing::FakeCommunicator::Log>();
  testing::FakeCommunicator world("fake", Memory::host, log);
  const ModelSpec spec{2, 6, 5, 3, 7, 8};
  for (const std::string name : {"ddp", "zero1", "zero2", "zero3"}) {
    log->clear();
    ParallelConfig config = layouts_of(parse_strategy_spec(name), 1, kDefaults).at(0);
    ProcessGroups groups = ProcessGroups::split(world, config);
    EXPECT_EQ(std::count(log->begin(), log->end(), "split"), 1) << name;  // dp only: tp = pp = 1
    EXPECT_NE(groups.dp, nullptr) << name;
    EXPECT_EQ(groups.tp, nullptr) << name;
    EXPECT_EQ(groups.pp, nullptr) << name;
    // And the strategy builds on them: it reads no group that was left unsplit.
    EXPECT_NE(make_strategy(name, spec, config, groups, Precision::f32), nullptr) << name;
  }
}

// One class per strategy for host and device: every registered strategy has a device factory
// (a strategy registered without one would be refused on a device backend, naming those that run
// there), and each builds on device memory wherever it has a one-rank layout.
TEST(DeviceStrategies, EveryStrategyRunsOnTheDevice) {
  // Every build has them: the kernel table runs on the emulated device where CUDA is missing,
  // and the classes are built there (device memory that host code cannot touch: a constructor
  // that wrote its tensors directly would die here).
  use_device_kind(DeviceKind::emulated);
  EXPECT_EQ(device_strategies(), registered_strategies());
  EXPECT_EQ(device_strategies().size(), 13u);  // ddp, zero1-3, tp, gpipe, 1f1b, hybrid, ps x4, gossip
  for (const std::string& name : registered_strategies()) {
    const std::string built = unsupported_on_device(name, Precision::f32);
    if (built == "no layout") continue;  // hybrid needs two dimensions above 1
    EXPECT_EQ(built, "built") << name;
  }
}

TEST(DeviceStrategies, TheDeviceClassesRefuseF64Only) {
  for (const std::string& name : device_strategies()) {
    // The fewest ranks with a layout: one, but a parameter server needs a server and a worker
    // (ps-backup two workers), and unsupported_on_device builds on one rank only.
    std::vector<ParallelConfig> layouts;
    int ranks = 0;
    while (layouts.empty() && ranks < 4) layouts = layouts_of(parse_strategy_spec(name), ++ranks, kDefaults);
    ASSERT_FALSE(layouts.empty()) << name;
    const ParallelConfig config = layouts[0];
    if (ranks == 1) {
      const std::string why = unsupported_on_device(name, Precision::f64);
      EXPECT_NE(why.find(name + " on the device computes in f32 and bf16"), std::string::npos) << why;
    }
    try {
      check_strategy(name, config, Memory::device, Precision::f64);
      ADD_FAILURE() << name << " passed check_strategy in f64 on the device";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name + " on the device computes in f32 and bf16"), std::string::npos)
          << e.what();
    }
    EXPECT_NO_THROW(check_strategy(name, config, Memory::device, Precision::bf16)) << name;
    EXPECT_NO_THROW(check_strategy(name, config, Memory::device, Precision::f32)) << name;
  }
}

// gossip makes one local step per mixing: it takes no micro-batches, so `gossip(mb=2)` is refused
// and --accumulation (LayoutDefaults::accumulation) leaves its layouts at one micro-batch instead
// of building one it refuses (which failed its cases under --accumulation 2).
TEST(StrategySpec, GossipTakesNoMicroBatches) {
  EXPECT_NE(parse_error("gossip(mb=2)").find("does not take 'mb'"), std::string::npos) << parse_error("gossip(mb=2)");
  LayoutDefaults defaults;
  defaults.accumulation = 3;
  for (const ParallelConfig& c : layouts_of(parse_strategy_spec("gossip"), 3, defaults)) EXPECT_EQ(c.microbatches, 1);
  for (const ParallelConfig& c : layouts_of(parse_strategy_spec("ddp"), 3, defaults)) EXPECT_EQ(c.microbatches, 3);
}

}  // namespace
}  // namespace dts

// --straggler: the straggler's rank waits at least (factor - 1) x the phase it computed (the wait
// ends at a deadline, so this holds however loaded the machine: only the upper side is noisy);
// every other rank, a factor of 1, and a layout too small to hold that rank wait nothing; the
// config names the straggler only where the layout has it.
TEST(Straggler, WaitsItsShareOnlyOnItsRankAndTheConfigSaysSo) {
  dts::ParallelConfig config;
  config.dp = 2;
  config.straggler_rank = 1;
  config.straggler_factor = 3;
  EXPECT_TRUE(config.has_straggler());
  EXPECT_GE(dts::straggle(config, 1, 0.002), 0.004);  // (3 - 1) x 2 ms
  EXPECT_GE(dts::straggle(config, 1, 2e-5), 4e-5);     // a phase of microseconds: no timer slack short of it
  EXPECT_EQ(dts::straggle(config, 0, 0.002), 0.0);
  EXPECT_EQ(config.describe(), "dp=2;tp=1;pp=1;zero=0;mb=1;schedule=none;straggler=1:3");
  dts::ParallelConfig one = config;
  one.dp = 1;  // rank 1 is not in a layout of one rank
  EXPECT_FALSE(one.has_straggler());
  EXPECT_EQ(dts::straggle(one, 1, 0.002), 0.0);
  EXPECT_EQ(one.describe(), "dp=1;tp=1;pp=1;zero=0;mb=1;schedule=none");
  dts::ParallelConfig unit = config;
  unit.straggler_factor = 1;
  EXPECT_FALSE(unit.has_straggler());
  EXPECT_EQ(dts::straggle(unit, 1, 0.002), 0.0);
}

