// main() for GoogleTest binaries run under mpirun: initializes MPI (thread-multiple, as the
// harness does), checks the launcher gave the world size ctest asked for, and keeps the
// console readable by letting only rank 0 print passing tests (every rank prints failures).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>

namespace {
// Prints failures only: the default printer on every rank would interleave N copies of the log.
class FailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (result.failed()) {
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, result.file_name() ? result.file_name() : "?",
                   result.line_number(), result.summary());
    }
  }

 private:
  int rank_;
};
}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  testing::InitGoogleTest(&argc, argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (const char* expect = std::getenv("DTS_EXPECT_WORLD_SIZE")) {
    if (std::atoi(expect) != size) {
      std::fprintf(stderr, "expected a world of %s ranks, got %d: is the launcher from another MPI?\n", expect, size);
      MPI_Finalize();
      return 1;
    }
  }
  if (rank != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  const int result = RUN_ALL_TESTS();
  // A rank that failed must fail the job even if rank 0 passed: combine before returning.
  int any_failed = 0;
  MPI_Allreduce(&result, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed;
}
