// What the importers (PyTorch execution traces, Kineto / Chrome traces, Chakra) share: their
// options and the summary each returns. An importer reads one source file, one rank's, as it
// streams (its memory is bounded by what it keeps of a window, never by the file), and hands
// the header, groups and ops to a TraceSink in the order of the rank's issue.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trace/trace.h"

namespace dts::trace {

struct ImportOptions {
  double timeout_seconds = 0;  // a FIFO or pipe that gives no bytes this long: Error{timeout}
  // The rank and world size to write when the source does not say them (-1: the source must).
  int rank = -1;
  int world = -1;
};

struct ImportSummary {
  std::string format;  // "pytorch-et 1.1.0", "kineto", "chakra"
  int rank = -1, world = -1;
  int64_t ops = 0;  // ops handed to the sink, waits included
  // Nodes or events that look like communication but were not imported, by reason ("host-side
  // COMM_COLL node without comm_type": 12).
  std::map<std::string, int64_t> skipped;
  // What a replay of this import must know, one sentence each ("no dtype, reduction op or root:
  // ops replay as bytes, timed only").
  std::vector<std::string> notes;
};

}  // namespace dts::trace
