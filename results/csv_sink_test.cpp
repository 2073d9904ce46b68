// Tests of CsvSink: the fixed header, RFC 4180 escaping, a row read back by an independent
// parser written here, the spelling of numbers, durability under SIGKILL, and I/O errors.
// The parser below shares no code with csv_sink.cpp, so a symmetric bug cannot hide.
#include "results/csv_sink.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <csignal>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "results/csv_reader.h"
#include "results/testing/file_size_limit.h"

namespace dts {
namespace {

namespace fs = std::filesystem;

// DESIGN.md, "CSV": the column list users rely on, typed out here rather than taken from the
// code under test.
constexpr const char* kExpectedHeader =
    "schema_version,run_id,timestamp,suite,case,backend,backend_version,mpi_version,device,host,"
    "world_size,nodes,ranks_per_node,op,dtype,bytes,placement,strategy,config,metric,value,unit,"
    "n,min,p05,median,p95,max,verdict,threshold,detail,samples,seed,repetition,mpi_config";
constexpr size_t kColumnCount = 35;  // the names in kExpectedHeader (schema 2 added samples, 3 seed, 4 repetition, 5 mpi_config)

using Row = std::vector<std::string>;

// A small RFC 4180 reader: fields separated by commas, rows by LF or CRLF; a quoted field may
// hold commas, CR, LF and doubled quotes. Malformed input is a test failure.
std::vector<Row> parse_csv(std::string_view text) {
  std::vector<Row> rows;
  Row row;
  std::string field;
  size_t i = 0;
  const auto end_of_row = [&](size_t at) {  // LF or CRLF at `at`; returns its length or 0
    if (at < text.size() && text[at] == '\n') return size_t{1};
    if (at + 1 < text.size() && text[at] == '\r' && text[at + 1] == '\n') return size_t{2};
    return size_t{0};
  };
  while (i < text.size()) {
    field.clear();
    if (text[i] == '"') {
      ++i;
      for (;;) {
        if (i >= text.size()) {
          ADD_FAILURE() << "unterminated quoted field";
          return rows;
        }
        if (text[i] == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;  // the closing quote
          break;
        }
        field += text[i++];
      }
    } else {
      while (i < text.size() && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
        if (text[i] == '"') ADD_FAILURE() << "quote inside an unquoted field at offset " << i;
        field += text[i++];
      }
    }
    row.push_back(field);
    if (i < text.size() && text[i] == ',') {
      ++i;
      if (i == text.size()) row.push_back("");  // a trailing comma ends with an empty field
      continue;
    }
    const size_t newline = end_of_row(i);
    if (i < text.size() && newline == 0) {
      ADD_FAILURE() << "unexpected character after field at offset " << i;
      return rows;
    }
    i += newline;
    rows.push_back(row);
    row.clear();
  }
  if (!row.empty()) rows.push_back(row);
  return rows;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

double parse_double(const std::string& text) {
  double value = 0;
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  EXPECT_EQ(result.ec, std::errc()) << text;
  EXPECT_EQ(result.ptr, text.data() + text.size()) << text;
  return value;
}

// A record whose strings exercise every escaping rule and whose numbers need all 17 digits.
Record sample_record() {
  Record r;
  r.run_id = "20240501T120000Z-4242";
  r.timestamp = "2024-05-01T12:00:00.125Z";
  r.suite = "collectives";
  r.case_id = "all_reduce/f32/sum/1048576";
  r.metric = "time";
  r.unit = "seconds";
  r.labels.backend = "ring(mpi)";
  r.labels.backend_version = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4";  // commas
  r.labels.mpi_version = "MPI 3.1";
  r.labels.device = "cpu";
  r.labels.host = "node-1";
  r.labels.world_size = 6;
  r.labels.nodes = 2;
  r.labels.ranks_per_node = 3;
  r.labels.op = "all_reduce";
  r.labels.dtype = "f32";
  r.labels.bytes = 1048576;
  r.labels.placement = "out_of_place";
  r.labels.strategy = "";
  r.labels.config = "redop=sum;root=-1;count=262144";
  r.value = 0.1 + 0.2;  // 0.30000000000000004: only the shortest round-trip form keeps it
  r.stats = compute_stats({1.0 / 3.0, 0.25, 2e-7, 1e300});
  r.stats.median = r.value;  // a timing's value is its median: the reader refuses another
  r.verdict = Verdict::pass;
  r.threshold = 2.0 / 3.0;
  r.detail = "say \"hi\", then\nnew line\r\nand CRLF";
  r.samples = {0.25, 1e-07, 1.0 / 3.0};  // %.9g: "0.25", "1e-07", "0.333333333"
  r.seed = "18446744073709551615";        // the largest --seed: 2^64 - 1, written in full
  return r;
}

class CsvSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("dts_csv_sink_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `records` through a CsvSink and parses the file back.
  std::vector<Row> round_trip(const std::vector<Record>& records) {
    const fs::path path = dir_ / "results.csv";
    CsvSink sink(path.string());
    for (const Record& r : records) sink.write(r);
    sink.close();
    return parse_csv(read_file(path));
  }

  fs::path dir_;
};

TEST(CsvEscape, QuotesOnlyWhenNeeded) {
  EXPECT_EQ(csv_escape(""), "");
  EXPECT_EQ(csv_escape("plain text; key=value"), "plain text; key=value");  // ; = and space are plain
  EXPECT_EQ(csv_escape("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_escape("say \"hi\""), "\"say \"\"hi\"\"\"");  // each quote doubled
  EXPECT_EQ(csv_escape("\""), "\"\"\"\"");
  EXPECT_EQ(csv_escape("line\nbreak"), "\"line\nbreak\"");
  EXPECT_EQ(csv_escape("carriage\rreturn"), "\"carriage\rreturn\"");
}

TEST(CsvColumns, AreTheDesignList) {
  std::string joined;
  for (const std::string& column : csv_columns()) joined += (joined.empty() ? "" : ",") + column;
  EXPECT_EQ(joined, kExpectedHeader);
  EXPECT_EQ(csv_columns().size(), kColumnCount);
}

TEST_F(CsvSinkTest, HeaderIsExact) {
  const fs::path path = dir_ / "header.csv";
  CsvSink sink(path.string());
  sink.close();
  EXPECT_EQ(read_file(path), std::string(kExpectedHeader) + "\n");
}

TEST_F(CsvSinkTest, RowRoundTrip) {
  const Record r = sample_record();
  const std::vector<Row> rows = round_trip({r});
  ASSERT_EQ(rows.size(), 2u);  // header + one row
  ASSERT_EQ(rows[1].size(), kColumnCount);
  const Row& row = rows[1];
  const auto column = [&](std::string_view column_name) -> const std::string& {
    for (size_t i = 0; i < rows[0].size(); ++i) {
      if (rows[0][i] == column_name) return row[i];
    }
    ADD_FAILURE() << "no column " << column_name;
    static const std::string none;
    return none;
  };
  EXPECT_EQ(column("schema_version"), std::to_string(kSchemaVersion));
  EXPECT_EQ(column("run_id"), r.run_id);
  EXPECT_EQ(column("timestamp"), r.timestamp);
  EXPECT_EQ(column("suite"), r.suite);
  EXPECT_EQ(column("case"), r.case_id);
  EXPECT_EQ(column("backend"), r.labels.backend);
  EXPECT_EQ(column("backend_version"), r.labels.backend_version);
  EXPECT_EQ(column("mpi_version"), r.labels.mpi_version);
  EXPECT_EQ(column("device"), r.labels.device);
  EXPECT_EQ(column("host"), r.labels.host);
  EXPECT_EQ(column("world_size"), "6");
  EXPECT_EQ(column("nodes"), "2");
  EXPECT_EQ(column("ranks_per_node"), "3");
  EXPECT_EQ(column("op"), r.labels.op);
  EXPECT_EQ(column("dtype"), r.labels.dtype);
  EXPECT_EQ(column("bytes"), "1048576");
  EXPECT_EQ(column("placement"), r.labels.placement);
  EXPECT_EQ(column("strategy"), "");
  EXPECT_EQ(column("config"), r.labels.config);
  EXPECT_EQ(column("metric"), r.metric);
  EXPECT_EQ(column("value"), "0.30000000000000004");
  EXPECT_EQ(parse_double(column("value")), r.value);
  EXPECT_EQ(column("unit"), r.unit);
  EXPECT_EQ(column("n"), "4");
  // Bit-exact: the shortest round-trip form reads back to the same double.
  EXPECT_EQ(parse_double(column("min")), r.stats.min);
  EXPECT_EQ(parse_double(column("p05")), r.stats.p05);
  EXPECT_EQ(parse_double(column("median")), r.stats.median);
  EXPECT_EQ(parse_double(column("p95")), r.stats.p95);
  EXPECT_EQ(column("max"), "1e+300");
  EXPECT_EQ(column("verdict"), "pass");
  EXPECT_EQ(parse_double(column("threshold")), r.threshold);
  // Quotes and commas survive; each line break becomes one space, so a row is one line.
  EXPECT_EQ(column("detail"), "say \"hi\", then new line and CRLF");
  EXPECT_EQ(column("samples"), "0.25;1e-07;0.333333333");
  EXPECT_EQ(column("seed"), "18446744073709551615");
}

TEST_F(CsvSinkTest, NotApplicableFieldsAreEmpty) {
  Record r;  // bytes -1, threshold NaN, stats.n 0
  r.suite = "topology";
  r.case_id = "p2p/0-1";
  r.metric = "check";
  r.value = 1;
  r.verdict = Verdict::skip;
  const std::vector<Row> rows = round_trip({r});
  ASSERT_EQ(rows.size(), 2u);
  const Row& row = rows[1];
  ASSERT_EQ(row.size(), kColumnCount);
  EXPECT_EQ(row[15], "");  // bytes
  for (size_t i = 22; i <= 27; ++i) EXPECT_EQ(row[i], "") << rows[0][i];  // n .. max
  EXPECT_EQ(row[28], "skip");  // verdict
  EXPECT_EQ(row[29], "");      // threshold
  EXPECT_EQ(row[20], "1");     // value: integral doubles print without a fraction
}

TEST_F(CsvSinkTest, NumbersUseShortestRoundTripAndFixedSpecialSpellings) {
  struct Case {
    double value;
    const char* text;
  };
  // Expected texts are what printf's %e / %f would give at the fewest digits that read back
  // exactly, choosing the shorter of the two (std::to_chars' plain overload).
  const Case cases[] = {
      {0.0, "0"},
      {-0.0, "-0"},
      {0.1, "0.1"},
      {1e-7, "1e-07"},
      {1048576.0, "1048576"},
      {3.5e9, "3.5e+09"},          // shorter than "3500000000"
      {1e21, "1e+21"},
      {std::numeric_limits<double>::infinity(), "inf"},
      {-std::numeric_limits<double>::infinity(), "-inf"},
      {std::numeric_limits<double>::quiet_NaN(), "nan"},
      {-std::numeric_limits<double>::quiet_NaN(), "nan"},  // NaN's sign is not spelled
  };
  std::vector<Record> records;
  for (const Case& c : cases) {
    Record r;
    r.metric = "x";
    r.value = c.value;
    r.threshold = c.value;
    records.push_back(r);
  }
  const std::vector<Row> rows = round_trip(records);
  ASSERT_EQ(rows.size(), std::size(cases) + 1);
  for (size_t i = 0; i < std::size(cases); ++i) {
    EXPECT_EQ(rows[i + 1][20], cases[i].text) << "value #" << i;
    // threshold NaN means "none", so it is empty rather than "nan".
    EXPECT_EQ(rows[i + 1][29], std::isnan(cases[i].value) ? "" : cases[i].text) << "threshold #" << i;
  }
}

TEST_F(CsvSinkTest, CreatesParentDirectoriesAndTruncates) {
  const fs::path path = dir_ / "a" / "b" / "c" / "results.csv";
  {
    CsvSink sink(path.string());
    sink.write(sample_record());
  }
  ASSERT_TRUE(fs::exists(path));
  EXPECT_EQ(parse_csv(read_file(path)).size(), 2u);
  {
    CsvSink sink(path.string());  // a second run to the same path starts over
  }
  EXPECT_EQ(read_file(path), std::string(kExpectedHeader) + "\n");
}

// SIGKILL skips every destructor and atexit handler: only what reached the OS survives. The
// child writes 100 rows and kills itself; all 100 must be complete in the file.
TEST_F(CsvSinkTest, RowsSurviveSigkill) {
  constexpr int kRows = 100;
  const fs::path path = dir_ / "killed.csv";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0) << "fork failed";
  if (child == 0) {
    try {
      CsvSink sink(path.string());
      Record r = sample_record();
      for (int i = 0; i < kRows; ++i) {
        r.case_id = "case/" + std::to_string(i);
        r.value = i;
        sink.write(r);
      }
      std::raise(SIGKILL);
    } catch (...) {
    }
    ::_exit(3);  // reached only if writing failed or the signal did not kill us
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exit status " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGKILL);

  const std::string text = read_file(path);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');  // the last row is complete
  const std::vector<Row> rows = parse_csv(text);
  ASSERT_EQ(rows.size(), size_t{kRows} + 1);
  for (int i = 0; i < kRows; ++i) {
    const Row& row = rows[static_cast<size_t>(i) + 1];
    ASSERT_EQ(row.size(), kColumnCount) << "row " << i;
    EXPECT_EQ(row[4], "case/" + std::to_string(i));
    EXPECT_EQ(row[30], "say \"hi\", then new line and CRLF");
  }
}

// Expects constructing a CsvSink at `path` to throw Error{io} that names the path.
void expect_io_error(const std::string& path) {
  try {
    CsvSink sink(path);
    ADD_FAILURE() << "no error for " << path;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::io) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(CsvSinkErrors, ParentIsARegularFile) {
  // /proc/version is a file: no directory can be made under it, not even by root.
  expect_io_error("/proc/version/x/results.csv");
  expect_io_error("/proc/version/x");
}

TEST_F(CsvSinkTest, PathIsADirectory) { expect_io_error(dir_.string()); }

TEST_F(CsvSinkTest, WriteFailureIsReported) {
  // A file size limit of 0 bytes makes the header's write() fail with EFBIG (SIGXFSZ ignored), on
  // a regular file: /dev/full is refused before any write now. In a child, so the limit stays there.
  const std::string path = (dir_ / "full.csv").string();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit none{0, 0};
    if (::setrlimit(RLIMIT_FSIZE, &none) != 0) ::_exit(2);
    try {
      CsvSink sink(path);
    } catch (const Error& e) {
      const std::string what = e.what();
      const bool named = what.find(path) != std::string::npos && what.find(std::strerror(EFBIG)) != std::string::npos;
      ::_exit(e.kind() == Error::Kind::io && named ? 0 : 3);
    }
    ::_exit(4);  // no error
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: setrlimit failed, 3: wrong error, 4: no error";
}

// What is not a regular file is refused before it is written or opened for writing: a FIFO
// (open() for writing would block until a reader came) and a socket stand in for /dev/null.
TEST_F(CsvSinkTest, FifoIsRefused) {
  const fs::path fifo = dir_ / "fifo.csv";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0) << std::strerror(errno);
  expect_io_error(fifo.string());
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST_F(CsvSinkTest, SocketIsRefused) {
  const fs::path path = dir_ / "socket.csv";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(path.string().size(), sizeof address.sun_path);
  std::strcpy(address.sun_path, path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0) << std::strerror(errno);
  expect_io_error(path.string());
  ::close(fd);
  EXPECT_TRUE(fs::is_socket(path));
}

TEST_F(CsvSinkTest, WriteAfterCloseThrows) {
  CsvSink sink((dir_ / "closed.csv").string());
  sink.close();
  sink.close();  // idempotent
  EXPECT_THROW(sink.write(sample_record()), Error);
}

// The bounds readers rely on (kMaxCsvLine): a text field past kMaxCsvTextField is cut at a
// character boundary and marked, a series past kMaxCsvSamples is thinned evenly, and the row
// reads back.
TEST_F(CsvSinkTest, FieldsAndSamplesAreBoundedSoEveryRowReadsBack) {
  Record r = sample_record();
  r.detail = std::string(kMaxCsvTextField, 'a') + "\xC3\xA9" + std::string(1000, 'b');  // an e-acute past the bound
  r.samples.clear();
  r.metric = "rank_load";  // byte counts from 0: a time's sample of 0 the reader would refuse
  r.unit = "bytes";
  for (size_t i = 0; i < 2 * kMaxCsvSamples + 1; ++i) r.samples.push_back(static_cast<double>(i));
  r.stats.n = static_cast<int64_t>(r.samples.size());
  const fs::path path = dir_ / "bounded.csv";
  {
    CsvSink sink(path.string());
    sink.write(r);
    sink.close();
  }
  const std::vector<Record> back = read_results_csv(path.string());
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].detail.size(), kMaxCsvTextField);
  EXPECT_EQ(back[0].detail.substr(back[0].detail.size() - 6), " [cut]");
  ASSERT_EQ(back[0].samples.size(), kMaxCsvSamples);
  EXPECT_EQ(back[0].samples.front(), 0);
  // Sample i * (2 k + 1) / k of the series 0, 1, 2, ...: evenly spaced, the last near the end.
  EXPECT_EQ(back[0].samples[1], 2);
  EXPECT_EQ(back[0].samples.back(), static_cast<double>((kMaxCsvSamples - 1) * (2 * kMaxCsvSamples + 1) / kMaxCsvSamples));
  EXPECT_EQ(back[0].stats.n, static_cast<int64_t>(2 * kMaxCsvSamples + 1));  // n keeps the full count
  EXPECT_LT(static_cast<int64_t>(fs::file_size(path)), kMaxCsvLine);
}

// A full disk in the middle of a row: the row is taken back, so the file ends at its last whole
// row and reads back without a warning (before, it ended mid-row and compare refused it whole).
TEST_F(CsvSinkTest, AFullDiskLeavesTheFileAtItsLastWholeRow) {
  const fs::path path = dir_ / "full.csv";
  size_t rows = 0;
  std::string what;
  {
    CsvSink sink(path.string());
    const auto header = static_cast<rlim_t>(fs::file_size(path));
    Record r = sample_record();
    r.detail = std::string(300, 'd');  // a row of about 500 bytes: the limit falls inside the 4th
    testing::FileSizeLimit full_disk(header + 1800);
    try {
      for (; rows < 100; ++rows) sink.write(r);
    } catch (const Error& e) {
      what = e.what();
    }
  }
  EXPECT_GT(rows, 0u);
  EXPECT_LT(rows, 100u);
  EXPECT_NE(what.find("the file ends at its last whole row"), std::string::npos) << what;
  std::vector<std::string> warnings;
  CsvReadOptions options;
  options.warn = [&](const std::string& w) { warnings.push_back(w); };
  EXPECT_EQ(read_results_csv(path.string(), options).size(), rows);
  EXPECT_TRUE(warnings.empty());
  const std::string text = read_file(path);
  EXPECT_EQ(text.back(), '\n');
}

}  // namespace
}  // namespace dts
