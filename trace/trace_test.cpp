// The trace format: what the writer and the recorder write is what the reader reads, and every
// line the reader refuses is refused in one line naming the file and line.
#include "trace/trace.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "comm/testing/fake_communicator.h"
#include "core/error.h"
#include "trace/check.h"
#include "trace/recorder.h"
#include "trace/stats.h"

namespace dts::trace {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("dts_trace_test_" + std::to_string(getpid())) / name;
  fs::remove_all(dir);
  return dir;
}

// Writes one rank file from raw lines.
void write_lines(const fs::path& dir, int rank, const std::vector<std::string>& lines) {
  fs::create_directories(dir);
  std::ofstream out(dir / ("rank-" + std::to_string(rank) + ".jsonl"));
  for (const auto& l : lines) out << l << "\n";
}

std::string header(int rank, int world) {
  return "{\"dtsuite_trace\":1,\"rank\":" + std::to_string(rank) + ",\"world\":" + std::to_string(world) +
         ",\"source\":\"test\"}";
}

std::vector<Op> read_ops(const std::string& path) {
  TraceReader reader(path);
  std::vector<Op> ops;
  Group g;
  Op op;
  bool is_op = false;
  while (reader.next(g, op, is_op)) {
    if (is_op) ops.push_back(op);
  }
  return ops;
}

// The message of reading `lines` as rank 0 of a world of 2, or "" when they read.
std::string refusal(const std::vector<std::string>& lines, const std::string& name) {
  const fs::path dir = fresh_dir(name);
  write_lines(dir, 0, lines);
  try {
    read_ops((dir / "rank-0.jsonl").string());
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
    return e.what();
  }
  return "";
}

TEST(TraceFormat, EveryFieldOfEveryKindReadsBackAsWritten) {
  const fs::path dir = fresh_dir("roundtrip");
  std::vector<Op> written;
  {
    TraceWriter writer(dir.string(), 1);
    Header h;
    h.rank = 1;
    h.world = 3;
    h.source = "test \"quoted\"";  // the header's strings are escaped
    writer.header(h);
    writer.group({0, {0, 1, 2}});
    writer.group({5, {2, 1}});  // a group's ids are the file's own; its ranks in group-rank order
    int64_t seq = 0;
    auto add = [&](Op op) {
      op.seq = seq++;
      written.push_back(op);
      writer.op(op);
    };
    Op a;
    a.kind = OpKind::all_reduce;
    a.dtype = DType::bf16;
    a.redop = ReduceOp::max;
    a.count = 1 << 20;
    a.seconds = 0.0015;
    add(a);
    Op v;
    v.kind = OpKind::all_to_allv;
    v.group = 5;
    v.dtype = DType::i64;
    v.in_splits = {3, 0};
    v.out_splits = {1, 7};
    add(v);
    Op b;
    b.kind = OpKind::broadcast;
    b.dtype = DType::u8;
    b.count = 9;
    b.root = 2;
    b.stream = 4;
    add(b);
    Op s;
    s.kind = OpKind::send_recv;
    s.count = 64;  // no dtype: bytes
    s.peer = 2;
    s.source = 0;
    s.tag = 17;
    add(s);
    Op r;
    r.kind = OpKind::recv;
    r.group = 5;
    r.dtype = DType::f64;
    r.count = 5;
    r.peer = 0;
    r.async = true;
    add(r);
    Op w;
    w.kind = OpKind::wait;
    w.waits = {4};
    add(w);
    Op bar;
    bar.kind = OpKind::barrier;
    add(bar);
    writer.close();
  }
  TraceReader reader(rank_file(dir.string(), 1));
  EXPECT_EQ(reader.header().rank, 1);
  EXPECT_EQ(reader.header().world, 3);
  EXPECT_EQ(reader.header().source, "test \"quoted\"");
  const std::vector<Op> read = read_ops(rank_file(dir.string(), 1));
  ASSERT_EQ(read.size(), written.size());
  for (size_t i = 0; i < read.size(); ++i) {
    SCOPED_TRACE(op_line(written[i]));
    EXPECT_EQ(read[i].seq, written[i].seq);
    EXPECT_EQ(read[i].group, written[i].group);
    EXPECT_EQ(read[i].kind, written[i].kind);
    EXPECT_EQ(read[i].dtype, written[i].dtype);
    EXPECT_EQ(read[i].redop, written[i].redop);
    EXPECT_EQ(read[i].count, written[i].count);
    EXPECT_EQ(read[i].in_splits, written[i].in_splits);
    EXPECT_EQ(read[i].out_splits, written[i].out_splits);
    EXPECT_EQ(read[i].root, written[i].root);
    EXPECT_EQ(read[i].peer, written[i].peer);
    EXPECT_EQ(read[i].source, written[i].source);
    EXPECT_EQ(read[i].tag, written[i].tag);
    EXPECT_EQ(read[i].stream, written[i].stream);
    EXPECT_EQ(read[i].async, written[i].async);
    EXPECT_EQ(read[i].waits, written[i].waits);
    // Written in microseconds with 3 decimals: a nanosecond's rounding.
    if (written[i].seconds < 0) {
      EXPECT_LT(read[i].seconds, 0);
    } else {
      EXPECT_NEAR(read[i].seconds, written[i].seconds, 1e-9);
    }
  }
}

TEST(TraceFormat, AWriterNeverOverwritesAFile) {
  const fs::path dir = fresh_dir("overwrite");
  write_lines(dir, 0, {"precious"});
  try {
    TraceWriter writer(dir.string(), 0);
    FAIL() << "a second writer opened rank-0.jsonl";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already exists"), std::string::npos) << e.what();
  }
  std::ifstream in(dir / "rank-0.jsonl");
  std::string kept;
  std::getline(in, kept);
  EXPECT_EQ(kept, "precious");
}

TEST(TraceFormat, EachBadLineIsRefusedNamingItsLine) {
  const std::string h = header(0, 2);
  const std::string g = "{\"group\":0,\"ranks\":[0,1]}";
  struct Bad {
    std::vector<std::string> lines;
    std::string said;
  };
  const std::vector<Bad> bad{
      {{}, "empty"},
      {{"{\"schema\":\"1.1.0\"}"}, "not a dtsuite trace"},
      {{"\x7f" "ELF\x02\x01"}, "not a dtsuite trace"},
      {{"{\"dtsuite_trace\":2,\"rank\":0,\"world\":2}"}, "newer than this dtsuite reads"},
      {{"{\"dtsuite_trace\":1,\"rank\":2,\"world\":2}"}, "\"rank\" is 2, outside 0..1"},
      {{h, "{\"seq\":0,\"group\":0,\"op\":\"barrier\"}"}, ":2: group 0 is used before"},
      {{h, g, "{\"seq\":1,\"group\":0,\"op\":\"barrier\"}"}, ":3: seq 1 where 0 comes next"},
      {{h, g, "{\"seq\":0,\"group\":0,\"op\":\"allreduce\",\"count\":1}"}, "unknown op 'allreduce'"},
      {{h, g, "{\"seq\":0,\"group\":0,\"op\":\"all_reduce\",\"dtype\":\"f32\",\"count\":-1}"}, "\"count\" is -1"},
      // 2^62 f32 elements are 2^64 bytes: past the 2^50 bound long before an int64 overflows.
      {{h, g, "{\"seq\":0,\"group\":0,\"op\":\"all_reduce\",\"dtype\":\"f32\",\"count\":4611686018427387904}"},
       "\"count\" is 4611686018427387904, outside"},
      {{h, g, "{\"seq\":0,\"group\":0,\"op\":\"all_reduce\",\"count\":18446744073709551615}"}, "overflows a 64-bit count"},
      // all_gather's buffer is count x members: 2^49 bytes from each of 2 ranks is 2^50, past the bound.
      {{h, g, "{\"seq\":0,\"group\":0,\"op\":\"all_gather\",\"dtype\":\"u8\",\"count\":1125899906842624}"}, "overflows a buffer"},
      {{h, g, "{\"seq\":0,\"group\":0,\"op\":\"send\",\"dtype\":\"u8\",\"count\":1,\"peer\":2}"}, "\"peer\" is 2, outside 0..1"},
      {{h, "{\"group\":0,\"ranks\":[0,3]}"}, "\"ranks\" holds 3, outside 0..1"},
      {{h, "{\"group\":0,\"ranks\":[1]}"}, "does not hold this file's rank 0"},
      {{h, g, "{\"seq\":0,\"group\":0,\"op\":\"wait\",\"waits\":[0]}"}, "\"waits\" holds 0, outside"},
      {{h, g, "{\"seq\":0,\"group\":0,\"op\":\"all_to_allv\",\"dtype\":\"u8\",\"in_splits\":[1],\"out_splits\":[1]}"},
       "splits of 1 and 1 entries on a group of 2"},
      {{h, g, "{\"seq\":0,\"group\":0,\"op\":\"broadcast\",\"dtype\":\"u8\",\"count\":1}"}, "no \"root\""},
      {{h, g, "{\"seq\":0,\"group\":0,\"op\":\"all_reduce\",\"dtype\":\"f33\",\"count\":1}"}, "f33"},
      {{h, g, "{\"seq\":0,\"group\":0,\"op\":\"barr"}, ":3: not a JSON object"},  // torn last line
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    const std::string said = refusal(bad[i].lines, "bad" + std::to_string(i));
    EXPECT_NE(said.find(bad[i].said), std::string::npos) << "case " << i << ": " << said;
  }
}

TEST(TraceFormat, ALineLongerThanTheBoundIsRefusedWithoutBeingHeld) {
  const fs::path dir = fresh_dir("long");
  write_lines(dir, 0, {header(0, 1), std::string(static_cast<size_t>(kMaxTraceLine) + 1, '[')});
  try {
    read_ops((dir / "rank-0.jsonl").string());
    FAIL() << "read a line past the bound";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line longer than"), std::string::npos) << e.what();
  }
}

TEST(TraceFormat, ADeviceOrAFolderIsNotATrace) {
  EXPECT_THROW(TraceReader("/dev/zero"), Error);
  try {
    open_trace_folder("/dev/null");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a folder"), std::string::npos) << e.what();
  }
}

TEST(TraceFolder, AMissingRankFileIsNamed) {
  const fs::path dir = fresh_dir("missing");
  write_lines(dir, 0, {header(0, 3)});
  write_lines(dir, 2, {header(2, 3)});
  try {
    open_trace_folder(dir.string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is of 3 ranks, but has no rank-1.jsonl"), std::string::npos) << e.what();
  }
}

TEST(TraceRecorder, EachCallIsOneLineInIssueOrderWithItsWait) {
  const fs::path dir = fresh_dir("recorder");
  auto recording = start_recording(dir.string(), 0, 1, "fake");
  auto fake = std::make_unique<testing::FakeCommunicator>("fake");
  auto log = fake->log();
  auto comm = record_calls(std::move(fake), recording);
  EXPECT_EQ(comm->backend(), "fake");  // rows of a recorded run name the stack, not the recorder
  float x[4] = {};
  comm->all_reduce(x, x, 4, DType::f32, ReduceOp::sum);
  auto work = comm->irecv(x, 2, DType::f32, 0);
  comm->broadcast(x, x, 3, DType::f32, 0);
  work->wait();
  work->wait();  // a second wait completes nothing more: no second line
  auto group = comm->split(0, 0);
  group->send(x, 1, DType::f32, 0);
  group->barrier();
  finish_recording(*recording);
  // Every call reached the stack unchanged, and the split's exchange of global ranks (an
  // all_gather over the new group) went to the stack too, but not into the trace.
  EXPECT_EQ(*log, (std::vector<std::string>{"all_reduce", "irecv", "broadcast", "split", "all_gather", "send", "barrier"}));
  const std::vector<Op> ops = read_ops(rank_file(dir.string(), 0));
  // all_reduce, irecv, broadcast, its wait, send, barrier: the split is a group line
  ASSERT_EQ(ops.size(), 6u);
  EXPECT_EQ(ops[0].kind, OpKind::all_reduce);
  EXPECT_EQ(ops[0].redop, ReduceOp::sum);
  EXPECT_GE(ops[0].seconds, 0);  // a host backend's call is timed
  EXPECT_EQ(ops[1].kind, OpKind::recv);
  EXPECT_TRUE(ops[1].async);
  EXPECT_EQ(ops[2].root, 0);
  EXPECT_EQ(ops[3].kind, OpKind::wait);
  EXPECT_EQ(ops[3].waits, std::vector<int64_t>{1});
  EXPECT_EQ(ops[4].kind, OpKind::send);
  EXPECT_EQ(ops[4].group, 1);  // the split's group, defined by its own line
  EXPECT_EQ(ops[5].kind, OpKind::barrier);
  EXPECT_EQ(ops[5].group, 1);  // a barrier is on its group too (the checker found it on the world once)
}

TEST(TraceRecorder, ADeviceBackendsCallsCarryNoTime) {
  const fs::path dir = fresh_dir("device");
  auto recording = start_recording(dir.string(), 0, 1, "fake");
  auto comm = record_calls(std::make_unique<testing::FakeCommunicator>("fake", Memory::device), recording);
  float x = 0;
  comm->all_reduce(&x, &x, 1, DType::f32, ReduceOp::sum);
  finish_recording(*recording);
  const std::vector<Op> ops = read_ops(rank_file(dir.string(), 0));
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_LT(ops[0].seconds, 0);  // enqueued, not done: the time it took is not known
}

TEST(TraceStats, ACallCountsOnceAndBytesFollowNcclTests) {
  const fs::path dir = fresh_dir("stats");
  const std::string g = "{\"group\":0,\"ranks\":[0,1]}";
  for (int r = 0; r < 2; ++r) {
    write_lines(dir, r,
                {header(r, 2), g,
                 "{\"seq\":0,\"group\":0,\"op\":\"all_gather\",\"dtype\":\"f32\",\"count\":8,\"us\":10}",
                 "{\"seq\":1,\"group\":0,\"op\":\"all_reduce\",\"dtype\":\"f32\",\"count\":8}",
                 r == 0 ? "{\"seq\":2,\"group\":0,\"op\":\"send\",\"dtype\":\"u8\",\"count\":3,\"peer\":1}"
                        : "{\"seq\":2,\"group\":0,\"op\":\"recv\",\"dtype\":\"u8\",\"count\":3,\"peer\":0}"});
  }
  const TraceStats stats = trace_stats(dir.string());
  EXPECT_EQ(stats.lines, 6);  // 3 lines on each of 2 ranks
  ASSERT_EQ(stats.classes.size(), 4u);  // all_gather, all_reduce, the send and its receive
  for (const auto& [c, t] : stats.classes) {
    EXPECT_EQ(t.calls, 1) << class_id(c);  // once, though each collective is a line on both ranks
    if (c.kind == OpKind::all_gather) {
      EXPECT_EQ(c.bytes, 64);  // 8 f32 from each of 2 ranks: nccl-tests' size is the whole output
      EXPECT_NEAR(t.recorded_seconds, 10e-6, 1e-12);
    }
    if (c.kind == OpKind::all_reduce) {
      EXPECT_EQ(c.bytes, 32);  // 8 f32
      EXPECT_TRUE(t.reduction_unknown);  // the line names no redop
    }
    if (c.kind == OpKind::send || c.kind == OpKind::recv) {
      EXPECT_EQ(c.bytes, 3);
    }
  }
  EXPECT_NE(format_stats(stats).find("all_gather"), std::string::npos);
}

TEST(TraceStats, TheCheckersPassCountsAsTraceStatsDoes) {
  // A replay takes its counts from check_trace's one reading; they must be trace_stats' own, an
  // all_to_allv's bytes included (the checker keeps its splits, which a careless pass would take
  // before counting them).
  const fs::path dir = fresh_dir("stats_in_check");
  const std::string g = "{\"group\":0,\"ranks\":[0,1]}";
  for (int r = 0; r < 2; ++r) {
    write_lines(dir, r,
                {header(r, 2), g,
                 r == 0 ? "{\"seq\":0,\"group\":0,\"op\":\"all_to_allv\",\"dtype\":\"f32\",\"in_splits\":[1,2],"
                          "\"out_splits\":[1,3],\"us\":7}"
                        : "{\"seq\":0,\"group\":0,\"op\":\"all_to_allv\",\"dtype\":\"f32\",\"in_splits\":[3,4],"
                          "\"out_splits\":[2,4],\"us\":9}",
                 "{\"seq\":1,\"group\":0,\"op\":\"all_reduce\",\"dtype\":\"f32\",\"count\":8,\"async\":true}",
                 "{\"seq\":2,\"group\":0,\"op\":\"wait\",\"waits\":[1],\"us\":4}"});
  }
  const TraceStats alone = trace_stats(dir.string());
  TraceStats in_check;
  const CheckSummary summary = check_trace(dir.string(), 0, &in_check);
  EXPECT_EQ(summary.ops, 6);
  EXPECT_EQ(in_check.lines, alone.lines);
  EXPECT_EQ(in_check.waits, 2);  // one a rank
  EXPECT_EQ(in_check.waits, alone.waits);
  EXPECT_EQ(in_check.rank_recorded_seconds, alone.rank_recorded_seconds);
  ASSERT_EQ(in_check.classes.size(), alone.classes.size());
  auto b = in_check.classes.cbegin();
  for (auto a = alone.classes.cbegin(); a != alone.classes.cend(); ++a, ++b) {
    EXPECT_EQ(class_id(a->first), class_id(b->first));
    EXPECT_EQ(a->second.calls, b->second.calls) << class_id(a->first);
    EXPECT_EQ(a->second.recorded_seconds, b->second.recorded_seconds) << class_id(a->first);
    if (a->first.kind == OpKind::all_to_allv) {
      EXPECT_EQ(b->first.bytes, 12);  // rank 0 sends 1 + 2 f32
    }
  }
}

}  // namespace
}  // namespace dts::trace
