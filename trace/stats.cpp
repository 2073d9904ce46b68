// Operation classes and `trace stats` (trace/stats.h).
#include "trace/stats.h"

#include <algorithm>
#include <cstdio>

#include "core/ranges.h"

namespace dts::trace {

std::string group_text(const std::vector<int>& ranks) { return "g" + format_ranges(ranks); }

std::string dtype_text(const OpClass& c) {
  if (c.kind == OpKind::barrier) return "none";
  return c.dtype < 0 ? "bytes" : std::string(name(static_cast<DType>(c.dtype)));
}

std::string class_id(const OpClass& c) {
  return std::string(name(c.kind)) + "/" + dtype_text(c) + "/" + std::to_string(c.bytes) + "/" + group_text(c.group);
}

int64_t op_bytes(const Op& op, int members) {
  const int64_t element = op.dtype ? static_cast<int64_t>(size_of(*op.dtype)) : 1;
  switch (op.kind) {
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_to_all:
      return op.count * element * members;
    case OpKind::all_to_allv: {
      int64_t total = 0;
      for (const int64_t s : op.in_splits) total += s;
      return total * element;
    }
    case OpKind::barrier:
    case OpKind::wait:
      return 0;
    default:
      return op.count * element;
  }
}

OpClass class_of(const Op& op, const Group& group) {
  OpClass c;
  c.kind = op.kind;
  c.dtype = op.dtype ? static_cast<int>(*op.dtype) : -1;
  c.bytes = op_bytes(op, static_cast<int>(group.ranks.size()));
  c.group = group.ranks;
  return c;
}

void begin_stats(TraceStats& stats, const TraceFolder& folder) {
  stats = TraceStats{};
  stats.folder = folder;
  stats.rank_recorded_seconds.assign(static_cast<size_t>(folder.world), 0.0);
}

void add_to_stats(TraceStats& stats, int rank, const Op& op, const Group& group) {
  ++stats.lines;
  if (op.seconds >= 0) stats.rank_recorded_seconds[static_cast<size_t>(rank)] += op.seconds;
  if (op.kind == OpKind::wait) {
    ++stats.waits;
    return;
  }
  // Once per call: a collective on its group's first rank, a send on its sender, a receive on
  // its receiver.
  const bool counts = !is_collective(op.kind) || group.ranks.front() == rank;
  if (!counts) return;
  ClassTotals& totals = stats.classes[class_of(op, group)];
  ++totals.calls;
  if (op.seconds >= 0) {
    ++totals.timed;
    totals.recorded_seconds += op.seconds;
  }
  if (is_reduction(op.kind) && !op.redop) totals.reduction_unknown = true;
}

TraceStats trace_stats(const std::string& dir, double timeout_seconds) {
  TraceStats stats;
  begin_stats(stats, open_trace_folder(dir, timeout_seconds));
  for (int r = 0; r < stats.folder.world; ++r) {
    TraceReader reader(rank_file(dir, r), timeout_seconds);
    Group g;
    Op op;
    bool is_op = false;
    while (reader.next(g, op, is_op)) {
      if (is_op) add_to_stats(stats, r, op, reader.group_of(op.group));
    }
  }
  return stats;
}

std::string format_stats(const TraceStats& stats) {
  std::vector<std::pair<OpClass, ClassTotals>> rows(stats.classes.begin(), stats.classes.end());
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.first.bytes * a.second.calls > b.first.bytes * b.second.calls;
  });
  std::string out;
  char line[512];
  std::snprintf(line, sizeof(line), "# trace %s: %d ranks, source %s%s%s; %lld operation lines (%lld waits), %zu classes\n",
                stats.folder.dir.c_str(), stats.folder.world, stats.folder.source.c_str(),
                stats.folder.backend.empty() ? "" : ", recorded on ", stats.folder.backend.c_str(),
                static_cast<long long>(stats.lines), static_cast<long long>(stats.waits), rows.size());
  out += line;
  std::snprintf(line, sizeof(line), "%-15s %-7s %14s %-14s %10s %16s %14s\n", "op", "dtype", "bytes", "group", "calls",
                "total bytes", "recorded s");
  out += line;
  int64_t calls = 0, bytes = 0;
  for (const auto& [c, t] : rows) {
    const std::string dtype = dtype_text(c);
    std::string recorded = t.timed == 0 ? "-" : "";
    if (t.timed > 0) {
      char s[32];
      std::snprintf(s, sizeof(s), "%.6f%s", t.recorded_seconds, t.timed < t.calls ? "*" : "");
      recorded = s;
    }
    std::snprintf(line, sizeof(line), "%-15s %-7s %14lld %-14s %10lld %16lld %14s%s\n",
                  std::string(name(c.kind)).c_str(), dtype.c_str(), static_cast<long long>(c.bytes),
                  group_text(c.group).c_str(), static_cast<long long>(t.calls),
                  static_cast<long long>(c.bytes * t.calls), recorded.c_str(),
                  t.reduction_unknown ? "  (reduction op not recorded)" : "");
    out += line;
    calls += t.calls;
    bytes += c.bytes * t.calls;
  }
  std::snprintf(line, sizeof(line), "# %lld calls, %lld bytes; recorded time per rank (s):", static_cast<long long>(calls),
                static_cast<long long>(bytes));
  out += line;
  for (const double s : stats.rank_recorded_seconds) {
    std::snprintf(line, sizeof(line), " %.6f", s);
    out += line;
  }
  out += "\n";
  if (std::any_of(rows.begin(), rows.end(), [](const auto& r) { return r.second.timed < r.second.calls && r.second.timed > 0; })) {
    out += "# *: some calls of the class carry no recorded time\n";
  }
  return out;
}

}  // namespace dts::trace
