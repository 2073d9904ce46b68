// Unit tests of acceptance profiles: the loader (every class of malformed profile gives its own
// PATH:LINE message), the selectors, the inclusive bounds, the judge's verdicts and citations,
// and the per-threshold summary (including thresholds that matched nothing). No MPI.
#include "suites/profiles/profile.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "core/error.h"
#include "core/input_file.h"

namespace dts {
namespace {

// A record as the collectives suite emits it (stack labels as the harness stamps them).
Record busbw_record(int64_t bytes, double value, const std::string& op = "all_reduce") {
  Record r;
  r.suite = "collectives";
  r.case_id = op + "/f32/sum/" + std::to_string(bytes);
  r.metric = "busbw";
  r.unit = "bytes_per_second";
  r.labels.backend = "mpi";
  r.labels.device = "cpu:Some CPU";
  r.labels.world_size = 4;
  r.labels.op = op;
  r.labels.dtype = "f32";
  r.labels.bytes = bytes;
  r.labels.placement = "out_of_place";
  r.labels.config = "redop=sum;root=-1;count=" + std::to_string(bytes / 4);
  r.value = value;
  return r;
}

constexpr int64_t k256M = int64_t{256} << 20;

const char* kBusbwProfile = R"(# test profile
[profile]
name = "t"

[[threshold]]
metric = "busbw"
op = "all_reduce"
min_bytes = "256M"
min = 4.0e9
source = "vendor figure"
)";

std::string load_error(const std::string& text) {
  try {
    parse_profile(text, "p.toml");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
    return message;
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return {};
}

TEST(ProfileLoader, ReadsSelectorsBoundsAndRunDefaults) {
  const Profile p = parse_profile(R"([profile]
name = "x"
description = "d"

[run]
suites = ["collectives", "equivalence"]
minbytes = "1M"
maxbytes = 268435456
stepfactor = 2
datatype = ["f32", "bf16"]
op = "sum,max"

[[threshold]]
metric = "max_abs_error"
suite = "equivalence"
strategy = ["ddp", "zero3"]
dtype = "float"
config = "dp=4;zero=3"
world_size = 4
max = 1e-6
source = "s"
optional = true
)",
                                  "dir/x.toml");
  EXPECT_EQ(p.name, "x");
  EXPECT_EQ(p.file_name(), "x.toml");
  ASSERT_EQ(p.run.size(), 6u);
  EXPECT_EQ(p.run[0].flag, "suites");
  EXPECT_EQ(p.run[0].items, (std::vector<std::string>{"collectives", "equivalence"}));
  EXPECT_EQ(p.run[1].value, "1M");
  EXPECT_EQ(p.run[2].value, "268435456");
  EXPECT_EQ(p.run[3].value, "2");
  EXPECT_EQ(p.run[4].value, "f32,bf16");
  EXPECT_EQ(p.run[5].items, (std::vector<std::string>{"sum", "max"}));
  EXPECT_EQ(p.run[5].line, 11);  // the `op = ...` line of the text above
  ASSERT_EQ(p.thresholds.size(), 1u);
  const Threshold& t = p.thresholds[0];
  EXPECT_EQ(t.index, 1);
  EXPECT_EQ(t.line, 13);  // its [[threshold]] header
  EXPECT_EQ(t.dtypes, std::vector<std::string>{"f32"});  // nccl-tests' "float" as records spell it
  EXPECT_EQ(t.config.size(), 2u);
  EXPECT_EQ(t.min_world_size, 4);
  EXPECT_EQ(t.max_world_size, 4);
  EXPECT_FALSE(t.min.has_value());
  EXPECT_EQ(*t.max, 1e-6);
  EXPECT_TRUE(t.optional);
}

// Strategy specs keep their own commas; the flag's parser checks them when the profile is applied.
TEST(ProfileLoader, RunStrategyKeepsPinnedSpecsWhole) {
  const Profile p = parse_profile("[run]\nstrategy = [\"ddp\", \"hybrid(dp=2,tp=2)\"]\nquick = true\n[[threshold]]\n"
                                  "metric = \"wrong\"\nmax = 0\nsource = \"s\"\n",
                                  "p.toml");
  ASSERT_EQ(p.run.size(), 2u);
  EXPECT_EQ(p.run[0].value, "ddp,hybrid(dp=2,tp=2)");
  EXPECT_EQ(p.run[1].value, "true");
  EXPECT_EQ(parse_profile("[run]\nstrategy = \"1f1b(pp=2,mb=8)\"\n[[threshold]]\nmetric = \"wrong\"\nmax = 0\nsource = \"s\"\n",
                          "p.toml")
                .run[0]
                .value,
            "1f1b(pp=2,mb=8)");
}

// The two lists do not overlap, so no key is both settable and refused.
TEST(ProfileLoader, ProfileKeysAndCommandLineFlagsAreDisjoint) {
  for (std::string_view key : profile_run_keys()) {
    for (std::string_view refused : command_line_only_run_flags()) EXPECT_NE(key, refused);
  }
}

TEST(ProfileLoader, SizesTakeTheCommandLineSuffixes) {
  const Profile p = parse_profile(kBusbwProfile, "p.toml");
  EXPECT_EQ(p.thresholds[0].min_bytes, k256M);
  EXPECT_EQ(p.thresholds[0].max_bytes, -1);
}

struct Malformed {
  const char* what;
  std::string text;
  std::string expected;  // the message, with its PATH:LINE prefix
};

class MalformedProfiles : public testing::TestWithParam<Malformed> {};

TEST_P(MalformedProfiles, GiveOneLineNamingFileAndLine) {
  const Malformed& m = GetParam();
  const std::string message = load_error(m.text);
  EXPECT_NE(message.find(m.expected), std::string::npos) << m.what << ": " << message;
  // One line, and nothing a terminal would act on, whatever text of the file the reason quotes.
  for (const char c : message) EXPECT_GE(static_cast<unsigned char>(c), 0x20) << m.what << ": " << message;
}

const std::string kOk = "source = \"s\"\nmetric = \"busbw\"\n";

INSTANTIATE_TEST_SUITE_P(
    EveryClass, MalformedProfiles,
    testing::Values(
        Malformed{"syntax", "[[threshold]]\nmetric = \"busbw\"\nmin = \n", "p.toml:3: TOML syntax error"},
        Malformed{"duplicate key", "[[threshold]]\nmetric = \"busbw\"\nmetric = \"time\"\n", "p.toml:3: TOML syntax error"},
        Malformed{"unknown top-level key", "colour = 1\n[[threshold]]\n" + kOk + "min = 1\n", "p.toml:1: unknown key 'colour'"},
        Malformed{"unknown threshold key", "[[threshold]]\n" + kOk + "mn = 1\n", "p.toml:4: unknown key 'mn' in [[threshold]] #1"},
        Malformed{"[run] key of a wrong type", "[run]\nepochs = { a = 1 }\n[[threshold]]\n" + kOk + "min = 1\n",
                  "p.toml:2: [run] epochs must be a string, a number or a boolean, not a table"},
        Malformed{"unknown [profile] key", "[profile]\nnam = \"x\"\n[[threshold]]\n" + kOk + "min = 1\n",
                  "p.toml:2: unknown key 'nam' in [profile]"},
        Malformed{"bound of wrong type", "[[threshold]]\n" + kOk + "min = \"4e9\"\n",
                  "p.toml:4: 'min' of [[threshold]] #1 must be a number, not a string"},
        Malformed{"selector of wrong type", "[[threshold]]\n" + kOk + "min = 1\nop = 3\n",
                  "p.toml:5: 'op' of [[threshold]] #1 must be a string or an array of strings, not an integer"},
        Malformed{"nan bound", "[[threshold]]\n" + kOk + "max = nan\n", "p.toml:4: 'max' of [[threshold]] #1 must be a finite number"},
        Malformed{"infinite bound", "[[threshold]]\n" + kOk + "min = inf\n", "p.toml:4: 'min' of [[threshold]] #1 must be a finite number"},
        Malformed{"threshold not a table array", "threshold = 3\n", "p.toml:1: 'threshold' must be an array of tables"},
        Malformed{"unknown metric", "[[threshold]]\nsource = \"s\"\nmetric = \"bussbw\"\nmin = 1\n",
                  "p.toml:3: unknown metric 'bussbw' in [[threshold]] #1"},
        Malformed{"unknown op", "[[threshold]]\n" + kOk + "min = 1\nop = \"allreduce\"\n", "p.toml:5: unknown op 'allreduce'"},
        Malformed{"unknown dtype", "[[threshold]]\n" + kOk + "min = 1\ndtype = \"f33\"\n", "p.toml:5: unknown dtype 'f33'"},
        Malformed{"unknown suite", "[[threshold]]\n" + kOk + "min = 1\nsuite = \"colectives\"\n",
                  "p.toml:5: unknown suite 'colectives'"},
        Malformed{"unknown strategy", "[[threshold]]\n" + kOk + "min = 1\nstrategy = \"zero4\"\n",
                  "p.toml:5: unknown strategy 'zero4'"},
        Malformed{"bad size", "[[threshold]]\n" + kOk + "min = 1\nmin_bytes = \"256X\"\n", "p.toml:5: bad size '256X'"},
        Malformed{"bad config", "[[threshold]]\n" + kOk + "min = 1\nconfig = \"dp\"\n", "p.toml:5: bad config pair 'dp'"},
        Malformed{"min > max", "\n[[threshold]]\n" + kOk + "min = 5\nmax = 3\n", "p.toml:2: [[threshold]] #1: min 5 > max 3"},
        Malformed{"min_bytes > max_bytes", "[[threshold]]\n" + kOk + "min = 1\nmin_bytes = \"1M\"\nmax_bytes = \"1K\"\n",
                  "p.toml:1: [[threshold]] #1: min_bytes 1048576 > max_bytes 1024"},
        Malformed{"no bound", "[[threshold]]\n" + kOk, "p.toml:1: [[threshold]] #1 has no bound"},
        Malformed{"no metric", "[[threshold]]\nsource = \"s\"\nmin = 1\n", "p.toml:1: [[threshold]] #1 has no metric"},
        Malformed{"no source", "[[threshold]]\nmetric = \"busbw\"\nmin = 1\n", "p.toml:1: [[threshold]] #1 has no source"},
        Malformed{"empty source", "[[threshold]]\nmetric = \"busbw\"\nmin = 1\nsource = \"\"\n",
                  "p.toml:4: 'source' of [[threshold]] #1 must not be empty"},
        Malformed{"second threshold is cited by its index",
                  "[[threshold]]\n" + kOk + "min = 1\n\n[[threshold]]\n" + kOk + "min = 2\nmax = 1\n",
                  "p.toml:6: [[threshold]] #2: min 2 > max 1"},
        Malformed{"bad [run] dtype", "[run]\ndatatype = \"f32,f33\"\n[[threshold]]\n" + kOk + "min = 1\n",
                  "p.toml:2: [run] datatype: unknown dtype 'f33'"},
        Malformed{"bad [run] type", "[run]\niters = \"many\"\n[[threshold]]\n" + kOk + "min = 1\n",
                  "p.toml:2: [run] iters must be an integer, not a string"},
        // Outputs and listeners are the command line's: a profile that opened a port on every
        // interface or wrote results elsewhere did what its README said it could not.
        Malformed{"[run] csv", "[run]\niters = 3\ncsv = \"/elsewhere/r.csv\"\n[[threshold]]\n" + kOk + "min = 1\n",
                  "p.toml:3: [run] csv: outputs and listeners are command-line decisions, not profile keys"},
        Malformed{"[run] junit", "[run]\njunit = \"j.xml\"\n[[threshold]]\n" + kOk + "min = 1\n",
                  "p.toml:2: [run] junit: outputs and listeners are command-line decisions"},
        Malformed{"[run] prom", "[run]\nprom = \"m.prom\"\n[[threshold]]\n" + kOk + "min = 1\n",
                  "p.toml:2: [run] prom: outputs and listeners are command-line decisions"},
        Malformed{"[run] push", "[run]\npush = \"http://gw:9091\"\n[[threshold]]\n" + kOk + "min = 1\n",
                  "p.toml:2: [run] push: outputs and listeners are command-line decisions"},
        Malformed{"[run] metrics-port", "[run]\nmetrics-port = 9100\n[[threshold]]\n" + kOk + "min = 1\n",
                  "p.toml:2: [run] metrics-port: outputs and listeners are command-line decisions"},
        Malformed{"[run] metrics-address", "[run]\nmetrics-address = \"0.0.0.0\"\n[[threshold]]\n" + kOk + "min = 1\n",
                  "p.toml:2: [run] metrics-address: outputs and listeners are command-line decisions"},
        Malformed{"[run] profile", "[run]\nprofile = \"other.toml\"\n[[threshold]]\n" + kOk + "min = 1\n",
                  "p.toml:2: [run] profile: a profile cannot name another profile"},
        Malformed{"[run] node", "[run]\nnode = \"n0\"\n[[threshold]]\n" + kOk + "min = 1\n",
                  "p.toml:2: [run] node: a rank's node name is the command line's"},
        // An allow-list: a key no list names (a typo, or a flag nobody has made a profile key) is refused.
        Malformed{"[run] unknown key", "[run]\nminbyte = 8\n[[threshold]]\n" + kOk + "min = 1\n",
                  "p.toml:2: [run] minbyte is not a profile key"},
        Malformed{"[run] repeated item", "[run]\ndatatype = [\"f32\", \"bf16\", \"f32\"]\n[[threshold]]\n" + kOk + "min = 1\n",
                  "p.toml:2: [run] datatype names 'f32' twice"},
        Malformed{"[run] quick not a boolean", "[run]\nquick = \"yes\"\n[[threshold]]\n" + kOk + "min = 1\n",
                  "p.toml:2: [run] quick must be true or false, not a string"},
        Malformed{"unknown statistic", "[[threshold]]\n" + kOk + "min = 1\nstatistic = \"mean\"\n",
                  "p.toml:5: unknown statistic 'mean'"},
        Malformed{"no thresholds", "[profile]\nname = \"empty\"\n", "p.toml:1: no [[threshold]] table"},
        // toml++ quotes what it saw, line break included; a quoted key or a string may hold
        // escaped line breaks and escape sequences.
        Malformed{"syntax error quoting a line break", "[[threshold]]\noptional = tr\n", "p.toml:2: TOML syntax error"},
        Malformed{"key with a line break", "[[threshold]]\n" + kOk + "min = 1\n\"m\\nn\" = 1\n",
                  "p.toml:5: unknown key 'm"},
        Malformed{"metric with an escape sequence", "[[threshold]]\nsource = \"s\"\nmetric = \"\\u001b[31m\"\nmin = 1\n",
                  "p.toml:3: unknown metric '"},
        // [[spec]], [[measured]] and a threshold's fraction of a spec.
        Malformed{"spec without source", "[[spec]]\nname = \"hbm\"\nvalue = 1e12\nunit = \"bytes_per_second\"\n[[threshold]]\n" + kOk + "min = 1\n",
                  "p.toml:1: [[spec]] at line 1 (hbm) has no source"},
        Malformed{"spec of zero", "[[spec]]\nname = \"hbm\"\nvalue = 0\nunit = \"u\"\nsource = \"s\"\n[[threshold]]\n" + kOk + "min = 1\n",
                  "p.toml:3: 'value' of [[spec]] at line 1 must be above 0"},
        Malformed{"spec twice", "[[spec]]\nname = \"a\"\nvalue = 1\nunit = \"u\"\nsource = \"s\"\n[[spec]]\nname = \"a\"\nvalue = 2\nunit = \"u\"\nsource = \"s\"\n[[threshold]]\n" + kOk + "min = 1\n",
                  "p.toml:6: [[spec]] at line 6: spec 'a' is defined twice (also line 1)"},
        Malformed{"threshold naming no spec", "[[threshold]]\n" + kOk + "spec = \"hbm\"\nfraction = 0.8\n",
                  "p.toml:1: [[threshold]] #1 names spec 'hbm', which no [[spec]] table defines"},
        Malformed{"spec without fraction", "[[threshold]]\n" + kOk + "spec = \"hbm\"\n",
                  "p.toml:1: [[threshold]] #1: spec and fraction go together"},
        Malformed{"spec and min", "[[threshold]]\n" + kOk + "spec = \"hbm\"\nfraction = 0.8\nmin = 1\n",
                  "p.toml:1: [[threshold]] #1 sets min and spec"},
        Malformed{"fraction of zero", "[[threshold]]\n" + kOk + "spec = \"hbm\"\nfraction = 0\n",
                  "p.toml:5: 'fraction' of [[threshold]] #1 must be above 0"},
        Malformed{"measured naming no spec", "[[measured]]\nspec = \"hbm\"\nfraction = 0.9\non = \"one H200\"\nsource = \"s\"\n[[threshold]]\n" + kOk + "min = 1\n",
                  "p.toml:1: [[measured]] names spec 'hbm', which no [[spec]] table defines"},
        Malformed{"measured without its part", "[[measured]]\nspec = \"hbm\"\nfraction = 0.9\nsource = \"s\"\n[[threshold]]\n" + kOk + "min = 1\n",
                  "p.toml:1: [[measured]] at line 1 needs spec, fraction, on (the part measured) and source"}),
    [](const testing::TestParamInfo<Malformed>& param_info) {
      std::string name = param_info.param.what;
      for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

TEST(ProfileLoader, UnreadableFileIsAnIoError) {
  try {
    load_profile("/nonexistent-dir/p.toml");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::io);
    EXPECT_NE(std::string(e.what()).find("cannot read profile '/nonexistent-dir/p.toml': No such file"), std::string::npos)
        << e.what();
  }
}

TEST(ProfileLoader, EveryShippedProfileLoads) {
  // The profiles in this folder are what users run; a typo there must fail here, not on a cluster.
  const std::filesystem::path folder = std::filesystem::path(DTS_PROFILES_DIR);
  int loaded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.path().extension() != ".toml") continue;
    const Profile p = load_profile(entry.path().string());
    EXPECT_FALSE(p.thresholds.empty()) << entry.path();
    ++loaded;
  }
  EXPECT_GE(loaded, 2);  // acceptance-cpu.toml and acceptance-h100-8gpu.toml
}

// A threshold's bound as a fraction of a cited figure: min = fraction x value, the spec's
// citation added to the threshold's own reason, and the figure judged like any other min.
TEST(ProfileLoader, AFractionOfASpecIsTheMinAndCitesTheDatasheet) {
  const Profile p = parse_profile(R"([profile]
parts = ["NVIDIA H200"]
[[threshold]]
metric = "memory_bandwidth"
spec = "hbm_bandwidth"
fraction = 0.75
source = "a triad moves most of it"
[[spec]]
name = "hbm_bandwidth"
value = 4.8e12
unit = "bytes_per_second"
source = "H200 datasheet: 4.8TB/s"
[[measured]]
spec = "hbm_bandwidth"
fraction = 0.91
on = "one H200"
source = "dtsuite run hardware"
)",
                                  "p.toml");
  ASSERT_EQ(p.thresholds.size(), 1u);
  ASSERT_TRUE(p.thresholds[0].min);
  EXPECT_DOUBLE_EQ(*p.thresholds[0].min, 0.75 * 4.8e12);
  EXPECT_NE(p.thresholds[0].source.find("a triad moves most of it (0.75 of hbm_bandwidth 4.8e+12 bytes_per_second: "
                                        "H200 datasheet: 4.8TB/s)"),
            std::string::npos)
      << p.thresholds[0].source;
  EXPECT_EQ(p.parts, (std::vector<std::string>{"NVIDIA H200"}));
  ASSERT_EQ(p.measured.size(), 1u);
  EXPECT_EQ(p.measured[0].on, "one H200");
  ProfileJudge judge(p);
  Record low;
  low.metric = "memory_bandwidth";
  low.value = 3.5e12;  // 0.73 of 4.8e12: below the 0.75
  judge.apply(low);
  EXPECT_EQ(low.verdict, Verdict::fail) << low.detail;
  Record high = low;
  high.verdict = Verdict::info;
  high.value = 3.7e12;  // 0.77
  judge.apply(high);
  EXPECT_EQ(high.verdict, Verdict::pass) << high.detail;
}

// The profiles built into the binary are the files of this folder, byte for byte: a file edited
// without a rebuild, or one left out of the build, fails here.
TEST(BuiltinProfiles, AreTheShippedFiles) {
  std::set<std::string> on_disk, built_in;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(DTS_PROFILES_DIR))) {
    if (entry.path().extension() == ".toml") on_disk.insert(entry.path().filename().string());
  }
  for (const BuiltinProfile& b : builtin_profiles()) {
    built_in.insert(std::string(b.file_name));
    EXPECT_EQ(b.text, read_input_file(std::string(DTS_PROFILES_DIR) + "/" + std::string(b.file_name), "profile",
                                      profile_limits()))
        << b.file_name;
  }
  EXPECT_EQ(built_in, on_disk);
}

// --profile auto: each part named by one shipped profile, whole names only, case aside.
TEST(BuiltinProfiles, AutoPicksTheProfileNamingThePart) {
  EXPECT_EQ(choose_builtin_profile("NVIDIA H100 80GB HBM3").file_name, "acceptance-h100-8gpu.toml");
  EXPECT_EQ(choose_builtin_profile("nvidia h100 pcie").file_name, "acceptance-h100-pcie.toml");
  EXPECT_EQ(choose_builtin_profile("NVIDIA H200").file_name, "acceptance-h200.toml");
  EXPECT_EQ(choose_builtin_profile("NVIDIA A100-SXM4-80GB").file_name, "acceptance-a100-sxm.toml");
  EXPECT_EQ(choose_builtin_profile("NVIDIA A100 80GB PCIe").file_name, "acceptance-a100-pcie.toml");
  EXPECT_EQ(choose_builtin_profile("NVIDIA B200").file_name, "acceptance-b200.toml");
  EXPECT_EQ(choose_builtin_profile("AMD EPYC").file_name, "acceptance-cpu.toml");
  // A card of other figures whose name holds a shipped part's: not taken for it.
  for (const char* other : {"NVIDIA H200 NVL", "NVIDIA GH200 480GB", "NVIDIA GB200", "AMD EPYC 9654 96-Core Processor"}) {
    try {
      choose_builtin_profile(other);
      ADD_FAILURE() << other << " was given a profile";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("--profile auto: no shipped profile is for '" + std::string(other) + "'"),
                std::string::npos)
          << e.what();
    }
  }
  // No part is claimed by two profiles, and every GPU profile cites its figures.
  std::set<std::string> claimed;
  for (const BuiltinProfile& b : builtin_profiles()) {
    const Profile p = parse_profile(b.text, std::string(b.file_name));
    for (const std::string& part : p.parts) EXPECT_TRUE(claimed.insert(part).second) << part << " twice";
    if (std::string(b.file_name) == "acceptance-cpu.toml") continue;
    std::set<std::string> specs;
    for (const SpecFigure& f : p.specs) specs.insert(f.name);
    for (const char* needed : {"fp64", "fp32", "tf32_dense", "bf16_dense", "f16_dense", "hbm_bandwidth", "nvlink_bandwidth"}) {
      EXPECT_TRUE(specs.count(needed)) << b.file_name << " has no spec " << needed;
    }
  }
}

TEST(Matcher, SelectorsNarrowWhatIsJudged) {
  Threshold t;
  t.metric = "busbw";
  const Record r = busbw_record(k256M, 5e9);
  EXPECT_TRUE(matches(t, r));  // no selectors: every busbw record
  Record other_metric = r;
  other_metric.metric = "algbw";
  EXPECT_FALSE(matches(t, other_metric));

  t.ops = {"all_gather", "all_reduce"};  // any of a list
  EXPECT_TRUE(matches(t, r));
  t.ops = {"all_gather"};
  EXPECT_FALSE(matches(t, r));
  t.ops.clear();

  t.devices = {"cpu"};  // the device kind before ':'
  EXPECT_TRUE(matches(t, r));
  t.devices = {"cpu:Some CPU"};  // or the whole name
  EXPECT_TRUE(matches(t, r));
  t.devices = {"cuda"};
  EXPECT_FALSE(matches(t, r));
  t.devices.clear();

  t.config = {{"redop", "sum"}};  // a subset of the record's key=value pairs
  EXPECT_TRUE(matches(t, r));
  t.config = {{"redop", "max"}};
  EXPECT_FALSE(matches(t, r));
  t.config.clear();

  t.min_world_size = 5;  // the record's job has 4 ranks
  EXPECT_FALSE(matches(t, r));
  t.min_world_size = 4;
  t.max_world_size = 4;
  EXPECT_TRUE(matches(t, r));
}

TEST(Matcher, ByteBoundsAreInclusiveAndNeverMatchRecordsWithoutBytes) {
  Threshold t;
  t.metric = "busbw";
  t.min_bytes = k256M;
  EXPECT_TRUE(matches(t, busbw_record(k256M, 1)));       // equal to min_bytes: inside
  EXPECT_FALSE(matches(t, busbw_record(k256M - 1, 1)));  // one byte below
  t.max_bytes = k256M;
  EXPECT_TRUE(matches(t, busbw_record(k256M, 1)));
  EXPECT_FALSE(matches(t, busbw_record(k256M + 1, 1)));
  Record no_bytes = busbw_record(k256M, 1);
  no_bytes.labels.bytes = -1;  // not applicable
  EXPECT_FALSE(matches(t, no_bytes));
}

TEST(Judge, MinIsInclusiveAndAFailCitesTheThreshold) {
  ProfileJudge judge(parse_profile(kBusbwProfile, "profiles/t.toml"));
  Record at_bound = busbw_record(k256M, 4.0e9);
  judge.apply(at_bound);
  EXPECT_EQ(at_bound.verdict, Verdict::pass);  // equal to min passes
  EXPECT_EQ(at_bound.threshold, 4.0e9);
  EXPECT_NE(at_bound.detail.find(">= 4e+09 (t.toml [[threshold]] #1)"), std::string::npos) << at_bound.detail;

  Record below = busbw_record(int64_t{1} << 30, std::nextafter(4.0e9, 0.0));
  judge.apply(below);
  EXPECT_EQ(below.verdict, Verdict::fail);
  EXPECT_EQ(below.threshold, 4.0e9);
  EXPECT_EQ(below.detail, "busbw 4e+09 bytes_per_second < 4e+09 required by t.toml [[threshold]] #1: vendor figure");

  Record small = busbw_record(1024, 1.0);  // below min_bytes: not judged, stays info
  judge.apply(small);
  EXPECT_EQ(small.verdict, Verdict::info);
  EXPECT_TRUE(std::isnan(small.threshold));
  EXPECT_TRUE(small.detail.empty());
}

TEST(Judge, MaxIsInclusiveAndNanFails) {
  ProfileJudge judge(parse_profile("[[threshold]]\nmetric = \"time\"\nmax = 0.5\nsource = \"s\"\n", "t.toml"));
  Record r;
  r.metric = "time";
  r.value = 0.5;
  judge.apply(r);
  EXPECT_EQ(r.verdict, Verdict::pass);
  r.verdict = Verdict::info;
  r.value = std::nextafter(0.5, 1.0);
  judge.apply(r);
  EXPECT_EQ(r.verdict, Verdict::fail);
  Record unmeasured;
  unmeasured.metric = "time";
  unmeasured.value = std::nan("");
  judge.apply(unmeasured);
  EXPECT_EQ(unmeasured.verdict, Verdict::fail);
  EXPECT_NE(unmeasured.detail.find("not measured"), std::string::npos);
}

TEST(Judge, AStatisticJudgesThatColumnOfTheDistribution) {
  ProfileJudge judge(parse_profile(
      "[[threshold]]\nmetric = \"busbw\"\nstatistic = \"max\"\nmin = 2e9\nsource = \"best iteration\"\n", "t.toml"));
  Record r = busbw_record(k256M, 1e9);  // median below the bound ...
  r.stats = {10, 0.5e9, 0.6e9, 1e9, 1.9e9, 2e9};  // ... fastest iteration exactly at it
  judge.apply(r);
  EXPECT_EQ(r.verdict, Verdict::pass);
  EXPECT_NE(r.detail.find("busbw (max of 10) 2e+09"), std::string::npos) << r.detail;
  Record single = busbw_record(k256M, 1e9);  // no distribution (n = 0): its value is judged
  judge.apply(single);
  EXPECT_EQ(single.verdict, Verdict::fail);
  EXPECT_NE(single.detail.find("busbw 1e+09 bytes_per_second < 2e+09"), std::string::npos) << single.detail;
}

TEST(Judge, SuiteVerdictsAreNeverLoosened) {
  ProfileJudge judge(
      parse_profile("[[threshold]]\nmetric = \"max_abs_error\"\nmax = 1e-3\nsource = \"s\"\n", "t.toml"));
  Record failed;  // the suite's own derived bound already failed it
  failed.metric = "max_abs_error";
  failed.value = 1e-4;
  failed.verdict = Verdict::fail;
  failed.threshold = 1e-5;
  failed.detail = "bound 1e-5";
  judge.apply(failed);
  EXPECT_EQ(failed.verdict, Verdict::fail);
  EXPECT_EQ(failed.threshold, 1e-5);  // the bound it failed, not the profile's looser one
  EXPECT_NE(failed.detail.find(" | bound 1e-5"), std::string::npos) << failed.detail;

  Record skipped;  // no measurement: not judged, and not counted as a match
  skipped.metric = "max_abs_error";
  skipped.verdict = Verdict::skip;
  judge.apply(skipped);
  EXPECT_EQ(skipped.verdict, Verdict::skip);
  EXPECT_TRUE(skipped.detail.empty());
  const auto summary = judge.summary();
  EXPECT_NE(summary[0].detail.find(": 1 record passes"), std::string::npos) << summary[0].detail;  // the skip is not counted
}

TEST(Judge, EveryMatchingThresholdIsAppliedAndTheFirstFailureSetsTheThreshold) {
  ProfileJudge judge(parse_profile(R"(
[[threshold]]
metric = "busbw"
min = 1e9
source = "a"

[[threshold]]
metric = "busbw"
min = 8e9
max = 9e9
source = "b"
)",
                                   "t.toml"));
  Record r = busbw_record(k256M, 5e9);
  judge.apply(r);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_EQ(r.threshold, 8e9);
  EXPECT_NE(r.detail.find("#1)"), std::string::npos) << r.detail;
  EXPECT_NE(r.detail.find("< 8e+09 required by t.toml [[threshold]] #2: b"), std::string::npos) << r.detail;
}

TEST(Judge, SummaryHasOneCheckPerThresholdAndUnmatchedOnesFail) {
  ProfileJudge judge(parse_profile(R"(
[[threshold]]
metric = "busbw"
op = "all_reduce"
min = 1e9
source = "met"

[[threshold]]
metric = "busbw"
op = "all_gather"
min = 1e9
source = "missed"

[[threshold]]
metric = "scaling_efficiency"
min = 0.9
source = "not run"

[[threshold]]
metric = "gradient_noise_scale"
min = 0.8
optional = true
source = "maybe"
)",
                                   "acc.toml"));
  Record good = busbw_record(k256M, 2e9);
  Record bad = busbw_record(k256M, 5e8, "all_gather");
  judge.apply(good);
  judge.apply(bad);
  const std::vector<Record> summary = judge.summary();
  ASSERT_EQ(summary.size(), 4u);
  for (const Record& s : summary) {
    EXPECT_EQ(s.suite, "profile");
    EXPECT_EQ(s.metric, "check");
  }
  EXPECT_EQ(summary[0].case_id, "acc/1/busbw");
  EXPECT_EQ(summary[0].verdict, Verdict::pass);
  EXPECT_EQ(summary[0].value, 1);
  EXPECT_EQ(summary[0].labels.op, "all_reduce");
  EXPECT_EQ(summary[1].verdict, Verdict::fail);
  EXPECT_NE(summary[1].detail.find("1 of 1 record fails; first: all_gather/f32/sum/268435456 out_of_place: busbw 5e+08"),
            std::string::npos)
      << summary[1].detail;
  EXPECT_EQ(summary[2].verdict, Verdict::fail);
  EXPECT_NE(summary[2].detail.find("acc.toml [[threshold]] #3 (scaling_efficiency; min 0.9) matched no record"),
            std::string::npos)
      << summary[2].detail;
  EXPECT_NE(summary[2].detail.find(": not run"), std::string::npos);
  EXPECT_EQ(summary[3].verdict, Verdict::skip);  // optional
}

}  // namespace
}  // namespace dts
