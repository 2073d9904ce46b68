// The checks a trace must pass before a replay launches anything, run in one process over every
// rank's file: what would hang or corrupt a real job is found here, named by rank and operation
// index, instead of as a replay that never ends.
//
// - Every group's members issue the same collectives in the same order: the same op, count,
//   dtype, reduction op and root (all_to_allv: rank i sends rank j what rank j receives from i).
//   A group used by one member and never created by another is the same fault.
// - Sends and receives pair up: on each (group, sender, receiver, tag), the n-th send and the
//   n-th receive move the same bytes, and there are as many of each.
// - Every wait names an earlier asynchronous op of its rank that no wait completed before.
//
// What it cannot see: an order across groups that deadlocks (rank 0 waits in group A while rank
// 1 waits in group B) and blocking sends that only a library's eager protocol lets through; a
// replay's watchdog names those. Memory: 32 bytes per collective and 24 per message of the trace
// (all_to_allv's split lists kept whole besides), since every rank's sequence is compared with
// every other's; the files themselves stream, a line at a time.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "trace/stats.h"
#include "trace/trace.h"

namespace dts::trace {

struct CheckSummary {
  int world = 0;
  int64_t ops = 0;     // over all ranks, waits included
  int64_t groups = 0;  // distinct communicators
  int64_t messages = 0;  // point-to-point pairs matched
  int64_t unwaited = 0;  // asynchronous ops no wait names (a replay completes them at the end)
  // Every communicator by its members (global ranks, in group-rank order) and its place among
  // those of the same members (0: the first made), in the order first seen: a replay makes them
  // in this order on every rank.
  std::vector<std::pair<std::vector<int>, int>> group_keys;
};

// Throws Error{invalid_argument}, one line naming the rank, the operation's index (its seq) and
// what does not match; Error{io} or Error{timeout} for a file that cannot be read. With `stats`,
// the same pass also counts the trace as trace_stats does (a replay needs both: one reading).
CheckSummary check_trace(const std::string& dir, double timeout_seconds = 0, TraceStats* stats = nullptr);

}  // namespace dts::trace
