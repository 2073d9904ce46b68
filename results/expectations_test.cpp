// Tests of expectation files: the loader refuses what cannot be a cited waiver (no library, no
// deviation, no citation, unknown keys) at its line; the judge turns a failure into xfail only
// when every deviation kind of the row is named by an entry for this stack and these cases, keeps
// any other kind a failure, and calls an entry whose deviation no longer shows xpass (a failure
// of the run) and one that selects nothing unused. The shipped files parse.
#include "results/expectations.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "results/catalog.h"

namespace dts {
namespace {

// The kinds a check classifies come from the suite catalog, which the suites fill; this test
// links none, so it registers the few it uses (the real vocabulary's test is in
// suites/collectives/expectation_kinds_test.cpp), each on the rows that can carry it.
const bool kVocabulary = register_suite_info([] {
  SuiteInfo info;
  info.name = "expectations-test";
  for (const char* kind : {"saturates at 127", "saturates at -128", "a partial sum saturates"}) {
    for (const char* redop : {"sum", "avg"}) info.deviation_kinds.push_back({kind, "i8", redop});
  }
  for (const char* redop : {"min", "max"}) {
    for (const char* dtype : {"f32", "f64"}) info.deviation_kinds.push_back({std::string("NaN dropped by ") + redop, dtype, redop});
  }
  return info;
}());

const std::string kOpenMpi = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022";

std::string error_of(const std::string& text) {
  try {
    parse_expectations(text, "x.toml");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    return e.what();
  }
  return "";
}

// A collectives `wrong` row as the suite writes it, with the given kinds on its overflow inputs.
Record wrong_row(const std::string& dtype, const std::string& redop, const std::string& kinds, int world_size = 4,
                 const std::string& backend = "mpi", const std::string& version = kOpenMpi) {
  Record r;
  r.suite = "collectives";
  r.case_id = "all_reduce/" + dtype + "/" + redop + "/64";
  r.metric = "wrong";
  r.unit = "elements";
  r.labels.backend = backend;
  r.labels.backend_version = version;
  r.labels.mpi_version = version;
  r.labels.world_size = world_size;
  r.labels.op = "all_reduce";
  r.labels.dtype = dtype;
  r.labels.bytes = 64;
  r.labels.placement = "out_of_place";
  r.labels.config = "redop=" + redop + ";root=-1;count=64";
  r.threshold = 0;
  if (kinds.empty()) {
    r.verdict = Verdict::pass;
    r.detail = "exact inputs: 0 wrong (bit for bit); random inputs: 0 wrong (bit for bit); overflow inputs: 0 wrong (stated semantics)";
  } else {
    r.verdict = Verdict::fail;
    r.value = 6;
    r.detail = "exact inputs: 0 wrong (bit for bit); random inputs: 0 wrong (bit for bit); overflow inputs: 6 wrong "
               "(stated semantics: integers wrap, floats reach inf, NaN propagates through every op): " + kinds +
               "; first: rank 0 element 2: got 127 expected -128 (saturates at 127)";
  }
  return r;
}

const char* kSaturation = R"(
[expectations]
description = "test"

[[expect]]
library = "Open MPI 4.1.*"
backend = "mpi"
collective = ["all_reduce", "reduce"]
dtype = "i8"
redop = ["sum", "avg"]
min_world_size = 2
deviation = ["saturates at 127", "saturates at -128", "a partial sum saturates"]
citation = "https://github.com/open-mpi/ompi/issues/8045"
)";

TEST(Expectations, DeviationKindsAreReadFromTheWrongRowsDetail) {
  EXPECT_EQ(deviation_kinds(wrong_row("i8", "sum", "saturates at 127: 4, saturates at -128: 2").detail),
            (std::vector<std::string>{"saturates at 127", "saturates at -128"}));
  // A kind holding ", " inside parentheses stays one kind; each kind once over the input sets.
  const std::string two = "random inputs: 3 wrong (bound (ceil(log2 n)+1)*eps*sum|x|): inf where NaN is due (inf - inf, "
                          "0 * inf): 2, wrong value: 1; overflow inputs: 1 wrong (x): wrong value: 1; first: rank 0 "
                          "element 1: got 1 expected 2 (wrong value)";
  EXPECT_EQ(deviation_kinds(two), (std::vector<std::string>{"inf where NaN is due (inf - inf, 0 * inf)", "wrong value"}));
  EXPECT_TRUE(deviation_kinds(wrong_row("i8", "sum", "").detail).empty());
  EXPECT_TRUE(deviation_kinds("rank 2 is gone").empty());
  EXPECT_TRUE(deviation_kinds("").empty());
}

TEST(Expectations, StackLibraryAndGlob) {
  Labels l;
  l.backend_version = kOpenMpi;
  EXPECT_EQ(stack_library(l), "Open MPI 4.1.4");
  l.backend_version = "MPICH Version:\t4.0.2\nMPICH Release date: ...";
  EXPECT_EQ(stack_library(l), "MPICH 4.0.2");
  l.backend_version = "NCCL 2.28.9";
  EXPECT_EQ(stack_library(l), "NCCL 2.28.9");
  EXPECT_TRUE(glob_match("Open MPI 4.1.*", "Open MPI 4.1.4"));
  EXPECT_FALSE(glob_match("Open MPI 4.1.*", "Open MPI 4.2.0"));
  EXPECT_FALSE(glob_match("Open MPI 4.1.*", "Open MPI 5.0.1"));
  EXPECT_TRUE(glob_match("MPICH 4.0.?", "MPICH 4.0.2"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_FALSE(glob_match("NCCL", "NCCL 2.28.9"));  // whole text: a prefix is not a match
  EXPECT_FALSE(glob_match(std::string(64, '*') + "b", std::string(10000, 'a')));  // no blow-up
}

TEST(Expectations, LoaderRefusesWhatIsNoCitedWaiver) {
  EXPECT_NE(error_of(R"([[expect]]
deviation = "saturates at 127"
citation = "x")").find("x.toml:1: [[expect]] #1 has no library"), std::string::npos);
  EXPECT_NE(error_of(R"([[expect]]
library = "Open MPI 4.1.*"
citation = "x")").find("has no deviation"), std::string::npos);
  EXPECT_NE(error_of(R"([[expect]]
library = "Open MPI 4.1.*"
deviation = "saturates at 127")").find("has no citation"), std::string::npos);
  EXPECT_NE(error_of(R"([[expect]]
library = "Open MPI 4.1.*"
op = "sum"
deviation = "saturates at 127"
citation = "x")").find("x.toml:3: 'op' is no key of [[expect]] #1: say collective"), std::string::npos);
  EXPECT_NE(error_of(R"([[expect]]
library = "Open MPI 4.1.*"
redop = "add"
deviation = "saturates at 127"
citation = "x")").find("unknown redop 'add'"), std::string::npos);
  EXPECT_NE(error_of(R"([[expect]]
library = "Open MPI 4.1.*"
mpi_datatype = "UNSIGNED_LONG"
deviation = "saturates at 127"
citation = "x")").find("not an MPI datatype name"), std::string::npos);
  EXPECT_NE(error_of("[[expect]]\nlibrary = \"L\"\ndeviation = \"saturates at 127\"\ncitation = \"x\"\nwhy = 1\n").find("x.toml:5: unknown key 'why'"),
            std::string::npos);
  EXPECT_NE(error_of("[expectations]\ndescription = \"d\"\n").find("no [[expect]] table"), std::string::npos);
  EXPECT_NE(error_of("[[expect]\n").find("x.toml:1: TOML syntax error"), std::string::npos);
  EXPECT_NE(error_of(R"([[expect]]
library = "L"
min_bytes = 64
max_bytes = 8
deviation = "saturates at 127"
citation = "x")").find("min_bytes 64 > max_bytes 8"), std::string::npos);
}

TEST(Expectations, ExpectedKindsBecomeXfailAndOthersStayFailures) {
  ExpectationJudge judge({parse_expectations(kSaturation, "openmpi.toml")});
  Record expected = wrong_row("i8", "sum", "saturates at 127: 4, saturates at -128: 1, a partial sum saturates: 2");
  judge.apply(expected);
  EXPECT_EQ(expected.verdict, Verdict::xfail);
  EXPECT_EQ(expected.detail.rfind("expected: openmpi.toml #1 (https://github.com/open-mpi/ompi/issues/8045) | ", 0), 0u)
      << expected.detail;
  // The same case with a wrong value beside the saturation: a new deviation, still a failure.
  Record other = wrong_row("i8", "sum", "saturates at 127: 4, wrong value: 1");
  judge.apply(other);
  EXPECT_EQ(other.verdict, Verdict::fail);
  EXPECT_EQ(other.detail.rfind("not expected: wrong value | ", 0), 0u) << other.detail;
  // Outside the entry's selection: another dtype, op, stack, backend, library version, world size.
  for (Record r : {wrong_row("u8", "sum", "saturates at 127: 4"), wrong_row("i8", "max", "saturates at 127: 4"),
                   wrong_row("i8", "sum", "saturates at 127: 4", 1), wrong_row("i8", "sum", "saturates at 127: 4", 4, "ring"),
                   wrong_row("i8", "sum", "saturates at 127: 4", 4, "mpi", "Open MPI v5.0.1, package: x")}) {
    judge.apply(r);
    EXPECT_EQ(r.verdict, Verdict::fail) << r.labels.dtype << " " << r.labels.config << " " << r.labels.backend;
  }
  // A failure the check did not classify (a rank lost) is never expected.
  Record lost = wrong_row("i8", "sum", "saturates at 127: 4");
  lost.detail = "rank 3 is gone";
  judge.apply(lost);
  EXPECT_EQ(lost.verdict, Verdict::fail);
  EXPECT_EQ(judge.xfailed_rows(), 1);
  const std::vector<Record> summary = judge.summary();
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_EQ(summary[0].suite, "expect");
  EXPECT_EQ(summary[0].case_id, "openmpi.toml#1");
  EXPECT_EQ(summary[0].verdict, Verdict::info);
  EXPECT_EQ(summary[0].value, 2);  // rows that showed the deviation: the xfail and the mixed one
  EXPECT_NE(summary[0].detail.find("ompi/issues/8045"), std::string::npos) << summary[0].detail;
}

TEST(Expectations, AnEntryWhoseDeviationIsGoneIsXpassAndOneThatSelectsNothingIsUnused) {
  const ExpectationFile file = parse_expectations(kSaturation, "openmpi.toml");
  {
    ExpectationJudge judge({file});
    Record fixed = wrong_row("i8", "sum", "");  // the library wraps now: the row passes
    judge.apply(fixed);
    EXPECT_EQ(fixed.verdict, Verdict::pass);
    const std::vector<Record> summary = judge.summary();
    ASSERT_EQ(summary.size(), 1u);
    EXPECT_EQ(summary[0].verdict, Verdict::xpass);
    EXPECT_TRUE(is_failure(summary[0].verdict));
    EXPECT_NE(summary[0].detail.find("update openmpi.toml (line 5)"), std::string::npos) << summary[0].detail;
  }
  {
    ExpectationJudge judge({file});
    Record f32 = wrong_row("f32", "sum", "");  // this stack, but no row of the entry's selection
    judge.apply(f32);
    const std::vector<Record> summary = judge.summary();
    ASSERT_EQ(summary.size(), 1u);
    EXPECT_EQ(summary[0].verdict, Verdict::skip);
    EXPECT_EQ(summary[0].detail.rfind("unused: ", 0), 0u) << summary[0].detail;
  }
  {
    ExpectationJudge judge({file});
    Record mpich = wrong_row("i8", "sum", "", 4, "mpi", "MPICH Version:\t4.0.2");
    judge.apply(mpich);
    const std::vector<Record> summary = judge.summary();
    ASSERT_EQ(summary.size(), 1u);  // one line for the file: its entries are for another stack
    EXPECT_EQ(summary[0].verdict, Verdict::info);
    EXPECT_NE(summary[0].detail.find("1 of its 1 entries are for another stack (this run: MPICH 4.0.2, backend mpi)"),
              std::string::npos)
        << summary[0].detail;
  }
}

TEST(Expectations, LoaderRefusesWaiversThatCouldHideAFault) {
  // The fault: every library, an unclassified wrong answer: it turned every bit flip into xfail.
  const std::string any = error_of(R"([[expect]]
library = "*"
deviation = ["wrong value"]
citation = "x")");
  EXPECT_NE(any.find("x.toml:2: 'library' of [[expect]] #1: '*' does not name a library"), std::string::npos) << any;
  for (const char* pattern : {"*MPI*", "?pen MPI 4.1.4", " Open MPI"}) {
    const std::string error = error_of(std::string("[[expect]]\nlibrary = \"") + pattern +
                                       "\"\ndeviation = \"saturates at 127\"\ncitation = \"x\"\n");
    EXPECT_NE(error.find("does not name a library"), std::string::npos) << pattern << ": " << error;
  }
  const std::string unclassified = error_of(R"([[expect]]
library = "Open MPI 4.1.*"
deviation = ["saturates at 127", "wrong value"]
citation = "x")");
  EXPECT_NE(unclassified.find("x.toml:3: 'deviation' of [[expect]] #1: 'wrong value' is a failure the check could not "
                              "classify: it is never waivable"),
            std::string::npos)
      << unclassified;
  const std::string misspelt = error_of(R"([[expect]]
library = "Open MPI 4.1.*"
deviation = "NaN droped by min"
citation = "x")");
  EXPECT_NE(misspelt.find("x.toml:3: 'deviation' of [[expect]] #1: 'NaN droped by min' is no deviation kind a check "
                          "names; did you mean 'NaN dropped by min'?"),
            std::string::npos)
      << misspelt;
  EXPECT_NE(error_of("[[expect]]\nlibrary = \"L\"\ndeviation = \"sign of everything lost\"\ncitation = \"x\"\n")
                .find("is no deviation kind a check names (results/expectations/README.md"),
            std::string::npos);  // nothing close: no suggestion
  const std::string blank = error_of("[[expect]]\nlibrary = \"L\"\ndeviation = \"saturates at 127\"\ncitation = \" \\t \"\n");
  EXPECT_NE(blank.find("x.toml:4: 'citation' of [[expect]] #1 is blank"), std::string::npos) << blank;
  // No-break and zero-width spaces are blank too.
  EXPECT_NE(error_of("[[expect]]\nlibrary = \"L\"\ndeviation = \"saturates at 127\"\ncitation = \"\\u00a0\\u200b\"\n")
                .find("is blank"),
            std::string::npos);
}

TEST(Expectations, AnEntryIsJudgedKindByKind) {
  const ExpectationFile file = parse_expectations(R"([[expect]]
library = "Open MPI 4.1.*"
collective = "all_reduce"
dtype = "f32"
redop = ["min", "max"]
deviation = ["NaN dropped by min", "NaN dropped by max"]
citation = "x")",
                                                  "nan.toml");
  const auto summary_of = [&](const std::vector<Record>& rows) {
    ExpectationJudge judge({file});
    for (Record r : rows) judge.apply(r);
    const std::vector<Record> summary = judge.summary();
    EXPECT_EQ(summary.size(), 1u);
    return summary.empty() ? Record{} : summary[0];
  };
  // Both kinds show: info.
  EXPECT_EQ(summary_of({wrong_row("f32", "min", "NaN dropped by min: 1"), wrong_row("f32", "max", "NaN dropped by max: 1")})
                .verdict,
            Verdict::info);
  // max's rows ran and none dropped NaN any more: that kind is stale though min's still shows.
  const Record stale = summary_of({wrong_row("f32", "min", "NaN dropped by min: 1"), wrong_row("f32", "max", "")});
  EXPECT_EQ(stale.verdict, Verdict::xpass);
  EXPECT_NE(stale.detail.find("none that could shows NaN dropped by max (0 of 1 rows)"), std::string::npos) << stale.detail;
  EXPECT_EQ(stale.detail.find("NaN dropped by min (0 of"), std::string::npos) << stale.detail;
  // A run of min alone has no row that could show max's kind: not stale.
  EXPECT_EQ(summary_of({wrong_row("f32", "min", "NaN dropped by min: 1")}).verdict, Verdict::info);
  // Neither kind shows anywhere: both named.
  const Record gone = summary_of({wrong_row("f32", "min", ""), wrong_row("f32", "max", "")});
  EXPECT_EQ(gone.verdict, Verdict::xpass);
  EXPECT_NE(gone.detail.find("NaN dropped by min (0 of 1 rows); NaN dropped by max (0 of 1 rows)"), std::string::npos)
      << gone.detail;
}

}  // namespace
}  // namespace dts
