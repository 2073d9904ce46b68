// The trace's lines written and read (trace/trace.h). Lines are formatted by hand (the recorder
// writes one per call of the stack, and a JSON document per line would cost more than the
// smallest call); they are read with nlohmann/json, one line at a time.
#include "trace/trace.h"

#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"

namespace dts::trace {
namespace {

constexpr std::array<std::string_view, 12> kKindNames{"all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                                      "reduce",     "all_to_all",     "all_to_allv", "send",
                                                      "recv",       "send_recv",      "barrier",    "wait"};

void append_int(std::string& out, int64_t value) {
  char digits[24];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), value);
  out.append(digits, end);
}

void append_list(std::string& out, std::string_view key, const std::vector<int64_t>& values) {
  out += ",\"";
  out += key;
  out += "\":[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    append_int(out, values[i]);
  }
  out += ']';
}

void append_field(std::string& out, std::string_view key, int64_t value) {
  out += ",\"";
  out += key;
  out += "\":";
  append_int(out, value);
}

void append_field(std::string& out, std::string_view key, std::string_view value) {
  out += ",\"";
  out += key;
  out += "\":\"";
  out += value;  // names of this file's vocabulary: no character needs escaping
  out += '"';
}

// The integer `key` of a line, within low..high; `otherwise` where the line may leave it out. A
// failure goes to `fail` (which throws), its message led by `where`.
template <class Fail>
int64_t integer_field(const nlohmann::json& j, const char* key, int64_t low, int64_t high,
                      std::optional<int64_t> otherwise, const std::string& where, Fail&& fail) {
  const auto it = j.find(key);
  if (it == j.end()) {
    if (otherwise) return *otherwise;
    fail(where + "no \"" + key + "\"");
  }
  if (!it->is_number_integer()) fail(where + "\"" + key + "\" is not an integer");
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    fail(where + "\"" + key + "\" overflows a 64-bit count");
  }
  const int64_t v = it->get<int64_t>();
  if (v < low || v > high) {
    fail(where + "\"" + key + "\" is " + std::to_string(v) + ", outside " + std::to_string(low) + ".." +
         std::to_string(high));
  }
  return v;
}

}  // namespace

std::string_view name(OpKind kind) { return kKindNames[static_cast<size_t>(kind)]; }

std::optional<OpKind> parse_op_kind(std::string_view text) {
  for (size_t i = 0; i < kKindNames.size(); ++i) {
    if (kKindNames[i] == text) return static_cast<OpKind>(i);
  }
  return std::nullopt;
}

bool is_collective(OpKind kind) {
  return kind != OpKind::send && kind != OpKind::recv && kind != OpKind::send_recv && kind != OpKind::wait;
}

bool is_reduction(OpKind kind) {
  return kind == OpKind::all_reduce || kind == OpKind::reduce_scatter || kind == OpKind::reduce;
}

std::string header_line(const Header& header) {
  nlohmann::json line;
  line["dtsuite_trace"] = header.version;
  line["rank"] = header.rank;
  line["world"] = header.world;
  line["source"] = header.source;
  if (!header.backend.empty()) line["backend"] = header.backend;
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string group_line(const Group& group) {
  std::string out = "{\"group\":";
  append_int(out, group.id);
  std::vector<int64_t> ranks(group.ranks.begin(), group.ranks.end());
  append_list(out, "ranks", ranks);
  out += '}';
  return out;
}

std::string op_line(const Op& op) {
  std::string out = "{\"seq\":";
  out.reserve(128);
  append_int(out, op.seq);
  append_field(out, "group", op.group);
  append_field(out, "op", name(op.kind));
  if (op.kind == OpKind::wait) {
    append_list(out, "waits", op.waits);
  } else if (op.kind != OpKind::barrier) {
    if (op.dtype) append_field(out, "dtype", name(*op.dtype));
    if (op.redop) append_field(out, "redop", name(*op.redop));
    if (op.kind == OpKind::all_to_allv) {
      if (op.splits_truncated) {
        out += ",\"splits_truncated\":true";
      } else {
        append_list(out, "in_splits", op.in_splits);
        append_list(out, "out_splits", op.out_splits);
      }
    } else {
      append_field(out, "count", op.count);
    }
    if (op.root >= 0) append_field(out, "root", op.root);
    if (op.peer >= 0) append_field(out, "peer", op.peer);
    if (op.source >= 0) append_field(out, "source", op.source);
    if (op.tag != 0) append_field(out, "tag", op.tag);
  }
  if (op.stream != 0) append_field(out, "stream", op.stream);
  if (op.async) out += ",\"async\":true";
  if (op.seconds >= 0) {
    char us[40];
    const int n = std::snprintf(us, sizeof(us), ",\"us\":%.3f", op.seconds * 1e6);
    out.append(us, static_cast<size_t>(n));
  }
  out += '}';
  return out;
}

std::string rank_file(const std::string& dir, int rank) {
  return (std::filesystem::path(dir) / ("rank-" + std::to_string(rank) + ".jsonl")).string();
}

std::string brief_ranks(const std::vector<int>& ranks, const char* separator) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size() && i < 8; ++i) out += (i ? separator : "") + std::to_string(ranks[i]);
  if (ranks.size() > 8) out += std::string(separator) + "... (" + std::to_string(ranks.size()) + " ranks)";
  return out + "]";
}

TraceWriter::TraceWriter(std::string dir, int rank) : path_(rank_file(dir, rank)) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(Error::Kind::io, "cannot make the trace folder " + quoted_input(dir) + ": " + ec.message());
  // "x": never over a file already there (another trace, another rank's output, a special file).
  file_ = std::fopen(path_.c_str(), "wx");
  if (!file_) {
    if (errno == EEXIST) {
      throw Error(Error::Kind::invalid_argument,
                  "trace file " + quoted_input(path_) + " already exists; a trace never overwrites one (give a new folder)");
    }
    throw Error(Error::Kind::io, "cannot write trace file " + quoted_input(path_) + ": " + std::strerror(errno));
  }
  std::setvbuf(file_, nullptr, _IOFBF, 1 << 16);
}

TraceWriter::~TraceWriter() {
  if (file_) std::fclose(file_);
}

void TraceWriter::write(const std::string& line) {
  if (!file_) throw Error(Error::Kind::io, "trace file " + quoted_input(path_) + " is closed");
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fputc('\n', file_) == EOF) {
    throw Error(Error::Kind::io, "cannot write trace file " + quoted_input(path_) + ": " + std::strerror(errno));
  }
}

void TraceWriter::header(const Header& header) { write(header_line(header)); }
void TraceWriter::group(const Group& group) { write(group_line(group)); }
void TraceWriter::op(const Op& op) { write(op_line(op)); }

void TraceWriter::close() {
  if (!file_) return;
  const bool flushed = std::fflush(file_) == 0;
  const int error = errno;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!flushed || !closed) {
    throw Error(Error::Kind::io, "cannot write trace file " + quoted_input(path_) + ": " + std::strerror(error));
  }
}

// ---- reading ----

TraceReader::TraceReader(const std::string& path, double timeout_seconds) : path_(path) {
  InputLimits limits;
  limits.max_line = kMaxTraceLine;
  limits.timeout_seconds = timeout_seconds;
  input_ = std::make_unique<InputFile>(path, "trace file", limits);
  std::string line;
  if (!read_line(line)) fail("empty: no header line (a dtsuite trace starts with {\"dtsuite_trace\":1,...})");
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("dtsuite_trace")) {
    fail("not a dtsuite trace: its first line is not a header {\"dtsuite_trace\":1,...} (other tools' traces are "
         "converted by `dtsuite trace import`)");
  }
  auto integer = [&](const char* key, int64_t low, int64_t high) {
    return integer_field(j, key, low, high, {}, "header: ", [&](const std::string& why) { fail(why); });
  };
  header_.version = static_cast<int>(integer("dtsuite_trace", 1, std::numeric_limits<int>::max()));
  if (header_.version > kTraceVersion) {
    fail("trace format version " + std::to_string(header_.version) + " is newer than this dtsuite reads (" +
         std::to_string(kTraceVersion) + ")");
  }
  header_.world = static_cast<int>(integer("world", 1, kMaxWorld));
  header_.rank = static_cast<int>(integer("rank", 0, header_.world - 1));
  if (auto it = j.find("source"); it != j.end() && it->is_string()) header_.source = it->get<std::string>();
  if (auto it = j.find("backend"); it != j.end() && it->is_string()) header_.backend = it->get<std::string>();
}

void TraceReader::fail(const std::string& why) const {
  throw Error(Error::Kind::invalid_argument, path_ + (line_ > 0 ? ":" + std::to_string(line_) : "") + ": " + why);
}

bool TraceReader::read_line(std::string& line) {
  line.clear();
  for (;;) {
    if (buffer_at_ < buffer_.size()) {
      const size_t newline = buffer_.find('\n', buffer_at_);
      if (newline != std::string::npos) {
        line.append(buffer_, buffer_at_, newline - buffer_at_);
        buffer_at_ = newline + 1;
        ++line_;
        return true;
      }
      line.append(buffer_, buffer_at_, std::string::npos);
      buffer_at_ = buffer_.size();
    }
    if (at_end_) {
      if (line.empty()) return false;
      ++line_;
      // A last line without its '\n' was cut short (a job that died while writing): it is read
      // if it parses, and a torn one fails as any bad line does, naming its number.
      return true;
    }
    buffer_.resize(1 << 16);
    const size_t got = input_->read(buffer_.data(), buffer_.size());
    buffer_.resize(got);
    buffer_at_ = 0;
    if (got == 0) at_end_ = true;
  }
}

const Group& TraceReader::group_of(int id) const {
  for (const Group& g : groups_) {
    if (g.id == id) return g;
  }
  fail("group " + std::to_string(id) + " is used before a line defines it ({\"group\":" + std::to_string(id) +
       ",\"ranks\":[...]})");
}

bool TraceReader::next(Group& group, Op& op, bool& is_op) {
  std::string line;
  do {
    if (!read_line(line)) return false;
  } while (line.empty());
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) fail("not a JSON object (a torn or foreign line)");
  auto integer = [&](const char* key, int64_t low, int64_t high, std::optional<int64_t> otherwise = {}) {
    return integer_field(j, key, low, high, otherwise, "", [&](const std::string& why) { fail(why); });
  };
  auto list = [&](const char* key, int64_t low, int64_t high) {
    std::vector<int64_t> values;
    const auto it = j.find(key);
    if (it == j.end() || !it->is_array()) fail(std::string("no list \"") + key + "\"");
    values.reserve(it->size());
    for (const auto& v : *it) {
      if (!v.is_number_integer()) fail(std::string("\"") + key + "\" holds a value that is not an integer");
      if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail(std::string("\"") + key + "\" holds " + v.dump() + ", which overflows a 64-bit count");
      }
      const int64_t x = v.get<int64_t>();
      if (x < low || x > high) fail(std::string("\"") + key + "\" holds " + std::to_string(x) + ", outside " +
                                    std::to_string(low) + ".." + std::to_string(high));
      values.push_back(x);
    }
    return values;
  };

  if (j.contains("group") && j.contains("ranks") && !j.contains("seq")) {
    group.id = static_cast<int>(integer("group", 0, kMaxWorld));
    const std::vector<int64_t> ranks = list("ranks", 0, header_.world - 1);
    if (ranks.empty()) fail("group " + std::to_string(group.id) + " has no ranks");
    std::set<int64_t> seen(ranks.begin(), ranks.end());
    if (seen.size() != ranks.size()) fail("group " + std::to_string(group.id) + " names a rank twice");
    if (!seen.count(header_.rank)) {
      fail("group " + std::to_string(group.id) + " does not hold this file's rank " + std::to_string(header_.rank));
    }
    for (const Group& g : groups_) {
      if (g.id == group.id) fail("group " + std::to_string(group.id) + " is defined twice");
    }
    group.ranks.assign(ranks.begin(), ranks.end());
    groups_.push_back(group);
    is_op = false;
    return true;
  }

  op = Op{};
  op.seq = integer("seq", 0, std::numeric_limits<int64_t>::max());
  if (op.seq != next_seq_) {
    fail("seq " + std::to_string(op.seq) + " where " + std::to_string(next_seq_) +
         " comes next (a rank's operations are numbered from 0 in issue order)");
  }
  ++next_seq_;
  op.group = static_cast<int>(integer("group", 0, kMaxWorld));
  const Group& g = group_of(op.group);
  const int64_t members = static_cast<int64_t>(g.ranks.size());
  const auto kind_it = j.find("op");
  if (kind_it == j.end() || !kind_it->is_string()) fail("no \"op\"");
  const auto kind = parse_op_kind(kind_it->get<std::string>());
  if (!kind) fail("unknown op " + quoted_input(kind_it->get<std::string>()));
  op.kind = *kind;
  if (auto it = j.find("dtype"); it != j.end()) {
    if (!it->is_string()) fail("\"dtype\" is not a string");
    try {
      op.dtype = parse_dtype(it->get<std::string>());
    } catch (const Error& e) {
      fail(e.what());
    }
  }
  if (auto it = j.find("redop"); it != j.end()) {
    if (!it->is_string()) fail("\"redop\" is not a string");
    try {
      op.redop = parse_reduce_op(it->get<std::string>());
    } catch (const Error& e) {
      fail(e.what());
    }
  }
  const int64_t element = op.dtype ? static_cast<int64_t>(size_of(*op.dtype)) : 1;
  const int64_t max_count = kMaxOpBytes / element;
  if (op.kind == OpKind::wait) {
    op.waits = list("waits", 0, op.seq - 1 < 0 ? -1 : op.seq - 1);
    if (op.waits.empty()) fail("a wait that waits for nothing");
  } else if (op.kind == OpKind::all_to_allv) {
    if (auto it = j.find("splits_truncated"); it != j.end() && it->is_boolean() && it->get<bool>()) {
      op.splits_truncated = true;
    } else {
      op.in_splits = list("in_splits", 0, max_count);
      op.out_splits = list("out_splits", 0, max_count);
      if (static_cast<int64_t>(op.in_splits.size()) != members || static_cast<int64_t>(op.out_splits.size()) != members) {
        fail("all_to_allv splits of " + std::to_string(op.in_splits.size()) + " and " +
             std::to_string(op.out_splits.size()) + " entries on a group of " + std::to_string(members) + " ranks");
      }
      int64_t in_total = 0, out_total = 0;
      for (size_t i = 0; i < op.in_splits.size(); ++i) {
        in_total += op.in_splits[i];
        out_total += op.out_splits[i];
        if (in_total > max_count || out_total > max_count) fail("all_to_allv splits overflow a buffer of 2^50 bytes");
      }
    }
  } else if (op.kind != OpKind::barrier) {
    op.count = integer("count", 0, max_count);
    // The whole buffer an op needs must fit too: a gather's output is count x members.
    if (op.kind == OpKind::all_gather || op.kind == OpKind::reduce_scatter || op.kind == OpKind::all_to_all) {
      if (op.count > max_count / members) fail("count " + std::to_string(op.count) + " overflows a buffer of 2^50 bytes");
    }
  }
  if (op.kind == OpKind::broadcast || op.kind == OpKind::reduce) op.root = static_cast<int>(integer("root", 0, members - 1));
  if (op.kind == OpKind::send || op.kind == OpKind::recv || op.kind == OpKind::send_recv) {
    op.peer = static_cast<int>(integer("peer", 0, members - 1));
  }
  if (op.kind == OpKind::send_recv) op.source = static_cast<int>(integer("source", 0, members - 1));
  op.tag = integer("tag", 0, std::numeric_limits<int32_t>::max(), 0);
  op.stream = static_cast<int>(integer("stream", 0, std::numeric_limits<int32_t>::max(), 0));
  if (auto it = j.find("async"); it != j.end()) {
    if (!it->is_boolean()) fail("\"async\" is not true or false");
    op.async = it->get<bool>();
  }
  if (auto it = j.find("us"); it != j.end()) {
    if (!it->is_number() || it->get<double>() < 0) fail("\"us\" is not a time in microseconds");
    op.seconds = it->get<double>() * 1e-6;
  }
  is_op = true;
  return true;
}

TraceFolder open_trace_folder(const std::string& dir, double timeout_seconds) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    throw Error(Error::Kind::io, "cannot read trace folder " + quoted_input(dir) + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    throw Error(Error::Kind::invalid_argument,
                "trace " + quoted_input(dir) + " is not a folder (a trace is a folder of rank-R.jsonl files)");
  }
  const std::string first = rank_file(dir, 0);
  if (::stat(first.c_str(), &st) != 0) {
    throw Error(Error::Kind::invalid_argument, "trace folder " + quoted_input(dir) + " has no rank-0.jsonl");
  }
  TraceFolder folder;
  folder.dir = dir;
  {
    TraceReader zero(first, timeout_seconds);
    folder.world = zero.header().world;
    folder.source = zero.header().source;
    folder.backend = zero.header().backend;
  }
  for (int r = 1; r < folder.world; ++r) {
    const std::string path = rank_file(dir, r);
    if (::stat(path.c_str(), &st) != 0) {
      throw Error(Error::Kind::invalid_argument, "trace folder " + quoted_input(dir) + " is of " +
                                                     std::to_string(folder.world) + " ranks, but has no rank-" +
                                                     std::to_string(r) + ".jsonl");
    }
    TraceReader reader(path, timeout_seconds);
    if (reader.header().world != folder.world || reader.header().rank != r) {
      throw Error(Error::Kind::invalid_argument,
                  path + ": header says rank " + std::to_string(reader.header().rank) + " of " +
                      std::to_string(reader.header().world) + ", where rank-0.jsonl's world is " +
                      std::to_string(folder.world));
    }
  }
  return folder;
}

}  // namespace dts::trace
