// CsvSink implementation. Rows go straight to the file descriptor with write(2): no user-space
// buffer can hold back a finished row when the process dies. Format rules: results/SCHEMA.md.
#include "results/csv_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "core/error.h"
#include "results/output_paths.h"

namespace dts {

namespace {

[[noreturn]] void throw_io(const std::string& what, const std::string& path, const std::string& reason) {
  throw Error(Error::Kind::io, what + " '" + path + "': " + reason);
}

// One physical line per row, so line-based tools and readers (grep, tail -f, fast-cpp-csv-parser,
// which splits lines before it unquotes) see whole rows: each line break (CRLF, CR or LF) inside a
// field becomes one space.
std::string single_line(std::string_view field) {
  std::string line;
  line.reserve(field.size());
  for (size_t i = 0; i < field.size(); ++i) {
    const char c = field[i];
    if (c == '\r' && i + 1 < field.size() && field[i + 1] == '\n') continue;  // CRLF: the LF speaks
    line += (c == '\r' || c == '\n') ? ' ' : c;
  }
  return line;
}

// At most kMaxCsvTextField bytes, cut before a UTF-8 continuation byte so no character is split.
std::string bounded(std::string text) {
  if (text.size() <= kMaxCsvTextField) return text;
  static constexpr std::string_view kCut = " [cut]";
  size_t keep = kMaxCsvTextField - kCut.size();
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;
  text.resize(keep);
  text += kCut;
  return text;
}

// Per-iteration samples, ';'-separated, %.9g: nine significant digits resolve a nanosecond in a
// one-second iteration, and keep a 1000-iteration row near 16 KB. A longer series than
// kMaxCsvSamples is written evenly thinned (sample i * size / kMaxCsvSamples), which keeps its
// distribution for `compare --samples` and the row within its bound.
std::string format_samples(const std::vector<double>& all) {
  std::vector<double> thinned;
  if (all.size() > kMaxCsvSamples) {
    thinned.reserve(kMaxCsvSamples);
    for (size_t i = 0; i < kMaxCsvSamples; ++i) thinned.push_back(all[i * all.size() / kMaxCsvSamples]);
  }
  const std::vector<double>& samples = all.size() > kMaxCsvSamples ? thinned : all;
  std::string text;
  for (double sample : samples) {
    if (!text.empty()) text += ';';
    if (std::isnan(sample)) {
      text += "nan";
    } else {
      char buffer[32];  // "%.9g" needs at most 16 chars ("-1.23456789e-308")
      std::snprintf(buffer, sizeof buffer, "%.9g", sample);
      text += buffer;
    }
  }
  return text;
}

// Builds one row field by field, putting the separators in.
class RowBuilder {
 public:
  RowBuilder& text(std::string_view field) {
    next();
    row_ += csv_escape(bounded(single_line(field)));
    return *this;
  }
  // Already bounded by format_samples: digits, signs, '.', 'e', ';' and "nan" need no quoting.
  RowBuilder& samples(const std::string& field) {
    next();
    row_ += field;
    return *this;
  }
  RowBuilder& integer(int64_t value) {
    next();
    char buffer[24];  // int64 needs at most 20 chars with its sign
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
    row_.append(buffer, result.ptr);
    return *this;
  }
  // Shortest text that reads back to the same double; inf, -inf and nan spelled so everywhere.
  RowBuilder& number(double value) {
    next();
    if (std::isnan(value)) {
      row_ += "nan";  // a NaN's sign means nothing; "-nan" would only confuse readers
    } else if (std::isinf(value)) {
      row_ += value > 0 ? "inf" : "-inf";
    } else {
      char buffer[32];  // the longest shortest form, "-2.2250738585072014e-308", is 24 chars
      const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
      row_.append(buffer, result.ptr);
    }
    return *this;
  }
  RowBuilder& empty() {
    next();
    return *this;
  }
  std::string finish() && {
    row_ += '\n';
    return std::move(row_);
  }

 private:
  void next() {
    if (!first_) row_ += ',';
    first_ = false;
  }
  std::string row_;
  bool first_ = true;
};

std::string format_row(const Record& r) {
  RowBuilder row;
  row.integer(kSchemaVersion).text(r.run_id).text(r.timestamp).text(r.suite).text(r.case_id);
  const Labels& l = r.labels;
  row.text(l.backend).text(l.backend_version).text(l.mpi_version).text(l.device).text(l.host);
  row.integer(l.world_size).integer(l.nodes).integer(l.ranks_per_node).text(l.op).text(l.dtype);
  if (l.bytes >= 0) {
    row.integer(l.bytes);
  } else {
    row.empty();  // -1: not applicable
  }
  row.text(l.placement).text(l.strategy).text(l.config);
  row.text(r.metric).number(r.value).text(r.unit);
  if (r.stats.n > 0) {
    row.integer(r.stats.n).number(r.stats.min).number(r.stats.p05).number(r.stats.median);
    row.number(r.stats.p95).number(r.stats.max);
  } else {
    // No distribution (a single value): n, min, p05, median, p95, max all empty.
    row.empty().empty().empty().empty().empty().empty();
  }
  row.text(name(r.verdict));
  if (std::isnan(r.threshold)) {
    row.empty();  // no threshold
  } else {
    row.number(r.threshold);
  }
  row.text(r.detail);
  row.samples(format_samples(r.samples));  // schema 2
  row.text(r.seed);                      // schema 3
  row.integer(r.repetition);             // schema 4
  row.text(l.mpi_config);                // schema 5
  return std::move(row).finish();
}

}  // namespace

const std::vector<std::string>& csv_columns() {
  static const std::vector<std::string> columns{
      "schema_version", "run_id", "timestamp", "suite", "case", "backend", "backend_version",
      "mpi_version", "device", "host", "world_size", "nodes", "ranks_per_node", "op", "dtype",
      "bytes", "placement", "strategy", "config", "metric", "value", "unit", "n", "min", "p05",
      "median", "p95", "max", "verdict", "threshold", "detail", "samples", "seed", "repetition", "mpi_config"};
  return columns;
}

std::string csv_escape(std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(field);
  std::string quoted;
  quoted.reserve(field.size() + 2);
  quoted += '"';
  for (char c : field) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  quoted += '"';
  return quoted;
}

CsvSink::CsvSink(std::string path) : path_(std::move(path)) {
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) throw_io("cannot create directory for CSV file", path_, ec.message());
  }
  // 0644 before umask: results are for reading by others (CI, dashboards).
  fd_ = open_output_file({"CSV file", path_}, O_WRONLY);
  std::string header;
  for (const std::string& column : csv_columns()) {
    if (!header.empty()) header += ',';
    header += column;
  }
  header += '\n';
  try {
    write_all(header);
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

CsvSink::~CsvSink() {
  if (fd_ >= 0) ::close(fd_);  // no throw from a destructor; close() reports errors
}

void CsvSink::write(const Record& record) {
  if (fd_ < 0) throw Error(Error::Kind::io, "CSV file '" + path_ + "' is closed");
  write_all(format_row(record));
}

void CsvSink::close() {
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw_io("cannot close CSV file", path_, std::strerror(errno));
}

void CsvSink::write_all(std::string_view text) {
  // One write(2) per row in practice; the loop covers partial writes and signals. A write that
  // fails part-way (a full disk) is taken back to the last whole row, so the file never ends in
  // a torn one: readers and `compare` keep every row before it.
  const off_t row_start = size_;
  while (!text.empty()) {
    const ssize_t written = ::write(fd_, text.data(), text.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      const bool taken_back = size_ == row_start || (::ftruncate(fd_, row_start) == 0 &&
                                                     ::lseek(fd_, row_start, SEEK_SET) == row_start);
      size_ = taken_back ? row_start : size_;
      throw_io("cannot write CSV file", path_,
               std::string(std::strerror(error)) + (taken_back ? "; the file ends at its last whole row" : ""));
    }
    size_ += written;
    text.remove_prefix(static_cast<size_t>(written));
  }
}

}  // namespace dts
