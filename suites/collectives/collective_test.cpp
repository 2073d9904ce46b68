// Collective descriptors: byte counts and bus-bandwidth factors exactly as nccl-tests defines them.
#include <gtest/gtest.h>

#include "core/error.h"
#include "suites/collectives/collective.h"

namespace dts {
namespace {

TEST(Collective, BusFactorsFollowNcclTests) {
  // all_reduce moves 2(n-1)/n of the buffer over each link (reduce-scatter + all-gather).
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::all_reduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::all_reduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::all_reduce, 3), 4.0 / 3.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::all_reduce, 4), 1.5);
  for (Collective c : {Collective::all_gather, Collective::reduce_scatter, Collective::all_to_all}) {
    EXPECT_DOUBLE_EQ(bus_bandwidth_factor(c, 3), 2.0 / 3.0);  // (n-1)/n
    EXPECT_DOUBLE_EQ(bus_bandwidth_factor(c, 4), 0.75);
  }
  for (Collective c : {Collective::broadcast, Collective::reduce, Collective::send_recv}) {
    EXPECT_DOUBLE_EQ(bus_bandwidth_factor(c, 3), 1.0);
  }
}

TEST(Collective, BytesCountTheFullBufferForPerRankOps) {
  // 1021 f32 elements per rank on 3 ranks: all_gather's buffer holds 3 * 1021 * 4 bytes.
  EXPECT_EQ(collective_bytes(Collective::all_gather, 1021, 4, 3), 3 * 1021 * 4);
  EXPECT_EQ(collective_bytes(Collective::reduce_scatter, 1021, 4, 3), 3 * 1021 * 4);
  EXPECT_EQ(collective_bytes(Collective::all_to_all, 1021, 4, 3), 3 * 1021 * 4);
  EXPECT_EQ(collective_bytes(Collective::all_reduce, 1021, 4, 3), 1021 * 4);
  EXPECT_EQ(collective_bytes(Collective::broadcast, 0, 8, 4), 0);
}

TEST(Collective, ParseNamesAndRejectUnknown) {
  for (Collective c : kAllCollectives) EXPECT_EQ(parse_collective(name(c)), c);
  EXPECT_THROW(parse_collective("allreduce"), Error);
}

}  // namespace
}  // namespace dts
