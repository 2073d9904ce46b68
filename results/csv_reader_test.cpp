// Tests of read_results_csv: what CsvSink writes comes back field for field (quotes, commas, line
// breaks, special numbers, samples); schema version 1 files still read; every kind of malformed
// input is refused with "PATH:LINE: reason" naming the right line.
#include "results/csv_reader.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "results/csv_sink.h"

namespace dts {
namespace {

namespace fs = std::filesystem;

class CsvReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("dts_csv_reader_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write_text(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  fs::path dir_;
};

// Every field set, and strings that need every escaping rule.
Record full_record() {
  Record r;
  r.run_id = "20240501T120000Z-abcdef";
  r.timestamp = "2024-05-01T12:00:00.125Z";
  r.suite = "collectives";
  r.case_id = "all_reduce/f32/sum/1048576";
  r.metric = "time";
  r.unit = "seconds";
  r.labels.backend = "faulty(bitflip,mpi)";                                           // comma
  r.labels.backend_version = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4";  // commas
  r.labels.mpi_version = "MPI \"3.1\"";                                               // quotes
  r.labels.device = "cpu:Intel(R) Xeon(R)";
  r.labels.host = "node-1";
  r.labels.world_size = 4;
  r.labels.nodes = 2;
  r.labels.ranks_per_node = 2;
  r.labels.op = "all_reduce";
  r.labels.dtype = "f32";
  r.labels.bytes = 1048576;
  r.labels.placement = "in_place";
  r.labels.strategy = "zero2";
  r.labels.config = "redop=sum;root=-1;count=262144";
  r.value = 0.1 + 0.2;  // needs all 17 digits: the shortest round-trip form must keep it
  // A timing's value is its median (the reader refuses another): the middle of five samples.
  r.stats = compute_stats({0.2, 0.1, 0.1 + 0.2, 0.5, 0.4});
  r.verdict = Verdict::fail;
  r.threshold = 2.0 / 3.0;
  r.detail = "  leading spaces, a \"quote\", a comma";
  // Exactly representable in 9 significant digits, so %.9g gives them back bit for bit.
  r.samples = {3e-06, 1e-06, 2.5e-06, 0.125, 1048576};
  return r;
}

void expect_same(const Record& a, const Record& b) {
  EXPECT_EQ(a.run_id, b.run_id);
  EXPECT_EQ(a.timestamp, b.timestamp);
  EXPECT_EQ(a.suite, b.suite);
  EXPECT_EQ(a.case_id, b.case_id);
  EXPECT_EQ(a.metric, b.metric);
  EXPECT_EQ(a.unit, b.unit);
  EXPECT_EQ(a.labels.backend, b.labels.backend);
  EXPECT_EQ(a.labels.backend_version, b.labels.backend_version);
  EXPECT_EQ(a.labels.mpi_version, b.labels.mpi_version);
  EXPECT_EQ(a.labels.device, b.labels.device);
  EXPECT_EQ(a.labels.host, b.labels.host);
  EXPECT_EQ(a.labels.world_size, b.labels.world_size);
  EXPECT_EQ(a.labels.nodes, b.labels.nodes);
  EXPECT_EQ(a.labels.ranks_per_node, b.labels.ranks_per_node);
  EXPECT_EQ(a.labels.op, b.labels.op);
  EXPECT_EQ(a.labels.dtype, b.labels.dtype);
  EXPECT_EQ(a.labels.bytes, b.labels.bytes);
  EXPECT_EQ(a.labels.placement, b.labels.placement);
  EXPECT_EQ(a.labels.strategy, b.labels.strategy);
  EXPECT_EQ(a.labels.config, b.labels.config);
  EXPECT_EQ(a.value, b.value);  // bit-exact: shortest round-trip text
  EXPECT_EQ(a.stats.n, b.stats.n);
  EXPECT_EQ(a.stats.min, b.stats.min);
  EXPECT_EQ(a.stats.p05, b.stats.p05);
  EXPECT_EQ(a.stats.median, b.stats.median);
  EXPECT_EQ(a.stats.p95, b.stats.p95);
  EXPECT_EQ(a.stats.max, b.stats.max);
  EXPECT_EQ(a.verdict, b.verdict);
  EXPECT_TRUE(a.threshold == b.threshold || (std::isnan(a.threshold) && std::isnan(b.threshold)));
  EXPECT_EQ(a.detail, b.detail);
  EXPECT_EQ(a.samples, b.samples);
}

TEST_F(CsvReaderTest, RoundTripsWhatCsvSinkWrites) {
  std::vector<Record> written{full_record()};
  Record sparse;  // not-applicable fields: bytes -1, no stats, no threshold, no samples
  sparse.suite = "topology";
  sparse.case_id = "p2p/0-1";
  sparse.metric = "check";
  sparse.value = 0;
  sparse.verdict = Verdict::skip;
  sparse.labels.world_size = 1;
  sparse.detail = "unsupported, by \"design\"";
  written.push_back(sparse);
  Record special = full_record();  // inf, -inf and nan as values
  special.metric = "max_ulp";  // not a timing: its value need not be a clock's reading or the median
  special.unit = "ulp";
  special.value = std::numeric_limits<double>::infinity();
  special.threshold = -std::numeric_limits<double>::infinity();
  special.verdict = Verdict::timeout;
  written.push_back(special);

  const fs::path path = dir_ / "results.csv";
  {
    CsvSink sink(path.string());
    for (const Record& r : written) sink.write(r);
  }
  const std::vector<Record> read = read_results_csv(path.string());
  ASSERT_EQ(read.size(), written.size());
  for (size_t i = 0; i < read.size(); ++i) {
    SCOPED_TRACE("row " + std::to_string(i));
    expect_same(read[i], written[i]);
  }
}

TEST_F(CsvReaderTest, AUtf8ByteOrderMarkIsNotPartOfTheFirstColumn) {
  // A spreadsheet that saves "CSV UTF-8" puts EF BB BF before the header.
  const fs::path path = dir_ / "plain.csv";
  {
    CsvSink sink(path.string());
    sink.write(full_record());
  }
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const fs::path with_bom = write_text("bom.csv", "\xEF\xBB\xBF" + text);
  const std::vector<Record> read = read_results_csv(with_bom.string());
  ASSERT_EQ(read.size(), 1u);
  expect_same(read[0], full_record());
}

TEST_F(CsvReaderTest, LineBreaksInFieldsBecomeSpacesSoEachRowIsOneLine) {
  Record r = full_record();
  r.detail = "first\nsecond\r\nthird\rfourth";
  const fs::path path = dir_ / "lines.csv";
  {
    CsvSink sink(path.string());
    sink.write(r);
    sink.write(r);
  }
  std::ifstream in(path);
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  EXPECT_EQ(lines, 3);  // header + two rows: no physical line inside a field
  const std::vector<Record> read = read_results_csv(path.string());
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[1].detail, "first second third fourth");  // one space per CRLF, CR or LF
}

TEST_F(CsvReaderTest, ReadsSchemaVersion1WithoutSamples) {
  // A version 1 file: 31 columns, no `samples`; CRLF line ends, as some tools rewrite them.
  const std::string header =
      "schema_version,run_id,timestamp,suite,case,backend,backend_version,mpi_version,device,host,"
      "world_size,nodes,ranks_per_node,op,dtype,bytes,placement,strategy,config,metric,value,unit,"
      "n,min,p05,median,p95,max,verdict,threshold,detail\r\n";
  const std::string row =
      "1,r1,2024-05-01T12:00:00.000Z,collectives,all_reduce/f32/sum/8,mpi,\"v4.1.4, x\",MPI 3.1,cpu,h,2,1,2,"
      "all_reduce,f32,8,out_of_place,,redop=sum;root=-1;count=2,time,2e-06,seconds,5,1e-06,1.2e-06,2e-06,"
      "3e-06,4e-06,info,,\r\n";
  const fs::path path = write_text("v1.csv", header + row);
  const std::vector<Record> read = read_results_csv(path.string());
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read[0].labels.backend_version, "v4.1.4, x");
  EXPECT_EQ(read[0].labels.bytes, 8);
  EXPECT_EQ(read[0].stats.n, 5);
  EXPECT_EQ(read[0].stats.p95, 3e-06);
  EXPECT_EQ(read[0].value, 2e-06);
  EXPECT_TRUE(std::isnan(read[0].threshold));
  EXPECT_TRUE(read[0].samples.empty());
}

TEST_F(CsvReaderTest, ColumnsAreFoundByNameInAnyOrder) {
  // Same columns, reordered: a reader that indexes by position would swap suite and case.
  std::vector<std::string> columns = csv_columns();
  std::swap(columns[3], columns[4]);
  std::string header;
  for (const auto& c : columns) header += (header.empty() ? "" : ",") + c;
  const std::string row =
      "5,r,t,THE_CASE,THE_SUITE,mpi,,,cpu,h,1,1,1,,,,,,,check,1,,,,,,,,pass,,,,,3,\n";
  const fs::path path = write_text("reordered.csv", header + "\n" + row);
  const std::vector<Record> read = read_results_csv(path.string());
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read[0].suite, "THE_SUITE");
  EXPECT_EQ(read[0].case_id, "THE_CASE");
  EXPECT_EQ(read[0].repetition, 3);
}

// A valid version 5 header and row; each malformed case changes one thing.
std::string header_line() {
  std::string header;
  for (const auto& c : csv_columns()) header += (header.empty() ? "" : ",") + c;
  return header + "\n";
}
const std::string kGoodRow =
    "5,r,t,collectives,all_reduce/f32/sum/8,mpi,,,cpu,h,2,1,2,all_reduce,f32,8,in_place,,,time,2e-06,seconds,"
    "3,1e-06,1e-06,2e-06,3e-06,3e-06,info,,,1e-06;2e-06;3e-06,7,2,btl=tcp\n";

// A version 4 file (34 columns, no `mpi_config`) reads with the library's defaults; a version 5
// row keeps its settings.
TEST_F(CsvReaderTest, ReadsSchemaVersion4WithoutMpiConfig) {
  std::vector<std::string> columns = csv_columns();
  ASSERT_EQ(columns.back(), "mpi_config");
  columns.pop_back();
  std::string header;
  for (const auto& c : columns) header += (header.empty() ? "" : ",") + c;
  const fs::path path = write_text("v4.csv", header + "\n4,r,t,collectives,x,mpi,,,cpu,h,1,1,1,,,,,,,check,1,,,,,,,,pass,,,,,2\n");
  const std::vector<Record> read = read_results_csv(path.string());
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read[0].labels.mpi_config, "");
  EXPECT_EQ(read[0].repetition, 2);
  const fs::path v5 = write_text("v5.csv", header_line() + kGoodRow);
  EXPECT_EQ(read_results_csv(v5.string()).at(0).labels.mpi_config, "btl=tcp");
}

std::string replace_field(std::string row, size_t index, const std::string& value) {
  // Fields of kGoodRow hold no quotes, so commas split it.
  size_t start = 0;
  for (size_t i = 0; i < index; ++i) start = row.find(',', start) + 1;
  size_t end = row.find_first_of(",\n", start);
  return row.replace(start, end - start, value);
}

struct Malformed {
  std::string name;
  std::string text;
  int line;              // the line the message must name
  std::string reason;    // a piece of the message
};

class CsvReaderMalformed : public CsvReaderTest, public ::testing::WithParamInterface<Malformed> {};

TEST_P(CsvReaderMalformed, NamesFileAndLine) {
  const Malformed& m = GetParam();
  const fs::path path = write_text(m.name + ".csv", m.text);
  try {
    read_results_csv(path.string());
    ADD_FAILURE() << "no error for " << m.name;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << e.what();
    const std::string message = e.what();
    const std::string where = path.string() + ":" + std::to_string(m.line) + ": ";
    EXPECT_EQ(message.rfind(where, 0), 0u) << message;
    EXPECT_NE(message.find(m.reason), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
  }
}

std::vector<Malformed> malformed_cases() {
  const std::string h = header_line();
  const std::string ok = kGoodRow;
  const std::string newer = replace_field(ok, 0, "6");
  const std::string newer_with_extra = newer.substr(0, newer.size() - 1) + ",x\n";
  std::string zero_time = ok;  // every number of the time 0, as a hand edit would make it
  for (size_t column : {20, 23, 24, 25, 26, 27}) zero_time = replace_field(zero_time, column, "0");
  zero_time = replace_field(zero_time, 31, "0;0;0");
  // An algbw of 8 bytes, a single value (n empty), of 0.
  std::string zero_algbw = replace_field(replace_field(replace_field(ok, 19, "algbw"), 21, "bytes_per_second"), 20, "0");
  for (size_t column : {22, 23, 24, 25, 26, 27, 31}) zero_algbw = replace_field(zero_algbw, column, "");
  // Line numbers: the header is line 1, kGoodRow line 2, the bad row line 3.
  return {
      {"empty", "", 1, "no header"},
      {"missing_column", "schema_version,run_id\n", 1, "missing column 'timestamp'"},
      {"unknown_column", h.substr(0, h.size() - 1) + ",flavour\n" + ok.substr(0, ok.size() - 1) + ",x\n", 1,
       "unknown column 'flavour'"},
      {"duplicate_column", h.substr(0, h.size() - 1) + ",detail\n", 1, "appears twice"},
      {"bad_number", h + ok + replace_field(ok, 20, "fast"), 3, "column 'value': bad number 'fast'"},
      {"empty_value", h + ok + replace_field(ok, 20, ""), 3, "column 'value': bad number ''"},
      {"bad_integer", h + ok + replace_field(ok, 10, "4.5"), 3, "column 'world_size': bad integer '4.5'"},
      {"bad_bytes", h + ok + replace_field(ok, 15, "8K"), 3, "column 'bytes': bad integer '8K'"},
      {"bad_stat", h + ok + replace_field(ok, 26, "1e-6x"), 3, "column 'p95': bad number"},
      {"unknown_verdict", h + ok + replace_field(ok, 28, "maybe"), 3, "unknown verdict 'maybe'"},
      {"newer_schema", h + ok + replace_field(ok, 0, "6"), 3, "schema_version 6 is newer"},
      {"bad_repetition", h + ok + replace_field(ok, 33, "0"), 3, "column 'repetition': not a repetition (1, 2, ...) '0'"},
      {"newer_schema_with_new_column", h.substr(0, h.size() - 1) + ",flavour\n" + newer_with_extra,
       2, "schema_version 6 is newer"},
      {"bad_seed", h + ok + replace_field(ok, 32, "-1"), 3, "column 'seed': not a seed '-1'"},
      {"zero_schema", h + replace_field(ok, 0, "0"), 2, "not a version"},
      {"too_few_fields", h + ok + "2,r,t\n", 3, "too few fields"},
      {"too_many_fields", h + ok + ok.substr(0, ok.size() - 1) + ",extra\n", 3, "too many fields"},
      {"unclosed_quote", h + ok + replace_field(ok, 30, "\"open"), 3, "not closed"},
      {"bad_sample", h + ok + replace_field(ok, 31, "1e-06;;3e-06"), 3, "column 'samples': bad number ''"},
      {"empty_case", h + ok + replace_field(ok, 4, ""), 3, "column 'case' is empty"},
      // kGoodRow is a time (seconds): no clock gives a negative one.
      {"negative_time", h + ok + replace_field(ok, 20, "-0.5"), 3, "column 'value': a time of -0.5 s is negative"},
      {"negative_p05", h + ok + replace_field(ok, 24, "-1e-6"), 3, "column 'p05': a time of -1e-6 s is negative"},
      // Numbers no measurement gives (kGoodRow: n 3, min 1e-06, p05 1e-06, median 2e-06, p95
      // 3e-06, max 3e-06, value 2e-06, samples 1e-06;2e-06;3e-06); compare judged each before.
      {"p05_above_p95", h + ok + replace_field(replace_field(ok, 24, "3e-06"), 26, "1e-06"), 3, "p05 3e-06 > p95 1e-06"},
      {"nan_p05", h + ok + replace_field(ok, 24, "nan"), 3, "p05 is nan"},
      {"inf_max", h + ok + replace_field(ok, 27, "inf"), 3, "max is inf"},
      {"median_above_max", h + ok + replace_field(replace_field(ok, 25, "0.0003"), 20, "0.0003"), 3,
       "median 3e-04 > max 3e-06"},
      {"max_below_min", h + ok + replace_field(replace_field(ok, 23, "3e-06"), 27, "1e-06"), 3, "min 3e-06 > max 1e-06"},
      {"value_not_median", h + ok + replace_field(ok, 20, "2.5e-06"), 3, "value 2.5e-06 is not the median 2e-06"},
      {"zero_time", h + ok + zero_time, 3, "value 0 seconds: time is read from a clock"},
      {"zero_min", h + ok + replace_field(replace_field(ok, 23, "0"), 24, "0"), 3, "min 0 seconds: time is read"},
      {"zero_sample", h + ok + replace_field(ok, 31, "0;2e-06;3e-06"), 3, "a sample 0 seconds"},
      {"nan_sample", h + ok + replace_field(ok, 31, "nan;2e-06;3e-06"), 3, "samples hold nan"},
      {"zero_algbw", h + ok + zero_algbw, 3, "value 0 bytes_per_second: algbw is read from a clock (bytes over a time)"},
      // A time without its unit would slip past every check that reads the unit.
      {"time_without_unit", h + ok + replace_field(replace_field(ok, 21, ""), 20, "0"), 3,
       "time in '': a time is written in seconds"},
      // Each row is one line, none skipped: the fifth line is the fourth row.
      {"impossible_on_line_5", h + ok + ok + ok + replace_field(ok, 24, "nan"), 5, "p05 is nan"},
      // A bad last row that does end its line was written whole: it is wrong, not torn.
      {"bad_last_row_with_newline", h + ok + "4,r\n", 3, "too few fields"},
  };
}

INSTANTIATE_TEST_SUITE_P(Inputs, CsvReaderMalformed, ::testing::ValuesIn(malformed_cases()),
                         [](const auto& param_info) { return param_info.param.name; });

// What runs write and must still read: 0 where 0 is the result (no wrong element, busbw on one
// rank, whose bus factor is 0, the algbw of a 0-byte call, no communication or waiting on one
// rank), a value that is not the median where the schema says another (rank_load: the busiest
// rank's), and NaN or inf among the stack's own numbers (consensus_spread has no unit).
TEST_F(CsvReaderTest, ZerosAndNonFiniteResultsThatRunsWriteAreRead) {
  std::vector<Record> written;
  const auto add = [&](const char* metric, const char* unit, double value, Stats stats, int64_t bytes, int world) {
    Record r;
    r.suite = "collectives";
    r.case_id = std::string(metric) + "/" + std::to_string(written.size());
    r.metric = metric;
    r.unit = unit;
    r.value = value;
    r.stats = stats;
    r.labels.bytes = bytes;
    r.labels.world_size = world;
    written.push_back(r);
  };
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  add("wrong", "elements", 0, {}, 8, 2);
  add("check", "", 0, {}, -1, 2);
  add("busbw", "bytes_per_second", 0, compute_stats({0, 0, 0}), 8, 1);
  add("algbw", "bytes_per_second", 0, compute_stats({0, 0, 0}), 0, 2);
  add("comm_time", "seconds", 0, compute_stats({0, 0, 0}), -1, 1);
  add("idle_time", "seconds", 0, compute_stats({0, 0, 1e-6}), -1, 2);  // median 0 of three
  add("rank_load", "bytes", 4000, compute_stats({1000, 4000, 2000}), -1, 3);  // the busiest, not the median
  add("consensus_spread", "", nan, Stats{3, 0.5, nan, inf, nan, 0.25}, -1, 2);
  add("max_abs_error", "", nan, {}, -1, 2);
  add("link_utilization", "ratio", nan, {}, 8, 2);
  add("time", "seconds", 2e-6, compute_stats({2e-6, 2e-6, 2e-6}), 8, 2);  // every sample alike
  const fs::path path = dir_ / "legitimate.csv";
  {
    CsvSink sink(path.string());
    for (const Record& r : written) sink.write(r);
  }
  std::vector<Record> read;
  ASSERT_NO_THROW(read = read_results_csv(path.string()));
  EXPECT_EQ(read.size(), written.size());
  for (const Record& r : written) EXPECT_EQ(impossible_measurement(r), "") << r.metric;
}

TEST_F(CsvReaderTest, UnreadableFileIsAnIoError) {
  for (const std::string& path : {(dir_ / "absent.csv").string(), dir_.string()}) {
    try {
      read_results_csv(path);
      ADD_FAILURE() << "no error for " << path;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::io) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

TEST_F(CsvReaderTest, HeaderOnlyIsNoRecords) {
  const fs::path path = write_text("header.csv", header_line());
  EXPECT_TRUE(read_results_csv(path.string()).empty());
}

TEST_F(CsvReaderTest, AStreamReadsAsTheFileDoes) {
  // The stream entry point (the fuzz target's): the same records as from a file, and the same
  // errors, with the name given where the path would be.
  const std::string text = "\xEF\xBB\xBF" + header_line() + kGoodRow + replace_field(kGoodRow, 4, "all_reduce/f32/sum/16");
  std::istringstream in(text);
  const std::vector<Record> read = read_results_csv(in, "in-memory");
  const std::vector<Record> from_file = read_results_csv(write_text("good.csv", text).string());
  ASSERT_EQ(read.size(), 2u);  // both rows of `text`
  ASSERT_EQ(from_file.size(), read.size());
  for (size_t i = 0; i < read.size(); ++i) {
    EXPECT_EQ(read[i].case_id, from_file[i].case_id);
    EXPECT_EQ(read[i].value, from_file[i].value);
    EXPECT_EQ(read[i].samples, from_file[i].samples);
  }
  for (const Malformed& m : malformed_cases()) {
    std::istringstream bad(m.text);
    try {
      read_results_csv(bad, "in-memory");
      ADD_FAILURE() << "no error for " << m.name;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("in-memory:" + std::to_string(m.line) + ": ", 0), 0u) << e.what();
    }
  }
}

// What CsvSink writes ends in '\n'. A last line without one that does not parse was cut short
// by a full disk or a killed writer: the rows before it are read, and a warning names it.
TEST_F(CsvReaderTest, ATornLastRowEndsTheFileWithAWarning) {
  const std::string ok = kGoodRow;
  for (const std::string& torn : {ok.substr(0, 40), ok.substr(0, ok.size() / 2), std::string("2,\"open")}) {
    const fs::path path = write_text("torn.csv", header_line() + ok + ok + torn);
    std::vector<std::string> warnings;
    CsvReadOptions options;
    options.warn = [&](const std::string& w) { warnings.push_back(w); };
    const std::vector<Record> read = read_results_csv(path.string(), options);
    EXPECT_EQ(read.size(), 2u) << torn;  // the two whole rows
    ASSERT_EQ(warnings.size(), 1u) << torn;
    EXPECT_EQ(warnings[0].rfind(path.string() + ":4: the last row is cut short", 0), 0u) << warnings[0];
    EXPECT_NE(warnings[0].find("the 2 rows before it kept"), std::string::npos) << warnings[0];
    std::istringstream in(header_line() + ok + torn);  // the stream reads alike
    EXPECT_EQ(read_results_csv(in, "in-memory", options).size(), 1u);
  }
  // The same row in the middle of the file is corruption, not a torn end: refused.
  const fs::path middle = write_text("middle.csv", header_line() + ok.substr(0, 40) + "\n" + ok);
  EXPECT_THROW(read_results_csv(middle.string()), Error);
  // A whole last row without its '\n' (a spreadsheet's save) parses: kept, no warning.
  std::vector<std::string> warnings;
  CsvReadOptions options;
  options.warn = [&](const std::string& w) { warnings.push_back(w); };
  const fs::path whole = write_text("whole.csv", header_line() + ok + ok.substr(0, ok.size() - 1));
  EXPECT_EQ(read_results_csv(whole.string(), options).size(), 2u);
  EXPECT_TRUE(warnings.empty());
}

// /dev/zero's bytes never end a line: refused as a device before reading. The same bytes in a
// regular file, or any line past kMaxCsvLine, are refused at that line, naming the limit, before
// the file is held in memory.
TEST_F(CsvReaderTest, DevicesAndOverlongLinesAreRefused) {
  try {
    read_results_csv("/dev/zero");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::io);
    EXPECT_NE(std::string(e.what()).find("a character device"), std::string::npos) << e.what();
  }
  const std::string zeros(static_cast<size_t>(kMaxCsvLine) + 1, '\0');
  const fs::path path = write_text("zeros.csv", zeros);
  try {
    read_results_csv(path.string());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find(path.string() + ":1: line longer than " + std::to_string(kMaxCsvLine) + " bytes"),
              std::string::npos) << e.what();
  }
  const fs::path long_row = write_text("long.csv", header_line() + kGoodRow + std::string(kMaxCsvLine + 1, 'x') + "\n");
  try {
    read_results_csv(long_row.string());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(long_row.string() + ":3: line longer"), std::string::npos) << e.what();
  }
}

// A FIFO is read once, as a file is (the header is no longer read twice); one without a writer
// ends after the wait asked for.
TEST_F(CsvReaderTest, AFifoIsReadOnceAndOneWithoutAWriterTimesOut) {
  const std::string path = (dir_ / "fifo.csv").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  const std::string text = header_line() + kGoodRow + kGoodRow;
  std::thread writer([&] { std::ofstream(path, std::ios::binary) << text; });
  CsvReadOptions options;
  options.timeout_seconds = 60;
  EXPECT_EQ(read_results_csv(path, options).size(), 2u);
  writer.join();
  options.timeout_seconds = 0.2;
  try {
    read_results_csv(path, options);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::timeout) << e.what();
  }
}

}  // namespace
}  // namespace dts
