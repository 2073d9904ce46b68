// The trace checker: a consistent trace passes with its counts, and each fault that would hang
// or corrupt a real job is refused naming the rank and operation index.
#include "trace/check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace dts::trace {
namespace {

namespace fs = std::filesystem;

// A 3-rank job: every rank in the world group and ranks 0 and 2 in a pair group. Rank r's file
// is header, groups, then the lines `ops[r]` (seq numbers filled in).
struct Job {
  std::vector<std::vector<std::string>> ops{3};
};

std::string write_job(const Job& job, const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("dts_check_test_" + std::to_string(getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (int r = 0; r < 3; ++r) {
    std::ofstream out(dir / ("rank-" + std::to_string(r) + ".jsonl"));
    out << "{\"dtsuite_trace\":1,\"rank\":" << r << ",\"world\":3,\"source\":\"test\"}\n";
    out << "{\"group\":0,\"ranks\":[0,1,2]}\n";
    if (r != 1) out << "{\"group\":1,\"ranks\":[0,2]}\n";
    int64_t seq = 0;
    for (const std::string& body : job.ops[static_cast<size_t>(r)]) {
      out << "{\"seq\":" << seq++ << "," << body << "}\n";
    }
  }
  return dir.string();
}

std::string refusal(const Job& job, const std::string& name) {
  try {
    check_trace(write_job(job, name));
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    return e.what();
  }
  return "";
}

const std::string kAllReduce = "\"group\":0,\"op\":\"all_reduce\",\"dtype\":\"f32\",\"redop\":\"sum\",\"count\":16";
const std::string kPairGather = "\"group\":1,\"op\":\"all_gather\",\"dtype\":\"bf16\",\"count\":4";

Job consistent() {
  Job job;
  // Rank 0 sends rank 2 a message in the pair group (group rank 1), asynchronously.
  job.ops[0] = {kAllReduce, kPairGather, "\"group\":1,\"op\":\"send\",\"dtype\":\"u8\",\"count\":5,\"peer\":1,\"async\":true",
                "\"group\":0,\"op\":\"wait\",\"waits\":[2]"};
  job.ops[1] = {kAllReduce};
  job.ops[2] = {kAllReduce, "\"group\":1,\"op\":\"recv\",\"dtype\":\"u8\",\"count\":5,\"peer\":0", kPairGather};
  return job;
}

TEST(TraceCheck, AConsistentJobPassesWithItsCounts) {
  const CheckSummary s = check_trace(write_job(consistent(), "good"));
  EXPECT_EQ(s.world, 3);
  EXPECT_EQ(s.ops, 8);       // 4 + 1 + 3 lines
  EXPECT_EQ(s.groups, 2);    // the world and the pair
  EXPECT_EQ(s.messages, 1);  // rank 0's send, rank 2's receive
  EXPECT_EQ(s.unwaited, 0);
}

TEST(TraceCheck, ACountThatDiffersNamesTheRankAndItsIndex) {
  Job job = consistent();
  job.ops[1][0] = "\"group\":0,\"op\":\"all_reduce\",\"dtype\":\"f32\",\"redop\":\"sum\",\"count\":17";
  const std::string said = refusal(job, "count");
  EXPECT_NE(said.find("rank 1's operation #0 (all_reduce f32 sum of 17 elements"), std::string::npos) << said;
  EXPECT_NE(said.find("rank 0's #0"), std::string::npos) << said;
}

TEST(TraceCheck, AReductionOpThatDiffersIsFound) {
  Job job = consistent();
  // Rank 2 reduces with max where the others sum, and later in its own order (#2, after the
  // gather): each group's sequence is compared on its own, so the world's shows it.
  job.ops[2] = {"\"group\":1,\"op\":\"recv\",\"dtype\":\"u8\",\"count\":5,\"peer\":0", kPairGather,
                "\"group\":0,\"op\":\"all_reduce\",\"dtype\":\"f32\",\"redop\":\"max\",\"count\":16"};
  const std::string said = refusal(job, "order");
  EXPECT_NE(said.find("rank 2's operation #2 (all_reduce f32 max"), std::string::npos) << said;
}

TEST(TraceCheck, AMissingCollectiveHasNoPartner) {
  Job job = consistent();
  job.ops[1].clear();
  const std::string said = refusal(job, "missing");
  EXPECT_NE(said.find("rank 0's operation #0"), std::string::npos) << said;
  EXPECT_NE(said.find("no partner on rank 1"), std::string::npos) << said;
}

TEST(TraceCheck, ARootThatDiffersIsFound) {
  Job job;
  for (int r = 0; r < 3; ++r) {
    job.ops[static_cast<size_t>(r)] = {"\"group\":0,\"op\":\"broadcast\",\"dtype\":\"u8\",\"count\":1,\"root\":" +
                                       std::string(r == 2 ? "1" : "0")};
  }
  EXPECT_NE(refusal(job, "root").find("rank 2's operation #0 (broadcast u8 of 1 elements root 1"), std::string::npos);
}

TEST(TraceCheck, ASendWithoutAReceiveWouldHang) {
  Job job = consistent();
  job.ops[2] = {kAllReduce, kPairGather};
  const std::string said = refusal(job, "unpaired");
  EXPECT_NE(said.find("rank 0's operation #2 (a send, rank 0 to rank 2) has no matching receive"), std::string::npos)
      << said;
}

TEST(TraceCheck, AMessageOfOtherBytesIsFound) {
  Job job = consistent();
  job.ops[2][1] = "\"group\":1,\"op\":\"recv\",\"dtype\":\"u8\",\"count\":6,\"peer\":0";
  EXPECT_NE(refusal(job, "bytes").find("sends 5 bytes, rank 0 to rank 2, where rank 2's #1 receives 6"),
            std::string::npos);
}

TEST(TraceCheck, AWaitForNothingInFlightIsFound) {
  Job job = consistent();
  job.ops[0][3] = "\"group\":0,\"op\":\"wait\",\"waits\":[1]";  // #1 is a blocking all_gather
  EXPECT_NE(refusal(job, "wait").find("rank 0's operation #3 waits for #1"), std::string::npos);
  job.ops[0][3] = "\"group\":0,\"op\":\"wait\",\"waits\":[2,2]";  // the same op twice
  EXPECT_NE(refusal(job, "wait2").find("already waited for"), std::string::npos);
}

TEST(TraceCheck, AGroupOneMemberNeverMakesIsFound) {
  Job job = consistent();
  // Rank 1 uses a pair group {0,1} that rank 0 never made (rank 0's file has no such line).
  const fs::path dir = write_job(job, "nogroup");
  {
    std::ofstream out(fs::path(dir) / "rank-1.jsonl", std::ios::app);
    out << "{\"group\":7,\"ranks\":[0,1]}\n{\"seq\":1,\"group\":7,\"op\":\"barrier\"}\n";
  }
  try {
    check_trace(dir);
    FAIL() << "passed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 never creates group [0,1]"), std::string::npos) << e.what();
  }
}

TEST(TraceCheck, AllToAllvSplitsMustAgreePairwise) {
  Job job;
  // Rank r sends rank j (r + 1) * (j + 1) elements; rank j then expects (r + 1) * (j + 1) from r.
  for (int r = 0; r < 3; ++r) {
    std::string in, out;
    for (int j = 0; j < 3; ++j) {
      in += (j ? "," : "") + std::to_string((r + 1) * (j + 1));
      out += (j ? "," : "") + std::to_string((j + 1) * (r + 1));
    }
    job.ops[static_cast<size_t>(r)] = {"\"group\":0,\"op\":\"all_to_allv\",\"dtype\":\"i32\",\"in_splits\":[" + in +
                                       "],\"out_splits\":[" + out + "]"};
  }
  EXPECT_EQ(refusal(job, "a2av"), "");
  job.ops[1][0] = "\"group\":0,\"op\":\"all_to_allv\",\"dtype\":\"i32\",\"in_splits\":[2,4,6],\"out_splits\":[2,4,5]";
  const std::string said = refusal(job, "a2av_bad");
  EXPECT_NE(said.find("sends 6 elements to rank 1"), std::string::npos) << said;  // rank 2's in_splits[1] = 3 * 2
}

}  // namespace
}  // namespace dts::trace
