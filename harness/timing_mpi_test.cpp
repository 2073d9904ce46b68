// The timed loop times iterations by the clock of the communicator under test (Communicator::timer):
// a device backend's events, not the host's clock around a call that only enqueued work. A
// wrapper over mpi scripts its timer, so the loop's result is known exactly.
//   ctest -R timing_mpi_test
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/forwarding_communicator.h"
#include "harness/timing.h"

namespace dts {
namespace {

using Log = std::vector<std::string>;

// Interval i of rank r lasts (i + 1) * (r + 1) ms: the slowest rank is the last one.
double scripted_seconds(int iteration, int rank) { return (iteration + 1) * (rank + 1) * 1e-3; }

class ScriptedTimer final : public Timer {
 public:
  ScriptedTimer(Log& log, int rank) : log_(log), rank_(rank) {}
  void mark() override {
    log_.push_back("mark");
    ++marks_;
  }
  std::vector<double> intervals() override {
    std::vector<double> out;
    for (int i = 0; i + 1 < marks_; ++i) out.push_back(scripted_seconds(i, rank_));
    return out;
  }

 private:
  Log& log_;
  int rank_;
  int marks_ = 0;
};

class ScriptedClock final : public ForwardingCommunicator {
 public:
  ScriptedClock(std::unique_ptr<Communicator> inner, Log& log)
      : ForwardingCommunicator(std::move(inner), "scripted"), log_(log) {}
  void synchronize() override { log_.push_back("synchronize"); }
  std::unique_ptr<Timer> timer(size_t) override { return std::make_unique<ScriptedTimer>(log_, rank()); }

 private:
  std::unique_ptr<Communicator> wrap(std::unique_ptr<Communicator> inner_group) override {
    return std::make_unique<ScriptedClock>(std::move(inner_group), log_);
  }
  Log& log_;
};

TEST(TimeIterations, TimesByTheTestedCommunicatorsClockAndKeepsTheSlowestRank) {
  Log log;
  const std::unique_ptr<Communicator> control = make_communicator("mpi");
  ScriptedClock tested(make_communicator("mpi"), log);
  constexpr int kWarmup = 2, kIters = 4;
  const std::vector<double> times =
      time_iterations(*control, tested, kWarmup, kIters, [&] { log.push_back("iteration"); });
  // Warm-up, then the warm-up's work waited for, then a mark before and after each iteration.
  const Log expected{"iteration", "iteration", "synchronize", "mark", "iteration", "mark", "iteration",
                     "mark",      "iteration", "mark",        "iteration", "mark"};
  EXPECT_EQ(log, expected);
  if (control->rank() != 0) {
    EXPECT_TRUE(times.empty());
    return;
  }
  ASSERT_EQ(times.size(), static_cast<size_t>(kIters));
  for (int i = 0; i < kIters; ++i) EXPECT_EQ(times[static_cast<size_t>(i)], scripted_seconds(i, control->size() - 1));
}

// A timer that loses a mark must not hand the loop fewer times than it ran.
class LosingTimer final : public Timer {
 public:
  void mark() override {}
  std::vector<double> intervals() override { return {}; }
};

class LosingClock final : public ForwardingCommunicator {
 public:
  explicit LosingClock(std::unique_ptr<Communicator> inner) : ForwardingCommunicator(std::move(inner), "losing") {}
  std::unique_ptr<Timer> timer(size_t) override { return std::make_unique<LosingTimer>(); }

 private:
  std::unique_ptr<Communicator> wrap(std::unique_ptr<Communicator> inner_group) override {
    return std::make_unique<LosingClock>(std::move(inner_group));
  }
};

TEST(TimeIterations, ATimerWithTooFewIntervalsIsAnError) {
  const std::unique_ptr<Communicator> control = make_communicator("mpi");
  LosingClock tested(make_communicator("mpi"));
  try {
    time_iterations(*control, tested, 0, 3, [] {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::backend);
    EXPECT_NE(std::string(e.what()).find("gave 0 intervals for 3 iterations"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dts
