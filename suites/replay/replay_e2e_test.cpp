// End to end: a run's communication recorded (run --record-trace), checked (trace check), counted
// (trace stats) and replayed (run replay) under mpirun; a replay over a stack that corrupts data
// fails, a replay of another size is refused, a trace that would hang is refused before the job
// runs, and one that hangs anyway (a deadlock no per-group check sees) is named by operation.
//   ctest -R replay_e2e_test
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>

#include "harness/testing/e2e.h"
#include "results/csv_reader.h"
#include "results/record.h"

namespace {

namespace fs = std::filesystem;
using namespace dts::e2e;

// A 3-rank run of point-to-point and collective traffic (odd rank count, uneven sizes).
const std::string kRecorded =
    "run collectives --quick -b 8 -e 1K --collective all_reduce,all_gather,broadcast,reduce_scatter,send_recv "
    "-n 2 -w 1";

fs::path recorded(const std::string& name, int np, const std::string& run) {
  const fs::path dir = scratch_dir() / name;
  fs::remove_all(dir);
  const RunResult r = run_dtsuite(np, run + " --record-trace " + dir.string() + " --csv " + (dir.string() + ".csv"));
  // The collectives plan meets Open MPI's known deviations (its overflow inputs): exit 1 is the
  // stack's verdict, not the recorder's; what counts here is that the trace was written.
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.err;
  EXPECT_NE(r.err.find("trace of every call of the stack"), std::string::npos) << r.err;
  return dir;
}

std::map<std::string, int> verdicts(const fs::path& csv, const std::string& metric) {
  std::map<std::string, int> count;
  for (const dts::Record& row : dts::read_results_csv(csv.string())) {
    if (row.metric == metric) ++count[std::string(dts::name(row.verdict))];
  }
  return count;
}

TEST(Replay, ARecordedRunReplaysCheckedOnTheSameStack) {
  const fs::path dir = recorded("coll", 3, kRecorded);
  const RunResult check = run_dtsuite(0, "trace check " + dir.string());
  ASSERT_EQ(check.exit_code, 0) << check.err;
  EXPECT_NE(check.out.find("3 ranks"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("consistent"), std::string::npos) << check.out;
  const RunResult stats = run_dtsuite(0, "trace stats " + dir.string());
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  for (const char* op : {"all_reduce", "all_gather", "broadcast", "reduce_scatter", "send_recv"}) {
    EXPECT_NE(stats.out.find(op), std::string::npos) << op << "\n" << stats.out;
  }
  const fs::path csv = scratch_dir() / "coll_replay.csv";
  const RunResult replay = run_dtsuite(3, "run replay --trace " + dir.string() + " -n 3 -w 1 --csv " + csv.string());
  ASSERT_EQ(replay.exit_code, 0) << replay.err << replay.out;
  const auto wrong = verdicts(csv, "wrong");
  EXPECT_GT(wrong.at("pass"), 20) << "every checked class passes";  // 5 ops x 3 dtypes x several sizes
  EXPECT_EQ(wrong.count("fail"), 0u);
  // Every class has its time, bandwidths and the recorded time beside them; each rank its total.
  const auto times = verdicts(csv, "time");
  EXPECT_EQ(times.at("info"), static_cast<int>(verdicts(csv, "busbw").at("info")));
  EXPECT_EQ(verdicts(csv, "comm_time").at("info"), 3);  // one row per rank
  EXPECT_GT(verdicts(csv, "recorded_time").at("info"), 0);  // a host backend's calls are timed
}

// A strategy's traffic: ps-async's asynchronous sends and receives with their waits, on the
// sub-worlds the equivalence suite splits, replayed checked; and hybrid's groups (dp and tp).
TEST(Replay, AStrategysTrafficReplaysWithItsGroupsAndWaits) {
  for (const std::string strategy : {"ps-async", "hybrid(dp=2,tp=2)"}) {
    const int np = strategy == "ps-async" ? 3 : 4;
    const fs::path dir = recorded(strategy == "ps-async" ? "ps" : "hybrid", np,
                                  "run equivalence --quick --strategy '" + strategy + "'");
    const RunResult stats = run_dtsuite(0, "trace stats " + dir.string());
    ASSERT_EQ(stats.exit_code, 0) << stats.err;
    if (strategy == "ps-async") {
      EXPECT_EQ(stats.out.find("(0 waits)"), std::string::npos) << "ps-async waits for its messages\n" << stats.out;
    } else {
      EXPECT_NE(stats.out.find("g0-1"), std::string::npos) << "a tp or dp pair group\n" << stats.out;
    }
    const fs::path csv = scratch_dir() / (strategy.substr(0, 2) + "_replay.csv");
    const RunResult replay = run_dtsuite(np, "run replay --trace " + dir.string() + " -n 2 -w 0 --csv " + csv.string());
    ASSERT_EQ(replay.exit_code, 0) << strategy << ": " << replay.err;
    const auto wrong = verdicts(csv, "wrong");
    EXPECT_GT(wrong.at("pass"), 0) << strategy;
    EXPECT_EQ(wrong.count("fail"), 0u) << strategy;
  }
}

TEST(Replay, AStackThatCorruptsDataFailsTheReplay) {
  const fs::path dir = recorded("bitflip", 3, kRecorded);
  const fs::path csv = scratch_dir() / "bitflip_replay.csv";
  const RunResult replay =
      run_dtsuite(3, "run replay --trace " + dir.string() + " --backend 'faulty(bitflip,mpi)' -n 1 -w 0 --csv " + csv.string());
  EXPECT_EQ(replay.exit_code, 1) << replay.err;
  const auto wrong = verdicts(csv, "wrong");
  EXPECT_GT(wrong.count("fail") ? wrong.at("fail") : 0, 0);
  bool names_op = false;
  for (const dts::Record& row : dts::read_results_csv(csv.string())) {
    if (row.metric == "wrong" && row.verdict == dts::Verdict::fail) {
      names_op = names_op || row.detail.find("first: op #") != std::string::npos;
    }
  }
  EXPECT_TRUE(names_op) << "a failed class names the operation and rank of its first wrong element";
}

TEST(Replay, ATraceOfAnotherSizeIsRefusedNeverShrunk) {
  const fs::path dir = recorded("size", 3, kRecorded);
  const RunResult r = run_dtsuite(2, "run replay --trace " + dir.string());
  EXPECT_EQ(r.exit_code, 2);
  const auto lines = our_lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("is of 3 ranks and this job of 2: run it under mpirun -np 3"), std::string::npos) << lines[0];
}

TEST(Replay, ARecordingNeverOverwritesATrace) {
  const fs::path dir = recorded("twice", 2, "run collectives --quick -b 8 -e 8 --collective all_reduce -n 1 -w 0");
  const std::string before = read_file(dir / "rank-1.jsonl");
  const RunResult again = run_dtsuite(2, "run collectives --quick -b 8 -e 8 --collective all_reduce -n 1 -w 0 --record-trace " +
                                             dir.string());
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("already exists; a trace never overwrites one"), std::string::npos) << again.err;
  EXPECT_EQ(read_file(dir / "rank-1.jsonl"), before);
}

// Rank 1's second all_reduce has another count: a real job would hang there.
TEST(Replay, ATraceThatWouldHangIsRefusedBeforeTheJobRuns) {
  const fs::path dir = scratch_dir() / "mismatch";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (int r = 0; r < 2; ++r) {
    std::ofstream out(dir / ("rank-" + std::to_string(r) + ".jsonl"));
    out << "{\"dtsuite_trace\":1,\"rank\":" << r << ",\"world\":2,\"source\":\"test\"}\n"
        << "{\"group\":0,\"ranks\":[0,1]}\n"
        << "{\"seq\":0,\"group\":0,\"op\":\"all_reduce\",\"dtype\":\"f32\",\"redop\":\"sum\",\"count\":4}\n"
        << "{\"seq\":1,\"group\":0,\"op\":\"all_reduce\",\"dtype\":\"f32\",\"redop\":\"sum\",\"count\":" << (r ? 5 : 4)
        << "}\n";
  }
  const RunResult check = run_dtsuite(0, "trace check " + dir.string());
  EXPECT_EQ(check.exit_code, 2);
  EXPECT_NE(check.err.find("rank 1's operation #1 (all_reduce f32 sum of 5 elements"), std::string::npos) << check.err;
  const RunResult replay = run_dtsuite(2, "run replay --trace " + dir.string());
  EXPECT_EQ(replay.exit_code, 2);
  EXPECT_NE(replay.err.find("rank 1's operation #1"), std::string::npos) << replay.err;
}

// Both ranks send first, 64 MiB each (past any eager limit), then receive: the sends pair with
// the receives, so the check passes, and the replay hangs. The watchdog names where.
TEST(Replay, AHangNamesEachRanksOperation) {
  const fs::path dir = scratch_dir() / "deadlock";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (int r = 0; r < 2; ++r) {
    std::ofstream out(dir / ("rank-" + std::to_string(r) + ".jsonl"));
    const std::string peer = std::to_string(1 - r);
    out << "{\"dtsuite_trace\":1,\"rank\":" << r << ",\"world\":2,\"source\":\"test\"}\n"
        << "{\"group\":0,\"ranks\":[0,1]}\n"
        << "{\"seq\":0,\"group\":0,\"op\":\"barrier\"}\n"
        << "{\"seq\":1,\"group\":0,\"op\":\"send\",\"dtype\":\"f32\",\"count\":16777216,\"peer\":" << peer << "}\n"
        << "{\"seq\":2,\"group\":0,\"op\":\"recv\",\"dtype\":\"f32\",\"count\":16777216,\"peer\":" << peer << "}\n";
  }
  ASSERT_EQ(run_dtsuite(0, "trace check " + dir.string()).exit_code, 0);
  const RunResult r = run_dtsuite(2, "run replay --trace " + dir.string() + " -T 3 -n 1 -w 0 -c 0 --csv " +
                                         (scratch_dir() / "deadlock.csv").string());
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("case trace made no progress"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("0 in send (last completed barrier) at operation #1 of its trace"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1 in send (last completed barrier) at operation #1 of its trace"), std::string::npos) << r.err;
}

// A rank file that is a device, or a FIFO no one writes: one line each, exit 2 and 3 (-T), as
// every input dtsuite reads.
TEST(Replay, ADeviceOrASilentFifoIsNoTrace) {
  const fs::path zero = scratch_dir() / "zero";
  fs::remove_all(zero);
  fs::create_directories(zero);
  fs::create_symlink("/dev/zero", zero / "rank-0.jsonl");
  const RunResult device = run_dtsuite(0, "trace stats " + zero.string());
  EXPECT_EQ(device.exit_code, 2) << device.err;
  ASSERT_EQ(our_lines(device.err).size(), 1u) << device.err;
  const fs::path fifo = scratch_dir() / "fifo";
  fs::remove_all(fifo);
  fs::create_directories(fifo);
  ASSERT_EQ(mkfifo((fifo / "rank-0.jsonl").c_str(), 0600), 0);
  const RunResult silent = run_dtsuite(0, "trace check -T 1 " + fifo.string());
  EXPECT_EQ(silent.exit_code, 3) << silent.err;
  ASSERT_EQ(our_lines(silent.err).size(), 1u) << silent.err;
}

// A PyTorch execution trace of a 2-rank job, each rank's file as ExecutionTraceObserver writes
// it (schema 1.1.1-chakra.0.0.4): the process-group table, then record_param_comms nodes with
// RECORD_PARAM_COMMS_DATA's inputs (tensors, (seq, p2p), (pg_name, pg_desc), the recorded rank,
// the name, splits, rank start, stride, group size) and the collective attributes, each followed
// by its wait, as a synchronous call records them.
std::string et_rank(int rank) {
  using nlohmann::ordered_json;
  auto attr = [](const std::string& name, const std::string& type, ordered_json value) {
    return ordered_json{{"name", name}, {"type", type}, {"value", std::move(value)}};
  };
  auto node = [&](int64_t id, const std::string& name, ordered_json values, ordered_json types, ordered_json attrs) {
    ordered_json shapes = ordered_json::array();
    for (size_t i = 0; i < values.size(); ++i) shapes.push_back(ordered_json::array());
    ordered_json empty{{"values", ordered_json::array()}, {"shapes", ordered_json::array()},
                       {"types", ordered_json::array()}, {"strides", ordered_json::array()}};
    return ordered_json{{"id", id}, {"name", name}, {"ctrl_deps", 1},
                        {"inputs", {{"values", values}, {"shapes", shapes}, {"types", types}, {"strides", shapes}}},
                        {"outputs", empty}, {"attrs", attrs}};
  };
  struct Call {
    std::string name, dtype;
    int64_t in, out, seq;
    int recorded_rank;  // the group rank for most; the root of a broadcast; a send's dst, a recv's src
    bool p2p;
  };
  std::vector<Call> calls{{"allreduce", "Float", 1024, 1024, 1, rank, false},
                          {"broadcast", "Float", 64, 64, 2, 0, false},
                          {"_allgather_base", "BFloat16", 256, 512, 3, rank, false},
                          {rank == 0 ? "send" : "recv", "Half", 100, 100, 1, 1 - rank, true}};
  ordered_json table = ordered_json::array({ordered_json{{"pg_name", "0"}, {"pg_desc", "default_pg"},
                                                         {"backend_config", "cuda:nccl"}, {"ranks", ordered_json::array()},
                                                         {"group_size", 2}, {"group_count", 1}}});
  ordered_json nodes = ordered_json::array();
  nodes.push_back(node(2, "## process_group:init ##", ordered_json::array({table.dump()}), ordered_json::array({"String"}),
                       ordered_json::array()));
  int64_t id = 10;
  for (const Call& c : calls) {
    for (const bool wait : {false, true}) {
      ordered_json values = ordered_json::array();
      ordered_json types = ordered_json::array();
      if (!wait) {
        values.push_back(ordered_json::array({ordered_json::array({100 + id, 200 + id, 0, c.in, 4, "cuda:0"})}));
        types.push_back("GenericList[Tensor(float)]");
      }
      for (ordered_json v : {ordered_json::array({c.seq, c.p2p}), ordered_json::array({"0", "default_pg"}),
                             ordered_json(wait ? rank : c.recorded_rank), ordered_json(wait ? "wait" : c.name),
                             ordered_json::array(), ordered_json::array(), ordered_json(-1), ordered_json(-1),
                             ordered_json(2)}) {
        values.push_back(v);
        types.push_back("Int");
      }
      ordered_json attrs = ordered_json::array(
          {attr("rf_id", "uint64", id), attr("collective_name", "string", wait ? "wait" : c.name),
           attr("dtype", "string", wait ? "Byte" : c.dtype), attr("in_msg_nelems", "uint64", wait ? 0 : c.in),
           attr("out_msg_nelems", "uint64", wait ? 0 : c.out), attr("in_split_size", "string", "[]"),
           attr("out_split_size", "string", "[]"), attr("pg_name", "string", "0"),
           attr("pg_desc", "string", "default_pg"), attr("pg_size", "uint64", 2)});
      nodes.push_back(node(id++, "record_param_comms", values, types, attrs));
    }
  }
  ordered_json top{{"schema", "1.1.1-chakra.0.0.4"}, {"pid", 4242}, {"time", "2026-01-01 00:00:00"},
                   {"start_ts", 1000}, {"nodes", nodes}, {"finish_ts", 2000}};
  return top.dump(1);
}

TEST(Replay, AnImportedPytorchTraceIsCheckedAndReplays) {
  const fs::path dir = scratch_dir() / "et";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string files;
  for (int r = 0; r < 2; ++r) {
    const fs::path file = dir / ("rank" + std::to_string(r) + ".json");
    std::ofstream(file) << et_rank(r);
    files += " " + file.string();
  }
  const RunResult imported = run_dtsuite(0, "trace import" + files + " --to " + (dir / "trace").string());
  ASSERT_EQ(imported.exit_code, 0) << imported.err << imported.out;
  EXPECT_NE(imported.out.find("pytorch-et 1.1.1-chakra.0.0.4, rank 1 of 2: 4 operations"), std::string::npos)
      << imported.out;  // all_reduce, broadcast, all_gather and the recv, each wait folded in
  EXPECT_NE(imported.out.find("2 ranks, 8 operations on 1 groups, 1 messages paired; consistent"), std::string::npos)
      << imported.out;
  const fs::path csv = scratch_dir() / "et_replay.csv";
  const RunResult replay = run_dtsuite(2, "run replay --trace " + (dir / "trace").string() + " -n 2 -w 0 --csv " + csv.string());
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  const auto wrong = verdicts(csv, "wrong");
  EXPECT_EQ(wrong.at("pass"), 4);  // all_reduce (as sum: ET records no reduction op), broadcast, all_gather, recv
  bool said_sum = false;
  for (const dts::Record& row : dts::read_results_csv(csv.string())) {
    said_sum = said_sum || (row.labels.op == "all_reduce" && row.metric == "wrong" &&
                            row.detail.find("reduction op not recorded: replayed as sum") != std::string::npos);
  }
  EXPECT_TRUE(said_sum);
  // The same job twice is two sources of one rank: refused, and nothing is written over.
  const RunResult twice = run_dtsuite(0, "trace import " + (dir / "rank0.json").string() + " " +
                                             (dir / "rank0.json").string() + " --to " + (dir / "twice").string());
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_NE(twice.err.find("two sources are rank 0"), std::string::npos) << twice.err;
}

// The same 2-rank job as et_rank, as the PyTorch profiler's Kineto trace of each rank writes it:
// distributedInfo (rank, world, the process-group table), a record_param_comms CPU op per call
// with its wait, then the NCCL kernels they launched, linked by "External id", whose names give
// the reduction op (max here, which the ET does not record) and whose "dur" the time.
std::string kineto_rank(int rank) {
  using nlohmann::ordered_json;
  struct Call {
    std::string name, dtype, kernel;
    int64_t in, out;
    int recorded_rank;  // the caller's group rank; a broadcast's root; a send's dst, a recv's src
    double dur_us;
  };
  const std::vector<Call> calls{
      {"allreduce", "Float", "ncclDevKernel_AllReduce_Max_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 1024, 1024, rank, 21.5},
      {"broadcast", "Float", "ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 64, 64, 0, 4.0},
      {"_allgather_base", "BFloat16", "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 256, 512, rank,
       6.25},
      {rank == 0 ? "send" : "recv", "Half", "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", 100, 100, 1 - rank,
       3.5}};
  auto args = [&](const Call& c, int64_t external, bool cpu) {
    ordered_json a{{"External id", external},
                   {"Collective name", c.name},
                   {"In msg nelems", c.in},
                   {"Out msg nelems", c.out},
                   {"Group size", 2},
                   {"dtype", c.dtype},
                   {"In split size", "[]"},
                   {"Out split size", "[]"},
                   {"Process Group Name", "0"},
                   {"Process Group Description", "default_pg"},
                   {"Process Group Ranks", "[0, 1]"}};
    if (cpu) a["Rank"] = c.recorded_rank;
    if (c.name == "send") a["Dst Rank"] = c.recorded_rank;
    if (c.name == "recv") a["Src Rank"] = c.recorded_rank;
    return a;
  };
  auto event = [](const std::string& cat, const std::string& name, double ts, double dur, ordered_json a, int tid) {
    return ordered_json{{"ph", "X"}, {"cat", cat}, {"name", name}, {"pid", 50 + tid}, {"tid", tid},
                        {"ts", ts}, {"dur", dur}, {"args", std::move(a)}};
  };
  ordered_json events = ordered_json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const double ts = 1000.0 + 100.0 * static_cast<double>(i);
    events.push_back(event("cpu_op", "record_param_comms", ts, 30, args(calls[i], 700 + static_cast<int64_t>(i), true), 1));
    events.push_back(event("cpu_op", "record_param_comms", ts + 40, 5,
                           ordered_json{{"External id", 800 + static_cast<int64_t>(i)}, {"Collective name", "wait"},
                                        {"dtype", "Byte"}, {"In msg nelems", 0}, {"Out msg nelems", 0}, {"Group size", 2}},
                           1));
  }
  for (size_t i = 0; i < calls.size(); ++i) {
    events.push_back(event("kernel", calls[i].kernel, 1010.0 + 100.0 * static_cast<double>(i), calls[i].dur_us,
                           args(calls[i], 700 + static_cast<int64_t>(i), false), 7));
  }
  ordered_json top{{"schemaVersion", 1},
                   {"deviceProperties", ordered_json::array()},
                   {"distributedInfo",
                    {{"backend", "nccl"},
                     {"rank", rank},
                     {"world_size", 2},
                     {"pg_count", 1},
                     {"pg_config", ordered_json::array({ordered_json{{"pg_name", "0"},
                                                                     {"pg_desc", "default_pg"},
                                                                     {"backend_config", "cuda:nccl"},
                                                                     {"pg_size", 2},
                                                                     {"ranks", ordered_json::array({0, 1})}}})}}},
                   {"displayTimeUnit", "ms"},
                   {"traceEvents", events}};
  return top.dump(1);
}

// `trace stats`'s class lines, without their recorded-time column: (op, dtype, bytes, group,
// calls, total bytes), in the order printed.
std::multiset<std::string> stats_classes(const std::string& out) {
  std::multiset<std::string> classes;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("op ", 0) == 0) continue;
    std::istringstream words(line);
    std::string word, key;
    for (int i = 0; i < 6 && words >> word; ++i) key += word + " ";
    classes.insert(key);
  }
  return classes;
}

TEST(Replay, AKinetoTraceImportsAsTheSameJobsEtAndReplaysWithItsKernelsReduction) {
  const fs::path dir = scratch_dir() / "kineto";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string et_files, kineto_files;
  for (int r = 0; r < 2; ++r) {
    std::ofstream(dir / ("rank" + std::to_string(r) + ".json")) << et_rank(r);
    std::ofstream(dir / ("rank" + std::to_string(r) + ".pt.trace.json")) << kineto_rank(r);
    et_files += " " + (dir / ("rank" + std::to_string(r) + ".json")).string();
    kineto_files += " " + (dir / ("rank" + std::to_string(r) + ".pt.trace.json")).string();
  }
  const RunResult kineto = run_dtsuite(0, "trace import" + kineto_files + " --to " + (dir / "from_kineto").string());
  ASSERT_EQ(kineto.exit_code, 0) << kineto.err << kineto.out;
  EXPECT_NE(kineto.out.find("kineto"), std::string::npos) << kineto.out;  // sniffed, not told
  EXPECT_NE(kineto.out.find("2 ranks, 8 operations on 1 groups, 1 messages paired; consistent"), std::string::npos)
      << kineto.out;
  const RunResult et = run_dtsuite(0, "trace import" + et_files + " --to " + (dir / "from_et").string());
  ASSERT_EQ(et.exit_code, 0) << et.err << et.out;
  // The issue's property: the two tools' traces of one job give one multiset of (op, dtype,
  // bytes, group, calls).
  const RunResult kineto_stats = run_dtsuite(0, "trace stats " + (dir / "from_kineto").string());
  const RunResult et_stats = run_dtsuite(0, "trace stats " + (dir / "from_et").string());
  ASSERT_EQ(kineto_stats.exit_code, 0) << kineto_stats.err;
  ASSERT_EQ(et_stats.exit_code, 0) << et_stats.err;
  const auto classes = stats_classes(kineto_stats.out);
  EXPECT_EQ(classes.size(), 5u) << kineto_stats.out;  // all_reduce, broadcast, all_gather, the send, the recv
  EXPECT_EQ(classes, stats_classes(et_stats.out)) << kineto_stats.out << et_stats.out;

  const fs::path csv = scratch_dir() / "kineto_replay.csv";
  const RunResult replay =
      run_dtsuite(2, "run replay --trace " + (dir / "from_kineto").string() + " -n 3 -w 0 --csv " + csv.string());
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  EXPECT_EQ(verdicts(csv, "wrong").at("pass"), 4);  // the send's class is checked at its receiver
  std::map<std::string, double> recorded;  // op -> the trace's mean time per call
  std::map<int, std::vector<std::pair<int, double>>> timeline;  // rank -> (at, elapsed)
  std::map<int, double> comm_time;
  for (const dts::Record& row : dts::read_results_csv(csv.string())) {
    if (row.metric == "wrong" && row.labels.op == "all_reduce") {
      // max, from the kernel's name: checked as max, and not said to be a guess
      EXPECT_EQ(row.detail.find("reduction op not recorded"), std::string::npos) << row.detail;
    }
    if (row.metric == "recorded_time") recorded[row.labels.op] = row.value;
    const auto rank = dts::config_value(row.labels.config, "rank");
    if (row.metric == "comm_time") comm_time[std::stoi(*rank)] = row.value;
    if (row.metric == "elapsed") {
      timeline[std::stoi(*rank)].emplace_back(std::stoi(*dts::config_value(row.labels.config, "at")), row.value);
    }
  }
  EXPECT_NEAR(recorded["all_reduce"], 21.5e-6, 1e-12);  // the kernel's dur, in microseconds
  EXPECT_NEAR(recorded["recv"], 3.5e-6, 1e-12);
  ASSERT_EQ(timeline.size(), 2u);
  for (const auto& [rank, points] : timeline) {
    // 4 operations a rank, fewer than the 32 points: one a point, each at its count.
    ASSERT_EQ(points.size(), 4u) << rank;
    for (size_t k = 0; k < points.size(); ++k) {
      EXPECT_EQ(points[k].first, static_cast<int>(k) + 1) << rank;
      // Each pass's times only grow along its order, so their medians do too.
      if (k > 0) {
        EXPECT_GE(points[k].second, points[k - 1].second) << rank << " at " << k;
      }
    }
    // The pass's end comes after all its operations' times (and their buffers' set-up): in each
    // pass, so in the median.
    EXPECT_GE(points.back().second, comm_time.at(rank)) << rank;
  }
}

// A trace of more than 1 GiB: 1,048,576 all_reduce lines of 1 KiB each (a field the format does
// not know pads them, as a producer's extra fields would). Reading streams, a line at a time:
// under a cap below the file's size, `trace stats` and `trace check` read it whole, and check
// holds its 32 bytes a collective (32 MiB here), not the file.
TEST(Replay, AGigabyteTraceIsReadWithinItsBound) {
  const fs::path dir = scratch_dir() / "gigabyte";
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    std::ofstream out(dir / "rank-0.jsonl");
    out << "{\"dtsuite_trace\":1,\"rank\":0,\"world\":1,\"source\":\"test\"}\n{\"group\":0,\"ranks\":[0]}\n";
    const std::string pad(1000, 'x');
    for (int64_t i = 0; i < (int64_t{1} << 20); ++i) {
      out << "{\"seq\":" << i << ",\"group\":0,\"op\":\"all_reduce\",\"dtype\":\"f32\",\"count\":" << (i % 4096)
          << ",\"pad\":\"" << pad << "\"}\n";
    }
  }
  ASSERT_GT(fs::file_size(dir / "rank-0.jsonl"), int64_t{1} << 30);
  // 1 GiB of address space, of which the binary's libraries (CUDA's and NCCL's among them) map
  // about 800 MiB (it does not start under 768): a reader that held the file could not read it.
  // OpenBLAS's threads, which allocate their buffers at start and spin when that fails, are kept
  // to one.
  const std::string cap = "ulimit -v 1048576; OPENBLAS_NUM_THREADS=1 ";
  const RunResult stats = run_shell(cap + DTS_BINARY + " trace stats " + dir.string());
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_NE(stats.out.find("1048576 operation lines"), std::string::npos) << stats.out;
  const RunResult check = run_shell(cap + DTS_BINARY + " trace check " + dir.string());
  ASSERT_EQ(check.exit_code, 0) << check.err;
  EXPECT_NE(check.out.find("1 ranks, 1048576 operations"), std::string::npos) << check.out;
  fs::remove_all(dir);
}

// An importer's input of more than 1 GiB, as a profiler of a long job writes it: each call's
// record_param_comms (ET: the node and its wait; Kineto: the CPU op and its kernel)
// between other work whose text pads the file (1 KiB an op, as tensor shapes and names do).
// Streaming, each importer holds one node or event and its reorder window (kReorderWindow
// records, kMaxWindowBytes of text), never the file: under a 1 GiB address-space cap, of which the
// binary's libraries take about 800 MiB, both import it whole, every call.
void write_large(const fs::path& file, bool kineto, int64_t& calls) {
  std::ofstream out(file);
  const std::string pad(1024, 'x');
  out << (kineto ? "{\"schemaVersion\":1,\"distributedInfo\":{\"backend\":\"nccl\",\"rank\":0,\"world_size\":1,"
                   "\"pg_count\":1,\"pg_config\":[{\"pg_name\":\"0\",\"pg_desc\":\"default_pg\",\"pg_size\":1,"
                   "\"ranks\":[0]}]},\"traceEvents\":["
                 : "{\"schema\":\"1.1.1-chakra.0.0.4\",\"pid\":1,\"time\":\"2026-01-01 00:00:00\",\"start_ts\":0,"
                   "\"nodes\":[{\"id\":1,\"name\":\"## process_group:init ##\",\"ctrl_deps\":0,\"inputs\":{\"values\":"
                   "[\"[{\\\"pg_name\\\": \\\"0\\\", \\\"pg_desc\\\": \\\"default_pg\\\", \\\"backend_config\\\": "
                   "\\\"cuda:nccl\\\", \\\"ranks\\\": [], \\\"group_size\\\": 1, \\\"group_count\\\": 1}]\"],"
                   "\"shapes\":[[]],\"types\":[\"String\"],\"strides\":[[]]},\"outputs\":{\"values\":[],\"shapes\":[],"
                   "\"types\":[],\"strides\":[]},\"attrs\":[]}");
  calls = 0;
  int64_t bytes = 0;
  std::string text;
  while (bytes <= (int64_t{1} << 30) + (int64_t{16} << 20)) {
    const int64_t n = 1 + calls % 4096, id = 10 + 3 * calls;
    text.clear();
    if (kineto) {
      const std::string a = ",\"args\":{\"External id\":" + std::to_string(id) +
                            ",\"Collective name\":\"allreduce\",\"In msg nelems\":" + std::to_string(n) +
                            ",\"Out msg nelems\":" + std::to_string(n) +
                            ",\"Group size\":1,\"dtype\":\"Float\",\"In split size\":\"[]\",\"Out split size\":\"[]\","
                            "\"Process Group Name\":\"0\",\"Process Group Description\":\"default_pg\","
                            "\"Process Group Ranks\":\"[0]\"";
      const auto ts = [&](int64_t offset) { return std::to_string(100 * calls + offset); };
      text += std::string(calls ? "," : "") + "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"record_param_comms\",\"pid\":1,"
              "\"tid\":1,\"ts\":" + ts(0) + ",\"dur\":20" + a + ",\"Rank\":0}}";
      text += ",{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,\"tid\":1,\"ts\":" + ts(50) +
              ",\"dur\":1,\"args\":{\"Input Dims\":\"" + pad + "\"}}";
      text += ",{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclDevKernel_AllReduce_Sum_f32_RING_LL\",\"pid\":2,"
              "\"tid\":7,\"ts\":" + ts(10) + ",\"dur\":3" + a + "}}";
    } else {
      auto node = [&](int64_t node_id, const std::string& name, const std::string& values, const std::string& attrs) {
        return ",{\"id\":" + std::to_string(node_id) + ",\"name\":\"" + name + "\",\"ctrl_deps\":1,\"inputs\":{\"values\":" +
               values + ",\"shapes\":[],\"types\":[],\"strides\":[]},\"outputs\":{\"values\":[],\"shapes\":[],"
               "\"types\":[],\"strides\":[]},\"attrs\":" + attrs + "}";
      };
      auto comm = [&](const std::string& collective, int64_t elements) {
        const std::string e = std::to_string(elements);
        return "[{\"name\":\"collective_name\",\"type\":\"string\",\"value\":\"" + collective +
               "\"},{\"name\":\"dtype\",\"type\":\"string\",\"value\":\"Float\"},{\"name\":\"in_msg_nelems\","
               "\"type\":\"uint64\",\"value\":" + e + "},{\"name\":\"out_msg_nelems\",\"type\":\"uint64\",\"value\":" +
               e + "},{\"name\":\"in_split_size\",\"type\":\"string\",\"value\":\"[]\"},{\"name\":\"out_split_size\","
               "\"type\":\"string\",\"value\":\"[]\"},{\"name\":\"pg_name\",\"type\":\"string\",\"value\":\"0\"},"
               "{\"name\":\"pg_size\",\"type\":\"uint64\",\"value\":1}]";
      };
      const std::string seq = std::to_string(calls + 1);
      text += node(id, "record_param_comms", "[[" + seq + ",false],[\"0\",\"default_pg\"],0,\"allreduce\"]",
                   comm("allreduce", n));
      text += node(id + 1, "record_param_comms", "[[" + seq + ",false],[\"0\",\"default_pg\"],0,\"wait\"]", comm("wait", 0));
      text += node(id + 2, "aten::mm", "[\"" + pad + "\"]", "[]");
    }
    out << text;
    bytes += static_cast<int64_t>(text.size());
    ++calls;
  }
  out << (kineto ? "]}" : "],\"finish_ts\":1}");
}

TEST(Replay, AGigabyteImportIsReadWithinItsBound) {
  const fs::path dir = scratch_dir() / "gigabyte_import";
  const std::string cap = "ulimit -v 1048576; OPENBLAS_NUM_THREADS=1 ";
  for (const bool kineto : {false, true}) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path file = dir / (kineto ? "rank0.pt.trace.json" : "rank0.et.json");
    int64_t calls = 0;
    write_large(file, kineto, calls);
    ASSERT_GT(fs::file_size(file), int64_t{1} << 30);
    const RunResult imported = run_shell(cap + DTS_BINARY + " trace import " + file.string() + " --to " +
                                         (dir / "trace").string());
    ASSERT_EQ(imported.exit_code, 0) << imported.err << imported.out;
    const std::string want = std::string(kineto ? "kineto" : "pytorch-et 1.1.1-chakra.0.0.4") + ", rank 0 of 1: " +
                             std::to_string(calls) + " operations";
    EXPECT_NE(imported.out.find(want), std::string::npos) << want << "\n" << imported.out;
    EXPECT_NE(imported.out.find("1 ranks, " + std::to_string(calls) + " operations"), std::string::npos) << imported.out;
    rusage children{};
    getrusage(RUSAGE_CHILDREN, &children);  // the largest child so far: the imports (and their shells)
    std::printf("%s: %lld MiB, %lld calls imported; peak resident set of a child so far %ld MiB\n",
                file.filename().c_str(), static_cast<long long>(fs::file_size(file) >> 20), static_cast<long long>(calls),
                children.ru_maxrss / 1024);
  }
  fs::remove_all(dir);
}

}  // namespace
