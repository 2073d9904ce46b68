// What a trace holds, by operation class: `dtsuite trace stats`, and the cases of the replay
// suite. A class is (op, dtype, bytes, group): bytes as nccl-tests counts them (a collective's
// whole buffer, count x members for all_gather, reduce_scatter and all_to_all; a message's
// bytes for point-to-point), the group by its global ranks.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trace/trace.h"

namespace dts::trace {

struct OpClass {
  OpKind kind = OpKind::all_reduce;
  int dtype = -1;  // DType, or -1 where the trace says bytes only
  int64_t bytes = 0;
  std::vector<int> group;
  auto operator<=>(const OpClass&) const = default;
};

// "all_reduce/f32/4096/g0-3", "send/bytes/64/g0,2", "barrier/none/0/g0-3": a case id's last
// part names the group.
std::string class_id(const OpClass& c);
// The class's dtype as a case id and a row's label say it: its name, "bytes" where the trace has
// none, "none" for a barrier.
std::string dtype_text(const OpClass& c);
std::string group_text(const std::vector<int>& ranks);

// nccl-tests' bytes of `op` on a group of `members` ranks; all_to_allv: the bytes this rank sends.
int64_t op_bytes(const Op& op, int members);
OpClass class_of(const Op& op, const Group& group);

struct ClassTotals {
  int64_t calls = 0;          // each counted once: on the group's first rank (a send on its sender, a recv on its receiver)
  int64_t timed = 0;          // calls whose recorded time is known
  double recorded_seconds = 0;  // their sum, on that rank
  bool reduction_unknown = false;
};

struct TraceStats {
  TraceFolder folder;
  int64_t lines = 0;  // ops over all ranks, waits included
  int64_t waits = 0;
  std::map<OpClass, ClassTotals> classes;
  std::vector<double> rank_recorded_seconds;  // per rank, the recorded time of its ops where known
};

TraceStats trace_stats(const std::string& dir, double timeout_seconds = 0);
// The same, a line at a time, for a reader that walks the trace anyway (check_trace): begin with
// the folder, then add each op line of each rank, waits included.
void begin_stats(TraceStats& stats, const TraceFolder& folder);
void add_to_stats(TraceStats& stats, int rank, const Op& op, const Group& group);
// The table `trace stats` prints: a line per class, largest total bytes first, then totals.
std::string format_stats(const TraceStats& stats);

}  // namespace dts::trace
