// CsvSink: writes Records as CSV rows (the columns of results/SCHEMA.md), one write(2) per row,
// so a run killed with SIGKILL leaves every finished row on disk. Scripts, dashboards and
// `dtsuite compare` read this file; its column names and order are fixed.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "results/record.h"

namespace dts {

// Bounds of one row, so that a reader can refuse what no CsvSink writes (results/csv_reader.h):
// a text field holds at most kMaxCsvTextField bytes (a longer one is cut at a character boundary
// and ends " [cut]"), the samples column at most kMaxCsvSamples samples (evenly spaced over a
// longer series; `n` keeps the full count). With every field at its bound (quotes doubled, 16
// characters a sample) a row stays under 4 MiB, half of kMaxCsvLine.
inline constexpr size_t kMaxCsvTextField = 64 * 1024;
inline constexpr size_t kMaxCsvSamples = 65536;
inline constexpr int64_t kMaxCsvLine = 8 << 20;

// The CSV columns, in order (schema_version ... detail, samples). New columns only ever go at the
// end. Text fields never hold a line break (each becomes a space), so one row is one line.
const std::vector<std::string>& csv_columns();

// RFC 4180 field: quoted (with quotes doubled) when it holds a comma, quote, CR or LF.
std::string csv_escape(std::string_view field);

// Not thread-safe: the harness writes every record from one thread on rank 0.
class CsvSink : public Sink {
 public:
  // Creates parent directories, truncates or creates the file and writes the header.
  // Throws Error{io} naming the path and the OS reason.
  explicit CsvSink(std::string path);
  ~CsvSink() override;
  CsvSink(const CsvSink&) = delete;
  CsvSink& operator=(const CsvSink&) = delete;

  // Appends one row; it has reached the OS (survives the process) when write() returns.
  void write(const Record& record) override;
  void close() override;

  const std::string& path() const { return path_; }

 private:
  void write_all(std::string_view text);

  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;  // bytes of whole rows (and the header) in the file
};

}  // namespace dts
