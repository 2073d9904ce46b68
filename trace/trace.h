// dtsuite's communication trace: what one rank of a job asked of its communication library, one
// JSON object per line (JSON lines), in the order the rank issued it. A trace is a folder with one
// file per rank (rank-R.jsonl); docs/trace.md is the format's reference.
//
// Each file starts with a header line, then group lines (a communicator: its global ranks) and op
// lines (one call), a group always before the first op on it:
//   {"dtsuite_trace":1,"rank":0,"world":4,"source":"dtsuite record","backend":"mpi"}
//   {"group":0,"ranks":[0,1,2,3]}
//   {"seq":0,"group":0,"op":"all_reduce","dtype":"f32","redop":"sum","count":1024,"us":12.5}
//   {"seq":1,"group":0,"op":"recv","dtype":"f32","count":64,"peer":1,"async":true}
//   {"seq":2,"group":0,"op":"wait","waits":[1]}
// The writer here and the importers (trace/import_*.h) produce it; the checker (trace/check.h),
// `trace stats` and the replay suite read it.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/input_file.h"

namespace dts::trace {

// The format's version, the header's "dtsuite_trace" field. A reader refuses a later one.
inline constexpr int kTraceVersion = 1;
// A world of more ranks than any job runs (the largest reported are some 100k GPUs): a header
// beyond it is not a trace, and a group's rank list is bounded by it.
inline constexpr int kMaxWorld = 1 << 20;
// The most bytes an op may name (2^50, parse_size's bound): counts beyond it overflow a replay's
// buffers long before they exhaust an int64.
inline constexpr int64_t kMaxOpBytes = int64_t{1} << 50;


// The calls a trace holds. Counts follow comm/communicator.h: all_reduce, broadcast and reduce
// the buffer's elements; reduce_scatter each rank's output; all_gather each rank's input;
// all_to_all the elements to each peer; all_to_allv its splits; send, recv and send_recv the
// message's elements.
enum class OpKind : uint8_t {
  all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, all_to_allv, send, recv, send_recv,
  barrier, wait
};
std::string_view name(OpKind kind);
std::optional<OpKind> parse_op_kind(std::string_view text);
bool is_collective(OpKind kind);  // every kind but send, recv, send_recv and wait
bool is_reduction(OpKind kind);   // all_reduce, reduce_scatter, reduce

// A communicator of the job: its members' global ranks, in the order of their rank within it.
// Its id is the file's own: the same group may have another id in another rank's file.
struct Group {
  int id = 0;
  std::vector<int> ranks;
};

struct Op {
  int64_t seq = 0;  // this rank's operations numbered from 0 in issue order, waits included
  int group = 0;    // a Group of this file
  OpKind kind = OpKind::all_reduce;
  // None: the trace says only the bytes moved (Chakra): `count` is then bytes, the op replays as
  // u8, timed and not checked against a dtype's arithmetic.
  std::optional<DType> dtype;
  std::optional<ReduceOp> redop;  // reductions; none: the trace does not say (replayed as sum)
  int64_t count = 0;
  // all_to_allv: the elements this rank sends to and receives from each group rank.
  std::vector<int64_t> in_splits, out_splits;
  bool splits_truncated = false;  // the source cut its split lists ("..."): they are not known
  int root = -1;                  // broadcast, reduce: the root's rank within the group
  int peer = -1;                  // send, recv: the partner; send_recv: where it sends (group ranks)
  int source = -1;                // send_recv: where it receives from
  int64_t tag = 0;
  int stream = 0;                 // the source's stream or queue; 0: the default
  bool async = false;             // returns before completing: a later wait names its seq
  std::vector<int64_t> waits;     // wait: the seqs it completes
  double seconds = -1;            // the time it took where the source knows it; < 0: unknown
};

struct Header {
  int version = kTraceVersion;
  int rank = 0;
  int world = 1;
  std::string source;   // "dtsuite record", "pytorch-et 1.1.0", "kineto", "chakra"
  std::string backend;  // the stack it was recorded on, where known
};

// Where a recorder or an importer puts what it reads.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void header(const Header& header) = 0;
  virtual void group(const Group& group) = 0;
  virtual void op(const Op& op) = 0;
};

// One line of the format, without its '\n'.
std::string header_line(const Header& header);
std::string group_line(const Group& group);
std::string op_line(const Op& op);

// The file of `rank` in a trace folder.
std::string rank_file(const std::string& dir, int rank);

// "[0,1,2]", or its first 8 entries and the count, so that a message naming a group stays one
// short line; `separator` goes between two entries.
std::string brief_ranks(const std::vector<int>& ranks, const char* separator = ",");

// Writes one rank's file. The folder is made if missing; a file already there is refused
// (Error{invalid_argument}): a trace never overwrites another. Lines are buffered; close() (or
// the destructor) flushes them, and a write that fails is Error{io} naming the file.
class TraceWriter final : public TraceSink {
 public:
  TraceWriter(std::string dir, int rank);
  ~TraceWriter() override;
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;
  void header(const Header& header) override;
  void group(const Group& group) override;
  void op(const Op& op) override;
  void close();
  const std::string& path() const { return path_; }

 private:
  void write(const std::string& line);
  std::string path_;
  std::FILE* file_ = nullptr;
};

// The longest line a reader takes: an all_to_allv over 65,536 ranks writes two split lists of
// up to 20 digits each, about 2.8 MB; 8 MiB holds that with room, and refuses a file of another
// kind at its first long line.
inline constexpr int64_t kMaxTraceLine = int64_t{8} << 20;

// Reads one rank's file line by line (memory: one line). Every error is one line naming the
// file and line: Error{invalid_argument} for what is not this format (a missing or later
// version, a field of the wrong type, an op on a group not yet defined, a count below zero),
// Error{io} for what cannot be read, Error{timeout} for a FIFO that never writes.
class TraceReader {
 public:
  TraceReader(const std::string& path, double timeout_seconds = 0);
  const Header& header() const { return header_; }
  // The next group or op: false at the end of the file. `is_op` says which one was filled.
  bool next(Group& group, Op& op, bool& is_op);
  int64_t line() const { return line_; }
  const std::string& path() const { return path_; }
  // The group of `id`, read before (Error{invalid_argument} if none).
  const Group& group_of(int id) const;

 private:
  bool read_line(std::string& line);
  [[noreturn]] void fail(const std::string& why) const;
  std::string path_;
  std::unique_ptr<InputFile> input_;
  std::string buffer_;
  size_t buffer_at_ = 0;
  bool at_end_ = false;
  int64_t line_ = 0;
  Header header_;
  std::vector<Group> groups_;
  int64_t next_seq_ = 0;
};

// The world size and rank files of a trace folder: every rank-R.jsonl for R below the headers'
// world must be there, with matching headers (Error{invalid_argument} naming what is missing).
struct TraceFolder {
  std::string dir;
  int world = 0;
  std::string source, backend;
};
TraceFolder open_trace_folder(const std::string& dir, double timeout_seconds = 0);

}  // namespace dts::trace
