// One-process tests of backend specs: parse_backend_spec() on good and malformed specs, and the
// errors make_communicator() gives before any backend needs MPI (MPI is never initialized here).
#include "comm/communicator.h"
#include "comm/mpi/mpi_communicator.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace dts {
namespace {

TEST(ParseBackendSpec, NameOnly) {
  const BackendSpec spec = parse_backend_spec("mpi");
  EXPECT_EQ(spec.name, "mpi");
  EXPECT_TRUE(spec.args.empty());
}

TEST(ParseBackendSpec, OneArgument) {
  const BackendSpec spec = parse_backend_spec("ring(mpi)");
  EXPECT_EQ(spec.name, "ring");
  EXPECT_EQ(spec.args, std::vector<std::string>{"mpi"});
}

TEST(ParseBackendSpec, NestedArgumentsStayWhole) {
  // Commas inside an argument's parentheses belong to that argument.
  const BackendSpec spec = parse_backend_spec("faulty(bitflip,ring(mpi))");
  EXPECT_EQ(spec.name, "faulty");
  EXPECT_EQ(spec.args, (std::vector<std::string>{"bitflip", "ring(mpi)"}));

  const BackendSpec deep = parse_backend_spec("a(b(c,d(e,f)),g)");
  EXPECT_EQ(deep.name, "a");
  EXPECT_EQ(deep.args, (std::vector<std::string>{"b(c,d(e,f))", "g"}));
}

TEST(ParseBackendSpec, MalformedSpecsAreInvalidArguments) {
  for (const char* spec : {"", "ring(", "ring()", "(mpi)", "faulty(a,,b)", "faulty(a,)", "faulty(,a)", "ring(mpi))",
                           "ring((mpi)", "ring(mpi)x", "ring(a)(b)", "mpi)", "a,b"}) {
    try {
      parse_backend_spec(spec);
      ADD_FAILURE() << "'" << spec << "' parsed";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << spec;
      // The message quotes the spec so that a user sees which flag was wrong.
      EXPECT_NE(std::string(e.what()).find("'" + std::string(spec) + "'"), std::string::npos) << e.what();
    }
  }
}

// "ring(" * levels + inner + ")" * levels: a stack `levels` wrappers deep, nested `levels` parentheses.
std::string nested_rings(int levels, const std::string& inner = "mpi") {
  std::string spec;
  for (int i = 0; i < levels; ++i) spec += "ring(";
  spec += inner;
  spec.append(static_cast<size_t>(levels), ')');
  return spec;
}

// The message of the invalid_argument Error that `f` throws; a failure if it throws anything else.
template <typename F>
std::string invalid_argument_message(F f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

TEST(ParseBackendSpec, DepthAtTheLimitParses) {
  const BackendSpec spec = parse_backend_spec(nested_rings(kMaxBackendSpecDepth));
  EXPECT_EQ(spec.name, "ring");
  ASSERT_EQ(spec.args.size(), 1u);
  EXPECT_EQ(spec.args[0], nested_rings(kMaxBackendSpecDepth - 1));  // one level peeled
}

TEST(ParseBackendSpec, OneLevelPastTheLimitNamesTheLimit) {
  const std::string what = invalid_argument_message([] { parse_backend_spec(nested_rings(kMaxBackendSpecDepth + 1)); });
  EXPECT_NE(what.find("nested deeper than " + std::to_string(kMaxBackendSpecDepth) + " levels"), std::string::npos)
      << what;
  EXPECT_EQ(what.find('\n'), std::string::npos) << what;
}

TEST(ParseBackendSpec, ArgumentsCountTowardTheDepth) {
  // A wrapper's non-backend argument nests too: faulty(delay(...)) at the limit plus the wrapper's
  // own level is one past it.
  std::string delay = "20";
  for (int i = 0; i < kMaxBackendSpecDepth; ++i) delay = "delay(" + delay + ")";
  const std::string what = invalid_argument_message([&] { parse_backend_spec("faulty(" + delay + ",mpi)"); });
  EXPECT_NE(what.find("nested deeper than"), std::string::npos) << what;
}

TEST(ParseBackendSpec, MessagesAreOneShortLine) {
  // A long or generated spec is quoted cut, with its length; a newline in it cannot split the
  // harness's one-line error. The quote holds at most 80 characters, plus the fixed text around it,
  // so 400 is a generous bound against a message that grew with the spec (here 200,000+ chars).
  constexpr size_t kShortMessage = 400;
  for (const std::string& spec : {nested_rings(100'000), nested_rings(100'000, "mpi,") + "x",
                                  std::string("ring(\nmpi"), std::string("ri\nng(mpi)x")}) {
    const std::string what = invalid_argument_message([&] { parse_backend_spec(spec); });
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_LT(what.size(), kShortMessage) << what;
  }
}

TEST(ParseBackendSpec, MalformedSpecsNameTheirProblem) {
  const std::pair<const char*, const char*> cases[] = {
      {"ring((mpi)", "unbalanced parentheses"}, {"ring(mpi))", "unbalanced parentheses"},
      {"ring(a)(b)", "unbalanced parentheses"}, {"faulty(a,,b)", "empty argument"},
      {"faulty(a,)", "empty argument"},         {"ring(mpi)x", "expected NAME(ARGS)"},
      {"ring(mpi", "expected NAME(ARGS)"},      {"mpi)", "expected NAME or NAME(ARGS)"},
  };
  for (const auto& [spec_text, problem] : cases) {
    const std::string spec = spec_text;  // a plain variable for the lambda to capture
    const std::string what = invalid_argument_message([&] { parse_backend_spec(spec); });
    EXPECT_NE(what.find(problem), std::string::npos) << spec << ": " << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

Error::Kind kind_of_make_error(const std::string& spec) {
  try {
    make_communicator(spec);
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << spec << " built a communicator";
  return Error::Kind::io;  // any kind the callers do not expect
}

TEST(MakeCommunicator, UnknownBackendNamesTheKnownOnes) {
  try {
    make_communicator("nosuch");
    ADD_FAILURE() << "built an unknown backend";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    const std::string what = e.what();
    EXPECT_NE(what.find("nosuch"), std::string::npos) << what;
    EXPECT_NE(what.find("ring(INNER)"), std::string::npos) << what;
    EXPECT_NE(what.find("mpi"), std::string::npos) << what;
  }
}

TEST(MakeCommunicator, MalformedSpecsAreInvalidArguments) {
  for (const char* spec : {"ring(", "ring()", "(mpi)", "faulty(a,,b)", ""}) {
    EXPECT_EQ(kind_of_make_error(spec), Error::Kind::invalid_argument) << spec;
  }
}

TEST(MakeCommunicator, BadArgumentsAreInvalidArguments) {
  // Each of these fails in the factory before touching MPI.
  for (const char* spec : {"ring(mpi,mpi)", "ring(nosuch)", "mpi(x)", "ring(ring(nosuch))"}) {
    EXPECT_EQ(kind_of_make_error(spec), Error::Kind::invalid_argument) << spec;
  }
}

TEST(MakeCommunicator, DepthAtTheLimitReachesTheInnermostBackend) {
  // Every level parses; the stack fails only where it always does without MPI: at the mpi leaf.
  const std::string what = invalid_argument_message([] { make_communicator(nested_rings(kMaxBackendSpecDepth)); });
  EXPECT_NE(what.find("backend mpi needs MPI_Init first"), std::string::npos) << what;
}

TEST(MakeCommunicator, FarTooDeepIsAnErrorNotACrash) {
  // 100,000 levels overflowed the stack (issue 11 crashed at about 18,000): now refused at the
  // outermost parse, before any factory runs.
  const std::string what = invalid_argument_message([] { make_communicator(nested_rings(100'000)); });
  EXPECT_NE(what.find("nested deeper than " + std::to_string(kMaxBackendSpecDepth) + " levels"), std::string::npos)
      << what;
}

TEST(MakeCommunicator, MpiBeforeMpiInitIsAnError) {
  // A thrown Error, not a crash inside MPI: the harness reports it and exits 2.
  EXPECT_EQ(kind_of_make_error("mpi"), Error::Kind::invalid_argument);
  EXPECT_EQ(kind_of_make_error("ring(mpi)"), Error::Kind::invalid_argument);
}

TEST(Registry, ListsTheBuiltInBackends) {
  bool mpi = false, ring = false;
  for (const BackendInfo& info : registered_backends()) {
    EXPECT_FALSE(info.summary.empty()) << info.name;
    mpi = mpi || (info.name == "mpi" && info.usage == "mpi");
    ring = ring || (info.name == "ring" && info.usage == "ring(INNER)");
  }
  EXPECT_TRUE(mpi);
  EXPECT_TRUE(ring);
}

}  // namespace
}  // namespace dts

namespace dts {
namespace {

// The mpi backend skips in-place reduce at a non-zero root on MPICH releases that crash there
// (pmodels/mpich#6540, fixed in 4.1.2); judged from MPI_Get_library_version's first line.
TEST(MpichKnownCrash, JudgedFromTheVersionString) {
  EXPECT_TRUE(mpich_in_place_reduce_crashes("MPICH Version:\t4.0.2"));
  EXPECT_TRUE(mpich_in_place_reduce_crashes("MPICH Version:\t4.1.1"));
  EXPECT_FALSE(mpich_in_place_reduce_crashes("MPICH Version:\t4.1.2"));
  EXPECT_FALSE(mpich_in_place_reduce_crashes("MPICH Version:\t4.2"));  // 4.2.0
  EXPECT_TRUE(mpich_in_place_reduce_crashes("MPICH Version:\t3.4.2"));
  EXPECT_FALSE(mpich_in_place_reduce_crashes("Open MPI v4.1.4, package: Debian OpenMPI"));
  EXPECT_FALSE(mpich_in_place_reduce_crashes("MPICH Version: garbled"));
}

}  // namespace
}  // namespace dts

namespace dts {
namespace {

// Counts synchronize() calls: the default timer must wait for the backend's work at every mark.
class CountingSync final : public Communicator {
 public:
  std::string_view backend() const override { return "counting"; }
  std::string version() const override { return "0"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Memory memory() const override { return Memory::host; }
  void barrier() override {}
  void synchronize() override { ++synchronized; }
  std::unique_ptr<Communicator> split(int, int) override { return nullptr; }
  int synchronized = 0;
};

TEST(HostTimer, SynchronizesAtEachMarkAndGivesOneIntervalBetweenEachPair) {
  CountingSync comm;
  const std::unique_ptr<Timer> timer = comm.timer(4);
  EXPECT_TRUE(timer->intervals().empty());  // no mark yet: nothing timed
  for (int i = 0; i < 4; ++i) timer->mark();
  EXPECT_EQ(comm.synchronized, 4);
  const std::vector<double> intervals = timer->intervals();
  ASSERT_EQ(intervals.size(), 3u);
  for (double seconds : intervals) EXPECT_GE(seconds, 0.0);  // steady_clock never goes back
}

}  // namespace
}  // namespace dts
