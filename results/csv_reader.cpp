// read_results_csv: fast-cpp-csv-parser splits and unquotes the rows, fed by a byte source of
// ours that reads the input once (a FIFO or pipe too), bounds every line (core/input_file.h) and
// keeps the header line; this file checks every field against results/SCHEMA.md and names the
// file and line of the first thing that is wrong, because a gate that silently misreads a
// baseline is worse than one that refuses it.
#include "results/csv_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <functional>
#include <istream>
#include <limits>  // fast-cpp-csv-parser uses std::numeric_limits without including it
#include <set>
#include <string_view>

// CSV_IO_NO_THREAD is defined for every file (CMakeLists.txt): no read-ahead thread per file.
// fast-cpp-csv-parser copies file names with strncpy, which GCC flags under -Wall.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-truncation"
#include <libfccp/csv.h>
#pragma GCC diagnostic pop

#include "core/error.h"
#include "core/input_file.h"
#include "results/csv_sink.h"

namespace dts {

namespace {

// Columns of schema version 1 (the first 31 of csv_columns()); version 2 added `samples`, 3 `seed`,
// 4 `repetition`, 5 `mpi_config`.
constexpr size_t kVersion1Columns = 31;
constexpr size_t kColumns = 35;  // csv_columns().size() of this build; the parser's template arity

class RowError : public std::exception {
 public:
  explicit RowError(std::string reason) : reason_(std::move(reason)) {}
  const char* what() const noexcept override { return reason_.c_str(); }

 private:
  std::string reason_;
};

[[noreturn]] void malformed(const std::string& path, unsigned line, const std::string& reason) {
  throw Error(Error::Kind::invalid_argument, path + ":" + std::to_string(line) + ": " + reason);
}

// The byte order mark some spreadsheets put before UTF-8 text: not part of the first column's name.
const std::string kUtf8Bom = "\xEF\xBB\xBF";

// The parser's input: whatever `pull` gives (a file read once, or text in memory), the first
// line kept aside as it passes, since the parser ignores unknown columns silently and we want
// their names.
class HeaderKeepingSource : public io::ByteSourceBase {
 public:
  using Pull = std::function<size_t(char*, size_t)>;
  explicit HeaderKeepingSource(Pull pull, std::string* header) : pull_(std::move(pull)), header_(header) {}
  int read(char* buffer, int size) override {
    const size_t got = pull_(buffer, static_cast<size_t>(size));
    if (!header_done_) {
      const char* end = buffer + got;
      const char* newline = static_cast<const char*>(std::memchr(buffer, '\n', got));
      header_->append(buffer, static_cast<size_t>((newline ? newline : end) - buffer));
      header_done_ = newline != nullptr || got == 0;
    }
    return static_cast<int>(got);
  }

 private:
  Pull pull_;
  std::string* header_;
  bool header_done_ = false;
};

std::vector<std::string> header_names(std::string line, const std::string& path) {
  if (line.empty()) malformed(path, 1, "empty file: no header line");
  if (line.back() == '\r') line.pop_back();
  if (line.rfind(kUtf8Bom, 0) == 0) line.erase(0, kUtf8Bom.size());  // spreadsheets write one
  std::vector<std::string> names;
  size_t start = 0;
  for (;;) {
    const size_t comma = line.find(',', start);
    std::string name = line.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name.size() >= 2 && name.front() == '"' && name.back() == '"') name = name.substr(1, name.size() - 2);
    names.push_back(std::move(name));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return names;
}

int64_t parse_integer(const std::string& column, const std::string& text) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    throw RowError("column '" + column + "': bad integer '" + text + "'");
  }
  return value;
}

// Decimal or exponent form, and inf, -inf, nan (as CsvSink writes them).
double parse_number(const std::string& column, const std::string& text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    throw RowError("column '" + column + "': bad number '" + text + "'");
  }
  return value;
}

Verdict parse_verdict(const std::string& text) {
  for (Verdict v : {Verdict::pass, Verdict::fail, Verdict::skip, Verdict::info, Verdict::timeout, Verdict::xfail,
                    Verdict::xpass}) {
    if (text == name(v)) return v;
  }
  throw RowError("unknown verdict '" + text + "' (pass, fail, skip, info, timeout)");
}

const std::string& required(const std::string& column, const std::string& text) {
  if (text.empty()) throw RowError("column '" + column + "' is empty");
  return text;
}

std::vector<double> parse_samples(const std::string& text) {
  std::vector<double> samples;
  if (text.empty()) return samples;
  size_t start = 0;
  for (;;) {
    const size_t semicolon = text.find(';', start);
    const std::string one = text.substr(start, semicolon == std::string::npos ? std::string::npos : semicolon - start);
    samples.push_back(parse_number("samples", one));
    if (semicolon == std::string::npos) break;
    start = semicolon + 1;
  }
  return samples;
}

// A number as CsvSink writes it (the shortest text that reads back to it), so a message quotes
// the file.
std::string shortest(double value) {
  char buffer[32];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return ec == std::errc() ? std::string(buffer, end) : format_number(value);
}

// Metrics that are a clock's reading, or bytes over one: a timed call takes some time and moves
// its bytes in it, so none of their numbers is 0, negative or infinite. Not here, because 0 is a
// real result of them: derived times (comm_time and exposed_comm_time on one rank, idle_time,
// the plan's predictions), busbw (all_reduce's bus factor is 0 on one rank), counts and errors
// (`wrong`, `check`, ...). `with_bytes`: only a row that moved bytes (a 0-byte call's algbw is 0).
struct ClockMeasured {
  std::string_view metric, unit;
  bool with_bytes;
};
constexpr ClockMeasured kClockMeasured[] = {
    {"time", "seconds", false},           {"step_time", "seconds", false},
    {"p2p_latency", "seconds", false},    {"algbw", "bytes_per_second", true},
    {"p2p_bandwidth", "bytes_per_second", true},
};

// The unit a clock-measured metric is written in, or none for another metric.
const ClockMeasured* clock_metric(std::string_view metric) {
  for (const ClockMeasured& m : kClockMeasured) {
    if (m.metric == metric) return &m;
  }
  return nullptr;
}

bool clock_measured(const Record& r) {
  const ClockMeasured* m = clock_metric(r.metric);
  return m && r.unit == m->unit && (!m->with_bytes || r.labels.bytes > 0);
}

// Why a clock-measured row's `column` value is impossible, or empty.
std::string not_a_reading(const Record& r, const std::string& column, double value) {
  if (value > 0 && std::isfinite(value)) return "";
  return column + " " + shortest(value) + " " + r.unit + ": " + r.metric + " is read from a clock" +
         (r.unit == "seconds" ? "" : " (bytes over a time)") + ", so it is > 0 and finite";
}

// The order statistics of a row with n > 0, or why they cannot be any sample's: each finite, and
// min <= p05 <= median <= p95 <= max. A row without a unit (consensus_spread: a spread of the
// parameters the stack computed) may hold NaN or inf where the stack's results did, and then no
// order: those are the stack's numbers, not a measurement's.
std::string impossible_stats(const Record& r) {
  const std::pair<const char*, double> order[] = {
      {"min", r.stats.min}, {"p05", r.stats.p05}, {"median", r.stats.median}, {"p95", r.stats.p95}, {"max", r.stats.max}};
  for (const auto& [column, value] : order) {
    if (std::isfinite(value)) continue;
    if (r.unit.empty()) return "";
    return column + std::string(" is ") + shortest(value) + ": the statistics of a measurement are finite numbers";
  }
  // The pair farthest apart that is out of order says the most (p05 > p95, not p05 > median).
  for (size_t gap = std::size(order) - 1; gap >= 1; --gap) {
    for (size_t i = 0; i + gap < std::size(order); ++i) {
      const auto& [low, a] = order[i];
      const auto& [high, b] = order[i + gap];
      if (a > b) {
        return low + (" " + shortest(a)) + " > " + high + " " + shortest(b) + ": the order statistics of one sample "
               "hold min <= p05 <= median <= p95 <= max";
      }
    }
  }
  return "";
}

// One row's fields, in csv_columns() order, into a Record. `version` is the row's schema_version.
Record to_record(const std::vector<std::string>& f) {
  const auto& c = csv_columns();
  Record r;
  r.run_id = f[1];
  r.timestamp = f[2];
  r.suite = required(c[3], f[3]);
  r.case_id = required(c[4], f[4]);
  Labels& l = r.labels;
  l.backend = f[5];
  l.backend_version = f[6];
  l.mpi_version = f[7];
  l.mpi_config = f[34];
  l.device = f[8];
  l.host = f[9];
  const auto small = [&](size_t i) {
    const int64_t v = parse_integer(c[i], f[i]);
    if (v < 0 || v > std::numeric_limits<int>::max()) throw RowError("column '" + c[i] + "': out of range '" + f[i] + "'");
    return static_cast<int>(v);
  };
  l.world_size = small(10);
  l.nodes = small(11);
  l.ranks_per_node = small(12);
  l.op = f[13];
  l.dtype = f[14];
  l.bytes = f[15].empty() ? -1 : parse_integer(c[15], f[15]);
  if (!f[15].empty() && l.bytes < 0) throw RowError("column 'bytes': negative '" + f[15] + "'");
  l.placement = f[16];
  l.strategy = f[17];
  l.config = f[18];
  r.metric = required(c[19], f[19]);
  r.value = parse_number(c[20], f[20]);
  r.unit = f[21];
  if (!f[22].empty()) {
    r.stats.n = parse_integer(c[22], f[22]);
    if (r.stats.n < 0) throw RowError("column 'n': negative '" + f[22] + "'");
    if (r.stats.n > 0) {
      r.stats.min = parse_number(c[23], f[23]);
      r.stats.p05 = parse_number(c[24], f[24]);
      r.stats.median = parse_number(c[25], f[25]);
      r.stats.p95 = parse_number(c[26], f[26]);
      r.stats.max = parse_number(c[27], f[27]);
    }
  }
  // A time is never negative: such a row was not written by a clock (a hand edit, a broken tool),
  // and compare would read it as the fastest run ever.
  if (r.unit == "seconds") {
    for (const auto& [column, value] : {std::pair{20, r.value}, {23, r.stats.min}, {24, r.stats.p05},
                                        {25, r.stats.median}, {26, r.stats.p95}, {27, r.stats.max}}) {
      if (value < 0) throw RowError("column '" + c[static_cast<size_t>(column)] + "': a time of " + f[static_cast<size_t>(column)] + " s is negative");
    }
  }
  r.verdict = parse_verdict(f[28]);
  r.threshold = f[29].empty() ? std::numeric_limits<double>::quiet_NaN() : parse_number(c[29], f[29]);
  r.detail = f[30];
  r.samples = parse_samples(f[31]);
  if (f[32].find_first_not_of("0123456789") != std::string::npos || f[32].size() > 20) {
    throw RowError("column 'seed': not a seed '" + f[32] + "'");
  }
  r.seed = f[32];
  if (!f[33].empty()) {
    const int64_t repetition = parse_integer(c[33], f[33]);
    if (repetition < 1 || repetition > std::numeric_limits<int>::max()) {
      throw RowError("column 'repetition': not a repetition (1, 2, ...) '" + f[33] + "'");
    }
    r.repetition = static_cast<int>(repetition);
  }
  if (std::string fault = impossible_measurement(r); !fault.empty()) throw RowError(std::move(fault));
  return r;
}

// The rows of one input. `pull` fills a buffer (fully, but at the end) and bounds its lines;
// `torn` says, once everything was pulled, whether the input's last line lacks its '\n'.
std::vector<Record> read_rows(const HeaderKeepingSource::Pull& pull, const std::function<bool()>& torn,
                              const std::string& path, const CsvReadOptions& options) {
  const std::vector<std::string>& columns = csv_columns();
  static_assert(kColumns == 35, "the parser's arity below lists 35 columns");
  if (columns.size() != kColumns) throw Error(Error::Kind::invalid_argument, "csv_reader: column list out of date");

  std::string header_line;
  std::vector<Record> records;
  unsigned line = 1;
  try {
    // No trimming: a detail's leading spaces are data. Double quotes as RFC 4180. The parser
    // skips a byte order mark itself.
    io::CSVReader<kColumns, io::trim_chars<>, io::double_quote_escape<',', '"'>> in(
        path, std::make_unique<HeaderKeepingSource>(pull, &header_line));
    const std::vector<std::string> header = header_names(header_line, path);
    std::set<std::string> seen;
    std::vector<std::string> unknown;
    for (const std::string& h : header) {
      if (!seen.insert(h).second) malformed(path, 1, "column '" + h + "' appears twice in the header");
      if (std::find(columns.begin(), columns.end(), h) == columns.end()) unknown.push_back(h);
    }
    for (size_t i = 0; i < kVersion1Columns; ++i) {
      if (!seen.count(columns[i])) malformed(path, 1, "missing column '" + columns[i] + "'");
    }
    in.read_header(io::ignore_extra_column | io::ignore_missing_column, columns[0], columns[1], columns[2],
                   columns[3], columns[4], columns[5], columns[6], columns[7], columns[8], columns[9], columns[10],
                   columns[11], columns[12], columns[13], columns[14], columns[15], columns[16], columns[17],
                   columns[18], columns[19], columns[20], columns[21], columns[22], columns[23], columns[24],
                   columns[25], columns[26], columns[27], columns[28], columns[29], columns[30], columns[31],
                   columns[32], columns[33], columns[34]);
    std::vector<std::string> f(kColumns);
    // A row that fails to parse and is the input's last line, without its '\n': a write cut short
    // (a full disk, a writer killed mid-row). It is the end of the file, said in a warning, not a
    // reason to refuse the rows before it.
    const auto torn_end = [&](const std::string& reason) {
      if (in.next_line() != nullptr || !torn()) return false;
      if (options.warn) {
        options.warn(path + ":" + std::to_string(line) + ": the last row is cut short (" + reason +
                     ", and no end of line: a write stopped by a full disk or a killed writer); read as the end of "
                     "the file, the " + std::to_string(records.size()) + " rows before it kept");
      }
      return true;
    };
    for (;;) {
      f[31].clear();  // absent in version 1 files: the parser leaves a missing column untouched
      f[32].clear();  // absent before version 3
      f[33].clear();  // absent before version 4 (every row then is repetition 1)
      f[34].clear();  // absent before version 5 (the library's defaults, as far as the file says)
      line = in.get_file_line() + 1;
      try {
        if (!in.read_row(f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10], f[11], f[12], f[13],
                         f[14], f[15], f[16], f[17], f[18], f[19], f[20], f[21], f[22], f[23], f[24], f[25], f[26],
                         f[27], f[28], f[29], f[30], f[31], f[32], f[33], f[34])) {
          break;
        }
        line = in.get_file_line();
        const int64_t version = parse_integer(columns[0], f[0]);
        if (version > kSchemaVersion) {
          throw RowError("schema_version " + f[0] + " is newer than this build reads (1.." +
                         std::to_string(kSchemaVersion) + "); use a newer dtsuite");
        }
        if (version < 1) throw RowError("schema_version " + f[0] + " is not a version (1.." + std::to_string(kSchemaVersion) + ")");
        if (!unknown.empty()) malformed(path, 1, "unknown column '" + unknown.front() + "'");
        records.push_back(to_record(f));
      } catch (const RowError& e) {
        if (torn_end(e.what())) break;
        throw;
      } catch (const io::error::too_few_columns&) {
        if (torn_end("too few fields")) break;
        throw;
      } catch (const io::error::escaped_string_not_closed&) {
        if (torn_end("a quoted field is not closed")) break;
        throw;
      }
    }
    // A header only: nothing to say about the unknown columns' version, so they are the error.
    if (!unknown.empty()) malformed(path, 1, "unknown column '" + unknown.front() + "'");
  } catch (const RowError& e) {
    malformed(path, line, e.what());
  } catch (const io::error::header_missing&) {
    malformed(path, 1, "empty file: no header line");
  } catch (const io::error::too_few_columns&) {
    malformed(path, line, "too few fields (the header has " + std::to_string(header_names(header_line, path).size()) + ")");
  } catch (const io::error::too_many_columns&) {
    malformed(path, line, "too many fields (the header has " + std::to_string(header_names(header_line, path).size()) + ")");
  } catch (const io::error::escaped_string_not_closed&) {
    malformed(path, line, "a quoted field is not closed on its line");
  } catch (const io::error::line_length_limit_exceeded&) {
    malformed(path, line, "line longer than the parser's limit");
  } catch (const io::error::base& e) {
    malformed(path, line, e.what());
  }
  return records;
}

InputLimits csv_limits(double timeout_seconds) {
  InputLimits limits;
  limits.max_line = kMaxCsvLine;  // results/csv_sink.h: no row CsvSink writes comes near it
  limits.timeout_seconds = timeout_seconds;
  return limits;
}

}  // namespace

std::string impossible_measurement(const Record& r) {
  // A clock's metric in another unit (or none) would slip past every check below, which read the
  // unit, and still join the baseline's rows in compare (its key has no unit).
  if (const ClockMeasured* m = clock_metric(r.metric); m && r.unit != m->unit) {
    return r.metric + " in '" + r.unit + "': a " + r.metric + " is written in " + std::string(m->unit) +
           " (results/SCHEMA.md)";
  }
  if (r.stats.n > 0) {
    if (std::string fault = impossible_stats(r); !fault.empty()) return fault;
    // results/SCHEMA.md, `value`: a timed quantity's (and a bandwidth's) is the median.
    if ((r.unit == "seconds" || r.unit == "bytes_per_second") && !(r.value == r.stats.median)) {
      return "value " + shortest(r.value) + " is not the median " + shortest(r.stats.median) +
             ": a timing's value is its median";
    }
    for (double sample : r.samples) {
      if (!std::isfinite(sample) && !r.unit.empty()) {
        return "samples hold " + shortest(sample) + ": the samples of a measurement are finite numbers";
      }
    }
  }
  if (!clock_measured(r)) return "";
  if (std::string fault = not_a_reading(r, "value", r.value); !fault.empty()) return fault;
  if (r.stats.n > 0) {
    if (std::string fault = not_a_reading(r, "min", r.stats.min); !fault.empty()) return fault;
  }
  for (double sample : r.samples) {
    if (std::string fault = not_a_reading(r, "a sample", sample); !fault.empty()) return fault;
  }
  return "";
}

std::vector<Record> read_results_csv(const std::string& path, const CsvReadOptions& options) {
  InputFile file(path, "results CSV", csv_limits(options.timeout_seconds));
  return read_rows([&](char* buffer, size_t size) { return file.read(buffer, size); },
                   [&] { return !file.ended_with_newline(); }, path, options);
}

std::vector<Record> read_results_csv(std::istream& in, const std::string& name, const CsvReadOptions& options) {
  InputBounds bounds(name, "results CSV", csv_limits(0));
  bool ended = false;
  return read_rows(
      [&](char* buffer, size_t size) {
        in.read(buffer, static_cast<std::streamsize>(size));
        const auto got = static_cast<size_t>(in.gcount());
        if (in.bad()) throw Error(Error::Kind::io, "cannot read results CSV '" + name + "'");
        bounds.account(buffer, got);
        ended = ended || got < size;
        return got;
      },
      [&] { return ended && !bounds.ends_with_newline(); }, name, options);
}

}  // namespace dts
