// Reads a dtsuite results CSV (the columns of results/SCHEMA.md, schema versions 1 and 2) back
// into Records: the input side of `dtsuite compare` and `dtsuite report`. Sits in results/,
// beside the CsvSink that writes the format.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "results/record.h"

namespace dts {

// Reads a dtsuite results CSV (the columns of results/SCHEMA.md) back into Records.
// Throws Error{Kind::io} when the file can't be read, Error{Kind::invalid_argument} with
// "PATH:LINE: reason" when it is malformed (missing/unknown columns, bad number, unknown verdict,
// schema_version newer than this build).
std::vector<Record> read_results_csv(const std::string& path);
// The same from a stream that can seek back to its start (the header is read twice): a file or a
// std::istringstream. `name` stands for the path in messages.
std::vector<Record> read_results_csv(std::istream& in, const std::string& name);

}  // namespace dts
