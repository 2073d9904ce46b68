// Tests of ConsoleTable: the nccl-tests-shaped table (header per op, one row per case printed
// when the next case starts, skip/timeout/fail text), the footer (failed cases, average bus
// bandwidth) and the one-line form of other suites' records. Expected text is written out whole.
#include "results/console_table.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace dts {
namespace {

// The three lines under "# <op>", as in DESIGN.md / nccl-tests' all_reduce_perf.
constexpr const char* kHeader =
    "#                                                              out-of-place                       in-place\n"
    "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)\n";

// Captures what a ConsoleTable prints, readable at any point (the table flushes every line).
class Capture {
 public:
  Capture() : file_(::open_memstream(&buffer_, &size_)) {}
  ~Capture() {
    std::fclose(file_);
    std::free(buffer_);
  }
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;
  std::FILE* file() { return file_; }
  std::string text() {
    std::fflush(file_);
    return std::string(buffer_, size_);
  }

 private:
  char* buffer_ = nullptr;
  size_t size_ = 0;
  std::FILE* file_;
};

Record collective(const std::string& case_id, const std::string& op, const std::string& dtype,
                  int64_t bytes, const std::string& config) {
  Record r;
  r.suite = "collectives";
  r.case_id = case_id;
  r.labels.op = op;
  r.labels.dtype = dtype;
  r.labels.bytes = bytes;
  r.labels.config = config;
  r.verdict = Verdict::pass;
  return r;
}

// Emits what the collectives suite emits for one placement: time, algbw, busbw, wrong, max_ulp.
void emit_placement(ConsoleTable& table, Record r, const std::string& placement, double seconds,
                    double algbw, double busbw, double wrong) {
  r.labels.placement = placement;
  const auto write = [&](const char* metric, const char* unit, double value, Verdict verdict) {
    r.metric = metric;
    r.unit = unit;
    r.value = value;
    r.verdict = verdict;
    table.write(r);
  };
  write("time", "seconds", seconds, Verdict::info);
  write("algbw", "bytes_per_second", algbw, Verdict::info);
  write("busbw", "bytes_per_second", busbw, Verdict::info);
  write("wrong", "elements", wrong, wrong > 0 ? Verdict::fail : Verdict::pass);
  write("max_ulp", "ulp", 0, Verdict::pass);
}

void emit_check(ConsoleTable& table, Record r, Verdict verdict, const std::string& detail) {
  r.metric = "check";
  r.unit = "";
  r.value = verdict == Verdict::pass ? 1 : 0;
  r.verdict = verdict;
  r.detail = detail;
  table.write(r);
}

TEST(ConsoleTable, TwoCasesAndASkip) {
  Capture out;
  ConsoleTable table(out.file());

  // Case 1: 1 MiB of f32 = 262144 elements. Times print with one decimal from 100 us up.
  const Record small = collective("all_reduce/f32/sum/1048576", "all_reduce", "f32", 1048576,
                                  "redop=sum;root=-1;count=262144");
  emit_placement(table, small, "out_of_place", 350.1e-6, 3.00e9, 4.49e9, 0);
  emit_placement(table, small, "in_place", 348.2e-6, 3.01e9, 4.51e9, 0);
  // A row is complete only when the next case starts: nothing printed yet.
  EXPECT_EQ(out.text(), "");

  // Case 2: 16 MiB; in-place has 3 wrong elements (a failed case). 12345.6 us is past 10000 us,
  // where nccl-tests drops the decimals.
  const Record large = collective("all_reduce/f32/sum/16777216", "all_reduce", "f32", 16777216,
                                  "redop=sum;root=-1;count=4194304");
  emit_placement(table, large, "out_of_place", 5012.3e-6, 3.35e9, 5.02e9, 0);
  EXPECT_EQ(out.text(), std::string("# all_reduce\n") + kHeader +
                            "     1048576        262144     float     sum      -1"
                            "    350.1    3.00    4.49       0    348.2    3.01    4.51       0\n");
  emit_placement(table, large, "in_place", 12345.6e-6, 1.36e9, 2.04e9, 3);

  // Case 3: the backend does not support bf16. count is bytes / 2, as nccl-tests prints it.
  const Record skipped = collective("all_reduce/bf16/sum/1048576", "all_reduce", "bf16", 1048576, "redop=sum;root=-1");
  emit_check(table, skipped, Verdict::skip, "mpi: all_reduce of bf16 is not supported");
  table.close();

  // Average bus bandwidth over the four busbw records: (4.49 + 4.51 + 5.02 + 2.04) / 4 = 4.015.
  EXPECT_EQ(out.text(), std::string("# all_reduce\n") + kHeader +
                            "     1048576        262144     float     sum      -1"
                            "    350.1    3.00    4.49       0    348.2    3.01    4.51       0\n"
                            "    16777216       4194304     float     sum      -1"
                            "   5012.3    3.35    5.02       0    12346    1.36    2.04       3\n"
                            "     1048576        524288  bfloat16     sum      -1"
                            "  skipped: mpi: all_reduce of bf16 is not supported\n"
                            "# Failed cases : 1\n"
                            "# Avg bus bandwidth : 4.0150 GB/s\n");
  EXPECT_EQ(table.failed_cases(), 1);  // only case 2; a skip is not a failure
}

TEST(ConsoleTable, TimeoutFailureOtherSuitesAndHeaderPerOp) {
  Capture out;
  ConsoleTable table(out.file());

  // broadcast: no reduction (redop none), root from config; case 1 times out outright.
  const Record timed_out = collective("broadcast/f32/root0/1024", "broadcast", "f32", 1024,
                                      "redop=none;root=0;count=256");
  emit_check(table, timed_out, Verdict::timeout, "ranks 2, 3 did not arrive within 5 s");
  // Case 2 measured out-of-place, then failed in-place: the missing cells say N/A.
  const Record half_done = collective("broadcast/f32/root1/1024", "broadcast", "f32", 1024,
                                      "redop=none;root=1;count=256");
  emit_placement(table, half_done, "out_of_place", 20.25e-6, 0.05e9, 0.05e9, 0);
  emit_check(table, half_done, Verdict::fail, "in-place run threw: backend error");

  // Another suite: one line, printed at once; it interrupts the table, so the next
  // collectives row brings its header again.
  Record equivalence;
  equivalence.suite = "equivalence";
  equivalence.case_id = "ddp/f32/4";
  equivalence.metric = "max_ulp";
  equivalence.unit = "ulp";
  equivalence.value = 2;
  equivalence.verdict = Verdict::pass;
  table.write(equivalence);
  equivalence.metric = "reproducible";
  equivalence.unit = "";
  equivalence.value = 0;
  equivalence.verdict = Verdict::fail;
  equivalence.detail = "run 2 differs at parameter fc1.weight[17]";
  table.write(equivalence);

  emit_check(table, timed_out, Verdict::timeout, "again");  // same id as case 1, new case
  table.close();
  table.close();  // idempotent: no second footer

  const std::string broadcast_header = std::string("# broadcast\n") + kHeader;
  // Average over the one busbw record: 0.05 GB/s.
  EXPECT_EQ(out.text(), broadcast_header +
                            "        1024           256     float    none       0"
                            "  TIMEOUT: ranks 2, 3 did not arrive within 5 s\n"
                            "        1024           256     float    none       1"
                            "    20.25    0.05    0.05       0      N/A     N/A     N/A     N/A"
                            "  FAILED: in-place run threw: backend error\n"
                            "# equivalence ddp/f32/4 max_ulp = 2 ulp [pass]\n"
                            "# equivalence ddp/f32/4 reproducible = 0 [fail] run 2 differs at parameter fc1.weight[17]\n" +
                            broadcast_header +
                            "        1024           256     float    none       0  TIMEOUT: again\n"
                            "# Failed cases : 4\n"
                            "# Avg bus bandwidth : 0.0500 GB/s\n");
  // Both broadcast cases, the equivalence case (its reproducible record failed) and the repeat.
  EXPECT_EQ(table.failed_cases(), 4);
}

TEST(ConsoleTable, CountIsTheFullBufferAsInNcclTests) {
  Capture out;
  ConsoleTable table(out.file());
  // all_gather on 4 ranks, 256 f32 per rank: bytes count the full buffer, 256 * 4 * 4 = 4096,
  // and nccl-tests' count column is 4096 / 4 = 1024, not config's per-rank 256.
  emit_check(table, collective("all_gather/f32/256", "all_gather", "f32", 4096, "redop=none;root=-1;count=256"),
             Verdict::skip, "x");
  // A dtype this build does not know is shown as written; without bytes, count comes from config.
  emit_check(table, collective("all_gather/f8/7", "all_gather", "f8e4m3", -1, "redop=none;root=-1;count=7"),
             Verdict::skip, "y");
  table.close();
  EXPECT_EQ(out.text(), std::string("# all_gather\n") + kHeader +
                            "        4096          1024     float    none      -1  skipped: x\n"
                            "                         7    f8e4m3    none      -1  skipped: y\n"
                            "# Failed cases : 0\n"
                            "# Avg bus bandwidth : N/A\n");
}

TEST(ConsoleTable, NothingWrittenStillPrintsFooter) {
  Capture out;
  ConsoleTable table(out.file());
  table.close();
  EXPECT_EQ(out.text(), "# Failed cases : 0\n# Avg bus bandwidth : N/A\n");
  EXPECT_EQ(table.failed_cases(), 0);
}

}  // namespace
}  // namespace dts
