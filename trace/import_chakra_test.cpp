// Tests of the Chakra importer (trace/import_chakra.h) on traces the tests write themselves with a
// small protobuf writer (field numbers of Chakra's et_def.proto): every node kind it maps, the ones
// it skips and counts, gzip (one member and two), process groups, and files that are cut short,
// oversized, malformed or no Chakra trace at all, each an error of one line, never a crash or a hang.
#include "trace/import_chakra.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"

namespace dts::trace {
namespace {

namespace fs = std::filesystem;

// et_def.proto's values, as a producer writes them.
constexpr uint64_t kComp = 4, kSend = 5, kRecv = 6, kColl = 7, kMeta = 1;
constexpr int64_t kAllReduce = 0, kAllGather = 2, kGather = 3, kBroadcast = 5, kAllToAll = 6, kReduceScatter = 7;

// A protobuf message being written: varints, tags and length-delimited fields.
struct Proto {
  std::string bytes;
  Proto& varint(uint64_t v) {
    for (; v >= 0x80; v >>= 7) bytes += static_cast<char>((v & 0x7f) | 0x80);
    bytes += static_cast<char>(v);
    return *this;
  }
  Proto& tag(int field, int wire) { return varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire)); }
  Proto& number(int field, uint64_t v) { return tag(field, 0).varint(v); }
  Proto& text(int field, const std::string& s) {
    tag(field, 2).varint(s.size());
    bytes += s;
    return *this;
  }
  Proto& message(int field, const Proto& m) { return text(field, m.bytes); }
};

// AttributeProto: name 1; int32_val 7, int64_val 9, uint32_val 11, uint64_val 13, bool_val 27,
// string_val 29.
Proto attr(const std::string& name, int field, int64_t value) {
  return Proto{}.text(1, name).number(field, static_cast<uint64_t>(value));
}
Proto attr_text(const std::string& name, const std::string& value) { return Proto{}.text(1, name).text(29, value); }

// Node: id 1, name 2, type 3, ctrl_deps 4, duration_micros 7, inputs 8 (IOInfo values 1), attr 10.
Proto node(uint64_t id, const std::string& name, uint64_t type, uint64_t duration, const std::vector<Proto>& attrs) {
  Proto n;
  n.number(1, id).text(2, name).number(3, type);
  if (duration > 0) n.number(7, duration);
  for (const Proto& a : attrs) n.message(10, a);
  return n;
}
Proto collective(uint64_t id, int64_t comm_type, int64_t comm_size, uint64_t duration = 0, const std::string& pg = "") {
  std::vector<Proto> attrs{attr("is_cpu_op", 27, 0), attr("comm_type", 9, comm_type), attr("comm_size", 9, comm_size)};
  if (!pg.empty()) attrs.push_back(attr_text("pg_name", pg));
  return node(id, "ncclDevKernel", kColl, duration, attrs);
}
// GlobalMetadata: version 1, attr 2.
Proto metadata(const std::string& version = "0.0.4") { return Proto{}.text(1, version); }

// Chakra's framing: each message after its length as a varint.
std::string frame(const std::vector<Proto>& messages) {
  std::string out;
  for (const Proto& m : messages) out += Proto{}.varint(m.bytes.size()).bytes + m.bytes;
  return out;
}

std::string gzip(const std::string& data) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);  // 15 + 16: a gzip header
  std::string out(deflateBound(&z, static_cast<uLong>(data.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// Collects what an importer hands over, and in which order ('h', 'g', 'o').
struct RecordingSink final : TraceSink {
  std::vector<Header> headers;
  std::vector<Group> groups;
  std::vector<Op> ops;
  std::string order;
  void header(const Header& h) override { headers.push_back(h), order += 'h'; }
  void group(const Group& g) override { groups.push_back(g), order += 'g'; }
  void op(const Op& o) override { ops.push_back(o), order += 'o'; }
};

bool same_op(const Op& a, const Op& b) {
  return a.seq == b.seq && a.group == b.group && a.kind == b.kind && a.dtype == b.dtype && a.redop == b.redop &&
         a.count == b.count && a.root == b.root && a.peer == b.peer && a.tag == b.tag && a.stream == b.stream &&
         a.seconds == b.seconds;
}

// The fixture of most tests: rank 1 of 4, every kind of node the importer reads or passes over.
std::vector<Proto> fixture() {
  Proto compute = node(1, "aten::mm", kComp, 50, {attr("is_cpu_op", 27, 1)});
  compute.tag(4, 2).varint(2).varint(7).varint(8);  // ctrl_deps, packed: a field the importer skips
  compute.number(99, 5).tag(100, 1).bytes += std::string(8, 'x');  // fields of a later schema, varint and fixed64
  compute.tag(101, 5).bytes += std::string(4, 'y');                 // and fixed32
  return {metadata(),
          compute,
          collective(2, kAllReduce, 4096, 120),
          collective(3, kAllGather, 1024),
          node(4, "record_param_comms", kColl, 30, {attr("is_cpu_op", 27, 1)}),  // host side: no comm_type
          node(5, "ncclDevKernel_SendRecv", kSend, 9,
               {attr("comm_src", 7, 1), attr("comm_dst", 7, 2), attr("comm_size", 9, 256), attr("comm_tag", 11, 7),
                attr("stream", 9, 20)}),
          node(6, "ncclDevKernel_SendRecv", kRecv, 0,
               {attr("comm_src", 13, 3), attr("comm_dst", 13, 1), attr("comm_size", 13, 256), attr("comm_tag", 11, 7)}),
          collective(7, kReduceScatter, 8192),
          collective(8, kBroadcast, 100),
          collective(9, kGather, 64)};
}

class ImportChakraTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("dts_import_chakra_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    return path;
  }
  static ImportOptions rank_of(int rank, int world) {
    ImportOptions o;
    o.rank = rank;
    o.world = world;
    return o;
  }
  // The error importing `path`, which must be one line.
  static Error error_of(const std::string& path, const ImportOptions& options, RecordingSink* into = nullptr) {
    RecordingSink local;
    try {
      import_chakra(path, into ? *into : local, options);
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      return e;
    }
    ADD_FAILURE() << "no error importing " << path;
    return Error(Error::Kind::backend, "none");
  }
  fs::path dir_;
};

TEST_F(ImportChakraTest, MapsEveryCommunicationNode) {
  RecordingSink sink;
  const ImportSummary s = import_chakra(write("t.et", frame(fixture())), sink, rank_of(1, 4));
  ASSERT_EQ(sink.headers.size(), 1u);
  EXPECT_EQ(sink.headers[0].rank, 1);  // the options': GlobalMetadata says neither
  EXPECT_EQ(sink.headers[0].world, 4);
  EXPECT_EQ(sink.headers[0].source, "chakra");
  EXPECT_EQ(sink.headers[0].version, kTraceVersion);
  EXPECT_EQ(s.format, "chakra 0.0.4");  // the metadata's version
  // The header, the world group before the first op, then the ops: the compute node, the host-side
  // node and the GATHER give none.
  EXPECT_EQ(sink.order, "hgoooooo");
  ASSERT_EQ(sink.groups.size(), 1u);
  EXPECT_EQ(sink.groups[0].id, 0);
  EXPECT_EQ(sink.groups[0].ranks, (std::vector<int>{0, 1, 2, 3}));
  ASSERT_EQ(sink.ops.size(), 6u);
  EXPECT_EQ(s.ops, 6);
  for (size_t i = 0; i < sink.ops.size(); ++i) {
    EXPECT_EQ(sink.ops[i].seq, static_cast<int64_t>(i));  // file order
    EXPECT_EQ(sink.ops[i].group, 0);
    EXPECT_FALSE(sink.ops[i].dtype);  // Chakra says bytes only
    EXPECT_FALSE(sink.ops[i].redop);
  }
  const Op& all_reduce = sink.ops[0];
  EXPECT_EQ(all_reduce.kind, OpKind::all_reduce);
  EXPECT_EQ(all_reduce.count, 4096);            // comm_size, the buffer's bytes
  EXPECT_DOUBLE_EQ(all_reduce.seconds, 120e-6);  // duration_micros 120
  EXPECT_EQ(all_reduce.root, -1);
  const Op& all_gather = sink.ops[1];
  EXPECT_EQ(all_gather.kind, OpKind::all_gather);
  EXPECT_EQ(all_gather.count, 1024);  // comm_size is each rank's input: dtsuite's all_gather count
  EXPECT_EQ(all_gather.seconds, -1);  // no duration_micros
  const Op& send = sink.ops[2];
  EXPECT_EQ(send.kind, OpKind::send);
  EXPECT_EQ(send.peer, 2);  // comm_dst (an int32_val)
  EXPECT_EQ(send.tag, 7);   // comm_tag (a uint32_val)
  EXPECT_EQ(send.count, 256);
  EXPECT_EQ(send.stream, 20);  // the "stream" attribute
  EXPECT_DOUBLE_EQ(send.seconds, 9e-6);
  const Op& recv = sink.ops[3];
  EXPECT_EQ(recv.kind, OpKind::recv);
  EXPECT_EQ(recv.peer, 3);  // comm_src (a uint64_val)
  EXPECT_EQ(recv.tag, 7);
  EXPECT_EQ(recv.count, 256);
  const Op& reduce_scatter = sink.ops[4];
  EXPECT_EQ(reduce_scatter.kind, OpKind::reduce_scatter);
  EXPECT_EQ(reduce_scatter.count, 2048);  // comm_size 8192 is the whole input: 8192 / 4 ranks each rank's output
  const Op& broadcast = sink.ops[5];
  EXPECT_EQ(broadcast.kind, OpKind::broadcast);
  EXPECT_EQ(broadcast.count, 100);
  EXPECT_EQ(broadcast.root, 0);  // unknown: replayed from 0
  // Skipped and counted: the host-side node and the GATHER; the compute node is no communication.
  EXPECT_EQ(s.skipped, (std::map<std::string, int64_t>{{"host-side COMM_COLL node without comm_type", 1},
                                                       {"GATHER collective: dtsuite has no gather op", 1}}));
  auto noted = [&](const std::string& part) {
    return std::any_of(s.notes.begin(), s.notes.end(), [&](const std::string& n) { return n.find(part) != n.npos; });
  };
  EXPECT_TRUE(noted("no dtype, reduction op or root: ops replay as bytes, timed only"));
  EXPECT_TRUE(noted("node order"));
  EXPECT_TRUE(noted("root"));
  EXPECT_TRUE(noted("global ranks"));
  EXPECT_TRUE(noted("options'"));
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.world, 4);
}

TEST_F(ImportChakraTest, GzipGivesTheSameOps) {
  const std::string plain = frame(fixture());
  RecordingSink expected;
  import_chakra(write("t.et", plain), expected, rank_of(1, 4));
  // One gzip member; two (gzip files concatenated, as `cat a.gz b.gz` makes), cut inside a message.
  const std::string split = gzip(plain.substr(0, plain.size() / 2)) + gzip(plain.substr(plain.size() / 2));
  for (const std::string& bytes : {gzip(plain), split}) {
    RecordingSink sink;
    const ImportSummary s = import_chakra(write("t.et.gz", bytes), sink, rank_of(1, 4));
    EXPECT_EQ(s.ops, 6);
    EXPECT_EQ(sink.order, expected.order);
    ASSERT_EQ(sink.ops.size(), expected.ops.size());
    for (size_t i = 0; i < sink.ops.size(); ++i) EXPECT_TRUE(same_op(sink.ops[i], expected.ops[i])) << "op " << i;
  }
}

TEST_F(ImportChakraTest, StreamsATraceLargerThanItsBuffers) {
  // 20,000 all_reduces of 1..20000 bytes: some 600 KB, many 64 KiB reads, plain and gzip.
  std::vector<Proto> messages{metadata()};
  for (int i = 1; i <= 20000; ++i) messages.push_back(collective(static_cast<uint64_t>(i), kAllReduce, i, 3));
  const std::string plain = frame(messages);
  for (const std::string& bytes : {plain, gzip(plain)}) {
    RecordingSink sink;
    EXPECT_EQ(import_chakra(write("big.et", bytes), sink, rank_of(0, 2)).ops, 20000);
    ASSERT_EQ(sink.ops.size(), 20000u);
    for (size_t i = 0; i < sink.ops.size(); ++i) {
      ASSERT_EQ(sink.ops[i].count, static_cast<int64_t>(i) + 1);  // each node's own comm_size, in file order
    }
  }
}

TEST_F(ImportChakraTest, EveryCutIsAPrefixOrAnError) {
  const std::vector<Proto> messages = fixture();
  const std::string plain = frame(messages);
  std::vector<size_t> ends;  // where a message ends: a cut there is a shorter, valid trace
  for (size_t at = 0; const Proto& m : messages) {
    ends.push_back(at += Proto{}.varint(m.bytes.size()).bytes.size() + m.bytes.size());
  }
  RecordingSink full;
  import_chakra(write("t.et", plain), full, rank_of(1, 4));
  const std::string zipped = gzip(plain);
  for (size_t cut = 0; cut < plain.size(); ++cut) {
    const std::string path = write("cut.et", plain.substr(0, cut));
    RecordingSink sink;
    const bool boundary = std::find(ends.begin(), ends.end(), cut) != ends.end();
    if (boundary) {
      EXPECT_NO_THROW(import_chakra(path, sink, rank_of(1, 4))) << "cut at " << cut;
    } else {
      const Error e = error_of(path, rank_of(1, 4), &sink);
      EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << e.what();
      const std::string expected = cut == 0 ? "empty" : "truncated Chakra trace at byte " + std::to_string(cut);
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    ASSERT_LE(sink.ops.size(), full.ops.size());  // what was handed over is the full trace's start
    for (size_t i = 0; i < sink.ops.size(); ++i) EXPECT_TRUE(same_op(sink.ops[i], full.ops[i])) << cut;
  }
  // A gzip file cut anywhere lacks at least its trailer: always an error.
  for (size_t cut = 0; cut < zipped.size(); ++cut) {
    RecordingSink sink;
    EXPECT_EQ(error_of(write("cut.et.gz", zipped.substr(0, cut)), rank_of(1, 4), &sink).kind(),
              Error::Kind::invalid_argument) << "cut at " << cut;
    ASSERT_LE(sink.ops.size(), full.ops.size());
  }
}

TEST_F(ImportChakraTest, CorruptBytesGiveOpsOrAnErrorNeverACrash) {
  // 1,000 copies of the fixture with 1 to 4 bytes overwritten at random: each imports (a flipped
  // value is still a valid message) or throws dts::Error; sanitizer builds check the reads.
  const std::string plain = frame(fixture());
  std::mt19937 random(7);
  for (int i = 0; i < 1000; ++i) {
    std::string bytes = plain;
    for (uint32_t k = 0, n = 1 + random() % 4; k < n; ++k) bytes[random() % bytes.size()] = static_cast<char>(random());
    const std::string path = write("corrupt.et", i % 2 ? gzip(bytes) : bytes);
    RecordingSink sink;
    try {
      import_chakra(path, sink, rank_of(1, 4));
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
    for (size_t k = 0; k < sink.ops.size(); ++k) {  // what was handed over is still a trace the reader takes
      EXPECT_EQ(sink.ops[k].seq, static_cast<int64_t>(k));
      EXPECT_TRUE(sink.ops[k].count >= 0 && sink.ops[k].count <= int64_t{1} << 50);
      EXPECT_TRUE(sink.ops[k].group == 0 && sink.ops[k].peer < 4 && sink.ops[k].tag >= 0);
    }
  }
}

TEST_F(ImportChakraTest, RefusesHugeLengthsAndLongVarints) {
  const std::string head = frame({metadata()});
  // A length prefix of 2^40 after the metadata: refused at its offset, nothing allocated for it.
  const std::string huge = head + Proto{}.varint(uint64_t{1} << 40).bytes + "abc";
  Error e = error_of(write("huge.et", huge), rank_of(0, 1));
  EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
  EXPECT_NE(std::string(e.what()).find("1099511627776 bytes at byte " + std::to_string(head.size())), std::string::npos)
      << e.what();
  // Just above 64 MiB: refused the same way.
  e = error_of(write("big.et", head + Proto{}.varint(kMaxChakraMessage + 1).bytes), rank_of(0, 1));
  EXPECT_NE(std::string(e.what()).find("above the 64 MiB"), std::string::npos) << e.what();
  // A length prefix of 11 bytes.
  e = error_of(write("long.et", head + std::string(10, '\xff') + '\x01'), rank_of(0, 1));
  EXPECT_NE(std::string(e.what()).find("longer than 10 bytes"), std::string::npos) << e.what();
  // A field inside a node whose length runs past the node: malformed, named by the node's offset.
  Proto bad;
  bad.number(3, kColl).tag(10, 2).varint(50).bytes += "short";
  e = error_of(write("bad.et", head + frame({bad})), rank_of(0, 1));
  EXPECT_NE(std::string(e.what()).find("malformed Chakra node at byte " + std::to_string(head.size())),
            std::string::npos) << e.what();
}

TEST_F(ImportChakraTest, RefusesFilesThatAreNoChakraTrace) {
  std::vector<std::pair<std::string, std::string>> files{
      {"t.json", R"({"schema": "1.0.2-chakra.0.0.4", "pid": 7, "nodes": [{"id": 1, "name": "x"}]})" "\n"},
      {"empty.et", ""},
      {"trace.jsonl", "{\"dtsuite_trace\":1,\"rank\":0,\"world\":1,\"source\":\"dtsuite record\"}\n"}};
  std::mt19937 random(2024);
  for (int i = 0; i < 20; ++i) {
    std::string bytes(4096, '\0');
    for (char& c : bytes) c = static_cast<char>(random());
    files.emplace_back("random" + std::to_string(i), bytes);
  }
  for (const auto& [name, bytes] : files) {
    const Error e = error_of(write(name, bytes), rank_of(0, 1));
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << name;
    EXPECT_NE(std::string(e.what()).find("not a Chakra ET file"), std::string::npos) << name << ": " << e.what();
  }
  // Gzip's magic over bytes that are no deflate stream.
  const Error e = error_of(write("fake.gz", "\x1f\x8b" + std::string(100, 'z')), rank_of(0, 1));
  EXPECT_NE(std::string(e.what()).find("gzip"), std::string::npos) << e.what();
}

TEST_F(ImportChakraTest, RankAndWorldFromTheMetadataOrTheOptions) {
  const std::string body = frame({collective(1, kAllReduce, 8)});
  const std::string bare = write("bare.et", frame({metadata()}) + body);
  EXPECT_NE(std::string(error_of(bare, rank_of(0, -1)).what()).find("world size"), std::string::npos);
  EXPECT_NE(std::string(error_of(bare, rank_of(-1, 4)).what()).find("rank"), std::string::npos);
  EXPECT_EQ(error_of(bare, rank_of(4, 4)).kind(), Error::Kind::invalid_argument);  // rank 4 of ranks 0..3

  // Attributes "rank" and "world_size" of GlobalMetadata, where a producer writes them.
  Proto meta = metadata();
  meta.message(2, attr("rank", 9, 2)).message(2, attr("world_size", 11, 3));
  const std::string said = write("said.et", frame({meta}) + body);
  RecordingSink sink;
  const ImportSummary s = import_chakra(said, sink, ImportOptions{});
  EXPECT_EQ(sink.headers.at(0).rank, 2);
  EXPECT_EQ(sink.headers.at(0).world, 3);
  EXPECT_EQ(sink.groups.at(0).ranks, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(s.ops, 1);
  EXPECT_NE(std::string(error_of(said, rank_of(1, 3)).what()).find("\"rank\" is 2, the options say 1"),
            std::string::npos);
}

TEST_F(ImportChakraTest, MapsProcessGroupsOfPyTorchsConfig) {
  // PyTorch's pg_config_info as Chakra's converter keeps it (the Python text of the inputs' values):
  // group "0" the world (empty ranks), group "1" ranks 1 and 3, group "2" ranks 0 and 2 (not this rank's).
  const std::string config =
      R"(['[{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "ranks": [], "group_size": 4, )"
      R"("group_count": 2}, {"pg_name": "1", "pg_desc": "tp", "backend_config": "cuda:nccl", "ranks": [1, 3], )"
      R"("group_size": 2, "group_count": 3}, {"pg_name": "2", "pg_desc": "tp", "ranks": [0, 2], "group_size": 2}]'])";
  Proto init = node(1, "## process_group:init ##", kMeta, 0, {});
  init.message(8, Proto{}.text(1, config));
  RecordingSink sink;
  const ImportSummary s = import_chakra(write("pg.et", frame({metadata(), init,
                                                              collective(2, kAllReduce, 64, 0, "1"),
                                                              collective(3, kReduceScatter, 1000, 0, "1"),
                                                              collective(4, kAllReduce, 64, 0, "0"),
                                                              collective(5, kAllReduce, 64, 0, "7"),
                                                              collective(6, kAllToAll, 1001, 0, "1"),
                                                              collective(7, kAllReduce, 64, 0, "2")})),
                                        sink, rank_of(3, 4));
  EXPECT_EQ(sink.order, "hggoooooo");  // the world at the first op, group 1 right after it, before its first op
  ASSERT_EQ(sink.groups.size(), 2u);
  EXPECT_EQ(sink.groups[1].id, 1);
  EXPECT_EQ(sink.groups[1].ranks, (std::vector<int>{1, 3}));
  ASSERT_EQ(sink.ops.size(), 6u);
  EXPECT_EQ(sink.ops[0].group, 1);
  EXPECT_EQ(sink.ops[1].group, 1);
  EXPECT_EQ(sink.ops[1].count, 500);  // 1000 bytes of input over 2 ranks
  EXPECT_EQ(sink.ops[2].group, 0);    // "0" lists no ranks: every rank, the world
  EXPECT_EQ(sink.ops[3].group, 0);    // "7" is listed nowhere: the world, and a note
  EXPECT_EQ(sink.ops[4].group, 1);
  EXPECT_EQ(sink.ops[4].count, 1001);  // 1001 is not a multiple of 2: as given, and a note
  EXPECT_EQ(sink.ops[5].group, 0);     // "2" does not hold rank 3: the world, and a note
  auto noted = [&](const std::string& part) {
    return std::any_of(s.notes.begin(), s.notes.end(), [&](const std::string& n) { return n.find(part) != n.npos; });
  };
  EXPECT_TRUE(noted("process_group:init"));
  EXPECT_TRUE(noted("does not divide"));
  EXPECT_TRUE(noted("does not hold this rank"));
}

TEST_F(ImportChakraTest, SkipsWhatCannotBeReplayed) {
  RecordingSink sink;
  const ImportSummary s = import_chakra(
      write("skip.et", frame({metadata(), collective(1, 4, 64),  // SCATTER
                              collective(2, 42, 64),                 // no CollectiveCommType of Chakra's
                              collective(3, kAllReduce, -1),         // a size below 0
                              node(4, "send", kSend, 0, {attr("comm_size", 9, 8)}),  // no comm_dst
                              node(5, "recv", kRecv, 0, {attr("comm_src", 9, 9), attr("comm_size", 9, 8)})})),
      sink, rank_of(0, 2));
  EXPECT_EQ(s.ops, 0);
  EXPECT_TRUE(sink.ops.empty());
  EXPECT_EQ(s.skipped, (std::map<std::string, int64_t>{
                           {"SCATTER collective: dtsuite has no scatter op", 1},
                           {"comm_type outside Chakra's published CollectiveCommType values", 1},
                           {"COMM_COLL node without a comm_size of 0 to 2^50 bytes", 1},
                           {"COMM_SEND node without comm_dst", 1},
                           {"COMM_SEND or COMM_RECV peer outside the world", 1}}));  // comm_src 9 of 2 ranks
}

TEST_F(ImportChakraTest, RefusesDevicesAndWaitsForAFifoOnlySoLong) {
  EXPECT_EQ(error_of("/dev/zero", rank_of(0, 1)).kind(), Error::Kind::io);
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ImportOptions options = rank_of(0, 1);
  options.timeout_seconds = 0.2;
  EXPECT_EQ(error_of(fifo, options).kind(), Error::Kind::timeout);
}

}  // namespace
}  // namespace dts::trace
