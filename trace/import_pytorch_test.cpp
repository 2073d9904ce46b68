// The PyTorch importers (trace/import_pytorch.h) on fixtures written here in each tool's layout: an
// execution trace as ExecutionTraceObserver writes it (execution_trace_observer.cpp writeJsonNode,
// pg_config_info in a "## process_group:init ##" node) and the same job as Kineto writes it
// (output_json.cpp: record_param_comms CPU ops, then their NCCL kernels with the arguments Kineto
// copies to them). Both must give the same calls; every refusal is one line.
#include "trace/import_pytorch.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "core/error.h"

namespace dts::trace {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;  // the tools' key order ("name" before "inputs"), which the importers use

fs::path test_root() { return fs::temp_directory_path() / ("dts_import_pytorch_test_" + std::to_string(getpid())); }

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = test_root() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The fixtures go when the tests end (the bounds test's are some 18 MB).
class RemoveFixtures : public ::testing::Environment {
 public:
  void TearDown() override { fs::remove_all(test_root()); }
};
const ::testing::Environment* const kRemoveFixtures = ::testing::AddGlobalTestEnvironment(new RemoveFixtures);

std::string write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  return path.string();
}

struct RecordingSink : TraceSink {
  Header head;
  int headers = 0;
  std::vector<Group> groups;
  std::vector<Op> ops;
  std::atomic<int64_t> seen{0};  // ops so far, read by a writer thread
  void header(const Header& h) override {
    head = h;
    ++headers;
  }
  void group(const Group& g) override { groups.push_back(g); }
  void op(const Op& o) override {
    ops.push_back(o);
    ++seen;
  }
  const Group& group_of(int id) const {
    for (const Group& g : groups) {
      if (g.id == id) return g;
    }
    ADD_FAILURE() << "no group " << id;
    return groups.front();
  }
};

// --- The job: rank 1 of a world of 4 (a middle rank, so group ranks and global ranks differ), on
// the world ("0") and a subgroup of global ranks 1 and 3 ("1"), where rank 1 is group rank 0.
constexpr int kRank = 1;
constexpr int kWorld = 4;

// One call of the job, as both tools record it.
struct Call {
  std::string name, dtype, pg;
  int64_t in = 0, out = 0;
  std::string in_split = "[]", out_split = "[]";
  int recorded_rank = 0;  // the caller's group rank, the root or the peer, as c10d passes it
  int64_t seq = 0;
  bool p2p = false;
  std::string kernel;  // the NCCL kernel Kineto shows for it
  double dur_us = 0;
};

std::vector<Call> job() {
  return {
      // 1024 floats on the world; rank 1 records its own group rank, 1.
      {"allreduce", "Float", "0", 1024, 1024, "[]", "[]", 1, 1, false,
       "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 12.5},
      // 256 bf16 from each of the subgroup's 2 ranks (512 out); rank 1 is group rank 0 there.
      {"_allgather_base", "BFloat16", "1", 256, 512, "[]", "[]", 0, 1, false,
       "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 3.25},
      // 10 rows of 8 floats sent as 1, 2, 3, 4 rows, 10 rows received as 4, 3, 2, 1.
      {"all_to_allv", "Float", "0", 80, 80, "[1, 2, 3, 4]", "[4, 3, 2, 1]", 1, 2, false,
       "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", 7.0},
      // 64 floats from group rank 2.
      {"broadcast", "Float", "0", 64, 64, "[]", "[]", 2, 3, false,
       "ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 2.0},
      // 100 halves to rank 3, then 100 from rank 0: the p2p sequence of the world is 1, 2.
      {"send", "Half", "0", 100, 100, "[]", "[]", 3, 1, true,
       "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", 1.5},
      {"recv", "Half", "0", 100, 100, "[]", "[]", 0, 2, true,
       "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", 1.75},
  };
}

ojson attr(const std::string& name, const std::string& type, ojson value) {
  return ojson{{"name", name}, {"type", type}, {"value", std::move(value)}};
}

// A node as writeJsonNode writes it: id, name, ctrl_deps, inputs, outputs, attrs (the observer's own
// first, then getCommsNodeAttrs' for a record_param_comms).
ojson et_node(int64_t id, const std::string& name, ojson values, ojson types, ojson comm_attrs = ojson::array()) {
  ojson shapes = ojson::array();
  for (size_t i = 0; i < values.size(); ++i) shapes.push_back(ojson::array());
  ojson attrs = ojson::array({attr("rf_id", "uint64", id), attr("fw_parent", "uint64", 0), attr("seq_id", "int64", -1),
                              attr("scope", "uint64", 0), attr("tid", "uint64", 1), attr("fw_tid", "uint64", 0),
                              attr("op_schema", "string", ""), attr("kernel_backend", "string", ""),
                              attr("kernel_file", "string", "")});
  for (auto& a : comm_attrs) attrs.push_back(a);
  ojson node;
  node["id"] = id;
  node["name"] = name;
  node["ctrl_deps"] = 1;
  node["inputs"] =
      ojson{{"values", std::move(values)}, {"shapes", shapes}, {"types", std::move(types)}, {"strides", shapes}};
  node["outputs"] = ojson{
      {"values", ojson::array()}, {"shapes", ojson::array()}, {"types", ojson::array()}, {"strides", ojson::array()}};
  node["attrs"] = std::move(attrs);
  return node;
}

// A record_param_comms node: RECORD_PARAM_COMMS_DATA's arguments (tensors, seq, (pg_name, pg_desc),
// rank, name, splits, rank start, stride, size) as its inputs, the collective attributes as attrs.
// A wait records no tensors (RECORD_PARAM_COMMS).
ojson et_comm(int64_t id, const Call& c) {
  const bool tensors = c.name != "wait" && c.name != "barrier";
  const int pg_size = c.pg == "1" ? 2 : kWorld;
  ojson values = ojson::array();
  ojson types = ojson::array();
  if (tensors) {
    // [tensor id, storage id, offset, numel, itemsize, device], in a list of one.
    values.push_back(ojson::array({ojson::array({100 + id, 200 + id, 0, c.in, 4, "cuda:1"})}));
    types.push_back("GenericList[Tensor(float)]");
  }
  values.push_back(ojson::array({c.seq, c.p2p}));
  values.push_back(ojson::array({c.pg, c.pg == "0" ? "default_pg" : "undefined"}));
  values.push_back(c.recorded_rank);
  values.push_back(c.name);
  values.push_back(ojson::array());
  values.push_back(ojson::array());
  values.push_back(-1);
  values.push_back(-1);
  values.push_back(pg_size);
  for (int i = 0; i < 9; ++i) types.push_back("Int");
  ojson attrs = ojson::array({attr("collective_name", "string", c.name), attr("dtype", "string", c.dtype),
                              attr("in_msg_nelems", "uint64", c.in), attr("out_msg_nelems", "uint64", c.out),
                              attr("in_split_size", "string", c.in_split),
                              attr("out_split_size", "string", c.out_split), attr("pg_name", "string", c.pg),
                              attr("pg_desc", "string", c.pg == "0" ? "default_pg" : "undefined"),
                              attr("pg_size", "uint64", pg_size)});
  return et_node(id, "record_param_comms", std::move(values), std::move(types), std::move(attrs));
}

Call wait_of(const Call& c) {
  Call w;
  w.name = "wait";
  w.dtype = "Byte";
  w.pg = c.pg;
  w.recorded_rank = c.pg == "1" ? 0 : kRank;
  w.seq = c.seq;
  w.p2p = c.p2p;
  return w;
}

// pg_config_info as torch.distributed writes it: "ranks" empty for the group of every rank.
ojson pg_table(const std::string& subgroup_ranks = "[1, 3]") {
  ojson table = ojson::array();
  table.push_back(ojson{{"pg_name", "0"},
                        {"pg_desc", "default_pg"},
                        {"backend_config", "cuda:nccl"},
                        {"ranks", ojson::array()},
                        {"group_size", kWorld},
                        {"group_count", 2}});
  ojson sub = ojson::parse(subgroup_ranks);
  table.push_back(ojson{{"pg_name", "1"},
                        {"pg_desc", "undefined"},
                        {"backend_config", "cuda:nccl"},
                        {"ranks", sub},
                        {"group_size", sub.size()},
                        {"group_count", 2}});
  return table;
}

ojson pg_init_node(int64_t id, const ojson& table) {
  return et_node(id, "## process_group:init ##", ojson::array({table.dump()}), ojson::array({"String"}));
}

std::string et_text(const ojson& nodes, const std::string& schema = "1.1.1-chakra.0.0.4") {
  ojson top;
  top["schema"] = schema;
  top["pid"] = 4242;
  top["time"] = "2025-01-01 00:00:00";
  top["start_ts"] = 1000;
  top["nodes"] = nodes;
  top["finish_ts"] = 2000;
  return top.dump(2);
}

// The job's ET: the table (node 2), then each call and its wait, as a synchronous call records them.
std::string et_job(bool with_table = true) {
  ojson nodes = ojson::array();
  if (with_table) nodes.push_back(pg_init_node(2, pg_table()));
  int64_t id = 10;
  for (const Call& c : job()) {
    nodes.push_back(et_comm(id++, c));
    nodes.push_back(et_comm(id++, wait_of(c)));
  }
  return et_text(nodes);
}

ojson kineto_args(const Call& c, int64_t external, bool cpu) {
  ojson args;
  args["External id"] = external;
  if (cpu) args["Record function id"] = 0;
  args["Collective name"] = c.name;
  args["In msg nelems"] = c.in;
  args["Out msg nelems"] = c.out;
  args["Group size"] = c.pg == "1" ? 2 : kWorld;
  args["dtype"] = c.dtype;
  args["In split size"] = c.in_split;
  args["Out split size"] = c.out_split;
  args["Process Group Name"] = c.pg;
  args["Process Group Description"] = c.pg == "0" ? "default_pg" : "undefined";
  args["Process Group Ranks"] = c.pg == "1" ? "[1, 3]" : "[0, 1, 2, 3]";
  if (cpu) args["Rank"] = c.recorded_rank;
  // saveNcclMeta's global peers: group "0" is the world, so group rank = global rank.
  if (c.name == "send") args["Dst Rank"] = c.recorded_rank;
  if (c.name == "recv") args["Src Rank"] = c.recorded_rank;
  return args;
}

ojson kineto_event(const std::string& cat, const std::string& name, double ts, double dur, ojson args, int tid) {
  ojson e;
  e["ph"] = "X";
  e["cat"] = cat;
  e["name"] = name;
  e["pid"] = 77;
  e["tid"] = tid;
  e["ts"] = ts;
  e["dur"] = dur;
  e["args"] = std::move(args);
  return e;
}

enum class DistInfo { before, after, none };  // where Kineto writes it: with the metadata, or on demand after

std::string kineto_text(const ojson& events, DistInfo where = DistInfo::before) {
  ojson top;
  top["schemaVersion"] = 1;
  top["deviceProperties"] = ojson::array({ojson{{"id", 1}, {"name", "NVIDIA H100"}}});
  ojson info;
  if (where != DistInfo::none) {
    info = ojson{{"backend", "nccl"},
                 {"rank", kRank},
                 {"world_size", kWorld},
                 {"pg_count", 2},
                 {"pg_config", ojson::array({ojson{{"pg_name", "0"},
                                                   {"pg_desc", "default_pg"},
                                                   {"backend_config", "cuda:nccl"},
                                                   {"pg_size", 4},
                                                   {"ranks", ojson::array({0, 1, 2, 3})}},
                                             ojson{{"pg_name", "1"},
                                                   {"pg_desc", "undefined"},
                                                   {"backend_config", "cuda:nccl"},
                                                   {"pg_size", 2},
                                                   {"ranks", ojson::array({1, 3})}}})},
                 {"nccl_version", "2.21.5"}};
  }
  if (where == DistInfo::before) top["distributedInfo"] = info;
  top["displayTimeUnit"] = "ms";
  top["baseTimeNanoseconds"] = 1700000000000000000;  // any epoch: ts are relative to it
  top["traceEvents"] = events;
  if (where == DistInfo::after) top["distributedInfo"] = info;
  top["traceName"] = "rank1.pt.trace.json";
  return top.dump(1);
}

// The job as Kineto writes it: the CPU ops (each call 100 us after the last, a wait after each;
// from two threads' buffers, so not in time order), then the GPU kernels, which start 10 us after
// their call and come in another order again.
std::string kineto_job(DistInfo where = DistInfo::before) {
  ojson events = ojson::array();
  events.push_back(ojson{
      {"name", "process_name"}, {"ph", "M"}, {"ts", 0}, {"pid", 77}, {"tid", 0}, {"args", ojson{{"name", "python"}}}});
  const std::vector<Call> calls = job();
  int64_t external = 500;  // any ids: a call's CPU op and kernel share one, each call its own
  for (const size_t i : {2, 0, 1, 5, 3, 4}) {
    const double ts = 1000.0 + 100.0 * static_cast<double>(i);
    // The CPU op takes 40 us on thread 1 (the host's launch, not the transfer); its wait 50 us on.
    events.push_back(kineto_event("cpu_op", "record_param_comms", ts, 40,
                                  kineto_args(calls[i], external + static_cast<int64_t>(i), true), 1));
    ojson wait_args = ojson{{"External id", 900 + static_cast<int64_t>(i)},
                            {"Collective name", "wait"},
                            {"dtype", "Byte"},
                            {"In msg nelems", 0},
                            {"Out msg nelems", 0},
                            {"Group size", kWorld}};
    events.push_back(kineto_event("cpu_op", "record_param_comms", ts + 50, 5, std::move(wait_args), 1));
  }
  for (const size_t i : {3, 0, 5, 1, 4, 2}) {  // CUPTI's order, not the calls'
    const double ts = 1010.0 + 100.0 * static_cast<double>(i);
    events.push_back(kineto_event("kernel", calls[i].kernel, ts, calls[i].dur_us,
                                  kineto_args(calls[i], external + static_cast<int64_t>(i), false), 7));
  }
  return kineto_text(events, where);
}

// The message of importing `text` (ET or Kineto), or "" when it imports; every refusal one line.
std::string refusal(const std::string& text, bool et, const std::string& name,
                    Error::Kind kind = Error::Kind::invalid_argument, ImportOptions options = {}) {
  const fs::path dir = fresh_dir(name);
  const std::string path = write_file(dir / "trace.json", text);
  RecordingSink sink;
  try {
    et ? import_pytorch_et(path, sink, options) : import_kineto(path, sink, options);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
    EXPECT_NE(std::string(e.what()).find("trace.json"), std::string::npos) << "names the file: " << e.what();
    return e.what();
  }
  return "";
}

bool has_note(const ImportSummary& s, const std::string& part) {
  return std::any_of(s.notes.begin(), s.notes.end(),
                     [&](const std::string& n) { return n.find(part) != std::string::npos; });
}

std::vector<int> sink_ranks(const RecordingSink& sink, const Op& op) { return sink.group_of(op.group).ranks; }

using Key = std::tuple<std::string, int64_t, std::string>;  // op, count, dtype
std::vector<Key> multiset(const std::vector<Op>& ops) {
  std::vector<Key> out;
  for (const Op& op : ops) {
    if (op.kind != OpKind::wait) {
      out.emplace_back(std::string(name(op.kind)), op.count, op.dtype ? std::string(name(*op.dtype)) : "");
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ImportPytorchEt, TheJobsCallsWithTheirGroupsRootsAndPeers) {
  const fs::path dir = fresh_dir("et_job");
  RecordingSink sink;
  const ImportSummary s = import_pytorch_et(write_file(dir / "rank1.et.json", et_job()), sink, {});
  EXPECT_EQ(sink.headers, 1);
  EXPECT_EQ(sink.head.rank, kRank);    // the allreduce's own recorded group rank on the world
  EXPECT_EQ(sink.head.world, kWorld);  // the group_size of the table's group of every rank
  EXPECT_EQ(sink.head.source, "pytorch-et 1.1.1-chakra.0.0.4");
  EXPECT_EQ(sink.head.backend, "cuda:nccl");
  EXPECT_EQ(s.format, "pytorch-et 1.1.1-chakra.0.0.4");
  ASSERT_EQ(sink.groups.size(), 2u);  // the world and the subgroup
  EXPECT_EQ(sink.groups[0].id, 0);    // the world first, as group 0
  EXPECT_EQ(sink.groups[0].ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(sink.groups[1].ranks, (std::vector<int>{1, 3}));
  // Six calls; each wait directly after its call folds into it (a synchronous call).
  ASSERT_EQ(sink.ops.size(), 6u);
  EXPECT_EQ(s.ops, 6);
  for (size_t i = 0; i < sink.ops.size(); ++i) {
    EXPECT_EQ(sink.ops[i].seq, static_cast<int64_t>(i));  // numbered from 0 in issue order
    EXPECT_FALSE(sink.ops[i].async);
    EXPECT_EQ(sink.ops[i].stream, 0);
    EXPECT_LT(sink.ops[i].seconds, 0);  // ET records no durations
  }
  const Op& ar = sink.ops[0];
  EXPECT_EQ(ar.kind, OpKind::all_reduce);
  EXPECT_EQ(ar.count, 1024);  // the buffer's elements
  EXPECT_EQ(ar.dtype, DType::f32);
  EXPECT_FALSE(ar.redop.has_value());  // ET does not record it
  EXPECT_TRUE(has_note(s, "reduction op not recorded: replayed as sum"));
  const Op& ag = sink.ops[1];
  EXPECT_EQ(ag.kind, OpKind::all_gather);
  EXPECT_EQ(ag.count, 256);  // each rank's input, not the 512 gathered
  EXPECT_EQ(ag.dtype, DType::bf16);
  EXPECT_EQ(sink.group_of(ag.group).ranks, (std::vector<int>{1, 3}));
  const Op& a2a = sink.ops[2];
  EXPECT_EQ(a2a.kind, OpKind::all_to_allv);
  // 80 elements in 10 rows: 8 elements a row, so rows 1, 2, 3, 4 are 8, 16, 24, 32 elements.
  EXPECT_EQ(a2a.in_splits, (std::vector<int64_t>{8, 16, 24, 32}));
  EXPECT_EQ(a2a.out_splits, (std::vector<int64_t>{32, 24, 16, 8}));
  const Op& bc = sink.ops[3];
  EXPECT_EQ(bc.kind, OpKind::broadcast);
  EXPECT_EQ(bc.count, 64);
  EXPECT_EQ(bc.root, 2);  // the recorded rank of a broadcast is its root (opts.rootRank)
  const Op& send = sink.ops[4];
  EXPECT_EQ(send.kind, OpKind::send);
  EXPECT_EQ(send.peer, 3);  // the recorded rank of a send is its destination
  EXPECT_EQ(send.dtype, DType::f16);
  const Op& recv = sink.ops[5];
  EXPECT_EQ(recv.kind, OpKind::recv);
  EXPECT_EQ(recv.peer, 0);  // and of a recv its source
  EXPECT_TRUE(s.skipped.empty());
}

TEST(ImportKineto, TheSameJobGivesTheSameCallsOncePerCallWithKernelTimes) {
  const fs::path dir = fresh_dir("kineto_job");
  RecordingSink et_sink, kineto_sink;
  import_pytorch_et(write_file(dir / "rank1.et.json", et_job()), et_sink, {});
  const ImportSummary s = import_kineto(write_file(dir / "rank1.pt.trace.json", kineto_job()), kineto_sink, {});
  EXPECT_EQ(kineto_sink.head.rank, kRank);  // distributedInfo
  EXPECT_EQ(kineto_sink.head.world, kWorld);
  EXPECT_EQ(kineto_sink.head.source, "kineto");
  EXPECT_EQ(kineto_sink.head.backend, "nccl");
  EXPECT_EQ(s.format, "kineto");
  // The product requirement: one trace of the job whichever tool recorded it.
  EXPECT_EQ(multiset(kineto_sink.ops), multiset(et_sink.ops));
  // Six calls, not twelve: a CPU op and its kernel are one call.
  ASSERT_EQ(kineto_sink.ops.size(), 6u);
  const std::vector<Call> calls = job();
  for (size_t i = 0; i < calls.size(); ++i) {
    const Op& op = kineto_sink.ops[i];
    EXPECT_EQ(op.kind, et_sink.ops[i].kind) << i;  // issue order by the CPU ops' ts, not the kernels'
    EXPECT_EQ(op.root, et_sink.ops[i].root) << i;
    EXPECT_EQ(op.peer, et_sink.ops[i].peer) << i;
    EXPECT_EQ(op.in_splits, et_sink.ops[i].in_splits) << i;
    EXPECT_EQ(sink_ranks(kineto_sink, op), sink_ranks(et_sink, et_sink.ops[i])) << i;
    EXPECT_NEAR(op.seconds, calls[i].dur_us * 1e-6, 1e-12) << i;  // the kernel's dur, microseconds
    EXPECT_FALSE(op.async);
  }
  EXPECT_EQ(kineto_sink.ops[0].redop, ReduceOp::sum);  // "Sum" in the kernel's name
  // The six waits are skipped and counted (Kineto's ops are imported blocking).
  EXPECT_EQ(s.skipped.at("record_param_comms wait (Kineto's ops are imported blocking)"), 6);
  EXPECT_TRUE(has_note(s, "timed by its NCCL kernel"));
}

TEST(ImportPytorchEt, CallsWithOtherCallsBeforeTheirWaitAreAsync) {
  // Counts 16, 32, 8, 4: any, distinct so the ops tell apart; seqs 1, 2, 3: the world's collectives.
  Call a{"allreduce", "Float", "0", 16, 16, "[]", "[]", kRank, 1, false, "", 0};
  Call b{"allreduce", "Float", "0", 32, 32, "[]", "[]", kRank, 2, false, "", 0};
  // A coalesced send/recv pair: both record the block's p2p seq plus one (5), its wait the block's (4).
  Call send{"send", "Float", "0", 8, 8, "[]", "[]", 2, 5, true, "", 0};
  Call recv{"recv", "Float", "0", 8, 8, "[]", "[]", 0, 5, true, "", 0};
  Call block_wait = wait_of(send);
  block_wait.seq = 4;
  // A call no wait completes (as a backend that records none, such as Gloo).
  Call lone{"allreduce", "Float", "0", 4, 4, "[]", "[]", kRank, 3, false, "", 0};
  ojson nodes = ojson::array({pg_init_node(2, pg_table()), et_comm(10, a), et_comm(11, b), et_comm(12, wait_of(a)),
                              et_comm(13, wait_of(b)), et_comm(14, send), et_comm(15, recv), et_comm(16, block_wait),
                              et_comm(17, lone)});
  const fs::path dir = fresh_dir("async");
  RecordingSink sink;
  const ImportSummary s = import_pytorch_et(write_file(dir / "t.json", et_text(nodes)), sink, {});
  // a, b, wait(a), wait(b), send, recv, wait(send, recv), lone: 8 ops, waits included.
  ASSERT_EQ(sink.ops.size(), 8u);
  EXPECT_TRUE(sink.ops[0].async);  // b comes between a and its wait
  EXPECT_TRUE(sink.ops[1].async);  // wait(a) comes between b and its wait
  EXPECT_EQ(sink.ops[2].kind, OpKind::wait);
  EXPECT_EQ(sink.ops[2].waits, (std::vector<int64_t>{0}));
  EXPECT_EQ(sink.ops[3].waits, (std::vector<int64_t>{1}));
  EXPECT_TRUE(sink.ops[4].async);  // the coalesced pair: one wait for both
  EXPECT_TRUE(sink.ops[5].async);
  EXPECT_EQ(sink.ops[6].kind, OpKind::wait);
  EXPECT_EQ(sink.ops[6].waits, (std::vector<int64_t>{4, 5}));
  EXPECT_FALSE(sink.ops[7].async);  // no wait recorded: blocking
  EXPECT_TRUE(has_note(s, "1 ops with no wait"));
  EXPECT_TRUE(has_note(s, "is async, and the wait a wait op"));
}

TEST(ImportPytorchEt, NodesWrittenOutOfIdOrderAreIssuedInIdOrder) {
  // The observer writes a node when its call ends; ids are taken when calls start.
  const std::vector<Call> calls = job();
  ojson nodes = ojson::array({et_comm(21, calls[1]), pg_init_node(2, pg_table()), et_comm(20, calls[0])});
  const fs::path dir = fresh_dir("order");
  RecordingSink sink;
  import_pytorch_et(write_file(dir / "t.json", et_text(nodes)), sink, {});
  ASSERT_EQ(sink.ops.size(), 2u);
  EXPECT_EQ(sink.ops[0].kind, OpKind::all_reduce);  // id 20
  EXPECT_EQ(sink.ops[1].kind, OpKind::all_gather);  // id 21
}

TEST(ImportPytorch, TruncatedJsonIsOneLineAtEveryCut) {
  for (const bool et : {true, false}) {
    const std::string text = et ? et_job() : kineto_job();
    // Every 97th byte (a prime, so cuts land in keys, numbers, strings and between values alike),
    // and the last byte.
    for (size_t cut = 0; cut < text.size();
         cut += cut + 97 < text.size() ? 97 : std::max<size_t>(1, text.size() - 1 - cut)) {
      const std::string why = refusal(text.substr(0, cut), et, "cut");
      ASSERT_FALSE(why.empty()) << "cut at " << cut;
      EXPECT_TRUE(why.find("truncated JSON") != std::string::npos || why.find("empty") != std::string::npos) << why;
      if (cut == text.size() - 1) break;
    }
  }
}

TEST(ImportPytorchEt, SchemasBefore110AreRefusedByVersion) {
  const std::string old = et_text(ojson::array({pg_init_node(2, pg_table())}), "1.0.1");
  const std::string why = refusal(old, true, "old");
  EXPECT_NE(why.find("'1.0.1'"), std::string::npos) << why;
  EXPECT_NE(why.find("1.1.0 or later"), std::string::npos) << why;
  // 1.0.3's schema string names its chakra version too: the PyTorch part decides.
  EXPECT_NE(refusal(et_text(ojson::array(), "1.0.3-chakra.0.0.4"), true, "old3").find("1.1.0 or later"),
            std::string::npos);
  ojson no_schema = ojson{{"pid", 1}, {"nodes", ojson::array()}};
  EXPECT_NE(refusal(no_schema.dump(), true, "none").find("no \"schema\""), std::string::npos);
  EXPECT_NE(refusal(et_text(ojson::array(), "one"), true, "bad").find("not a PyTorch execution trace version"),
            std::string::npos);
}

TEST(ImportPytorchEt, ProcessGroupsMustBeInTheTable) {
  const std::string none = refusal(et_job(false), true, "no_table");
  EXPECT_NE(none.find("process group '0'"), std::string::npos) << none;
  EXPECT_NE(none.find("no process-group table"), std::string::npos) << none;
  // A table without group "7".
  Call c = job()[0];
  c.pg = "7";
  const std::string missing =
      refusal(et_text(ojson::array({pg_init_node(2, pg_table()), et_comm(10, c)})), true, "missing_pg");
  EXPECT_NE(missing.find("process group '7', which the process-group table does not list"), std::string::npos)
      << missing;
  // A table that is not JSON (cut short when recorded).
  const std::string cut =
      refusal(et_text(ojson::array(
                  {et_node(2, "## process_group:init ##", ojson::array({"[{\"pg_na"}), ojson::array({"String"}))})),
              true, "cut_table");
  EXPECT_NE(cut.find("not a JSON list"), std::string::npos) << cut;
}

TEST(ImportPytorchEt, AGroupRankBeyondTheWorldIsAnError) {
  // The subgroup names global rank 7 in a world of 4.
  Call c = job()[1];
  const std::string why =
      refusal(et_text(ojson::array({pg_init_node(2, pg_table("[1, 7]")), et_comm(10, job()[0]), et_comm(12, c)})), true,
              "beyond");
  EXPECT_NE(why.find("holds rank 7, outside the world of 4 ranks"), std::string::npos) << why;
}

TEST(ImportPytorchEt, CountsWhoseBytesOverflowAreErrors) {
  Call c = job()[0];
  c.in = c.out = int64_t{1} << 62;  // 2^62 floats: 2^64 bytes, beyond int64
  const std::string why =
      refusal(et_text(ojson::array({pg_init_node(2, pg_table()), et_comm(10, c)})), true, "overflow");
  EXPECT_NE(why.find("the count overflows"), std::string::npos) << why;
  // Beyond int64 itself: 2^64 - 1.
  ojson node = et_comm(10, c);
  for (auto& a : node["attrs"]) {
    if (a["name"] == "in_msg_nelems") a["value"] = std::numeric_limits<uint64_t>::max();
  }
  const std::string huge = refusal(et_text(ojson::array({pg_init_node(2, pg_table()), node})), true, "huge");
  EXPECT_NE(huge.find("overflows int64"), std::string::npos) << huge;
  // all_gather's output is its count times the group: 2^49 bf16 (2^50 bytes) from each of 2 ranks.
  Call ag = job()[1];
  ag.in = int64_t{1} << 49;
  ag.out = int64_t{1} << 50;
  const std::string gathered =
      refusal(et_text(ojson::array({pg_init_node(2, pg_table()), et_comm(10, job()[0]), et_comm(11, ag)})), true, "ag");
  EXPECT_NE(gathered.find("the count overflows"), std::string::npos) << gathered;
}

TEST(ImportPytorchEt, AnUnknownDtypeSkipsTheCallNamingIt) {
  Call c = job()[0];
  c.dtype = "ComplexFloat";
  const std::vector<Call> calls = job();
  ojson nodes =
      ojson::array({pg_init_node(2, pg_table()), et_comm(10, calls[0]), et_comm(11, wait_of(calls[0])), et_comm(12, c),
                    et_comm(13, wait_of(c)), et_comm(14, calls[3]), et_comm(15, wait_of(calls[3]))});
  const fs::path dir = fresh_dir("dtype");
  RecordingSink sink;
  const ImportSummary s = import_pytorch_et(write_file(dir / "t.json", et_text(nodes)), sink, {});
  ASSERT_EQ(sink.ops.size(), 2u);   // the first all_reduce and the broadcast
  EXPECT_EQ(s.skipped.size(), 1u);  // its wait goes with it, not counted twice
  EXPECT_EQ(s.skipped.at("dtype 'ComplexFloat': no dtsuite type"), 1);
  EXPECT_EQ(sink.ops[1].seq, 1);  // the numbering has no hole
}

TEST(ImportPytorchEt, RankAndWorldFromOptionsWhereTheTraceDoesNotSayThem) {
  // A broadcast records its root, a send its peer: neither says the caller's rank.
  const std::vector<Call> calls = job();
  const std::string text =
      et_text(ojson::array({pg_init_node(2, pg_table()), et_comm(10, calls[3]), et_comm(11, calls[4])}));
  EXPECT_NE(refusal(text, true, "no_rank").find("does not say its rank"), std::string::npos);
  const fs::path dir = fresh_dir("options");
  RecordingSink sink;
  ImportOptions options;
  options.rank = 2;
  options.world = 8;  // the table's world of 4 wins
  const ImportSummary s = import_pytorch_et(write_file(dir / "t.json", text), sink, options);
  EXPECT_EQ(sink.head.rank, 2);
  EXPECT_EQ(sink.head.world, 4);
  EXPECT_TRUE(has_note(s, "ImportOptions::world 8 not used"));
  // A world of 4 with rank 2: the subgroup [1, 3] would not hold it, but no op uses it.
  EXPECT_EQ(sink.ops.size(), 2u);
}

TEST(ImportKineto, DistributedInfoAfterTheEventsIsReadToo) {
  // Kineto's on-demand traces write it after "traceEvents": the header waits for the window.
  const fs::path dir = fresh_dir("info_after");
  RecordingSink sink;
  import_kineto(write_file(dir / "t.json", kineto_job(DistInfo::after)), sink, {});
  EXPECT_EQ(sink.head.rank, kRank);
  EXPECT_EQ(sink.head.world, kWorld);
  EXPECT_EQ(sink.head.backend, "nccl");
  EXPECT_EQ(sink.ops.size(), 6u);  // the job's six calls
}

TEST(ImportKineto, SplitListsCutByKinetoAreFlaggedNotGuessed) {
  Call c = job()[2];
  // util.cpp format_list: past 30 entries, the first 29, "..." and the last.
  std::string cut = "[";
  for (int i = 0; i < 29; ++i) cut += std::to_string(i % 4 + 1) + ", ";
  cut += "..., 4]";
  c.in_split = c.out_split = cut;
  ojson events = ojson::array({kineto_event("cpu_op", "record_param_comms", 10, 1, kineto_args(c, 1, true), 1)});
  const fs::path dir = fresh_dir("cut_splits");
  RecordingSink sink;
  const ImportSummary s = import_kineto(write_file(dir / "t.json", kineto_text(events)), sink, {});
  ASSERT_EQ(sink.ops.size(), 1u);
  EXPECT_EQ(sink.ops[0].kind, OpKind::all_to_allv);
  EXPECT_TRUE(sink.ops[0].splits_truncated);
  EXPECT_TRUE(sink.ops[0].in_splits.empty());
  EXPECT_TRUE(sink.ops[0].out_splits.empty());
  EXPECT_TRUE(has_note(s, "splits_truncated"));
  EXPECT_TRUE(has_note(s, "untimed"));  // no kernel came with it
}

TEST(ImportKineto, ACutRankListNeedsDistributedInfo) {
  Call c = job()[0];
  ojson args = kineto_args(c, 1, true);
  args["Process Group Ranks"] = "[0, 1, ..., 3]";
  ojson events = ojson::array({kineto_event("cpu_op", "record_param_comms", 10, 1, args, 1)});
  const fs::path dir = fresh_dir("cut_ranks");
  RecordingSink sink;
  import_kineto(write_file(dir / "t.json", kineto_text(events)), sink, {});  // pg_config lists group "0"
  EXPECT_EQ(sink.group_of(sink.ops.at(0).group).ranks, (std::vector<int>{0, 1, 2, 3}));
  ImportOptions options;
  options.rank = 1;
  options.world = 4;
  const std::string why =
      refusal(kineto_text(events, DistInfo::none), false, "cut_no_info", Error::Kind::invalid_argument, options);
  EXPECT_NE(why.find("cut its \"Process Group Ranks\""), std::string::npos) << why;
}

TEST(ImportKineto, RankAndWorldFromTheEventsWithoutDistributedInfo) {
  // The allreduce's "Rank" (its own group rank on the default_pg) and that group's size.
  const std::vector<Call> calls = job();
  ojson events = ojson::array({kineto_event("cpu_op", "record_param_comms", 10, 1, kineto_args(calls[0], 1, true), 1)});
  const fs::path dir = fresh_dir("no_info");
  RecordingSink sink;
  import_kineto(write_file(dir / "t.json", kineto_text(events, DistInfo::none)), sink, {});
  EXPECT_EQ(sink.head.rank, kRank);
  EXPECT_EQ(sink.head.world, kWorld);
}

TEST(ImportKineto, KernelsAloneMakeOpsWhereTheTraceHasNoCpuOps) {
  const std::vector<Call> calls = job();
  ojson events = ojson::array();
  for (size_t i = 0; i < 2; ++i) {
    events.push_back(kineto_event("kernel", calls[i].kernel, 10.0 * static_cast<double>(i + 1), calls[i].dur_us,
                                  kineto_args(calls[i], static_cast<int64_t>(i + 1), false), 7));
  }
  const fs::path dir = fresh_dir("kernels");
  RecordingSink sink;
  const ImportSummary s = import_kineto(write_file(dir / "t.json", kineto_text(events)), sink, {});
  ASSERT_EQ(sink.ops.size(), 2u);
  EXPECT_EQ(sink.ops[0].kind, OpKind::all_reduce);
  EXPECT_EQ(sink.ops[0].redop, ReduceOp::sum);
  EXPECT_NEAR(sink.ops[0].seconds, 12.5e-6, 1e-12);  // the allreduce kernel's 12.5 us
  EXPECT_EQ(sink.ops[1].count, 256);
  EXPECT_TRUE(has_note(s, "ops of the kernels alone"));
}

TEST(ImportKineto, KernelNamesGiveTheReductionOp) {
  Call c = job()[0];
  ojson events = ojson::array();
  const char* kernels[] = {"ncclKernel_AllReduce_RING_LL_Max_float(ncclWorkElem)",  // before NCCL 2.19
                           "ncclDevKernel_AllReduce_PreMulSum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                           "ncclDevKernel_AllReduce_MinMax_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"};
  for (int i = 0; i < 3; ++i) {
    events.push_back(kineto_event("cpu_op", "record_param_comms", 100.0 * i, 1, kineto_args(c, i + 1, true), 1));
    events.push_back(kineto_event("kernel", kernels[i], 100.0 * i + 5, 2, kineto_args(c, i + 1, false), 7));
  }
  const fs::path dir = fresh_dir("redops");
  RecordingSink sink;
  const ImportSummary s = import_kineto(write_file(dir / "t.json", kineto_text(events)), sink, {});
  ASSERT_EQ(sink.ops.size(), 3u);
  EXPECT_EQ(sink.ops[0].redop, ReduceOp::max);
  EXPECT_EQ(sink.ops[1].redop, ReduceOp::avg);  // how NCCL runs avg on floats
  EXPECT_FALSE(sink.ops[2].redop.has_value());  // min or max: not said
  EXPECT_TRUE(has_note(s, "PreMulSum"));
  EXPECT_TRUE(has_note(s, "MinMax"));
}

TEST(ImportPytorch, NotJsonAndJsonOfAnotherShapeAreRefusedInOneLine) {
  EXPECT_NE(refusal("\x7f"
                    "ELF\x02\x01\x01",
                    true, "binary")
                .find("not JSON at byte"),
            std::string::npos);
  EXPECT_NE(refusal("", true, "empty").find("empty"), std::string::npos);
  EXPECT_NE(refusal("[1, 2]", true, "array").find("not a JSON object"), std::string::npos);
  EXPECT_NE(refusal("{\"nodes\": 5}", true, "scalar_nodes").find("\"nodes\" is not an array"), std::string::npos);
  EXPECT_NE(refusal("{\"schema\": \"1.1.0\", \"nodes\": [1]}", true, "int_node").find("is not an object"),
            std::string::npos);
  EXPECT_NE(refusal(kineto_job(), true, "kineto_as_et").find("a Kineto trace"), std::string::npos);
  EXPECT_NE(refusal(et_job(), false, "et_as_kineto").find("a PyTorch execution trace"), std::string::npos);
  EXPECT_NE(refusal("{\"a\": 1}", false, "no_events").find("no \"traceEvents\""), std::string::npos);
  EXPECT_NE(refusal("{\"a\": 1}", true, "no_nodes").find("no \"nodes\""), std::string::npos);
  // 600 levels under a key the importer skips: its depth is bounded all the same.
  EXPECT_NE(
      refusal("{\"x\": " + std::string(600, '[') + std::string(600, ']') + "}", true, "deep").find("deeper than 512"),
      std::string::npos);
  RecordingSink sink;
  try {
    import_pytorch_et("/dev/zero", sink, {});
    ADD_FAILURE() << "read /dev/zero";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::io);  // refused before it is read
  }
}

TEST(ImportPytorch, OneValueAndOneEventAreBounded) {
  // A string of 16 MiB and 100 bytes (past the 64 allowed for the quotes and spaces around a
  // value): refused as it is read, not after.
  const std::string long_string =
      "{\"schema\": \"" + std::string(static_cast<size_t>(kMaxJsonValue) + 100, 'x') + "\", \"nodes\": []}";
  EXPECT_NE(refusal(long_string, true, "long").find("more than 16 MiB"), std::string::npos);
  // A record_param_comms whose inputs hold 2^20 + 1 values.
  std::string node =
      "{\"schema\": \"1.1.1\", \"nodes\": [{\"id\": 5, \"name\": \"record_param_comms\", \"inputs\": {\"values\": [";
  for (int64_t i = 0; i <= kMaxEventValues; ++i) node += i ? ",1" : "1";
  node += "]}}]}";
  EXPECT_NE(refusal(node, true, "many").find("more than 1048576 values"), std::string::npos);
}

TEST(ImportPytorchEt, StreamsThroughAFifoWithoutReadingItWhole) {
  // More calls than the reorder window holds: the first must reach the sink while the writer still
  // holds back the end of the file.
  const int64_t calls = static_cast<int64_t>(kReorderWindow) + 4096;
  const fs::path dir = fresh_dir("fifo");
  const std::string path = (dir / "et.fifo").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  RecordingSink sink;
  std::atomic<bool> seen_before_end{false};
  std::thread writer([&] {
    std::ofstream out(path, std::ios::binary);
    out << "{\"schema\": \"1.1.1-chakra.0.0.4\", \"pid\": 1, \"nodes\": [" << pg_init_node(2, pg_table()).dump();
    // One node's text, its id (the first key) replaced per node: the writer stays far faster than
    // the reader, whatever the build.
    const std::string node = et_comm(10, job()[0]).dump();
    const std::string first = "{\"id\":10,";
    ASSERT_EQ(node.rfind(first, 0), 0u);
    for (int64_t i = 0; i < calls; ++i) out << ",\n{\"id\":" << 10 + i << "," << node.substr(first.size());
    out.flush();
    out.flush();
    // Up to 60 s (far more than a slow machine takes) for the first op before the end is written.
    for (int i = 0; i < 6000 && sink.seen.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    seen_before_end = sink.seen.load() > 0;
    out << "], \"finish_ts\": 2}";
  });
  ImportSummary s;
  try {
    ImportOptions options;
    options.timeout_seconds = 120;  // the writer's wait and more
    s = import_pytorch_et(path, sink, options);
  } catch (...) {
    writer.join();
    throw;
  }
  writer.join();
  EXPECT_TRUE(seen_before_end);
  EXPECT_EQ(s.ops, calls);
  EXPECT_EQ(sink.ops.back().seq, calls - 1);
}

TEST(ImportPytorch, GzipIsReadThrough) {
  const fs::path dir = fresh_dir("gzip");
  const std::string path = (dir / "rank1.et.json.gz").string();
  const std::string text = et_job();
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  gzclose(gz);
  RecordingSink sink;
  EXPECT_EQ(import_pytorch_et(path, sink, {}).ops, 6);  // the job's six calls
  EXPECT_EQ(sniff_json_trace(path, 0), "pytorch-et");
}

TEST(SniffJsonTrace, TellsTheFormatsFromTheirFirstKeys) {
  const fs::path dir = fresh_dir("sniff");
  EXPECT_EQ(sniff_json_trace(write_file(dir / "et.json", et_job()), 0), "pytorch-et");
  EXPECT_EQ(sniff_json_trace(write_file(dir / "k.json", kineto_job()), 0), "kineto");
  // A first key of neither, skipped, then Kineto's.
  EXPECT_EQ(sniff_json_trace(write_file(dir / "k2.json", "{\"x\": [1, {\"y\": 2}], \"traceEvents\": ["), 0), "kineto");
  EXPECT_EQ(sniff_json_trace(write_file(dir / "a.json", "[{\"ph\": \"X\"}]"), 0), "");
  EXPECT_EQ(sniff_json_trace(write_file(dir / "b.bin", "\x01\x02garbage"), 0), "");
  EXPECT_EQ(sniff_json_trace(write_file(dir / "o.json", "{\"x\": 1}"), 0), "");
  EXPECT_EQ(sniff_json_trace(write_file(dir / "e.json", ""), 0), "");
  EXPECT_THROW(sniff_json_trace((dir / "missing.json").string(), 0), Error);
}

}  // namespace
}  // namespace dts::trace
