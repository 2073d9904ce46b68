// The PyTorch importers (trace/import_pytorch.h): the file's bytes (inflated as they pass when gzip)
// handed to nlohmann/json's SAX parser through an input iterator, a SAX handler that keeps one node
// or event at a time as a small DOM, and per format the mapping of its records to ops through a
// reorder window. What both formats share (ScalarType names, collective names, groups, counts and
// their bounds, the header) is the Emitter.
#include "trace/import_pytorch.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <deque>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "trace/byte_source.h"
#include "core/input_file.h"

namespace dts::trace {
namespace {

using nlohmann::json;

// Deeper nesting than any trace has (ET's tensor lists nest three or four levels): a bound on the
// handler's stack, which a file of "[[[[..." would otherwise grow by the megabyte.
constexpr size_t kMaxDepth = 512;
// The ranks the process-group tables may list in all (64 MiB of ints): a rank belongs to a few
// groups, far below it, so no table can grow the importer's memory without bound.
constexpr size_t kMaxGroupRanks = size_t{1} << 24;
// What sniff_json_trace reads at most before it says "neither".
constexpr int64_t kSniffBytes = int64_t{4} << 20;

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw Error(Error::Kind::invalid_argument, quoted_input(path) + ": " + why);
}

std::string number(int64_t value) { return std::to_string(value); }

// "[0, 1, 2]", as process groups are written in PyTorch's traces.
std::string brief(const std::vector<int>& ranks) { return brief_ranks(ranks, ", "); }

// The characters the parser reads, a buffer at a time. Between two SAX events the parser holds the
// characters of one token (a string or number): counting them here bounds that buffer, which the
// parser itself never does.
class JsonInput {
 public:
  JsonInput(ByteSource& source, std::string path, int64_t max_bytes = 0)
      : source_(source), path_(std::move(path)), buffer_(1 << 16), max_bytes_(max_bytes) {}

  bool more() { return at_ < end_ || refill(); }
  char current() const { return buffer_[at_]; }
  void advance() {
    ++at_;
    ++offset_;
    // 64 bytes of slack: the quotes, colon and spaces around the longest value.
    if (++since_value_ > kMaxJsonValue + 64) {
      fail(path_, "a JSON value of more than 16 MiB at byte " + number(offset_) +
                      " (the most one string or number may hold: is this the right file?)");
    }
  }
  void value_seen() { since_value_ = 0; }
  int64_t offset() const { return offset_; }
  const std::string& path() const { return path_; }

 private:
  bool refill() {
    if (eof_) return false;
    if (max_bytes_ > 0 && offset_ >= max_bytes_) {
      eof_ = true;  // sniffing: what comes after is not read
      return false;
    }
    end_ = source_.read(buffer_.data(), buffer_.size());
    at_ = 0;
    eof_ = end_ == 0;
    return !eof_;
  }

  ByteSource& source_;
  std::string path_;
  std::vector<char> buffer_;
  size_t at_ = 0, end_ = 0;
  bool eof_ = false;
  int64_t offset_ = 0, since_value_ = 0, max_bytes_ = 0;
};

// An input iterator over JsonInput, the form of input nlohmann's sax_parse(first, last, ...) reads
// one character at a time (its iterator_input_adapter): every copy shares the one JsonInput, and an
// iterator equals the end one once the input has no more bytes.
class JsonIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = char;

  JsonIterator() = default;
  explicit JsonIterator(JsonInput* input) : input_(input) {}
  char operator*() const { return input_->current(); }
  JsonIterator& operator++() {
    input_->advance();
    return *this;
  }
  JsonIterator operator++(int) {
    JsonIterator before = *this;
    input_->advance();
    return before;
  }
  bool operator==(const JsonIterator& other) const { return done() == other.done(); }

 private:
  bool done() const { return input_ == nullptr || !input_->more(); }
  JsonInput* input_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// The SAX handler both formats share: the top-level object's keys are skipped, captured whole (a
// small value: "schema", "distributedInfo") or read as the array of nodes or events, each of which
// is built as a DOM of the keys the format wants and handed over when it closes.

class SaxBase : public nlohmann::json_sax<json> {
 public:
  SaxBase(JsonInput& input) : input_(input) {}

  // The parse, to the end of the input: false where a hook stopped it.
  bool parse() { return json::sax_parse(JsonIterator(&input_), JsonIterator(), this); }

  bool null() override { return scalar(json()); }
  bool boolean(bool value) override { return scalar(json(value)); }
  bool number_integer(number_integer_t value) override { return scalar(json(value)); }
  bool number_unsigned(number_unsigned_t value) override { return scalar(json(value)); }
  bool number_float(number_float_t value, const string_t&) override { return scalar(json(value)); }
  bool string(string_t& value) override { return scalar(json(std::move(value))); }
  bool binary(binary_t&) override { return scalar(json()); }  // JSON text has none
  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& key) override {
    input_.value_seen();
    if (stopped_) return false;
    const Role role = stack_.back().role;
    if (role == Role::root) {
      top_key_ = key;
      top_ = top_key(top_key_);
      values_ = 0;
    } else if (role == Role::event) {
      key_ = key;
      want_ = event_wants(key_, event_);
    } else if (role == Role::capture) {
      key_ = key;
    }
    return !stopped_;
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    if (!input_.more()) {
      if (input_.offset() == 0) fail(path(), "empty: no JSON value");
      fail(path(), "truncated JSON: the file ends at byte " + number(input_.offset()) +
                       ", inside its top-level value (cut short while written or copied?)");
    }
    // nlohmann's message without its "[json.exception.parse_error.101] " prefix, printable, short.
    std::string what = ex.what();
    if (const size_t close = what.find("] "); close != std::string::npos) what = what.substr(close + 2);
    std::string shown;
    for (const char c : what) {
      if (shown.size() >= 160) {
        shown += "...";
        break;
      }
      shown += (c >= 0x20 && c < 0x7f) ? c : '?';
    }
    fail(path(), "not JSON at byte " + number(static_cast<int64_t>(position)) + " (" + shown + ")");
  }

 protected:
  enum class Top { skip, capture, events };
  // What to do with the value of a top-level key.
  virtual Top top_key(const std::string& key) = 0;
  // A captured top-level value, whole.
  virtual void top_value(const std::string& key, json& value) = 0;
  // Whether an event's key is kept, given what of the event was read before it.
  virtual bool event_wants(const std::string& key, const json& event) = 0;
  // One node or event (an object), with the keys it wanted.
  virtual void event(json& event) = 0;
  // The top-level value is not an object.
  virtual void not_an_object() { fail(path(), "not a JSON object at its top level: not a PyTorch trace"); }

  void stop() { stopped_ = true; }
  const std::string& path() const { return input_.path(); }
  const std::string& top_key_name() const { return top_key_; }
  int64_t event_index() const { return events_; }

 private:
  enum class Role { root, events, event, capture, skip };
  struct Frame {
    Role role;
    bool object;
    json* target;  // capture: the container being filled
  };

  void count() {
    if (++values_ > kMaxEventValues) {
      fail(path(), (stack_.size() > 1 && stack_[1].role == Role::events
                        ? "element " + number(events_) + " of \"" + top_key_ + "\""
                        : "\"" + top_key_ + "\"") +
                       " holds more than " + number(kMaxEventValues) + " values (the most one node or event may hold)");
    }
  }

  // The slot of a capture container's next child.
  json* child(Frame& frame) {
    if (frame.object) return &(*frame.target)[key_];
    frame.target->push_back(json());
    return &frame.target->back();
  }

  bool scalar(json&& value) {
    input_.value_seen();
    if (stopped_) return false;
    if (stack_.empty()) {
      not_an_object();
      return false;
    }
    Frame& frame = stack_.back();
    switch (frame.role) {
      case Role::root:
        if (top_ == Top::events) fail(path(), "\"" + top_key_ + "\" is not an array");
        if (top_ == Top::capture) {
          count();
          top_value_ = std::move(value);
          top_value(top_key_, top_value_);
          top_value_ = json();
        }
        break;
      case Role::events: fail(path(), "element " + number(events_) + " of \"" + top_key_ + "\" is not an object");
      case Role::event:
        if (want_) {
          count();
          event_[key_] = std::move(value);
        }
        break;
      case Role::capture:
        count();
        *child(frame) = std::move(value);
        break;
      case Role::skip: break;
    }
    return !stopped_;
  }

  bool open(bool object) {
    input_.value_seen();
    if (stopped_) return false;
    if (stack_.size() >= kMaxDepth) {
      fail(path(), "JSON nested deeper than 512 levels at byte " + number(input_.offset()));
    }
    if (stack_.empty()) {
      if (!object) {
        not_an_object();
        return false;
      }
      stack_.push_back({Role::root, true, nullptr});
      return true;
    }
    Frame& frame = stack_.back();
    Frame next{Role::skip, object, nullptr};
    switch (frame.role) {
      case Role::root:
        if (top_ == Top::events) {
          if (object) fail(path(), "\"" + top_key_ + "\" is not an array");
          next.role = Role::events;
        } else if (top_ == Top::capture) {
          count();
          top_value_ = object ? json::object() : json::array();
          next = {Role::capture, object, &top_value_};
        }
        break;
      case Role::events:
        if (!object) fail(path(), "element " + number(events_) + " of \"" + top_key_ + "\" is not an object");
        event_ = json::object();
        values_ = 0;
        next = {Role::event, true, &event_};
        break;
      case Role::event:
        if (want_) {
          count();
          json& slot = event_[key_];
          slot = object ? json::object() : json::array();
          next = {Role::capture, object, &slot};
        }
        break;
      case Role::capture: {
        count();
        json* slot = child(frame);
        *slot = object ? json::object() : json::array();
        next = {Role::capture, object, slot};
        break;
      }
      case Role::skip: break;
    }
    stack_.push_back(next);
    return true;
  }

  bool close() {
    input_.value_seen();
    if (stopped_) return false;
    const Frame frame = stack_.back();
    stack_.pop_back();
    if (frame.role == Role::event) {
      event(event_);
      event_ = json();
      ++events_;
    } else if (frame.role == Role::capture && stack_.size() == 1) {
      top_value(top_key_, top_value_);
      top_value_ = json();
    }
    return !stopped_;
  }

  JsonInput& input_;
  std::vector<Frame> stack_;
  std::string top_key_, key_;
  Top top_ = Top::skip;
  bool want_ = false, stopped_ = false;
  json top_value_, event_;
  int64_t values_ = 0, events_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Reading values out of a node's or event's DOM.

const json* field(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::optional<std::string> text(const json* value) {
  if (value == nullptr || !value->is_string()) return std::nullopt;
  return value->get<std::string>();
}

// An integer: none if absent or not an integer. One beyond int64 is no count of any trace: an error
// naming `what`.
std::optional<int64_t> integer(const json* value, const std::string& path, const std::string& what) {
  if (value == nullptr) return std::nullopt;
  if (value->is_number_unsigned()) {
    const uint64_t u = value->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(path, what + " " + std::to_string(u) + " overflows int64");
    }
    return static_cast<int64_t>(u);
  }
  if (value->is_number_integer()) return value->get<int64_t>();
  if (value->is_number_float()) {
    const double d = value->get<double>();
    if (!std::isfinite(d) || std::floor(d) != d) return std::nullopt;
    if (std::fabs(d) >= 9.2e18) fail(path, what + " " + value->dump() + " overflows int64");
    return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

std::optional<double> real(const json* value) {
  if (value == nullptr || !value->is_number()) return std::nullopt;
  return value->get<double>();
}

// A list of integers as PyTorch records one: a JSON array, or its text ("[1, 2, 3]"). Kineto cuts
// lists past 30 entries to their first 29, "..." and the last (util.cpp format_list).
struct IntList {
  bool present = false;  // the field was there
  bool ok = true;        // it read as a list of integers
  bool truncated = false;
  std::vector<int64_t> values;
};

IntList int_list(const json* value) {
  IntList out;
  if (value == nullptr || value->is_null()) return out;
  out.present = true;
  if (value->is_array()) {
    for (const json& e : *value) {
      if (e.is_string() && e.get<std::string>() == "...") {
        out.truncated = true;
      } else if (e.is_number_integer()) {
        if (e.is_number_unsigned() && e.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          out.ok = false;
          return out;
        }
        out.values.push_back(e.get<int64_t>());
      } else {
        out.ok = false;
        return out;
      }
      if (out.values.size() > static_cast<size_t>(kMaxWorld)) {
        out.ok = false;
        return out;
      }
    }
    return out;
  }
  if (!value->is_string()) {
    out.ok = false;
    return out;
  }
  const std::string& s = value->get_ref<const std::string&>();
  size_t at = 0;
  const auto space = [&] {
    while (at < s.size() && (s[at] == ' ' || s[at] == '\t' || s[at] == '\n')) ++at;
  };
  space();
  if (at >= s.size() || s[at] != '[') {
    out.ok = false;
    return out;
  }
  ++at;
  space();
  if (at < s.size() && s[at] == ']') {
    ++at;
  } else {
    for (;;) {
      space();
      if (s.compare(at, 3, "...") == 0) {
        out.truncated = true;
        at += 3;
      } else {
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(s.data() + at, s.data() + s.size(), v);
        if (ec != std::errc() || out.values.size() >= static_cast<size_t>(kMaxWorld)) {
          out.ok = false;
          return out;
        }
        out.values.push_back(v);
        at = static_cast<size_t>(end - s.data());
      }
      space();
      if (at < s.size() && s[at] == ',') {
        ++at;
        continue;
      }
      if (at < s.size() && s[at] == ']') {
        ++at;
        break;
      }
      out.ok = false;
      return out;
    }
  }
  space();
  out.ok = at == s.size();
  return out;
}

// PyTorch's ScalarType names (c10/core/ScalarType.h, as c10::toString writes them).
std::optional<DType> torch_dtype(std::string_view name) {
  static constexpr std::pair<std::string_view, DType> kTypes[] = {
      {"Float", DType::f32}, {"Double", DType::f64}, {"Half", DType::f16},   {"BFloat16", DType::bf16},
      {"Char", DType::i8},   {"Byte", DType::u8},    {"Int", DType::i32},    {"Long", DType::i64},
      {"UInt32", DType::u32}, {"UInt64", DType::u64}, {"Float8_e4m3fn", DType::f8e4m3},
      {"Float8_e5m2", DType::f8e5m2},
  };
  for (const auto& [spelling, dtype] : kTypes) {
    if (name == spelling) return dtype;
  }
  return std::nullopt;
}

// What a collective name becomes, and what the recorded rank of its call is.
enum class Count : uint8_t { in, out, none };
enum class RankRole : uint8_t { own, root, peer };
struct Collective {
  std::string_view name;
  OpKind kind;
  Count count;
  RankRole role;
};

// The names c10d records (ProcessGroupNCCL and ProcessGroupXCCL's RECORD_PARAM_COMMS calls) and
// the spellings of other backends and PyTorch versions for the same calls.
constexpr Collective kCollectives[] = {
    {"allreduce", OpKind::all_reduce, Count::in, RankRole::own},
    {"allreduce_coalesced", OpKind::all_reduce, Count::in, RankRole::own},
    {"reduce_scatter", OpKind::reduce_scatter, Count::out, RankRole::own},
    {"_reduce_scatter_base", OpKind::reduce_scatter, Count::out, RankRole::own},
    {"reduce_scatter_tensor", OpKind::reduce_scatter, Count::out, RankRole::own},
    {"reduce_scatter_tensor_coalesced", OpKind::reduce_scatter, Count::out, RankRole::own},
    {"all_gather", OpKind::all_gather, Count::in, RankRole::own},
    {"allgather", OpKind::all_gather, Count::in, RankRole::own},
    {"_allgather_base", OpKind::all_gather, Count::in, RankRole::own},
    {"all_gather_into_tensor", OpKind::all_gather, Count::in, RankRole::own},
    {"allgather_into_tensor_coalesced", OpKind::all_gather, Count::in, RankRole::own},
    {"broadcast", OpKind::broadcast, Count::in, RankRole::root},
    {"reduce", OpKind::reduce, Count::in, RankRole::root},
    {"all_to_all", OpKind::all_to_all, Count::in, RankRole::own},
    {"alltoall", OpKind::all_to_all, Count::in, RankRole::own},
    {"alltoall_base", OpKind::all_to_all, Count::in, RankRole::own},
    {"all_to_allv", OpKind::all_to_allv, Count::in, RankRole::own},
    {"alltoallv", OpKind::all_to_allv, Count::in, RankRole::own},
    {"send", OpKind::send, Count::in, RankRole::peer},
    {"recv", OpKind::recv, Count::in, RankRole::peer},
    {"barrier", OpKind::barrier, Count::none, RankRole::own},
};

const Collective* collective_of(std::string_view name) {
  for (const Collective& c : kCollectives) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

// Why a record of a name with no op is skipped; "" for a name that is not a call at all.
std::string unmapped(const std::string& name) {
  if (name == "init") return "";  // a communicator's creation (ProcessGroupNCCL records it too)
  if (name == "gather" || name == "scatter") return "'" + name + "': dtsuite has no " + name + " op";
  return "record_param_comms of unknown collective " + quoted_input(name);
}

// A reduction op in an NCCL kernel's name: "ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)" (NCCL 2.19
// on; MinMax is min and max in one) or "ncclKernel_AllReduce_RING_LL_Sum_float(...)" (before).
struct KernelRedop {
  std::optional<ReduceOp> op;
  std::string token;  // the name's word for it, "" if none
};

KernelRedop kernel_redop(std::string_view name) {
  name = name.substr(0, name.find('('));
  KernelRedop out;
  size_t at = 0;
  while (at <= name.size()) {
    const size_t end = std::min(name.find('_', at), name.size());
    const std::string_view word = name.substr(at, end - at);
    if (word == "Sum") out = {ReduceOp::sum, "Sum"};
    if (word == "Prod") out = {ReduceOp::prod, "Prod"};
    if (word == "Min") out = {ReduceOp::min, "Min"};
    if (word == "Max") out = {ReduceOp::max, "Max"};
    if (word == "Avg") out = {ReduceOp::avg, "Avg"};
    if (word == "PreMulSum" || word == "SumPostDiv") out = {ReduceOp::avg, std::string(word)};
    if (word == "MinMax") out = {std::nullopt, "MinMax"};
    at = end + 1;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// A call as either format records it, before its group, dtype and counts are checked.

struct CommRecord {
  std::string where;  // "node 12" / "event 40 of traceEvents", for messages
  std::string collective, dtype, pg_name, pg_desc;
  std::optional<int64_t> in_nelems, out_nelems, group_size;
  json in_split, out_split;                       // null if not recorded
  json pg_ranks;                                  // Kineto's "Process Group Ranks"; null if not recorded
  std::optional<int64_t> recorded_rank;           // the caller's group rank, the root or the peer (RankRole)
  std::optional<int64_t> dst_global, src_global;  // Kineto's "Dst Rank" / "Src Rank"
  std::optional<ReduceOp> redop;
  double seconds = -1;

  // The text it holds, for the window's byte bound.
  int64_t bytes() const {
    const auto size = [](const json& j) {
      return j.is_string() ? j.get_ref<const std::string&>().size() : j.size() * 8;
    };
    return static_cast<int64_t>(sizeof(CommRecord) + where.size() + collective.size() + dtype.size() + pg_name.size() +
                                pg_desc.size() + size(in_split) + size(out_split) + size(pg_ranks));
  }
};

// The header, the groups and the ops as they go to the sink, with the checks both formats share.
class Emitter {
 public:
  Emitter(const std::string& path, TraceSink& sink, const ImportOptions& options, ImportSummary& summary)
      : path_(path), sink_(sink), options_(options), summary_(summary) {}

  void set_redop_note(std::string text) { redop_note_ = std::move(text); }
  void skip(const std::string& reason) { ++summary_.skipped[reason]; }
  void note(const std::string& text) {
    if (std::find(summary_.notes.begin(), summary_.notes.end(), text) == summary_.notes.end()) {
      summary_.notes.push_back(text);
    }
  }

  // A process group as a table (or an event) lists it: global ranks in group-rank order.
  void add_group(const std::string& pg, std::vector<int> ranks, const std::string& from) {
    const auto it = tables_.find(pg);
    if (it != tables_.end()) {
      if (it->second != ranks) {
        fail(path_, from + " lists process group " + quoted_input(pg) + " as " + brief(ranks) + ", listed before as " +
                        brief(it->second));
      }
      return;
    }
    table_ranks_ += ranks.size();
    if (table_ranks_ > kMaxGroupRanks) fail(path_, "process groups list more than 2^24 ranks in all");
    tables_.emplace(pg, std::move(ranks));
  }
  const std::vector<int>* group_ranks(const std::string& pg) const {
    const auto it = tables_.find(pg);
    return it == tables_.end() ? nullptr : &it->second;
  }

  bool started() const { return started_; }
  int rank() const { return rank_; }
  int world() const { return world_; }

  // The header: rank and world size from the trace where it says them, else from the options. The
  // group of every rank (`world_pg`, else a table's group of ranks 0..world-1) becomes group 0.
  void start(std::optional<int64_t> rank, std::optional<int64_t> world, const std::string& source,
             const std::string& backend, const std::string& world_pg) {
    const auto pick = [&](std::optional<int64_t> traced, int given, const char* what, const char* option) -> int64_t {
      if (traced) {
        if (given >= 0 && given != *traced) {
          note(std::string("the trace says ") + what + " " + number(*traced) + ": ImportOptions::" + option + " " +
               number(given) + " not used");
        }
        return *traced;
      }
      if (given >= 0) return given;
      fail(path_, std::string("the trace does not say its ") + what + ": give it (ImportOptions::" + option + ")");
    };
    const int64_t w = pick(world, options_.world, "world size", "world");
    const int64_t r = pick(rank, options_.rank, "rank", "rank");
    if (w < 1 || w > kMaxWorld) fail(path_, "world size " + number(w) + " outside 1..2^20");
    if (r < 0 || r >= w) fail(path_, "rank " + number(r) + " outside the world of " + number(w) + " ranks");
    world_ = static_cast<int>(w);
    rank_ = static_cast<int>(r);
    Header header;
    header.rank = rank_;
    header.world = world_;
    header.source = source;
    header.backend = backend;
    sink_.header(header);
    summary_.rank = rank_;
    summary_.world = world_;
    started_ = true;
    std::string whole = world_pg;
    for (auto it = tables_.begin(); whole.empty() && it != tables_.end(); ++it) {
      bool every = static_cast<int64_t>(it->second.size()) == w;
      for (size_t i = 0; every && i < it->second.size(); ++i) every = it->second[i] == static_cast<int>(i);
      if (every) whole = it->first;
    }
    if (const std::vector<int>* ranks = whole.empty() ? nullptr : group_ranks(whole)) group_id(whole, *ranks);
  }

  // The op of a record on a group of `ranks`, the group sent at its first use; none: skipped, counted.
  std::optional<Op> make(const CommRecord& rec, const Collective& c, const std::string& pg,
                         const std::vector<int>& ranks) {
    Op op;
    op.kind = c.kind;
    op.group = group_id(pg, ranks);
    op.seconds = rec.seconds;
    const int64_t members = static_cast<int64_t>(ranks.size());
    if (c.kind == OpKind::barrier) return op;

    if (rec.dtype.empty()) return skipped("record_param_comms without a dtype");
    const std::optional<DType> dtype = torch_dtype(rec.dtype);
    if (!dtype) return skipped("dtype " + quoted_input(rec.dtype) + ": no dtsuite type");
    op.dtype = dtype;
    const int64_t element = static_cast<int64_t>(size_of(*dtype));
    const int64_t max_count = kMaxOpBytes / element;
    const auto bounded = [&](int64_t count, const char* what) {
      if (count < 0) fail(path_, rec.where + ": " + what + " " + number(count) + " is below 0");
      if (count > max_count) {
        fail(path_, rec.where + ": " + what + " " + number(count) + " of " + std::string(name(*dtype)) + " (" +
                        number(element) + " bytes each) is more than 2^50 bytes: the count overflows");
      }
      return count;
    };
    const std::optional<int64_t> in = rec.in_nelems, out = rec.out_nelems;

    if (c.kind == OpKind::all_to_all || c.kind == OpKind::all_to_allv) {
      if (!in || !out) return skipped(std::string(c.name) + " without its in and out element counts");
      bounded(*in, "input elements");
      bounded(*out, "output elements");
      const IntList in_split = int_list(&rec.in_split), out_split = int_list(&rec.out_split);
      if (!in_split.ok || !out_split.ok) {
        return skipped(std::string(c.name) + " split sizes that are no lists of integers");
      }
      const bool splits =
          in_split.truncated || out_split.truncated || !in_split.values.empty() || !out_split.values.empty();
      if (c.kind == OpKind::all_to_all && !splits) {
        if (*in % members != 0) return skipped("all_to_all of elements that its group size does not divide");
        op.count = *in / members;
        return op;
      }
      op.kind = OpKind::all_to_allv;
      if (in_split.truncated || out_split.truncated) {
        op.splits_truncated = true;
        note("all_to_allv split lists cut by the profiler (\"...\", past 30 entries): splits_truncated, no splits");
        return op;
      }
      std::optional<std::vector<int64_t>> in_elems = elements(in_split.values, *in, members);
      std::optional<std::vector<int64_t>> out_elems = elements(out_split.values, *out, members);
      if (!in_elems || !out_elems) {
        return skipped("all_to_allv whose split sizes are not one per group rank dividing its elements");
      }
      op.in_splits = std::move(*in_elems);
      op.out_splits = std::move(*out_elems);
      return op;
    }

    const std::optional<int64_t> count = c.count == Count::out ? out : in;
    if (!count) {
      return skipped(std::string(c.name) +
                     (c.count == Count::out ? " without out_msg_nelems" : " without in_msg_nelems"));
    }
    op.count = bounded(*count, c.count == Count::out ? "output elements" : "input elements");
    if ((c.kind == OpKind::all_gather || c.kind == OpKind::reduce_scatter) && op.count > max_count / members) {
      fail(path_, rec.where + ": " + number(op.count) + " elements from each of " + number(members) +
                      " ranks are more than 2^50 bytes: the count overflows");
    }
    if (c.role == RankRole::root) {
      if (!rec.recorded_rank) {
        op.root = 0;
        note("a broadcast or reduce whose root is not recorded: replayed from group rank 0");
      } else if (*rec.recorded_rank < 0 || *rec.recorded_rank >= members) {
        fail(path_, rec.where + ": root " + number(*rec.recorded_rank) + " outside its group of " + number(members) +
                        " ranks");
      } else {
        op.root = static_cast<int>(*rec.recorded_rank);
      }
    }
    if (c.role == RankRole::peer) {
      const std::optional<int64_t> global = c.kind == OpKind::send ? rec.dst_global : rec.src_global;
      std::optional<int64_t> peer = rec.recorded_rank;
      if (global) {
        const auto it = std::find(ranks.begin(), ranks.end(), *global);
        if (it == ranks.end()) {
          fail(path_, rec.where + ": " + std::string(c.name) + " peer, global rank " + number(*global) +
                          ", is not in its process group " + quoted_input(pg) + " " + brief(ranks));
        }
        peer = it - ranks.begin();
      }
      if (!peer) return skipped(std::string(c.name) + " without its peer");
      if (*peer < 0 || *peer >= members) {
        fail(path_, rec.where + ": " + std::string(c.name) + " peer " + number(*peer) + " outside its group of " +
                        number(members) + " ranks");
      }
      op.peer = static_cast<int>(*peer);
    }
    if (is_reduction(c.kind)) {
      op.redop = rec.redop;
      if (!op.redop) note(redop_note_);
    }
    return op;
  }

  int64_t emit(Op& op) {
    op.seq = summary_.ops++;
    sink_.op(op);
    return op.seq;
  }

 private:
  std::optional<Op> skipped(const std::string& reason) {
    skip(reason);
    return std::nullopt;
  }

  // An all_to_allv's split sizes in elements: PyTorch's are rows of the tensor's first dimension
  // (c10d::checkSplitSizes), each row of nelems / their sum elements; none at all: equal splits.
  static std::optional<std::vector<int64_t>> elements(const std::vector<int64_t>& rows, int64_t nelems,
                                                      int64_t members) {
    if (rows.empty()) {
      if (nelems % members != 0) return std::nullopt;
      return std::vector<int64_t>(static_cast<size_t>(members), nelems / members);
    }
    if (static_cast<int64_t>(rows.size()) != members) return std::nullopt;
    int64_t sum = 0;
    for (const int64_t r : rows) {
      if (r < 0 || r > kMaxOpBytes) return std::nullopt;
      sum += r;  // at most 2^20 x 2^50: inside int64
    }
    if (sum == 0) {
      if (nelems != 0) return std::nullopt;
      return rows;
    }
    if (nelems % sum != 0) return std::nullopt;
    std::vector<int64_t> out;
    out.reserve(rows.size());
    for (const int64_t r : rows) out.push_back(r * (nelems / sum));  // at most nelems, below 2^50
    return out;
  }

  // The group of a process group, checked and sent at its first use.
  int group_id(const std::string& pg, const std::vector<int>& ranks) {
    const auto it = ids_.find(pg);
    if (it != ids_.end()) return it->second;
    if (ranks.empty()) fail(path_, "process group " + quoted_input(pg) + " has no ranks");
    std::vector<int> sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i) {
      if (sorted[i] < 0 || sorted[i] >= world_) {
        fail(path_, "process group " + quoted_input(pg) + " " + brief(ranks) + " holds rank " + number(sorted[i]) +
                        ", outside the world of " + number(world_) + " ranks");
      }
      if (i > 0 && sorted[i] == sorted[i - 1]) {
        fail(path_,
             "process group " + quoted_input(pg) + " " + brief(ranks) + " names rank " + number(sorted[i]) + " twice");
      }
    }
    if (!std::binary_search(sorted.begin(), sorted.end(), rank_)) {
      fail(path_, "process group " + quoted_input(pg) + " " + brief(ranks) + " does not hold this trace's rank " +
                      number(rank_));
    }
    if (ids_.size() >= static_cast<size_t>(kMaxWorld)) fail(path_, "more than 2^20 process groups");
    const int id = static_cast<int>(ids_.size());
    ids_.emplace(pg, id);
    sink_.group(Group{id, ranks});
    return id;
  }

  std::string path_;
  TraceSink& sink_;
  const ImportOptions& options_;
  ImportSummary& summary_;
  std::string redop_note_ = "reduction op not recorded: replayed as sum";
  std::map<std::string, std::vector<int>> tables_;
  size_t table_ranks_ = 0;
  std::map<std::string, int> ids_;
  bool started_ = false;
  int rank_ = 0, world_ = 1;
};

// The ranks of a group as a table lists them: JSON integers of 0..2^20-1, or an object of
// global -> group rank (older pg_config_info); empty: every rank of a group of `size`.
std::optional<std::vector<int>> table_ranks(const json* value, std::optional<int64_t> size) {
  std::vector<int> ranks;
  if (value != nullptr && value->is_object()) {
    std::vector<std::pair<int64_t, int>> by_group_rank;
    for (const auto& [key, local] : value->items()) {
      int global = 0;
      const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), global);
      if (ec != std::errc() || end != key.data() + key.size() || !local.is_number_integer()) return std::nullopt;
      by_group_rank.emplace_back(local.get<int64_t>(), global);
    }
    std::sort(by_group_rank.begin(), by_group_rank.end());
    for (const auto& [local, global] : by_group_rank) ranks.push_back(global);
  } else {
    const IntList list = int_list(value);
    if (!list.ok || list.truncated) return std::nullopt;
    for (const int64_t r : list.values) {
      if (r < 0 || r >= kMaxWorld) return std::nullopt;
      ranks.push_back(static_cast<int>(r));
    }
  }
  for (const int r : ranks) {
    if (r < 0 || r >= kMaxWorld) return std::nullopt;
  }
  if (ranks.empty()) {
    if (!size || *size < 1 || *size > kMaxWorld) return std::nullopt;
    for (int r = 0; r < *size; ++r) ranks.push_back(r);
  }
  return ranks;
}

// ---------------------------------------------------------------------------------------------
// PyTorch ET.

// The (seq, is-p2p) of a call and the wait that completes it, in its process group.
struct SeqKey {
  std::string pg;
  int64_t seq = 0;
  bool p2p = false;
  auto operator<=>(const SeqKey&) const = default;
};

struct EtRecord {
  CommRecord rec;
  const Collective* collective = nullptr;  // none: a wait
  std::optional<SeqKey> key;
  bool absorbed = false;         // a wait folded into the blocking call just before it
  bool covers_skipped = false;   // a wait of a call that was skipped (dtype, ...): goes with it
  std::vector<int64_t> targets;  // a wait: the seqs of the async ops it completes
  int target_group = 0;
  int64_t bytes = 0;
};

class EtImporter final : public SaxBase {
 public:
  EtImporter(JsonInput& input, TraceSink& sink, const ImportOptions& options)
      : SaxBase(input), emitter_(input.path(), sink, options, summary_) {}

  ImportSummary run() {
    parse();
    if (!nodes_) fail(path(), "no \"nodes\": not a PyTorch execution trace");
    if (schema_.empty()) fail(path(), "no \"schema\": not a PyTorch execution trace of schema 1.1.0 or later");
    while (!window_.empty()) emit_front();
    if (!emitter_.started()) start();
    if (async_ > 0) {
      emitter_.note(
          "a call whose wait (record_param_comms \"wait\") follows it before any other call is blocking; "
          "one with calls between it and its wait is async, and the wait a wait op");
    }
    if (unwaited_ > 0) {
      emitter_.note(number(unwaited_) +
                    " ops with no wait in the reorder window (never waited, or a backend that "
                    "records none, such as Gloo): imported blocking");
    }
    if (late_ > 0) {
      emitter_.note(number(late_) + " nodes arrived after nodes of later ids had left the reorder window (" +
                    number(static_cast<int64_t>(kReorderWindow)) +
                    "): imported where they arrived, out of issue order");
    }
    return summary_;
  }

 private:
  Top top_key(const std::string& key) override {
    if (key == "schema") return Top::capture;
    if (key == "nodes") {
      nodes_ = true;
      return Top::events;
    }
    if (key == "traceEvents" || key == "schemaVersion") {
      fail(path(), "a Kineto trace (it has \"" + key + "\"), not a PyTorch execution trace: import it as Kineto");
    }
    return Top::skip;
  }

  void top_value(const std::string& key, json& value) override {
    if (key != "schema") return;
    if (!value.is_string()) fail(path(), "\"schema\" is not a string");
    schema_ = value.get<std::string>();
    // "1.1.1-chakra.0.0.4": PyTorch's version before the '-'.
    int64_t parts[3] = {0, 0, 0};
    const std::string version = schema_.substr(0, schema_.find('-'));
    const char* at = version.data();
    const char* end = version.data() + version.size();
    bool ok = true;
    for (int i = 0; i < 3 && ok; ++i) {
      const auto [next, ec] = std::from_chars(at, end, parts[i]);
      ok = ec == std::errc() && (i == 2 ? next == end : next < end && *next == '.');
      if (ok && i < 2) at = next + 1;
    }
    if (!ok) fail(path(), "schema " + quoted_input(schema_) + " is not a PyTorch execution trace version");
    if (std::make_tuple(parts[0], parts[1], parts[2]) < std::make_tuple(int64_t{1}, int64_t{1}, int64_t{0})) {
      fail(path(), "PyTorch execution trace schema " + quoted_input(schema_) +
                       ": 1.1.0 or later is needed (its record_param_comms attributes came with 1.1.0)");
    }
  }

  static bool wanted_name(const std::string& name) {
    return name == "record_param_comms" || name.find("process_group:init") != std::string::npos;
  }

  bool event_wants(const std::string& key, const json& node) override {
    if (key == "id" || key == "name") return true;
    if (key != "inputs" && key != "attrs") return false;
    const std::optional<std::string> name = text(field(node, "name"));
    return !name || wanted_name(*name);  // the observer writes the name first; another order keeps all
  }

  void event(json& node) override {
    const std::optional<std::string> name = text(field(node, "name"));
    if (!name || !wanted_name(*name)) return;
    const std::optional<int64_t> id = integer(field(node, "id"), path(), "node id");
    if (!id) fail(path(), "node " + number(event_index()) + " of \"nodes\" (" + *name + ") has no integer \"id\"");
    if (*name == "record_param_comms") {
      record(node, *id);
    } else {
      groups(node, *id);
    }
  }

  // "## process_group:init ##": pg_config_info as JSON text, its first input.
  void groups(const json& node, int64_t id) {
    const json* inputs = field(node, "inputs");
    const json* values = inputs ? field(*inputs, "values") : nullptr;
    if (values == nullptr || !values->is_array() || values->empty()) {
      fail(path(), "node " + number(id) + " (process_group:init) has no inputs");
    }
    table_seen_ = true;
    json table = (*values)[0];
    if (table.is_string()) table = json::parse(table.get<std::string>(), nullptr, false);
    if (table.is_discarded() || !table.is_array()) {
      fail(path(),
           "node " + number(id) + " (process_group:init): its process-group table is not a JSON list (cut short?)");
    }
    for (const json& entry : table) {
      const json* name = field(entry, "pg_name");
      if (name == nullptr || !(name->is_string() || name->is_number_integer())) {
        fail(path(), "node " + number(id) + " (process_group:init): an entry without a pg_name");
      }
      const std::string pg = name->is_string() ? name->get<std::string>() : name->dump();
      const json* size_field = field(entry, "group_size") ? field(entry, "group_size") : field(entry, "pg_size");
      const std::optional<int64_t> size = integer(size_field, path(), "group_size");
      const json* ranks_field = field(entry, "ranks");
      const std::optional<std::vector<int>> ranks = table_ranks(ranks_field, size);
      if (!ranks) {
        fail(path(), "node " + number(id) + " (process_group:init): process group " + quoted_input(pg) +
                         " has no ranks of 0..2^20-1 (nor, listed as empty, a group_size)");
      }
      const bool every_rank = ranks_field == nullptr || (ranks_field->is_array() && ranks_field->empty());
      if (every_rank && (world_pg_.empty() || text(field(entry, "pg_desc")).value_or("") == "default_pg")) {
        // pg_config_info lists no ranks for a group of every rank: the world (the default group's
        // entry where another group of every rank is listed too).
        world_size_ = size;
        world_pg_ = pg;
        backend_ = text(field(entry, "backend_config")).value_or("");
      }
      emitter_.add_group(pg, *ranks, "node " + number(id));
    }
  }

  void record(const json& node, int64_t id) {
    const std::string where = "node " + number(id);
    std::map<std::string, const json*> attrs;
    if (const json* list = field(node, "attrs"); list != nullptr && list->is_array()) {
      for (const json& a : *list) {
        if (const std::optional<std::string> n = text(field(a, "name")); n && field(a, "value")) {
          attrs[*n] = field(a, "value");
        }
      }
    }
    const auto attr = [&](const char* key) -> const json* {
      const auto it = attrs.find(key);
      return it == attrs.end() ? nullptr : it->second;
    };
    static const json kNone;
    const json* inputs = field(node, "inputs");
    const json* values = inputs ? field(*inputs, "values") : nullptr;
    const auto value = [&](size_t i) -> const json& {
      return values != nullptr && values->is_array() && i < values->size() ? (*values)[i] : kNone;
    };
    // The macro's arguments ([tensors,] seq, (pg_name, pg_desc), rank, name, ...): the seq is an
    // integer or [seq, is_p2p]; anything else first is the tensors (et_replay's is_seq_id).
    const auto is_seq = [](const json& v) {
      return v.is_number_integer() || (v.is_array() && v.size() == 2 && v[0].is_number_integer() && v[1].is_boolean());
    };
    const size_t base = is_seq(value(0)) ? 0 : 1;

    EtRecord r;
    CommRecord& rec = r.rec;
    rec.where = where;
    rec.collective = text(attr("collective_name")).value_or(text(&value(base + 3)).value_or(""));
    if (rec.collective.empty()) return emitter_.skip("record_param_comms without a collective_name");
    rec.pg_name = text(attr("pg_name")).value_or("");
    if (rec.pg_name.empty() && value(base + 1).is_array() && !value(base + 1).empty()) {
      rec.pg_name = text(&value(base + 1)[0]).value_or("");
    }
    rec.pg_desc = text(attr("pg_desc")).value_or("");
    rec.dtype = text(attr("dtype")).value_or("");
    rec.in_nelems = integer(attr("in_msg_nelems"), path(), where + ": in_msg_nelems");
    rec.out_nelems = integer(attr("out_msg_nelems"), path(), where + ": out_msg_nelems");
    rec.group_size = integer(attr("pg_size"), path(), where + ": pg_size");
    if (const json* s = attr("in_split_size")) rec.in_split = *s;
    if (const json* s = attr("out_split_size")) rec.out_split = *s;
    rec.recorded_rank = integer(&value(base + 2), path(), where + ": recorded rank");
    if (const json& seq = value(base); is_seq(seq)) {
      r.key = seq.is_array() ? SeqKey{rec.pg_name, seq[0].get<int64_t>(), seq[1].get<bool>()}
                             : SeqKey{rec.pg_name, seq.get<int64_t>(), false};
    }
    if (rec.collective != "wait") {
      r.collective = collective_of(rec.collective);
      if (r.collective == nullptr) {
        if (const std::string why = unmapped(rec.collective); !why.empty()) emitter_.skip(why);
        return;
      }
    } else if (!r.key) {
      return emitter_.skip("record_param_comms wait without the seq of the call it completes");
    }
    r.bytes = rec.bytes();
    if (emitted_any_ && id < last_id_) ++late_;
    const bool wait = r.collective == nullptr;
    const std::optional<SeqKey> key = r.key;
    const int64_t bytes = r.bytes;
    if (!window_.emplace(id, std::move(r)).second) fail(path(), "node id " + number(id) + " appears twice");
    if (wait) waits_.emplace(*key, id);
    window_bytes_ += bytes;
    while (window_.size() > kReorderWindow || window_bytes_ > kMaxWindowBytes) emit_front();
  }

  void start() {
    if (schema_.empty()) fail(path(), "no \"schema\" before its nodes: 1.1.0 or later is needed");
    // A call on a group no table lists is the fault to name, before the rank and world it hides.
    for (const auto& [id, r] : window_) {
      if (r.collective != nullptr) {
        ranks_of(r.rec);
        break;
      }
    }
    // The rank: what a call recording the caller's own group rank says, through its group.
    std::optional<int64_t> rank;
    for (const auto& [id, r] : window_) {
      const bool own = r.collective == nullptr || r.collective->role == RankRole::own;
      const std::vector<int>* ranks = emitter_.group_ranks(r.rec.pg_name);
      if (!own || ranks == nullptr || !r.rec.recorded_rank) continue;
      if (*r.rec.recorded_rank >= 0 && *r.rec.recorded_rank < static_cast<int64_t>(ranks->size())) {
        rank = (*ranks)[static_cast<size_t>(*r.rec.recorded_rank)];
        break;
      }
    }
    emitter_.start(rank, world_size_, "pytorch-et " + schema_, backend_, world_pg_);
    summary_.format = "pytorch-et " + schema_;
  }

  // The wait of a call: the first after it with its key; else one with its seq less one (the calls
  // of a coalescing block record the block's seq plus one, the block's wait the block's seq).
  std::optional<int64_t> wait_of(const SeqKey& key, int64_t id) const {
    for (const SeqKey& k : {key, SeqKey{key.pg, key.seq - 1, key.p2p}}) {
      std::optional<int64_t> best;
      const auto [lo, hi] = waits_.equal_range(k);
      for (auto it = lo; it != hi; ++it) {
        if (it->second > id && (!best || it->second < *best)) best = it->second;
      }
      if (best) return best;
    }
    return std::nullopt;
  }

  void unindex_wait(const SeqKey& key, int64_t id) {
    const auto [lo, hi] = waits_.equal_range(key);
    for (auto it = lo; it != hi; ++it) {
      if (it->second == id) {
        waits_.erase(it);
        return;
      }
    }
  }

  const std::vector<int>& ranks_of(const CommRecord& rec) {
    if (const std::vector<int>* ranks = emitter_.group_ranks(rec.pg_name)) return *ranks;
    fail(path(),
         rec.where + ": record_param_comms on process group " + quoted_input(rec.pg_name) +
             (table_seen_ ? ", which the process-group table does not list"
                          : ", but the trace has no process-group table (no \"## process_group:init ##\" node)"));
  }

  void emit_front() {
    if (!emitter_.started()) start();
    auto entry = window_.extract(window_.begin());
    const int64_t id = entry.key();
    EtRecord& r = entry.mapped();
    window_bytes_ -= r.bytes;
    emitted_any_ = true;
    last_id_ = std::max(last_id_, id);
    if (r.collective == nullptr) {  // a wait
      unindex_wait(*r.key, id);
      if (r.absorbed || (r.targets.empty() && r.covers_skipped)) return;
      if (r.targets.empty()) {
        return emitter_.skip(
            "wait that completes no call still in flight (a second wait on one call, or a call "
            "further back than the reorder window)");
      }
      Op op;
      op.kind = OpKind::wait;
      op.group = r.target_group;
      op.waits = std::move(r.targets);
      emitter_.emit(op);
      return;
    }
    const std::optional<int64_t> wait = r.key ? wait_of(*r.key, id) : std::nullopt;
    std::optional<Op> op = emitter_.make(r.rec, *r.collective, r.rec.pg_name, ranks_of(r.rec));
    if (!op) {
      if (wait) window_.at(*wait).covers_skipped = true;
      return;
    }
    if (!wait) {
      ++unwaited_;
      emitter_.emit(*op);
      return;
    }
    EtRecord& w = window_.at(*wait);
    const bool next = window_.begin()->first == *wait && w.targets.empty();
    op->async = !next;
    const int64_t seq = emitter_.emit(*op);
    if (next) {
      w.absorbed = true;  // a synchronous call: its wait is its end
    } else {
      w.targets.push_back(seq);
      w.target_group = op->group;
      ++async_;
    }
  }

  ImportSummary summary_;
  Emitter emitter_;
  std::string schema_, backend_, world_pg_;
  std::optional<int64_t> world_size_;
  bool nodes_ = false, emitted_any_ = false, table_seen_ = false;
  std::map<int64_t, EtRecord> window_;    // by node id: issue order
  std::multimap<SeqKey, int64_t> waits_;  // the waits in the window, by key
  int64_t window_bytes_ = 0, last_id_ = 0, late_ = 0, async_ = 0, unwaited_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Kineto.

struct KinetoEntry {
  std::optional<CommRecord> cpu;     // the record_param_comms CPU op
  std::optional<CommRecord> kernel;  // the kernel's own arguments, for an op of a kernel alone
  bool has_kernel = false;
  double kernel_seconds = 0;
  KernelRedop redop;
  int64_t external = -1;
  int64_t bytes = 0;
};

class KinetoImporter final : public SaxBase {
 public:
  KinetoImporter(JsonInput& input, TraceSink& sink, const ImportOptions& options)
      : SaxBase(input), emitter_(input.path(), sink, options, summary_) {
    emitter_.set_redop_note(
        "reduction op not recorded (a CPU op without its NCCL kernel, or a kernel name "
        "without one): replayed as sum");
  }

  ImportSummary run() {
    parse();
    if (!events_) fail(path(), "no \"traceEvents\": not a Kineto trace");
    while (!window_.empty()) emit_front();
    if (!emitter_.started()) start();
    if (timed_ > 0) {
      emitter_.note(
          "one op per call: its record_param_comms CPU op (issue order by its ts), timed by its NCCL "
          "kernel (the same External id), which names its reduction op");
    }
    if (untimed_ > 0) {
      emitter_.note(number(untimed_) + " ops without their NCCL kernel in the reorder window: untimed (seconds -1)");
    }
    if (late_kernels_ > 0) {
      emitter_.note(number(late_kernels_) + " NCCL kernels arrived after their CPU op had left the reorder window (" +
                    number(static_cast<int64_t>(kReorderWindow)) + "): their ops are untimed");
    }
    if (late_ > 0) {
      emitter_.note(number(late_) +
                    " events arrived after events of later ts had left the reorder window: imported "
                    "where they arrived, out of issue order");
    }
    if (waits_ > 0) emitter_.note("every op is blocking on stream 0: Kineto's record_param_comms waits are skipped");
    return summary_;
  }

 private:
  Top top_key(const std::string& key) override {
    if (key == "traceEvents") {
      events_ = true;
      return Top::events;
    }
    if (key == "distributedInfo") return Top::capture;
    if (key == "schema" || key == "nodes") {
      fail(path(), "a PyTorch execution trace (it has \"" + key + "\"), not a Kineto trace: import it as pytorch-et");
    }
    return Top::skip;
  }

  // distributedInfo: {backend, rank, world_size, pg_count, pg_config: [...]}.
  void top_value(const std::string& key, json& info) override {
    if (key != "distributedInfo" || !info.is_object()) return;
    const std::optional<int64_t> rank = integer(field(info, "rank"), path(), "distributedInfo rank");
    const std::optional<int64_t> world = integer(field(info, "world_size"), path(), "distributedInfo world_size");
    if (emitter_.started() && ((rank && *rank != emitter_.rank()) || (world && *world != emitter_.world()))) {
      fail(path(), "distributedInfo, after the events, says rank " + number(rank.value_or(-1)) + " of " +
                       number(world.value_or(-1)) + ", where the header went out as rank " + number(emitter_.rank()) +
                       " of " + number(emitter_.world()) + " (from ImportOptions or the events)");
    }
    if (rank) dist_rank_ = rank;
    if (world) dist_world_ = world;
    if (const std::optional<std::string> backend = text(field(info, "backend"))) backend_ = *backend;
    if (const json* configs = field(info, "pg_config"); configs != nullptr && configs->is_array()) {
      for (const json& pg : *configs) {
        const json* name = field(pg, "pg_name");
        if (name == nullptr || !(name->is_string() || name->is_number_integer())) continue;
        const std::string pg_name = name->is_string() ? name->get<std::string>() : name->dump();
        const std::optional<int64_t> size = integer(field(pg, "pg_size"), path(), "distributedInfo pg_size");
        const std::optional<std::vector<int>> ranks = table_ranks(field(pg, "ranks"), size);
        if (ranks) emitter_.add_group(pg_name, *ranks, "distributedInfo");  // cut lists: the events' are no better
      }
    }
  }

  bool event_wants(const std::string& key, const json& event) override {
    if (key == "ph" || key == "cat" || key == "name" || key == "ts" || key == "dur") return true;
    if (key != "args") return false;
    const std::optional<std::string> name = text(field(event, "name"));
    return !name || wanted(*name, text(field(event, "cat")).value_or(""));
  }

  static bool wanted(const std::string& name, const std::string& cat) {
    return name == "record_param_comms" || (cat == "kernel" && name.rfind("nccl", 0) == 0);
  }

  void event(json& event) override {
    if (text(field(event, "ph")).value_or("") != "X") return;  // complete events: ops and kernels
    const std::string name = text(field(event, "name")).value_or("");
    const std::string cat = text(field(event, "cat")).value_or("");
    if (!wanted(name, cat)) return;
    const json* args = field(event, "args");
    static const json kEmpty = json::object();
    if (args == nullptr || !args->is_object()) args = &kEmpty;
    const std::string where = "event " + number(event_index()) + " of traceEvents";
    const std::optional<double> ts = real(field(event, "ts"));
    std::optional<int64_t> external = integer(field(*args, "External id"), path(), where + ": External id");
    if (!external) external = integer(field(*args, "external id"), path(), where + ": external id");
    if (name == "record_param_comms") {
      cpu_op(*args, where, ts, external);
    } else {
      kernel(*args, where, name, ts, real(field(event, "dur")), external);
    }
  }

  CommRecord record(const json& args, const std::string& where) const {
    CommRecord rec;
    rec.where = where;
    rec.collective = text(field(args, "Collective name")).value_or("");
    rec.dtype = text(field(args, "dtype")).value_or("");
    rec.in_nelems = integer(field(args, "In msg nelems"), path(), where + ": In msg nelems");
    rec.out_nelems = integer(field(args, "Out msg nelems"), path(), where + ": Out msg nelems");
    rec.group_size = integer(field(args, "Group size"), path(), where + ": Group size");
    if (const json* s = field(args, "In split size")) rec.in_split = *s;
    if (const json* s = field(args, "Out split size")) rec.out_split = *s;
    rec.pg_name = text(field(args, "Process Group Name")).value_or("");
    rec.pg_desc = text(field(args, "Process Group Description")).value_or("");
    if (const json* r = field(args, "Process Group Ranks")) rec.pg_ranks = *r;
    rec.recorded_rank = integer(field(args, "Rank"), path(), where + ": Rank");
    rec.dst_global = integer(field(args, "Dst Rank"), path(), where + ": Dst Rank");
    rec.src_global = integer(field(args, "Src Rank"), path(), where + ": Src Rank");
    return rec;
  }

  // Whether a record's name is a call to import; skipped ones counted.
  bool importable(const std::string& collective) {
    if (collective == "wait") {
      ++waits_;
      emitter_.skip("record_param_comms wait (Kineto's ops are imported blocking)");
      return false;
    }
    if (collective_of(collective) != nullptr) return true;
    if (collective.empty()) {
      emitter_.skip("record_param_comms without a \"Collective name\"");
    } else if (const std::string why = unmapped(collective); !why.empty()) {
      emitter_.skip(why);
    }
    return false;
  }

  void cpu_op(const json& args, const std::string& where, std::optional<double> ts, std::optional<int64_t> external) {
    cpu_seen_ = true;
    CommRecord rec = record(args, where);
    if (!importable(rec.collective)) return;
    if (!ts) return emitter_.skip("record_param_comms without a \"ts\"");
    if (external) {
      if (const auto it = by_external_.find(*external); it != by_external_.end() && !window_.at(it->second).cpu) {
        // Its kernel came first: the entry takes the CPU op's ts, the call's issue time.
        auto entry = window_.extract(it->second);
        window_bytes_ += rec.bytes();
        entry.mapped().bytes += rec.bytes();
        entry.mapped().cpu = std::move(rec);
        entry.key() = {*ts, arrivals_++};
        it->second = entry.key();
        window_.insert(std::move(entry));
        return;
      }
      if (recent_set_.count(*external)) {
        return emitter_.skip("record_param_comms whose NCCL kernel was imported as an op of its own before it");
      }
    }
    KinetoEntry entry;
    entry.cpu = std::move(rec);
    insert(std::move(entry), *ts, external);
  }

  void kernel(const json& args, const std::string& where, const std::string& name, std::optional<double> ts,
              std::optional<double> dur, std::optional<int64_t> external) {
    const double seconds = dur && *dur >= 0 ? *dur * 1e-6 : 0;
    if (!external) return emitter_.skip("NCCL kernel without an External id");
    if (const auto it = by_external_.find(*external); it != by_external_.end()) {
      KinetoEntry& entry = window_.at(it->second);
      entry.has_kernel = true;
      entry.kernel_seconds += seconds;  // a call of several kernels (coalesced) takes them all
      if (const KernelRedop r = kernel_redop(name); !r.token.empty()) entry.redop = r;
      return;
    }
    if (recent_set_.count(*external)) {
      ++late_kernels_;
      return;
    }
    if (!ts) return emitter_.skip("NCCL kernel without a \"ts\"");
    KinetoEntry entry;
    CommRecord rec = record(args, where);
    if (!rec.collective.empty()) entry.kernel = std::move(rec);
    entry.has_kernel = true;
    entry.kernel_seconds = seconds;
    entry.redop = kernel_redop(name);
    insert(std::move(entry), *ts, external);
  }

  void insert(KinetoEntry entry, double ts, std::optional<int64_t> external) {
    if (emitted_any_ && ts < last_ts_) ++late_;
    entry.external = external.value_or(-1);
    entry.bytes = static_cast<int64_t>(sizeof(KinetoEntry)) + (entry.cpu ? entry.cpu->bytes() : 0) +
                  (entry.kernel ? entry.kernel->bytes() : 0);
    window_bytes_ += entry.bytes;
    const std::pair<double, int64_t> key{ts, arrivals_++};
    window_.emplace(key, std::move(entry));
    if (external) by_external_[*external] = key;
    while (window_.size() > kReorderWindow || window_bytes_ > kMaxWindowBytes) emit_front();
  }

  // A group's ranks: a table's (distributedInfo), else the record's own "Process Group Ranks".
  const std::vector<int>* ranks_of(const CommRecord& rec, bool derive_only) {
    if (const std::vector<int>* ranks = emitter_.group_ranks(rec.pg_name)) return ranks;
    const IntList list = int_list(&rec.pg_ranks);
    if (list.ok && !list.truncated && list.present) {
      std::optional<std::vector<int>> ranks = table_ranks(&rec.pg_ranks, std::nullopt);
      if (!ranks && list.values.empty() && !derive_only && rec.group_size && *rec.group_size == emitter_.world()) {
        ranks = table_ranks(&rec.pg_ranks, rec.group_size);  // "[]": the group of every rank
      }
      if (ranks) {
        emitter_.add_group(rec.pg_name, *ranks, rec.where);
        return emitter_.group_ranks(rec.pg_name);
      }
    }
    if (derive_only) return nullptr;
    if (rec.pg_name.empty()) {
      fail(path(), rec.where +
                       ": record_param_comms without a \"Process Group Name\" (older PyTorch versions record none)");
    }
    if (list.truncated) {
      fail(path(), rec.where + ": process group " + quoted_input(rec.pg_name) +
                       ": Kineto cut its \"Process Group Ranks\" (\"...\") and no distributedInfo pg_config lists it");
    }
    fail(path(), rec.where + ": process group " + quoted_input(rec.pg_name) +
                     " has no ranks: no \"Process Group Ranks\" and no distributedInfo pg_config lists it");
  }

  void start() {
    std::optional<int64_t> rank = dist_rank_, world = dist_world_;
    for (const auto& [key, entry] : window_) {
      if (rank && world) break;
      if (!entry.cpu) continue;
      const CommRecord& rec = *entry.cpu;
      if (!world && rec.pg_desc == "default_pg" && rec.group_size) world = rec.group_size;
      const Collective* c = collective_of(rec.collective);
      if (rank || c == nullptr || c->role != RankRole::own || !rec.recorded_rank) continue;
      if (const std::vector<int>* ranks = ranks_of(rec, true);
          ranks != nullptr && *rec.recorded_rank >= 0 && *rec.recorded_rank < static_cast<int64_t>(ranks->size())) {
        rank = (*ranks)[static_cast<size_t>(*rec.recorded_rank)];
      }
    }
    emitter_.start(rank, world, "kineto", backend_, "");
    summary_.format = "kineto";
  }

  void emit_front() {
    if (!emitter_.started()) start();
    auto node = window_.extract(window_.begin());
    KinetoEntry& entry = node.mapped();
    window_bytes_ -= entry.bytes;
    emitted_any_ = true;
    last_ts_ = std::max(last_ts_, node.key().first);
    if (entry.external >= 0) {
      by_external_.erase(entry.external);
      recent_.push_back(entry.external);
      recent_set_.insert(entry.external);
      if (recent_.size() > kReorderWindow) {
        recent_set_.erase(recent_.front());
        recent_.pop_front();
      }
    }
    CommRecord rec;
    if (entry.cpu) {
      rec = std::move(*entry.cpu);
      entry.has_kernel ? ++timed_ : ++untimed_;
    } else if (entry.kernel && !cpu_seen_) {
      rec = std::move(*entry.kernel);
      emitter_.note(
          "NCCL kernels with no record_param_comms CPU op in the trace: ops of the kernels alone "
          "(their roots and own group ranks are not recorded)");
    } else {
      return emitter_.skip(entry.kernel ? "NCCL kernel whose record_param_comms CPU op is not in the reorder window"
                                        : "NCCL kernel without collective arguments or a record_param_comms CPU op");
    }
    if (entry.has_kernel) rec.seconds = entry.kernel_seconds;
    if (!importable(rec.collective)) return;
    const Collective& c = *collective_of(rec.collective);
    if (is_reduction(c.kind) && !entry.redop.token.empty()) {
      rec.redop = entry.redop.op;
      if (entry.redop.token == "PreMulSum" || entry.redop.token == "SumPostDiv") {
        emitter_.note(
            "kernels named PreMulSum or SumPostDiv (how NCCL runs avg; PyTorch's premul_sum too) replayed "
            "as avg");
      } else if (entry.redop.token == "MinMax") {
        emitter_.note("kernels named MinMax (min or max, NCCL 2.19 on): reduction op not recorded, replayed as sum");
      }
    }
    std::string pg = rec.pg_name;
    const std::vector<int>* ranks = nullptr;
    std::vector<int> world;
    if (pg.empty() && rec.group_size && *rec.group_size == emitter_.world()) {
      // An older PyTorch names no process group: a call of every rank is taken as the world's.
      for (int r = 0; r < emitter_.world(); ++r) world.push_back(r);
      ranks = &world;
      emitter_.note("calls without a \"Process Group Name\" whose \"Group size\" is the world's: taken as the world");
    } else {
      ranks = ranks_of(rec, false);
    }
    if (std::optional<Op> op = emitter_.make(rec, c, pg, *ranks)) emitter_.emit(*op);
  }

  ImportSummary summary_;
  Emitter emitter_;
  std::string backend_;
  std::optional<int64_t> dist_rank_, dist_world_;
  bool events_ = false, cpu_seen_ = false, emitted_any_ = false;
  std::map<std::pair<double, int64_t>, KinetoEntry> window_;  // by (ts, arrival): issue order
  std::unordered_map<int64_t, std::pair<double, int64_t>> by_external_;
  std::deque<int64_t> recent_;  // External ids of entries that left, the latest kReorderWindow
  std::unordered_set<int64_t> recent_set_;
  int64_t arrivals_ = 0, window_bytes_ = 0, timed_ = 0, untimed_ = 0, late_kernels_ = 0, late_ = 0, waits_ = 0;
  double last_ts_ = 0;
};

// ---------------------------------------------------------------------------------------------

class Sniffer final : public SaxBase {
 public:
  using SaxBase::SaxBase;
  const std::string& kind() const { return kind_; }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    stop();
    return false;
  }

 private:
  Top top_key(const std::string& key) override {
    static const std::set<std::string> kKineto = {"schemaVersion",   "traceEvents",     "deviceProperties",
                                                  "distributedInfo", "displayTimeUnit", "baseTimeNanoseconds",
                                                  "traceName"};
    if (key == "schema" || key == "nodes") {
      kind_ = "pytorch-et";
      stop();
    } else if (kKineto.count(key)) {
      kind_ = "kineto";
      stop();
    }
    return Top::skip;
  }
  void top_value(const std::string&, json&) override {}
  bool event_wants(const std::string&, const json&) override { return false; }
  void event(json&) override {}
  void not_an_object() override { stop(); }

  std::string kind_;
};

}  // namespace

ImportSummary import_pytorch_et(const std::string& path, TraceSink& sink, const ImportOptions& options) {
  ByteSource bytes(path, "PyTorch execution trace", options.timeout_seconds);
  JsonInput input(bytes, path);
  EtImporter importer(input, sink, options);
  return importer.run();
}

ImportSummary import_kineto(const std::string& path, TraceSink& sink, const ImportOptions& options) {
  ByteSource bytes(path, "Kineto trace", options.timeout_seconds);
  JsonInput input(bytes, path);
  KinetoImporter importer(input, sink, options);
  return importer.run();
}

std::string sniff_json_trace(const std::string& path, double timeout_seconds) {
  try {
    ByteSource bytes(path, "JSON trace", timeout_seconds);
    JsonInput input(bytes, path, kSniffBytes);
    Sniffer sniffer(input);
    sniffer.parse();
    return sniffer.kind();
  } catch (const Error& e) {
    if (e.kind() != Error::Kind::invalid_argument) throw;  // unreadable: an error, not "neither"
    return "";                                             // not JSON, corrupt gzip, a value beyond the bounds
  }
}

}  // namespace dts::trace
