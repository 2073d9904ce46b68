// The Chakra importer (trace/import_chakra.h): the file's bytes (inflated as they pass when gzip),
// Chakra's varint framing of messages, a protobuf wire-format cursor over one message at a time,
// and the mapping of Node messages to ops. Field numbers and enum values are those published in
// Chakra's schema/protobuf/et_def.proto.
#include "trace/import_chakra.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "trace/byte_source.h"
#include "core/input_file.h"

namespace dts::trace {
namespace {

// The ranks that the process groups of one trace may list in all (64 MiB of ints): a rank of a job of
// 2^20 ranks belongs to a few groups, far below it. Groups listed beyond it are not mapped (their ops
// replay on the world), so that no trace can grow the importer's memory without bound.
constexpr size_t kMaxGroupRanks = size_t{1} << 24;

// et_def.proto's NodeType and CollectiveCommType values that the importer reads.
constexpr uint64_t kMetadataNode = 1, kSendNode = 5, kRecvNode = 6, kCollNode = 7;
enum CommType : int64_t {
  kAllReduce, kReduce, kAllGather, kGather, kScatter, kBroadcast, kAllToAll, kReduceScatter, kReduceScatterBlock,
  kBarrier
};

constexpr const char* kNoDtype = "no dtype, reduction op or root: ops replay as bytes, timed only";

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw Error(Error::Kind::invalid_argument, quoted_input(path) + ": " + why);
}

// Chakra's framing (protolib encodeMessage): each message prefixed by its length as a varint.
class MessageReader {
 public:
  MessageReader(ByteSource& in, const std::string& path) : in_(in), path_(path), buffer_(1 << 16) {}

  // The next message into `message`: false at the end of the file, between two messages.
  bool next(std::string& message) {
    ++index_;
    start_ = offset_;
    uint64_t length = 0;
    for (int i = 0;; ++i) {
      const int c = byte();
      if (c < 0) {
        if (i == 0) return false;
        truncated();
      }
      // The tenth byte holds bit 63 only; more is a varint of over 64 bits or over 10 bytes.
      if (i == 9 && c > 1) bad("a length prefix at byte " + std::to_string(start_) + " is longer than 10 bytes");
      length |= static_cast<uint64_t>(c & 0x7f) << (7 * i);
      if (!(c & 0x80)) break;
    }
    if (length > static_cast<uint64_t>(kMaxChakraMessage)) {
      bad("a message of " + std::to_string(length) + " bytes at byte " + std::to_string(start_) +
          ", above the 64 MiB one may hold");
    }
    message.clear();
    while (message.size() < length) {
      if (at_ == end_ && !refill()) truncated();
      const size_t n = std::min(end_ - at_, static_cast<size_t>(length) - message.size());
      message.append(buffer_.data() + at_, n);
      at_ += n;
      offset_ += static_cast<int64_t>(n);
    }
    return true;
  }
  int64_t start() const { return start_; }  // where the last message's length prefix starts
  // An error of the framing: in the first message, the file may be of another kind altogether.
  [[noreturn]] void bad(const std::string& why) const {
    const char* kind = index_ == 1 ? "not a Chakra ET file (or a corrupt one): " : "";
    fail(path_, kind + why + counted());
  }

 private:
  [[noreturn]] void truncated() const {
    const std::string at = "truncated Chakra trace at byte " + std::to_string(offset_);
    if (index_ == 1) fail(path_, "not a Chakra ET file, or a " + at + " (inside its first message)" + counted());
    bad(at + ", inside the message from byte " + std::to_string(start_));
  }
  std::string counted() const { return in_.gzip() ? " (bytes counted decompressed)" : ""; }
  bool refill() {
    at_ = 0;
    end_ = in_.read(buffer_.data(), buffer_.size());
    return end_ > 0;
  }
  int byte() {
    if (at_ == end_ && !refill()) return -1;
    ++offset_;
    return static_cast<uint8_t>(buffer_[at_++]);
  }

  ByteSource& in_;
  const std::string& path_;
  std::vector<char> buffer_;
  size_t at_ = 0, end_ = 0;
  int64_t offset_ = 0, start_ = 0, index_ = 0;
};

// What makes a message unreadable; the caller names the file and the message's byte.
struct Malformed {
  const char* why;
};

// The protobuf wire format over one message in memory.
class Cursor {
 public:
  explicit Cursor(std::string_view bytes) : at_(bytes.data()), end_(bytes.data() + bytes.size()) {}
  bool more() const { return at_ < end_; }

  uint64_t varint() {
    uint64_t value = 0;
    for (int i = 0; i < 10; ++i) {
      if (at_ == end_) throw Malformed{"a varint runs past the end of its message"};
      const auto c = static_cast<uint8_t>(*at_++);
      if (i == 9 && c > 1) break;
      value |= static_cast<uint64_t>(c & 0x7f) << (7 * i);
      if (!(c & 0x80)) return value;
    }
    throw Malformed{"a varint longer than 10 bytes"};
  }
  uint64_t fixed(int bytes) {
    if (end_ - at_ < bytes) throw Malformed{"a fixed-width field runs past the end of its message"};
    uint64_t value = 0;
    for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(static_cast<uint8_t>(*at_++)) << (8 * i);
    return value;
  }
  std::string_view bytes() {
    const uint64_t length = varint();
    if (length > static_cast<uint64_t>(end_ - at_)) throw Malformed{"a field's length runs past its message's end"};
    const std::string_view out(at_, static_cast<size_t>(length));
    at_ += static_cast<size_t>(length);
    return out;
  }
  // The next field's number and wire type.
  void field(uint64_t& number, uint64_t& wire) {
    const uint64_t tag = varint();
    number = tag >> 3;
    wire = tag & 7;
    if (number == 0 || number >= (uint64_t{1} << 29)) throw Malformed{"a field number of 0 or above 2^29"};
  }
  void skip(uint64_t wire) {
    switch (wire) {
      case 0: varint(); return;
      case 1: fixed(8); return;
      case 2: bytes(); return;
      case 5: fixed(4); return;
      default: throw Malformed{"a field of wire type 3, 4, 6 or 7 (groups, not in Chakra's schema)"};
    }
  }

 private:
  const char* at_;
  const char* end_;
};

// An AttributeProto's value as the importer reads it: any integer kind (int32_val ... sfixed64_val,
// bool_val, an integral double_val or float_val: producers differ in the kind they write), or text.
struct Value {
  bool present = false;
  std::optional<int64_t> integer;
  std::string_view text;
};

std::optional<int64_t> integral(double value) {
  if (!std::isfinite(value) || value != std::floor(value) || std::fabs(value) > 9007199254740992.0) return std::nullopt;
  return static_cast<int64_t>(value);
}

std::optional<int64_t> unsigned_value(uint64_t value) {
  if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return static_cast<int64_t>(value);
}

// One AttributeProto: name (1) and its oneof value (3..32; a later value replaces an earlier one).
Value parse_attr(std::string_view bytes, std::string_view& name) {
  Value v;
  v.present = true;
  Cursor c(bytes);
  while (c.more()) {
    uint64_t n = 0, wire = 0;
    c.field(n, wire);
    std::optional<int64_t> got;
    bool is_value = true;
    if (n == 1 && wire == 2) {
      name = c.bytes();
      is_value = false;
    } else if (wire == 0 && (n == 7 || n == 9 || n == 11 || n == 13 || n == 15 || n == 17 || n == 27)) {
      const uint64_t x = c.varint();
      const auto x32 = static_cast<uint32_t>(x);
      got = n == 7    ? std::optional<int64_t>(static_cast<int32_t>(x32))  // int32: sign-extended to 64 bits
            : n == 9  ? std::optional<int64_t>(static_cast<int64_t>(x))
            : n == 11 ? std::optional<int64_t>(x32)
            : n == 13 ? unsigned_value(x)
            : n == 15 ? std::optional<int64_t>(static_cast<int32_t>(x32 >> 1) ^ -static_cast<int32_t>(x32 & 1))
            : n == 17 ? std::optional<int64_t>(static_cast<int64_t>(x >> 1) ^ -static_cast<int64_t>(x & 1))
                      : std::optional<int64_t>(x != 0);
    } else if (wire == 5 && (n == 5 || n == 19 || n == 23)) {
      const auto x = static_cast<uint32_t>(c.fixed(4));
      float f = 0;
      std::memcpy(&f, &x, sizeof f);
      got = n == 5    ? integral(f)
            : n == 19 ? std::optional<int64_t>(x)
                      : std::optional<int64_t>(static_cast<int32_t>(x));
    } else if (wire == 1 && (n == 3 || n == 21 || n == 25)) {
      const uint64_t x = c.fixed(8);
      double d = 0;
      std::memcpy(&d, &x, sizeof d);
      got = n == 3 ? integral(d) : n == 21 ? unsigned_value(x) : std::optional<int64_t>(static_cast<int64_t>(x));
    } else if (wire == 2 && (n == 29 || n == 31)) {
      v.text = c.bytes();
      v.integer.reset();
      is_value = false;
    } else {
      c.skip(wire);  // doc_string, the lists, fields of later schemas
      is_value = false;
    }
    if (is_value) {
      v.integer = got;
      v.text = {};
    }
  }
  return v;
}

// The fields of a Node that the importer reads.
struct NodeFields {
  uint64_t type = 0, duration_micros = 0;
  std::string_view name, input_values;  // input_values: inputs (an IOInfo), its values
  Value comm_type, comm_size, comm_src, comm_dst, comm_tag, pg_name, stream;
};

void parse_node(std::string_view bytes, NodeFields& node) {
  Cursor c(bytes);
  while (c.more()) {
    uint64_t n = 0, wire = 0;
    c.field(n, wire);
    if (n == 3 && wire == 0) {
      node.type = c.varint();
    } else if (n == 7 && wire == 0) {
      node.duration_micros = c.varint();
    } else if (n == 2 && wire == 2) {
      node.name = c.bytes();
    } else if (n == 8 && wire == 2) {
      Cursor io(c.bytes());
      while (io.more()) {
        io.field(n, wire);
        if (n == 1 && wire == 2) node.input_values = io.bytes(); else io.skip(wire);
      }
    } else if (n == 10 && wire == 2) {
      std::string_view name;
      const Value v = parse_attr(c.bytes(), name);
      const std::pair<std::string_view, Value*> slots[] = {
          {"comm_type", &node.comm_type}, {"comm_size", &node.comm_size}, {"comm_src", &node.comm_src},
          {"comm_dst", &node.comm_dst},   {"comm_tag", &node.comm_tag},   {"pg_name", &node.pg_name},
          {"stream", &node.stream}};
      for (const auto& [key, slot] : slots) {
        if (name == key) *slot = v;
      }
    } else {
      c.skip(wire);  // id, deps, start time, outputs, storage, fields of later schemas
    }
  }
}

// GlobalMetadata: version (1) and attr (2). Whether either was there tells a Chakra file from another.
struct Metadata {
  bool known = false;
  std::string_view version;
  Value rank, world;
};

void parse_metadata(std::string_view bytes, Metadata& meta) {
  Cursor c(bytes);
  while (c.more()) {
    uint64_t n = 0, wire = 0;
    c.field(n, wire);
    if (n == 1 && wire == 2) {
      meta.version = c.bytes();
      const auto printable = [](char ch) { return ch >= 0x20 && ch < 0x7f; };
      meta.known = std::all_of(meta.version.begin(), meta.version.end(), printable);
      if (!meta.known) return;  // text a version never holds: another kind of file
    } else if (n == 2 && wire == 2) {
      std::string_view name;
      const Value v = parse_attr(c.bytes(), name);
      if (name == "rank") meta.rank = v;
      if (name == "world_size") meta.world = v;
      meta.known = true;
    } else {
      c.skip(wire);
    }
  }
}

class Importer {
 public:
  Importer(TraceSink& sink, ImportSummary& summary, int rank, int world)
      : sink_(sink), summary_(summary), rank_(rank), world_(world) {}

  void node(const NodeFields& n) {
    if (n.type == kCollNode) {
      collective(n);
    } else if (n.type == kSendNode || n.type == kRecvNode) {
      point_to_point(n, n.type == kSendNode);
    } else if (n.type == kMetadataNode && n.name.find("process_group:init") != std::string_view::npos) {
      read_process_groups(n.input_values);
    }
  }

 private:
  struct ProcessGroup {
    std::vector<int> ranks;  // global ranks in group-rank order; empty: every rank (PyTorch's spelling)
    int id = -1;             // its group in the output once an op used it; -1: not yet
  };

  void skip(const char* reason) { ++summary_.skipped[reason]; }
  void note(const std::string& text) {
    if (std::find(summary_.notes.begin(), summary_.notes.end(), text) == summary_.notes.end()) {
      summary_.notes.push_back(text);
    }
  }

  static std::optional<int64_t> bytes_of(const Value& size) {
    if (!size.integer || *size.integer < 0 || *size.integer > kMaxOpBytes) return std::nullopt;
    return size.integer;
  }

  void collective(const NodeFields& n) {
    if (!n.comm_type.present) return skip("host-side COMM_COLL node without comm_type");
    OpKind kind = OpKind::all_reduce;
    switch (n.comm_type.integer.value_or(-1)) {
      case kAllReduce: kind = OpKind::all_reduce; break;
      case kReduce: kind = OpKind::reduce; break;
      case kAllGather: kind = OpKind::all_gather; break;
      case kBroadcast: kind = OpKind::broadcast; break;
      case kAllToAll: kind = OpKind::all_to_all; break;
      case kReduceScatter: case kReduceScatterBlock: kind = OpKind::reduce_scatter; break;
      case kBarrier: kind = OpKind::barrier; break;
      case kGather: return skip("GATHER collective: dtsuite has no gather op");
      case kScatter: return skip("SCATTER collective: dtsuite has no scatter op");
      default: return skip("comm_type outside Chakra's published CollectiveCommType values");
    }
    const std::optional<int64_t> bytes = kind == OpKind::barrier ? 0 : bytes_of(n.comm_size);
    if (!bytes) return skip("COMM_COLL node without a comm_size of 0 to 2^50 bytes");
    Op op;
    op.kind = kind;
    op.group = group_of(n.pg_name.text);
    const int64_t members = op.group == 0 ? world_ : static_cast<int64_t>(groups_.at(op.group - 1).size());
    op.count = *bytes;
    if (kind == OpKind::reduce_scatter || kind == OpKind::all_to_all) {
      if (*bytes % members == 0) {
        op.count = *bytes / members;
      } else {
        note("a reduce_scatter or all_to_all comm_size that its group size does not divide is recorded as given, "
             "not per rank");
      }
    }
    if ((kind == OpKind::all_gather || kind == OpKind::reduce_scatter || kind == OpKind::all_to_all) &&
        op.count > kMaxOpBytes / members) {
      return skip("COMM_COLL node whose buffers exceed 2^50 bytes");
    }
    if (kind == OpKind::broadcast || kind == OpKind::reduce) {
      op.root = 0;
      note("Chakra does not say a broadcast's or reduce's root: replayed from group rank 0");
    }
    emit(op, n);
  }

  void point_to_point(const NodeFields& n, bool send) {
    const Value& peer = send ? n.comm_dst : n.comm_src;
    if (!peer.integer) return skip(send ? "COMM_SEND node without comm_dst" : "COMM_RECV node without comm_src");
    if (*peer.integer < 0 || *peer.integer >= world_) return skip("COMM_SEND or COMM_RECV peer outside the world");
    const std::optional<int64_t> bytes = bytes_of(n.comm_size);
    if (!bytes) return skip("COMM_SEND or COMM_RECV node without a comm_size of 0 to 2^50 bytes");
    const int64_t tag = n.comm_tag.integer.value_or(0);
    if (tag < 0 || tag > std::numeric_limits<int32_t>::max()) return skip("comm_tag outside 0..2^31-1");
    Op op;
    op.kind = send ? OpKind::send : OpKind::recv;
    op.group = 0;
    op.peer = static_cast<int>(*peer.integer);
    op.tag = tag;
    op.count = *bytes;
    note("send and recv peers (comm_dst, comm_src) are taken as global ranks, on the world group");
    emit(op, n);
  }

  void emit(Op& op, const NodeFields& n) {
    world_group();
    op.seconds = n.duration_micros > 0 ? static_cast<double>(n.duration_micros) * 1e-6 : -1;
    if (n.stream.integer && *n.stream.integer >= 0 && *n.stream.integer <= std::numeric_limits<int32_t>::max()) {
      op.stream = static_cast<int>(*n.stream.integer);
    }
    op.seq = summary_.ops++;
    sink_.op(op);
  }

  void world_group() {
    if (world_sent_) return;
    Group g{0, {}};
    for (int r = 0; r < world_; ++r) g.ranks.push_back(r);
    sink_.group(g);
    world_sent_ = true;
  }

  // The output group of a collective's pg_name, sent to the sink at its first use.
  int group_of(std::string_view pg_name) {
    world_group();
    if (pg_name.empty()) return 0;
    const auto it = process_groups_.find(pg_name);
    if (it == process_groups_.end()) {
      note("a pg_name that no \"process_group:init\" node before it lists: its ops replay on the world");
      return 0;
    }
    ProcessGroup& pg = it->second;
    if (pg.id >= 0) return pg.id;
    pg.id = 0;  // the world, unless its ranks say otherwise
    std::vector<int> sorted = pg.ranks;  // its ranks are below world_: read_process_groups keeps no other
    std::sort(sorted.begin(), sorted.end());
    const bool twice = std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();
    const bool mine = sorted.empty() || std::binary_search(sorted.begin(), sorted.end(), rank_);
    bool whole = sorted.empty() || static_cast<int>(sorted.size()) == world_;
    for (size_t i = 0; whole && i < pg.ranks.size(); ++i) whole = pg.ranks[i] == static_cast<int>(i);
    if (twice || !mine) {
      note("a process group that names a rank twice or does not hold this rank: its ops replay on the world");
    } else if (whole) {
      return 0;
    } else if (groups_.size() + 1 >= static_cast<size_t>(kMaxWorld)) {
      note("more process groups than a dtsuite trace holds (2^20): the further ones replay on the world");
    } else {
      groups_.push_back(pg.ranks);
      pg.id = static_cast<int>(groups_.size());
      sink_.group(Group{pg.id, pg.ranks});
    }
    return pg.id;
  }

  // PyTorch's pg_config_info as the "## process_group:init ##" node's inputs hold it: a JSON list of
  // {"pg_name": "1", ..., "ranks": [0, 2], ...} inside the Python text of a list of strings. Only
  // these two keys are read; a group whose ranks do not read as global ranks of this world is left
  // out (its ops replay on the world, noted there).
  void read_process_groups(std::string_view text) {
    constexpr std::string_view kName = "\"pg_name\"", kRanks = "\"ranks\"";
    auto skip_space = [&](size_t at) {
      while (at < text.size() && text[at] == ' ') ++at;
      return at;
    };
    for (size_t at = text.find(kName); at != std::string_view::npos; at = text.find(kName, at)) {
      at = skip_space(skip_space(at + kName.size()) + 1);  // past the ':'
      if (at >= text.size() || text[at] != '"') continue;
      const size_t name_end = text.find('"', at + 1);
      if (name_end == std::string_view::npos) return;
      const std::string_view name = text.substr(at + 1, name_end - at - 1);
      at = name_end;
      // Its "ranks" lie before the next group's "pg_name": searched there only, so the scan stays linear.
      const size_t ranks_at = text.substr(0, text.find(kName, at)).find(kRanks, at);
      if (ranks_at == std::string_view::npos) continue;
      size_t p = skip_space(skip_space(ranks_at + kRanks.size()) + 1);
      if (p >= text.size() || text[p] != '[') continue;
      std::vector<int> ranks;
      bool valid = true;
      for (p = skip_space(p + 1); valid && p < text.size() && text[p] != ']';) {
        const size_t first = p;
        int64_t r = 0;  // at most 8 digits: any more is no rank of a world of 2^20
        while (p < text.size() && p - first < 8 && text[p] >= '0' && text[p] <= '9') r = r * 10 + (text[p++] - '0');
        valid = p > first && r < world_ && listed_ + ranks.size() < kMaxGroupRanks;
        ranks.push_back(static_cast<int>(r));
        p = skip_space(p);
        if (p < text.size() && text[p] == ',') p = skip_space(p + 1);
      }
      if (!valid || p >= text.size() || listed_ + ranks.size() > kMaxGroupRanks) continue;
      listed_ += ranks.size();
      ProcessGroup& pg = process_groups_[std::string(name)];
      if (pg.ranks != ranks) pg = ProcessGroup{std::move(ranks), -1};  // a group of that name anew
    }
  }

  TraceSink& sink_;
  ImportSummary& summary_;
  int rank_, world_;
  bool world_sent_ = false;
  std::map<std::string, ProcessGroup, std::less<>> process_groups_;
  std::vector<std::vector<int>> groups_;  // the output's groups 1, 2, ...
  size_t listed_ = 0;
};

}  // namespace

ImportSummary import_chakra(const std::string& path, TraceSink& sink, const ImportOptions& options) {
  ByteSource in(path, "Chakra trace", options.timeout_seconds);
  MessageReader reader(in, path);
  std::string message;
  if (!reader.next(message)) fail(path, "empty: not a Chakra ET file (one starts with a GlobalMetadata message)");
  Metadata meta;
  try {
    parse_metadata(message, meta);
  } catch (const Malformed&) {
    meta.known = false;
  }
  if (!meta.known) {
    reader.bad("its first message is no GlobalMetadata (a Chakra trace in JSON, or another tool's, is not this "
               "format)");
  }

  ImportSummary summary;
  int rank = options.rank, world = options.world;
  auto take = [&](const Value& v, int& into, const char* key) {
    if (!v.present) return;
    if (!v.integer || *v.integer < 0 || *v.integer > kMaxWorld) {
      fail(path, std::string("its metadata's \"") + key + "\" is not a rank or world size");
    }
    if (into >= 0 && into != *v.integer) {
      fail(path, std::string("its metadata's \"") + key + "\" is " + std::to_string(*v.integer) + ", the options say " +
                     std::to_string(into));
    }
    into = static_cast<int>(*v.integer);
  };
  take(meta.world, world, "world_size");
  take(meta.rank, rank, "rank");
  if (world < 0) fail(path, "a Chakra trace does not say its world size: give it (the world option, --world)");
  if (rank < 0) fail(path, "a Chakra trace does not say which rank wrote it: give its rank (the rank option)");
  if (world < 1 || world > kMaxWorld || rank >= world) {
    fail(path, "rank " + std::to_string(rank) + " of a world of " + std::to_string(world) +
                   " ranks: the rank must be below the world size, at most 2^20");
  }
  if (!meta.rank.present || !meta.world.present) {
    summary.notes.push_back("the rank or world size is the options': the Chakra trace does not say it");
  }
  summary.format = meta.version.empty() ? "chakra" : "chakra " + std::string(meta.version);
  summary.rank = rank;
  summary.world = world;
  summary.notes.push_back(kNoDtype);
  summary.notes.push_back("ops are numbered in the file's node order (Chakra writes its dependency graph by node id), "
                          "taken as the rank's issue order");
  Header header;
  header.rank = rank;
  header.world = world;
  header.source = "chakra";
  sink.header(header);

  Importer importer(sink, summary, rank, world);
  while (reader.next(message)) {
    NodeFields node;
    try {
      parse_node(message, node);
    } catch (const Malformed& m) {
      fail(path, "malformed Chakra node at byte " + std::to_string(reader.start()) + ": " + m.why);
    }
    importer.node(node);
  }
  return summary;
}

}  // namespace dts::trace
