// The watchdog's case clock: a case times out after -T of its own time, and the time a rank spends
// checking a result on the host (pause_case .. resume_case) is not on that clock. One rank: rank
// 0's clock is the one that counts, and its watchdog thread needs no peer to time a case out.
//   ctest -R watchdog_mpi_test
#include "harness/watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

namespace dts {
namespace {

// -T of 1 s; each case below lasts kCase of wall time: past -T, so only a pause can keep it in.
constexpr double kTimeoutSeconds = 1;
constexpr std::chrono::milliseconds kCase{1800}, kOnTheClock{300};

TEST(Watchdog, AHostCheckIsOffTheClockAndTheRestIsOn) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 1) GTEST_SKIP() << "a timed-out leader releases no follower: one rank only";
  std::atomic<int> timeouts{0};
  std::string why;
  Watchdog watchdog(std::make_shared<OpObserver>(), std::make_shared<OpObserver>(), kTimeoutSeconds,
                    [&](const std::string& text) {
                      why = text;
                      timeouts.fetch_add(1);
                    });
  // kOnTheClock before and after a pause of the rest: 0.6 s of age, under -T.
  watchdog.begin_case(0, "paused");
  std::this_thread::sleep_for(kOnTheClock);
  watchdog.pause_case();
  std::this_thread::sleep_for(kCase - 2 * kOnTheClock);
  watchdog.resume_case();
  std::this_thread::sleep_for(kOnTheClock);
  watchdog.end_case();
  EXPECT_EQ(timeouts.load(), 0) << why;
  // The same wall time, all of it on the clock: a timeout, naming the case.
  watchdog.begin_case(1, "unpaused");
  std::this_thread::sleep_for(kCase);
  watchdog.end_case();
  EXPECT_EQ(timeouts.load(), 1);
  EXPECT_NE(why.find("unpaused"), std::string::npos) << why;
  watchdog.stop();
}

}  // namespace
}  // namespace dts
