// Command-line parsing for the dtsuite binary (CLI11). Flags of `run` mirror nccl-tests
// (-b -e -f -n -w -d -o -r -c -T) so its users feel at home. Parsing happens before MPI starts;
// a bad flag or value becomes UsageError, reported as one line and exit code 2.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "suites/suite.h"

namespace dts {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Command {
  enum class Kind { run, list, help, version } kind = Kind::help;
  std::string help_text;  // for Kind::help
  RunOptions run;
  std::string csv_path;   // empty: out/dtsuite-<run id>.csv
  size_t chunk_bytes = size_t{1} << 17;
  int fault_rank = -1;
  int64_t fault_after = 0;
};

// Throws UsageError with a one-line message on any bad flag or value.
Command parse_command_line(int argc, char** argv);

// "8", "64K", "16M", "1G" (powers of 1024, as nccl-tests) -> bytes.
int64_t parse_size(const std::string& text);

}  // namespace dts
