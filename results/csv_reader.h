// Reads a dtsuite results CSV (the columns of results/SCHEMA.md, every schema version) back
// into Records: the input side of `dtsuite compare` and `dtsuite report`. Sits in results/,
// beside the CsvSink that writes the format.
#pragma once
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "results/record.h"

namespace dts {

struct CsvReadOptions {
  // Seconds to wait for the next bytes of a FIFO or pipe (`compare -T`); 0: no limit.
  double timeout_seconds = 0;
  // Told of what is read past rather than refused: a last row cut short (a write stopped by a
  // full disk or a killed writer: no '\n' at the end, and the row does not parse) ends the file,
  // the rows before it kept. Unset: said nowhere.
  std::function<void(const std::string&)> warn;
};

// Reads a dtsuite results CSV (the columns of results/SCHEMA.md) back into Records, in one pass
// (a FIFO or a pipe reads too), holding one line at a time beside the records.
// Throws Error{io} when the file can't be read or is not a file (a device or a folder, refused
// before reading), Error{timeout} for a FIFO with no bytes for options.timeout_seconds, and
// Error{invalid_argument} with "PATH:LINE: reason" when it is malformed (a line longer than
// kMaxCsvLine, missing/unknown columns, bad number, negative time, unknown verdict,
// schema_version newer than this build, numbers no measurement gives: impossible_measurement).
// The i-th record returned is the input's line i + 2: the header is line 1, and every row is one
// line, none skipped (results/SCHEMA.md), so a reader's user can name a row's line too.
std::vector<Record> read_results_csv(const std::string& path, const CsvReadOptions& options = {});
// The same from a stream; `name` stands for the path in messages.
std::vector<Record> read_results_csv(std::istream& in, const std::string& name, const CsvReadOptions& options = {});

// Why no measurement could give `record`'s numbers (results/SCHEMA.md, *What the readers
// refuse*), in a few words naming the column and its value ("p05 2.1e-05 > p95 1.9e-05: ..."),
// or empty when some run could. A row with statistics (n > 0) has them finite (a row without a
// unit excepted: its NaN are the stack's results) and min <= p05 <= median <= p95 <= max; a
// timing's or bandwidth's value is its median; a clock's reading (`time`, `step_time`,
// `p2p_latency`, and `algbw`, `p2p_bandwidth` of more than 0 bytes) is > 0 and finite in value,
// min and samples. read_results_csv refuses such a row with its line.
std::string impossible_measurement(const Record& record);

}  // namespace dts
