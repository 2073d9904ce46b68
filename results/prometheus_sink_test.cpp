// Tests of PrometheusSink: metric names and units, the label set, escaping, the build-info and
// progress gauges, the atomic textfile, the push (against a one-request HTTP server written
// here) and /metrics. The exposition is read back by a parser written here, not prometheus-cpp's.
#include "results/prometheus_sink.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <prometheus/check_names.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

namespace dts {
namespace {

namespace fs = std::filesystem;

// --- a reader of the text exposition format (name{a="b",...} value) --------------------------

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Exposition {
  std::vector<Sample> samples;
  std::map<std::string, std::string> types;  // family -> TYPE

  std::vector<Sample> find(const std::string& name, const std::map<std::string, std::string>& match = {}) const {
    std::vector<Sample> out;
    for (const Sample& s : samples) {
      if (s.name != name) continue;
      bool ok = true;
      for (const auto& [k, v] : match) {
        const auto it = s.labels.find(k);
        ok = ok && it != s.labels.end() && it->second == v;
      }
      if (ok) out.push_back(s);
    }
    return out;
  }
};

Exposition parse_exposition(const std::string& text) {
  Exposition e;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream words(line.substr(7));
      std::string family, type;
      words >> family >> type;
      e.types[family] = type;
      continue;
    }
    if (line[0] == '#') continue;
    Sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') s.name += line[i++];
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (line.at(i) != '}') {
        std::string key, value;
        while (line.at(i) != '=') key += line[i++];
        ++i;  // '='
        EXPECT_EQ(line.at(i), '"') << line;
        ++i;
        while (line.at(i) != '"') {
          char c = line[i++];
          if (c == '\\') {
            const char escaped = line.at(i++);
            c = escaped == 'n' ? '\n' : escaped;  // \\ -> \, \" -> ", \n -> newline
          }
          value += c;
        }
        ++i;  // closing quote
        if (line.at(i) == ',') ++i;
        s.labels[key] = value;
      }
      ++i;  // '}'
    }
    const std::string number = line.substr(i + 1);
    s.value = number == "Nan" || number == "NaN" ? std::nan("") : std::stod(number);
    e.samples.push_back(std::move(s));
  }
  return e;
}

// --- records ----------------------------------------------------------------------------------

Record stack_record() {
  Record r;
  r.run_id = "20240501T120000Z-abcdef";
  r.timestamp = "2024-05-01T12:00:00.125Z";
  r.suite = "collectives";
  r.case_id = "all_reduce/f32/sum/4096";
  Labels& l = r.labels;
  l.backend = "mpi";
  l.backend_version = "Open MPI v4.1.4, package: Debian";
  l.mpi_version = "Open MPI v4.1.4";
  l.device = "cpu:Test CPU";
  l.host = "node-1";
  l.world_size = 4;
  l.nodes = 1;
  l.ranks_per_node = 4;
  l.op = "all_reduce";
  l.dtype = "f32";
  l.bytes = 4096;
  l.placement = "out_of_place";
  l.config = "redop=sum;root=-1;count=1024";
  return r;
}

Record busbw_record() {
  Record r = stack_record();
  r.metric = "busbw";
  r.unit = "bytes_per_second";
  r.stats = Stats{20, 1e9, 2e9, 3e9, 4e9, 5e9};  // distinct, so each quantile is told apart
  r.value = r.stats.median;
  return r;
}

Record wrong_record(Verdict verdict) {
  Record r = stack_record();
  r.metric = "wrong";
  r.unit = "elements";
  r.value = verdict == Verdict::pass ? 0 : 3;
  r.verdict = verdict;
  r.threshold = 0;
  r.detail = "first: element 7";
  return r;
}

PrometheusRunInfo run_info() {
  PrometheusRunInfo run;
  run.run_id = "20240501T120000Z-abcdef";
  run.version = "0.1.0";
  run.backend = "mpi";
  run.backend_version = "Open MPI v4.1.4, package: Debian";
  run.mpi_version = "Open MPI v4.1.4";
  run.device = "cpu:Test CPU";
  run.host = "node-1";
  run.world_size = 4;
  run.nodes = 1;
  run.planned_cases = 7;
  return run;
}

// One directory per test process, removed when the process ends.
struct ScratchDir {
  fs::path path = fs::temp_directory_path() / ("dtsuite_prom_test_" + std::to_string(getpid()));
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

fs::path scratch(const std::string& name) {
  static const ScratchDir dir;
  fs::create_directories(dir.path);
  return dir.path / name;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// --- names and labels -------------------------------------------------------------------------

TEST(PrometheusNames, FromMetricAndBaseUnit) {
  EXPECT_EQ(prometheus_metric_name("busbw", "bytes_per_second"), "dtsuite_busbw_bytes_per_second");
  EXPECT_EQ(prometheus_metric_name("time", "seconds"), "dtsuite_time_seconds");
  EXPECT_EQ(prometheus_metric_name("memory_params", "bytes"), "dtsuite_memory_params_bytes");
  EXPECT_EQ(prometheus_metric_name("max_rel_error", "ratio"), "dtsuite_max_rel_error_ratio");
  EXPECT_EQ(prometheus_metric_name("wrong", "elements"), "dtsuite_wrong_elements");
  // No unit: the name alone.
  EXPECT_EQ(prometheus_metric_name("max_abs_error", ""), "dtsuite_max_abs_error");
  EXPECT_EQ(prometheus_metric_name("check", ""), "dtsuite_check");
  // The unit is not repeated when the metric already ends with it as a word...
  EXPECT_EQ(prometheus_metric_name("max_ulp", "ulp"), "dtsuite_max_ulp");
  EXPECT_EQ(prometheus_metric_name("error_bound_ratio", "ratio"), "dtsuite_error_bound_ratio");
  // ...but a word merely ending in the same letters is not the unit.
  EXPECT_EQ(prometheus_metric_name("overhead", "head"), "dtsuite_overhead_head");
  EXPECT_EQ(prometheus_threshold_name("wrong", "elements"), "dtsuite_wrong_threshold_elements");
  EXPECT_EQ(prometheus_threshold_name("max_abs_error", ""), "dtsuite_max_abs_error_threshold");
}

TEST(PrometheusNames, OutsideTheAlphabetBecomesUnderscore) {
  const std::string name = prometheus_metric_name("p2p-bandwidth.peak", "bytes/s");
  EXPECT_EQ(name, "dtsuite_p2p_bandwidth_peak_bytes_s");
  EXPECT_TRUE(prometheus::CheckMetricName(name));
  EXPECT_TRUE(prometheus::CheckMetricName(prometheus_metric_name(":colon:", "")));
}

TEST(PrometheusLabels, StackAndShapeButNoRunOrFreeText) {
  const auto labels = prometheus_labels(busbw_record());
  const std::map<std::string, std::string> got(labels.begin(), labels.end());
  const std::map<std::string, std::string> expected{
      {"suite", "collectives"}, {"backend", "mpi"}, {"device", "cpu:Test CPU"}, {"world_size", "4"},
      {"nodes", "1"},           {"op", "all_reduce"}, {"dtype", "f32"},       {"bytes", "4096"},
      {"placement", "out_of_place"}, {"redop", "sum"}, {"root", "-1"}};
  EXPECT_EQ(got, expected);  // no case, run_id, host, versions, count, detail
  for (const auto& [name, value] : labels) EXPECT_TRUE(prometheus::CheckLabelName(name)) << name;
}

TEST(PrometheusLabels, EmptyAndNotApplicableAreLeftOut) {
  Record r;
  r.suite = "equivalence";
  r.labels.strategy = "zero2";
  r.labels.bytes = -1;  // not applicable
  r.labels.config = "dp=3;zero=2;mb=1;steps=5;batch=64;optimizer=sgd";
  const auto labels = prometheus_labels(r);
  const std::map<std::string, std::string> got(labels.begin(), labels.end());
  // steps and batch (constant over a run) are not labels; zero and mb are layout axes that cases
  // of one run differ along (hybrid with and without ZeRO-1).
  const std::map<std::string, std::string> expected{{"suite", "equivalence"}, {"strategy", "zero2"}, {"dp", "3"},
                                                    {"zero", "2"}, {"mb", "1"}, {"optimizer", "sgd"}};
  EXPECT_EQ(got, expected);
}

TEST(PrometheusLabels, TheInventorysRowsCarryEveryConfigKeyAsAnInfoMetricDoes) {
  Record r;
  r.suite = "inventory";
  r.metric = "rank_info";
  r.labels.world_size = 2;
  r.labels.config = "rank=1;local_rank=0;node=n1;gpu=NVIDIA H100 80GB HBM3;gpu_pci_bus_id=0000:1b:00.0;driver=550.54.15";
  const auto labels = prometheus_labels(r);
  const std::map<std::string, std::string> got(labels.begin(), labels.end());
  const std::map<std::string, std::string> expected{
      {"suite", "inventory"}, {"world_size", "2"}, {"rank", "1"},          {"local_rank", "0"},
      {"node", "n1"},         {"gpu", "NVIDIA H100 80GB HBM3"}, {"gpu_pci_bus_id", "0000:1b:00.0"},
      {"driver", "550.54.15"}};
  EXPECT_EQ(got, expected);
  EXPECT_EQ(prometheus_metric_name(r.metric, r.unit), "dtsuite_rank_info");
  // The other suites keep their few keys: a node or rank there would split a stack's series.
  r.suite = "collectives";
  const auto few = prometheus_labels(r);
  EXPECT_EQ(few.size(), 2u);
}

// --- the exposition -----------------------------------------------------------------------

TEST(PrometheusSink, TimedRecordIsASummaryOfItsQuantiles) {
  PrometheusSink sink(run_info(), {});
  const Record r = busbw_record();
  sink.write(r);
  const Exposition e = parse_exposition(sink.exposition());
  EXPECT_EQ(e.types.at("dtsuite_busbw_bytes_per_second"), "summary");
  const std::map<std::string, double> quantiles{{"0.05", r.stats.p05}, {"0.5", r.stats.median}, {"0.95", r.stats.p95}};
  for (const auto& [q, value] : quantiles) {
    const auto s = e.find("dtsuite_busbw_bytes_per_second", {{"quantile", q}, {"op", "all_reduce"}});
    ASSERT_EQ(s.size(), 1u) << q;
    EXPECT_EQ(s[0].value, value) << q;
  }
  const auto count = e.find("dtsuite_busbw_bytes_per_second_count");
  ASSERT_EQ(count.size(), 1u);
  EXPECT_EQ(count[0].value, static_cast<double>(r.stats.n));
  const auto sum = e.find("dtsuite_busbw_bytes_per_second_sum");
  ASSERT_EQ(sum.size(), 1u);
  EXPECT_TRUE(std::isnan(sum[0].value));  // no sum is kept: unknown, not a made-up number
}

TEST(PrometheusSink, SingleValueIsAGauge) {
  PrometheusSink sink(run_info(), {});
  Record r = stack_record();
  r.suite = "equivalence";
  r.metric = "memory_params";
  r.unit = "bytes";
  r.value = 123456;
  sink.write(r);
  const Exposition e = parse_exposition(sink.exposition());
  EXPECT_EQ(e.types.at("dtsuite_memory_params_bytes"), "gauge");
  const auto s = e.find("dtsuite_memory_params_bytes");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].value, r.value);
}

TEST(PrometheusSink, JudgedRecordsCarryVerdictAndThreshold) {
  PrometheusSink sink(run_info(), {});
  sink.write(busbw_record());  // info: no verdict series
  sink.write(wrong_record(Verdict::fail));
  Exposition e = parse_exposition(sink.exposition());
  auto verdicts = e.find("dtsuite_verdict");
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].labels.at("metric"), "wrong");
  EXPECT_EQ(verdicts[0].labels.at("verdict"), "fail");
  EXPECT_EQ(verdicts[0].value, 1);
  const auto limit = e.find("dtsuite_wrong_threshold_elements");
  ASSERT_EQ(limit.size(), 1u);
  EXPECT_EQ(limit[0].value, 0);
  EXPECT_EQ(e.find("dtsuite_wrong_elements").at(0).value, 3);

  // The same series judged again replaces the old verdict instead of adding a second one.
  sink.write(wrong_record(Verdict::pass));
  e = parse_exposition(sink.exposition());
  verdicts = e.find("dtsuite_verdict");
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].labels.at("verdict"), "pass");
}

TEST(PrometheusSink, CasesOfOneRunAreDistinctSeries) {
  PrometheusSink sink(run_info(), {});
  Record sum = busbw_record();
  Record max = busbw_record();
  max.case_id = "all_reduce/f32/max/4096";
  max.labels.config = "redop=max;root=-1;count=1024";
  Record in_place = busbw_record();
  in_place.labels.placement = "in_place";
  for (const Record& r : {sum, max, in_place}) sink.write(r);
  const Exposition e = parse_exposition(sink.exposition());
  // Three records, one median series each.
  EXPECT_EQ(e.find("dtsuite_busbw_bytes_per_second", {{"quantile", "0.5"}}).size(), 3u);
}

TEST(PrometheusSink, EachProfileThresholdIsItsOwnSeries) {
  // An acceptance profile's summary rows differ only in their case (profile/index/metric); a
  // failing threshold written before a passing one of the same metric must still show.
  PrometheusSink sink(run_info(), {});
  Record failing;
  failing.suite = "profile";
  failing.case_id = "acceptance/1/wrong";
  failing.metric = "check";
  failing.value = 0;
  failing.verdict = Verdict::fail;
  Record passing = failing;
  passing.case_id = "acceptance/2/wrong";
  passing.value = 1;
  passing.verdict = Verdict::pass;
  sink.write(failing);
  sink.write(passing);
  const Exposition e = parse_exposition(sink.exposition());
  EXPECT_EQ(e.find("dtsuite_check", {{"suite", "profile"}}).size(), 2u);
  EXPECT_EQ(e.find("dtsuite_verdict", {{"threshold", "acceptance/1/wrong"}, {"verdict", "fail"}}).size(), 1u);
}

TEST(PrometheusSink, PerEpochRecordsAreLeftToTheCsv) {
  PrometheusSink sink(run_info(), {});
  Record r = stack_record();
  r.suite = "convergence";
  r.metric = "loss";
  r.labels.config = "epoch=3";
  sink.write(r);
  EXPECT_TRUE(parse_exposition(sink.exposition()).find("dtsuite_loss").empty());
}

TEST(PrometheusSink, LabelValuesAreEscaped) {
  PrometheusSink sink(run_info(), {});
  Record r = busbw_record();
  r.labels.device = "cpu:a \"quoted\" back\\slash\nnewline";
  sink.write(r);
  const std::string text = sink.exposition();
  EXPECT_NE(text.find(R"(device="cpu:a \"quoted\" back\\slash\nnewline")"), std::string::npos) << text;
  const auto s = parse_exposition(text).find("dtsuite_busbw_bytes_per_second", {{"quantile", "0.5"}});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].labels.at("device"), r.labels.device);  // round trip
}

TEST(PrometheusSink, BuildInfoNamesTheStackAndTheRun) {
  const PrometheusRunInfo run = run_info();
  PrometheusSink sink(run, {});
  const auto info = parse_exposition(sink.exposition()).find("dtsuite_build_info");
  ASSERT_EQ(info.size(), 1u);
  EXPECT_EQ(info[0].value, 1);
  const std::map<std::string, std::string> expected{
      {"version", run.version},         {"backend", run.backend}, {"backend_version", run.backend_version},
      {"mpi_version", run.mpi_version}, {"device", run.device},   {"host", run.host},
      {"run_id", run.run_id}};
  EXPECT_EQ(info[0].labels, expected);
}

TEST(PrometheusSink, ProgressFollowsTheCaseLoop) {
  const PrometheusRunInfo run = run_info();
  PrometheusSink sink(run, {});
  const auto gauge = [&](const std::string& name) {
    const auto s = parse_exposition(sink.exposition()).find(name);
    EXPECT_EQ(s.size(), 1u) << name;
    return s.empty() ? -1.0 : s[0].value;
  };
  EXPECT_EQ(gauge("dtsuite_cases_planned"), static_cast<double>(run.planned_cases));
  EXPECT_EQ(gauge("dtsuite_cases_done"), 0);
  const double start = gauge("dtsuite_run_start_time_seconds");
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_LE(start, now);
  EXPECT_GT(start, now - 60);  // set when the sink was made, a moment ago

  sink.case_started(0, "collectives", "all_reduce/f32/sum/4096");
  auto current = parse_exposition(sink.exposition()).find("dtsuite_current_case_info");
  ASSERT_EQ(current.size(), 1u);
  EXPECT_EQ(current[0].labels.at("case"), "all_reduce/f32/sum/4096");
  EXPECT_EQ(current[0].labels.at("suite"), "collectives");
  Record failed = wrong_record(Verdict::fail);
  sink.write(failed);
  sink.write(failed);  // a second failing record of the same case: still one failed case
  sink.case_finished(0);
  EXPECT_TRUE(parse_exposition(sink.exposition()).find("dtsuite_current_case_info").empty());
  EXPECT_EQ(gauge("dtsuite_cases_done"), 1);
  EXPECT_EQ(gauge("dtsuite_cases_failed"), 1);

  sink.case_started(1, "collectives", "all_reduce/f32/max/4096");
  sink.case_started(2, "collectives", "all_reduce/f32/min/4096");  // begin without end: one current case
  current = parse_exposition(sink.exposition()).find("dtsuite_current_case_info");
  ASSERT_EQ(current.size(), 1u);
  EXPECT_EQ(current[0].labels.at("case"), "all_reduce/f32/min/4096");
  sink.close();
  const Exposition closed = parse_exposition(sink.exposition());
  EXPECT_TRUE(closed.find("dtsuite_current_case_info").empty());
  // ...but the family is still declared, so a finished run's textfile names every family.
  EXPECT_EQ(closed.types.at("dtsuite_current_case_info"), "gauge");
  sink.case_started(3, "collectives", "late");  // after close: ignored, no throw
  EXPECT_TRUE(parse_exposition(sink.exposition()).find("dtsuite_current_case_info").empty());
}

// --- the textfile -------------------------------------------------------------------------

TEST(PrometheusTextfile, WrittenAtSetUpRefreshedPerCaseReplacedAtomically) {
  const fs::path path = scratch("atomic/dtsuite.prom");  // parent made by the sink
  fs::remove_all(path.parent_path());
  PrometheusOutputs outputs;
  outputs.textfile_path = path.string();
  outputs.textfile_refresh = std::chrono::milliseconds(0);  // every case
  PrometheusSink sink(run_info(), outputs);
  ASSERT_TRUE(fs::exists(path));
  EXPECT_EQ(parse_exposition(slurp(path)).find("dtsuite_build_info").size(), 1u);

  // A reader that opened the old file keeps reading a whole old file: it was replaced by rename,
  // never truncated or written in place.
  std::ifstream old_reader(path);
  struct stat before{};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  sink.write(busbw_record());
  sink.case_finished(0);
  struct stat after{};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_NE(before.st_ino, after.st_ino);
  std::stringstream old_text;
  old_text << old_reader.rdbuf();
  EXPECT_EQ(parse_exposition(old_text.str()).find("dtsuite_build_info").size(), 1u);
  EXPECT_TRUE(parse_exposition(old_text.str()).find("dtsuite_busbw_bytes_per_second_count").empty());
  EXPECT_EQ(parse_exposition(slurp(path)).find("dtsuite_busbw_bytes_per_second_count").size(), 1u);
  sink.close();
  // Only the .prom file is left: no temporary beside it for node_exporter to trip over.
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(path.parent_path())) {
    ++files;
    EXPECT_EQ(entry.path().extension(), ".prom") << entry.path();
  }
  EXPECT_EQ(files, 1u);
}

TEST(PrometheusTextfile, RefreshIsRateLimitedButCloseAlwaysWrites) {
  const fs::path path = scratch("limited.prom");
  PrometheusOutputs outputs;
  outputs.textfile_path = path.string();
  outputs.textfile_refresh = std::chrono::hours(1);  // longer than this test: no refresh
  PrometheusSink sink(run_info(), outputs);
  sink.write(busbw_record());
  sink.case_finished(0);
  EXPECT_TRUE(parse_exposition(slurp(path)).find("dtsuite_busbw_bytes_per_second_count").empty());
  sink.close();
  const Exposition e = parse_exposition(slurp(path));
  EXPECT_EQ(e.find("dtsuite_busbw_bytes_per_second_count").size(), 1u);
  EXPECT_EQ(e.find("dtsuite_cases_done").at(0).value, 1);
}

TEST(PrometheusTextfile, UnwritablePathFailsAtSetUp) {
  const fs::path blocker = scratch("not_a_directory");
  std::ofstream(blocker) << "x";
  PrometheusOutputs outputs;
  outputs.textfile_path = (blocker / "dtsuite.prom").string();
  try {
    PrometheusSink sink(run_info(), outputs);
    FAIL() << "expected Error{io}";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::io);
    EXPECT_NE(std::string(e.what()).find("dtsuite.prom"), std::string::npos) << e.what();
  }
}

TEST(PrometheusTextfile, SpecialFileIsRefusedAndLeftInPlace) {
  // A FIFO stands in for /dev/null: the rename of the temporary file would have replaced it.
  const fs::path fifo = scratch("fifo.prom");
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0) << std::strerror(errno);
  PrometheusOutputs outputs;
  outputs.textfile_path = fifo.string();
  try {
    PrometheusSink sink(run_info(), outputs);
    FAIL() << "expected Error{io}";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::io);
    EXPECT_NE(std::string(e.what()).find("a FIFO"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_fifo(fifo));
  for (const auto& entry : fs::directory_iterator(fifo.parent_path())) {  // no temporary left behind
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << entry.path();
  }
}

// --- push ---------------------------------------------------------------------------------

TEST(PushUrl, Parsed) {
  PushTarget t = parse_push_url("http://127.0.0.1:9091");
  EXPECT_EQ(t.scheme, "http");
  EXPECT_EQ(t.host, "127.0.0.1");
  EXPECT_EQ(t.port, "9091");
  EXPECT_EQ(t.path, "");
  t = parse_push_url("gateway.example:9091/prefix/");
  EXPECT_EQ(t.scheme, "http");
  EXPECT_EQ(t.host, "gateway.example");
  EXPECT_EQ(t.path, "/prefix");
  t = parse_push_url("https://[::1]");
  EXPECT_EQ(t.host, "[::1]");
  EXPECT_EQ(t.port, "443");  // https's default
  EXPECT_EQ(parse_push_url("http://gw").port, "80");
}

TEST(PushUrl, BadOnesAreOneLineErrors) {
  for (const char* url : {"ftp://gw:9091", "http://:9091", "http://gw:", "http://gw:99999", "http://gw:12ab",
                          "http://user:pw@gw:9091", "http://[::1:9091", ""}) {
    try {
      parse_push_url(url);
      ADD_FAILURE() << url;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
  }
}

TEST(PushUrl, GroupingKeyValuesThatAreNotUrlSafeAreBase64) {
  EXPECT_EQ(grouping_key_segment("host", "node-1.example"), std::make_pair(std::string("host"), std::string("node-1.example")));
  // RFC 4648 base64url of "a/b" is "YS9i"; of "" the Pushgateway wants "=".
  EXPECT_EQ(grouping_key_segment("host", "a/b"), std::make_pair(std::string("host@base64"), std::string("YS9i")));
  EXPECT_EQ(grouping_key_segment("host", ""), std::make_pair(std::string("host@base64"), std::string("=")));
  // Padding: 1 byte -> 2 chars + "==", 2 bytes -> 3 chars + "=" ("?" is 0x3f, "??" 0x3f3f).
  EXPECT_EQ(grouping_key_segment("k", "?").second, "Pw==");
  EXPECT_EQ(grouping_key_segment("k", "??").second, "Pz8=");
}

// A one-connection-at-a-time HTTP server on 127.0.0.1 that answers every request with `status`
// and keeps what it was sent: enough to see what the Gateway pushes.
class FakeGateway {
 public:
  explicit FakeGateway(int status) : status_(status) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;  // any free port
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    EXPECT_EQ(::listen(fd_, 8), 0);
    socklen_t length = sizeof address;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeGateway() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  int port() const { return port_; }
  std::vector<std::string> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  void serve() {
    for (;;) {
      const int client = ::accept(fd_, nullptr, nullptr);
      if (client < 0) return;
      std::string request;
      char buffer[65536];
      size_t header_end = std::string::npos, body_length = 0;
      bool continued = false;
      for (;;) {
        const ssize_t got = ::recv(client, buffer, sizeof buffer, 0);
        if (got <= 0) break;
        request.append(buffer, static_cast<size_t>(got));
        if (header_end == std::string::npos && (header_end = request.find("\r\n\r\n")) != std::string::npos) {
          const size_t at = request.find("Content-Length: ");
          if (at != std::string::npos && at < header_end) body_length = std::stoul(request.substr(at + 16));
          // curl waits for this before sending a large body.
          if (request.find("Expect: 100-continue") < header_end && !continued) {
            const std::string go = "HTTP/1.1 100 Continue\r\n\r\n";
            ::send(client, go.data(), go.size(), MSG_NOSIGNAL);
            continued = true;
          }
        }
        if (header_end != std::string::npos && request.size() >= header_end + 4 + body_length) break;
      }
      {
        // Recorded before answering: the client returns as soon as it has the answer, and a
        // test may count requests right then.
        std::lock_guard lock(mutex_);
        requests_.push_back(request);
      }
      const std::string answer = "HTTP/1.1 " + std::to_string(status_) +
                                 " Whatever\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      ::send(client, answer.data(), answer.size(), MSG_NOSIGNAL);
      ::close(client);
    }
  }

  int status_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::vector<std::string> requests_;
};

TEST(PrometheusPush, AtSetUpAndAtCloseUnderJobRunIdAndHost) {
  FakeGateway gateway(200);
  PrometheusOutputs outputs;
  outputs.push_url = "http://127.0.0.1:" + std::to_string(gateway.port());
  PrometheusRunInfo run = run_info();
  run.host = "rack 7/node";  // not URL-safe: base64 in the grouping key
  PrometheusSink sink(run, outputs);
  ASSERT_EQ(gateway.requests().size(), 1u);  // the set-up push proves the gateway is there
  sink.write(busbw_record());
  sink.close();
  const auto requests = gateway.requests();
  ASSERT_EQ(requests.size(), 2u);
  const std::string& last = requests[1];
  const std::string line = last.substr(0, last.find("\r\n"));
  // base64url("rack 7/node") = "cmFjayA3L25vZGU="
  EXPECT_NE(line.find(" /metrics/job/dtsuite/"), std::string::npos) << line;
  EXPECT_NE(line.find("/run_id/" + run.run_id), std::string::npos) << line;
  EXPECT_NE(line.find("/host@base64/cmFjayA3L25vZGU="), std::string::npos) << line;
  const std::string body = last.substr(last.find("\r\n\r\n") + 4);
  const Exposition e = parse_exposition(body);
  EXPECT_EQ(e.find("dtsuite_busbw_bytes_per_second_count").size(), 1u);
  EXPECT_EQ(e.find("dtsuite_build_info").size(), 1u);
}

TEST(PrometheusPush, RefusedAtSetUpIsAnIoError) {
  int port = 0;
  {
    FakeGateway closed(200);  // a port that was free a moment ago and is closed now
    port = closed.port();
  }
  PrometheusOutputs outputs;
  outputs.push_url = "http://127.0.0.1:" + std::to_string(port);
  try {
    PrometheusSink sink(run_info(), outputs);
    FAIL() << "expected Error{io}";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::io);
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot push at set-up"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos);
  }
}

TEST(PrometheusPush, ErrorStatusAtCloseIsThrownAfterTheTextfileIsWritten) {
  auto gateway = std::make_unique<FakeGateway>(200);
  const fs::path path = scratch("push_fails.prom");
  PrometheusOutputs outputs;
  outputs.push_url = "http://127.0.0.1:" + std::to_string(gateway->port());
  outputs.textfile_path = path.string();
  outputs.textfile_refresh = std::chrono::hours(1);
  PrometheusSink sink(run_info(), outputs);
  sink.write(busbw_record());
  gateway.reset();  // the gateway goes away during the run
  EXPECT_THROW(sink.close(), Error);
  EXPECT_EQ(parse_exposition(slurp(path)).find("dtsuite_busbw_bytes_per_second_count").size(), 1u);
}

TEST(PrometheusPush, HttpErrorIsReportedWithItsStatus) {
  FakeGateway gateway(400);  // what a Pushgateway says to a body it will not take
  PrometheusOutputs outputs;
  outputs.push_url = "http://127.0.0.1:" + std::to_string(gateway.port());
  try {
    PrometheusSink sink(run_info(), outputs);
    FAIL() << "expected Error{io}";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("HTTP status 400"), std::string::npos) << e.what();
  }
}

// --- /metrics -----------------------------------------------------------------------------

std::string http_get(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return {};
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string response;
  char buffer[65536];
  for (ssize_t got; (got = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) response.append(buffer, static_cast<size_t>(got));
  ::close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? std::string() : response.substr(body + 4);
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

TEST(PrometheusMetricsPort, ServesLiveProgressUntilClose) {
  PrometheusOutputs outputs;
  outputs.metrics_port = free_port();
  outputs.bind_address = "127.0.0.1";
  PrometheusSink sink(run_info(), outputs);
  EXPECT_EQ(sink.metrics_port(), outputs.metrics_port);
  sink.case_started(0, "collectives", "all_reduce/f32/sum/4096");
  Exposition e = parse_exposition(http_get(outputs.metrics_port, "/metrics"));
  EXPECT_EQ(e.find("dtsuite_cases_planned").at(0).value, static_cast<double>(run_info().planned_cases));
  EXPECT_EQ(e.find("dtsuite_current_case_info").size(), 1u);
  sink.write(busbw_record());
  sink.case_finished(0);
  e = parse_exposition(http_get(outputs.metrics_port, "/metrics"));
  EXPECT_EQ(e.find("dtsuite_cases_done").at(0).value, 1);
  EXPECT_EQ(e.find("dtsuite_busbw_bytes_per_second_count").size(), 1u);
  sink.close();
  EXPECT_EQ(sink.metrics_port(), 0);
  EXPECT_EQ(http_get(outputs.metrics_port, "/metrics"), "");  // nothing listens any more
}

// The socket rows of /proc/net/tcp in LISTEN state (st 0A) on `port`: "ADDR:PORT" in the
// kernel's hex, e.g. "0100007F:2382" for 127.0.0.1 (little-endian) and "00000000:2382" for any.
std::vector<std::string> listening_on(int port) {
  std::ifstream table("/proc/net/tcp");
  std::string line;
  std::getline(table, line);  // header
  char wanted[8];
  std::snprintf(wanted, sizeof wanted, "%04X", port);
  std::vector<std::string> out;
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    if (state == "0A" && local.substr(local.find(':') + 1) == wanted) out.push_back(local);
  }
  return out;
}

TEST(PrometheusMetricsPort, ListensOnLoopbackOnlyByDefault) {
  PrometheusOutputs outputs;
  outputs.metrics_port = free_port();  // bind_address left at its default
  PrometheusSink sink(run_info(), outputs);
  char loopback[16];
  std::snprintf(loopback, sizeof loopback, "0100007F:%04X", outputs.metrics_port);
  EXPECT_EQ(listening_on(outputs.metrics_port), std::vector<std::string>{loopback});
  EXPECT_NE(http_get(outputs.metrics_port, "/metrics"), "");
  sink.close();
}

TEST(PrometheusMetricsPort, ListeningPortsSpellIpv6InBrackets) {
  EXPECT_EQ(metrics_listening_port("127.0.0.1", 9100), "127.0.0.1:9100");
  EXPECT_EQ(metrics_listening_port("::1", 9100), "[::1]:9100");
  EXPECT_EQ(metrics_listening_port("[::1]", 9100), "[::1]:9100");
}

TEST(PrometheusMetricsPort, IdleConnectionsDoNotStarveAScrape) {
  PrometheusOutputs outputs;
  outputs.metrics_port = free_port();
  PrometheusSink sink(run_info(), outputs);
  // 4 idle connections per worker thread: with civetweb's old 2 workers and 30 s wait for a
  // request, these 64 would have held /metrics for 16 minutes.
  constexpr int kIdle = 4 * kMetricsThreads;
  std::vector<int> idle;
  for (int i = 0; i < kIdle; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(outputs.metrics_port));
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0) << std::strerror(errno);
    idle.push_back(fd);  // connected, never sends a request
  }
  // The idle ones are served first and each is dropped after kMetricsRequestTimeout; http_get
  // has no timeout of its own, so the assertion is only that an answer comes (ctest bounds it).
  const Exposition e = parse_exposition(http_get(outputs.metrics_port, "/metrics"));
  EXPECT_EQ(e.find("dtsuite_cases_planned").size(), 1u);
  for (int fd : idle) ::close(fd);
  sink.close();
}

TEST(PrometheusMetricsPort, PortInUseFailsAtSetUp) {
  FakeGateway occupant(200);
  PrometheusOutputs outputs;
  outputs.metrics_port = occupant.port();
  outputs.bind_address = "127.0.0.1";
  try {
    PrometheusSink sink(run_info(), outputs);
    FAIL() << "expected Error{io}";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::io);
    EXPECT_NE(std::string(e.what()).find(std::to_string(occupant.port())), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dts
