// The PyTorch importers: one rank's PyTorch execution trace (ExecutionTraceObserver's JSON,
// "pytorch-et") or Kineto trace (the profiler's Chrome-trace JSON, "kineto") into dtsuite's trace.
// Both read the file as it streams, plain or gzip, through nlohmann/json's SAX parser: memory is one
// node or event (a JSON string or number of at most kMaxJsonValue bytes, an event of at most
// kMaxEventValues values) plus the reorder window below and the process-group tables, never the file.
//
// Where the fields come from (pytorch/pytorch and facebookresearch/param sources):
//   A communication call is a "record_param_comms" record (c10d's RECORD_PARAM_COMMS macros in
//   torch/csrc/distributed/c10d/ParamCommsUtils.hpp, called by ProcessGroupNCCL and the others).
//   Its collective names map to ops as trace.h counts them: allreduce, allreduce_coalesced ->
//   all_reduce (in_msg_nelems); reduce_scatter, _reduce_scatter_base, reduce_scatter_tensor,
//   reduce_scatter_tensor_coalesced -> reduce_scatter (out_msg_nelems, each rank's output);
//   all_gather, allgather, _allgather_base, all_gather_into_tensor, allgather_into_tensor_coalesced ->
//   all_gather (in_msg_nelems, each rank's input); broadcast, reduce (in_msg_nelems; the recorded
//   rank is the root); all_to_all, alltoall, alltoall_base (in_msg_nelems / group size to each peer;
//   with split sizes: all_to_allv), all_to_allv, alltoallv (the split sizes, which are rows of the
//   tensor's first dimension: each scaled by in_msg_nelems / their sum); send, recv (the recorded
//   rank is the peer); barrier. "wait" completes an earlier op (below); "init" is not a call. gather,
//   scatter and names not listed are skipped and counted. dtype is PyTorch's ScalarType name: Float
//   f32, Double f64, Half f16, BFloat16 bf16, Char i8, Byte u8, Int i32, Long i64, UInt32 u32,
//   UInt64 u64, Float8_e4m3fn f8e4m3, Float8_e5m2 f8e5m2; any other (Bool, Short, complex, ...):
//   the op is skipped, counted under a reason naming it.
//
// PyTorch ET (torch/csrc/profiler/standalone/execution_trace_observer.cpp): the top level holds
//   "schema", "pid", "time", "start_ts", "nodes" and "finish_ts". Schemas before 1.1.0 are refused
//   (1.1.0 added the collective attributes). A node's "attrs" ({name, type, value}) hold
//   collective_name, dtype, in_msg_nelems, out_msg_nelems, in_split_size, out_split_size (lists as
//   text), global_rank_start, global_rank_stride, pg_name, pg_desc, pg_size; its "inputs"."values"
//   hold the macro's arguments ([tensors,] seq, (pg_name, pg_desc), rank, collective name, ...), from
//   which the seq and the recorded rank are read as param's et_replay reads them
//   (et_replay/comm/commsTraceParser.py). The process groups are the "## process_group:init ##"
//   node's first input, a JSON string of torch.distributed's pg_config_info: pg_name, pg_desc,
//   backend_config, ranks (global; empty: every rank), group_size. An op on a pg_name the table
//   does not list (or with no table) is an error. World size: the group_size of the group of every
//   rank; rank: the recorded rank of a collective that records the caller's own (all_reduce,
//   all_gather, ...) mapped through its group; else ImportOptions. Nodes are issued in id order
//   (ids are taken at a call's start; nodes are written at its end). ET has no durations (seconds
//   -1) and no reduction op (none: replayed as sum, noted).
//   Async: ProcessGroupNCCL records a "wait" when a Work is waited on, with the (seq, is-p2p) of the
//   op it completes (ops inside a coalescing block record the block's seq plus one; a wait that
//   matches no op's seq matches those). An op whose wait follows it before any other call is
//   blocking (the wait folded in: a synchronous call); an op with other calls between it and its
//   wait is async and its wait a wait op; an op whose wait is not in the window (or never recorded,
//   as with Gloo) is blocking. Every op is on stream 0.
//
// Kineto (pytorch/kineto libkineto/src/output_json.cpp; torch/csrc/profiler/util.cpp saveNcclMeta):
//   the top level holds "schemaVersion", "deviceProperties", metadata such as "distributedInfo"
//   ({backend, rank, world_size, pg_count, pg_config: [{pg_name, pg_desc, backend_config, pg_size,
//   ranks}]}, before or after the events) and "traceEvents". A call is a "record_param_comms" CPU op
//   whose "args" hold "Collective name", "dtype", "In msg nelems", "Out msg nelems", "In split size",
//   "Out split size", "Group size", "Process Group Name", "Process Group Description", "Process Group
//   Ranks" (global ranks as text), "Rank" (the caller's group rank, the root, or the peer) and, for
//   send and recv, "Dst Rank" / "Src Rank" (global). Kineto copies most of these to the NCCL kernel
//   the op launched (cat "kernel", name "ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)" or
//   "ncclKernel_AllReduce_RING_LL_Sum_float(...)"), linked to it by "External id".
//   One op per call: the CPU op, timed by its kernel where the kernel is in the window with it
//   (seconds: the kernels' "dur" in microseconds, summed; the reduction op from the kernel's name:
//   Sum, Prod, Min, Max, Avg; PreMulSum and SumPostDiv (NCCL's avg) read as avg, MinMax as none, both
//   noted). A kernel becomes an op by itself only while the file has shown no record_param_comms
//   op (a trace of kernels alone); else a kernel without its CPU op is skipped, counted. A CPU op
//   whose kernel already left the window as an op of its own is skipped, counted. Lists that Kineto
//   cut ("[0, 1, ..., 63]", past 30 entries): split lists set Op::splits_truncated (no splits,
//   noted); a cut rank list is read from distributedInfo's pg_config, else it is an error. Ops are
//   issued in "ts" order (the CPU op's: the call's start); every op is blocking on stream 0 (waits
//   are skipped, counted). Rank and world: distributedInfo, else the "Rank" of a collective that
//   records the caller's own and the "Group size" of the "default_pg", else ImportOptions.
//
// Reorder window: the file's order is not issue order (ET writes a node when its call ends; Kineto
// writes CPU ops, then GPU activities), so records wait in a window of at most kReorderWindow
// records (and kMaxWindowBytes of their text), ordered by node id (ET) or ts (Kineto); the oldest
// leaves when it is full. A record that arrives after records issued later than it have left is
// imported where it arrives (out of issue order: counted in a note). The header goes out when the
// first record leaves, so the rank, world size and tables may come anywhere before that.
//
// Errors, each one line naming the file: Error{invalid_argument} for a file that is not JSON, is cut
// short ("truncated JSON at byte N"), is JSON of another shape (a Kineto trace given as an ET, a
// top-level array, ...), an ET schema before 1.1.0, a pg_name no table lists, a group with a rank
// outside the world, a count whose bytes overflow (more than 2^50 bytes, the trace's bound, which
// also keeps count x element size inside int64), a JSON value above kMaxJsonValue bytes, an event
// above kMaxEventValues values, nesting deeper than 512, no rank or world size from the trace or
// the options; Error{io} and Error{timeout} as InputFile's (devices, directories, a FIFO that
// never writes). Never prints, never exits. Ops handed to the sink before an error stay there.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "trace/import.h"
#include "trace/trace.h"

namespace dts::trace {

// Records the reorder window holds before the oldest leaves (its memory: a few hundred bytes each).
inline constexpr size_t kReorderWindow = 65536;
// The text (names, split and rank lists) the window's records may hold in all: an all_to_allv over
// 65,536 ranks carries two split lists of about 0.5 MB as text, so a window of them leaves early.
inline constexpr int64_t kMaxWindowBytes = int64_t{64} << 20;
// The longest JSON string or number (or run of bytes between two values) read: far above any real
// value (a pg_config_info of a 100k-rank job is some megabytes), and what a binary file fails at.
inline constexpr int64_t kMaxJsonValue = int64_t{16} << 20;
// The values one node or event may hold: a record_param_comms of an all_gather over 100k tensors
// lists 600k; more is not a trace.
inline constexpr int64_t kMaxEventValues = int64_t{1} << 20;

ImportSummary import_pytorch_et(const std::string& path, TraceSink& sink, const ImportOptions& options);
ImportSummary import_kineto(const std::string& path, TraceSink& sink, const ImportOptions& options);

// Which of the two a JSON file is, from its first top-level keys, without reading it all:
// "pytorch-et" ("schema" or "nodes"), "kineto" ("schemaVersion", "traceEvents", "deviceProperties",
// "distributedInfo", "displayTimeUnit", "baseTimeNanoseconds", "traceName"), or "" for neither (not
// JSON, not an object, or no such key in its first 4 MiB). Gzip is read through. Error{io} or
// Error{timeout} where the file cannot be read.
std::string sniff_json_trace(const std::string& path, double timeout_seconds);

}  // namespace dts::trace
