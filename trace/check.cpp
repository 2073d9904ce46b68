// The trace checker (trace/check.h): every rank's file read once, into per-group sequences of
// collective signatures and per-channel lists of messages, then compared.
#include "trace/check.h"

#include <map>
#include <set>
#include <tuple>

#include "core/error.h"

namespace dts::trace {
namespace {

// What must agree of a collective across its group, in 32 bytes: the checker holds one per
// collective of the trace. all_to_allv's split lists, kept whole, are in a table of their own.
struct Signature {
  int64_t seq = 0;
  int64_t count = 0;
  int32_t root = -1;
  int32_t splits = -1;  // all_to_allv: its entry in the split table; -1: none, or not known
  OpKind kind = OpKind::all_reduce;
  int8_t dtype = -1, redop = -1;  // -1: not said
};
static_assert(sizeof(Signature) <= 32, "the checker's memory per collective is stated in check.h");

struct Splits {
  std::vector<int64_t> in, out;
};

struct GroupState {
  std::vector<int> ranks;
  std::vector<bool> created;                    // by member position
  std::vector<std::vector<Signature>> ops;      // by member position
};

struct Message {
  int rank = 0;
  int64_t seq = 0;
  int64_t bytes = 0;
};

struct Channel {
  std::vector<Message> sends, receives;
};

std::string describe(const Signature& s) {
  std::string out(name(s.kind));
  if (s.dtype >= 0) out += " " + std::string(name(static_cast<DType>(s.dtype)));
  if (s.redop >= 0) out += " " + std::string(name(static_cast<ReduceOp>(s.redop)));
  if (s.kind == OpKind::all_to_allv) {
    out += s.splits < 0 ? " (splits not known)" : " (splits)";
  } else if (s.kind != OpKind::barrier) {
    out += " of " + std::to_string(s.count) + (s.dtype >= 0 ? " elements" : " bytes");
  }
  if (s.root >= 0) out += " root " + std::to_string(s.root);
  return out;
}

bool same(const Signature& a, const Signature& b) {
  return a.kind == b.kind && a.dtype == b.dtype && a.redop == b.redop && a.count == b.count && a.root == b.root;
}

int64_t bytes_of(const Op& op) {
  return op.count * (op.dtype ? static_cast<int64_t>(size_of(*op.dtype)) : 1);
}

}  // namespace

CheckSummary check_trace(const std::string& dir, double timeout_seconds, TraceStats* stats) {
  const TraceFolder folder = open_trace_folder(dir, timeout_seconds);
  if (stats) begin_stats(*stats, folder);
  CheckSummary summary;
  summary.world = folder.world;
  // A communicator is known by its members and, among communicators of the same members, by the
  // order of creation: two ranks that split the same groups in the same order agree on both.
  std::map<std::pair<std::vector<int>, int>, size_t> group_index;
  std::vector<GroupState> groups;
  std::map<std::tuple<size_t, int, int, int64_t>, Channel> channels;  // group, from, to, tag
  std::vector<Splits> splits;

  for (int r = 0; r < folder.world; ++r) {
    TraceReader reader(rank_file(dir, r), timeout_seconds);
    std::map<int, size_t> local;  // this file's group id -> groups[]
    std::map<std::vector<int>, int> ordinals;
    std::set<int64_t> pending;  // async ops no wait has completed yet
    Group g;
    Op op;
    bool is_op = false;
    auto where = [&](int64_t seq) { return "rank " + std::to_string(r) + "'s operation #" + std::to_string(seq); };
    while (reader.next(g, op, is_op)) {
      if (!is_op) {
        const int ordinal = ordinals[g.ranks]++;
        auto [it, added] = group_index.try_emplace({g.ranks, ordinal}, groups.size());
        if (added) {
          GroupState state;
          state.ranks = g.ranks;
          state.created.assign(g.ranks.size(), false);
          state.ops.resize(g.ranks.size());
          groups.push_back(std::move(state));
          summary.group_keys.emplace_back(g.ranks, ordinal);
        }
        local[g.id] = it->second;
        GroupState& state = groups[it->second];
        for (size_t m = 0; m < state.ranks.size(); ++m) {
          if (state.ranks[m] == r) state.created[m] = true;
        }
        continue;
      }
      ++summary.ops;
      if (stats) add_to_stats(*stats, r, op, reader.group_of(op.group));  // before the splits move below
      const size_t gi = local.at(op.group);
      GroupState& state = groups[gi];
      size_t me = 0;
      while (state.ranks[me] != r) ++me;
      if (op.kind == OpKind::wait) {
        for (const int64_t target : op.waits) {
          if (pending.erase(target) == 0) {
            throw Error(Error::Kind::invalid_argument,
                        "trace " + quoted_input(dir) + ": " + where(op.seq) + " waits for #" + std::to_string(target) +
                            ", which is not an asynchronous operation of rank " + std::to_string(r) +
                            " still in flight (never issued async, or already waited for)");
          }
        }
        continue;
      }
      if (op.async) pending.insert(op.seq);
      if (is_collective(op.kind)) {
        Signature s;
        s.seq = op.seq;
        s.kind = op.kind;
        s.dtype = static_cast<int8_t>(op.dtype ? static_cast<int>(*op.dtype) : -1);
        s.redop = static_cast<int8_t>(op.redop ? static_cast<int>(*op.redop) : -1);
        s.count = op.count;
        s.root = op.root;
        if (op.kind == OpKind::all_to_allv && !op.splits_truncated) {
          s.splits = static_cast<int32_t>(splits.size());
          splits.push_back({std::move(op.in_splits), std::move(op.out_splits)});
        }
        state.ops[me].push_back(s);
        continue;
      }
      const int64_t bytes = bytes_of(op);
      if (op.kind == OpKind::send || op.kind == OpKind::send_recv) {
        channels[{gi, r, state.ranks[static_cast<size_t>(op.peer)], op.tag}].sends.push_back({r, op.seq, bytes});
      }
      if (op.kind == OpKind::recv || op.kind == OpKind::send_recv) {
        const int from = state.ranks[static_cast<size_t>(op.kind == OpKind::recv ? op.peer : op.source)];
        channels[{gi, from, r, op.tag}].receives.push_back({r, op.seq, bytes});
      }
    }
    summary.unwaited += static_cast<int64_t>(pending.size());
  }
  summary.groups = static_cast<int64_t>(groups.size());

  const std::string prefix = "trace " + quoted_input(dir) + ": ";
  for (const GroupState& state : groups) {
    const std::string group = "group " + brief_ranks(state.ranks);
    // The reference: the first member that issued anything (a group none uses is harmless).
    size_t ref = state.ranks.size();
    for (size_t m = 0; m < state.ranks.size(); ++m) {
      if (!state.ops[m].empty()) {
        ref = m;
        break;
      }
    }
    if (ref == state.ranks.size()) continue;
    const std::vector<Signature>& expected = state.ops[ref];
    const std::string ref_rank = "rank " + std::to_string(state.ranks[ref]);
    for (size_t m = 0; m < state.ranks.size(); ++m) {
      const std::string rank = "rank " + std::to_string(state.ranks[m]);
      if (!state.created[m]) {
        throw Error(Error::Kind::invalid_argument,
                    prefix + rank + " never creates " + group + ", on which " + ref_rank + " issues " +
                        std::to_string(expected.size()) + " operations (first #" + std::to_string(expected[0].seq) +
                        ", " + describe(expected[0]) + "): the job would hang there");
      }
      const std::vector<Signature>& mine = state.ops[m];
      const size_t common = std::min(mine.size(), expected.size());
      for (size_t k = 0; k < common; ++k) {
        if (!same(mine[k], expected[k])) {
          throw Error(Error::Kind::invalid_argument,
                      prefix + rank + "'s operation #" + std::to_string(mine[k].seq) + " (" + describe(mine[k]) +
                          ", the " + std::to_string(k + 1) + "th on " + group + ") does not match " + ref_rank +
                          "'s #" + std::to_string(expected[k].seq) + " (" + describe(expected[k]) +
                          "): the job would hang or compute garbage there");
        }
      }
      if (mine.size() != expected.size()) {
        const bool short_mine = mine.size() < expected.size();
        const Signature& extra = short_mine ? expected[common] : mine[common];
        throw Error(Error::Kind::invalid_argument,
                    prefix + (short_mine ? ref_rank : rank) + "'s operation #" + std::to_string(extra.seq) + " (" +
                        describe(extra) + ", the " + std::to_string(common + 1) + "th on " + group + ") has no partner on " +
                        (short_mine ? rank : ref_rank) + ", which issues " + std::to_string(common) +
                        " there: the job would hang");
      }
    }
    // all_to_allv: what member i sends member j is what j expects from i.
    for (size_t k = 0; k < expected.size(); ++k) {
      if (expected[k].kind != OpKind::all_to_allv) continue;
      for (size_t i = 0; i < state.ranks.size(); ++i) {
        const Signature& a = state.ops[i][k];
        if (a.splits < 0) continue;
        for (size_t j = 0; j < state.ranks.size(); ++j) {
          const Signature& b = state.ops[j][k];
          if (b.splits < 0) continue;
          const int64_t sent = splits[static_cast<size_t>(a.splits)].in[j];
          const int64_t expected_here = splits[static_cast<size_t>(b.splits)].out[i];
          if (sent == expected_here) continue;
          throw Error(Error::Kind::invalid_argument,
                      prefix + "rank " + std::to_string(state.ranks[i]) + "'s operation #" + std::to_string(a.seq) +
                          " (all_to_allv on " + group + ") sends " + std::to_string(sent) + " elements to rank " +
                          std::to_string(state.ranks[j]) + ", whose #" + std::to_string(b.seq) + " receives " +
                          std::to_string(expected_here) + " from it");
        }
      }
    }
  }

  for (const auto& [key, channel] : channels) {
    const auto& [gi, from, to, tag] = key;
    const std::string pair = "rank " + std::to_string(from) + " to rank " + std::to_string(to) +
                             (tag ? " (tag " + std::to_string(tag) + ")" : "");
    const size_t common = std::min(channel.sends.size(), channel.receives.size());
    for (size_t k = 0; k < common; ++k) {
      const Message& s = channel.sends[k];
      const Message& v = channel.receives[k];
      if (s.bytes != v.bytes) {
        throw Error(Error::Kind::invalid_argument,
                    prefix + "rank " + std::to_string(s.rank) + "'s operation #" + std::to_string(s.seq) + " sends " +
                        std::to_string(s.bytes) + " bytes, " + pair + ", where rank " + std::to_string(v.rank) +
                        "'s #" + std::to_string(v.seq) + " receives " + std::to_string(v.bytes));
      }
    }
    if (channel.sends.size() != channel.receives.size()) {
      const bool more_sends = channel.sends.size() > channel.receives.size();
      const Message& extra = more_sends ? channel.sends[common] : channel.receives[common];
      throw Error(Error::Kind::invalid_argument,
                  prefix + "rank " + std::to_string(extra.rank) + "'s operation #" + std::to_string(extra.seq) + " (" +
                      (more_sends ? "a send, " : "a receive, ") + pair + ") has no matching " +
                      (more_sends ? "receive" : "send") + ": the job would hang");
    }
    summary.messages += static_cast<int64_t>(common);
  }
  return summary;
}

}  // namespace dts::trace
