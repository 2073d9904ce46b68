// Tests of JunitSink: what it writes is read back with a real XML parser (expat, strict about
// well-formedness) after every single write, so a run killed at any point leaves a valid report;
// verdicts map to <failure>, <error>, <skipped>; text that needs escaping survives; SIGKILL, also
// between any two system calls of a write (ptrace); a write costs its record, not its case.
#include "results/junit_sink.h"

#include <expat.h>
#include <gtest/gtest.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "results/testing/file_size_limit.h"

namespace dts {
namespace {

namespace fs = std::filesystem;

struct Element {
  std::string name;
  std::map<std::string, std::string> attributes;
  std::string text;
  std::vector<std::unique_ptr<Element>> children;
  Element* parent = nullptr;

  std::vector<const Element*> all(const std::string& child_name) const {
    std::vector<const Element*> found;
    for (const auto& c : children) {
      if (c->name == child_name) found.push_back(c.get());
    }
    return found;
  }
  const Element* first(const std::string& child_name) const {
    const auto found = all(child_name);
    return found.empty() ? nullptr : found.front();
  }
};

// Parses `text` with expat into a tree; a parse error is a test failure and returns null.
std::unique_ptr<Element> parse_xml(const std::string& text) {
  struct State {
    std::unique_ptr<Element> root;
    Element* current = nullptr;
  } state;
  XML_Parser parser = XML_ParserCreate("UTF-8");
  XML_SetUserData(parser, &state);
  XML_SetElementHandler(
      parser,
      [](void* data, const XML_Char* name, const XML_Char** attributes) {
        auto* s = static_cast<State*>(data);
        auto element = std::make_unique<Element>();
        element->name = name;
        for (size_t i = 0; attributes[i]; i += 2) element->attributes[attributes[i]] = attributes[i + 1];
        Element* raw = element.get();
        if (s->current) {
          raw->parent = s->current;
          s->current->children.push_back(std::move(element));
        } else {
          s->root = std::move(element);
        }
        s->current = raw;
      },
      [](void* data, const XML_Char*) {
        auto* s = static_cast<State*>(data);
        s->current = s->current->parent;
      });
  XML_SetCharacterDataHandler(parser, [](void* data, const XML_Char* chars, int length) {
    auto* s = static_cast<State*>(data);
    if (s->current) s->current->text.append(chars, static_cast<size_t>(length));
  });
  const bool ok = XML_Parse(parser, text.data(), static_cast<int>(text.size()), 1) == XML_STATUS_OK;
  if (!ok) {
    ADD_FAILURE() << "not well-formed XML: " << XML_ErrorString(XML_GetErrorCode(parser)) << " at line "
                  << XML_GetCurrentLineNumber(parser) << "\n"
                  << text;
  }
  XML_ParserFree(parser);
  return ok ? std::move(state.root) : nullptr;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Record record(const std::string& case_id, const std::string& metric, Verdict verdict, double value = 1) {
  Record r;
  r.run_id = "run-1";
  r.timestamp = "2024-05-01T12:00:00.125Z";
  r.suite = "collectives";
  r.case_id = case_id;
  r.metric = metric;
  r.unit = "elements";
  r.value = value;
  r.verdict = verdict;
  r.labels.backend = "faulty(bitflip,mpi)";
  r.labels.world_size = 2;
  r.labels.nodes = 1;
  r.labels.ranks_per_node = 2;
  r.labels.host = "node-1";
  r.labels.placement = "in_place";
  return r;
}

class JunitSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("dts_junit_sink_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

const Element* suite_of(const Element& root) {
  EXPECT_EQ(root.name, "testsuites");
  return root.first("testsuite");
}

TEST_F(JunitSinkTest, EmptyRunIsAValidReport) {
  const fs::path path = dir_ / "empty.xml";
  JunitSink sink(path.string());
  const auto root = parse_xml(read_file(path));
  ASSERT_TRUE(root);
  EXPECT_EQ(root->attributes.at("tests"), "0");
  ASSERT_TRUE(suite_of(*root));
  EXPECT_TRUE(suite_of(*root)->all("testcase").empty());
}

TEST_F(JunitSinkTest, VerdictsMapToFailureErrorSkipped) {
  const fs::path path = dir_ / "verdicts.xml";
  JunitSink sink(path.string());
  // Case a passes (info + pass); b fails on its second record; c is skipped; d times out.
  sink.write(record("a", "time", Verdict::info));
  sink.write(record("a", "wrong", Verdict::pass, 0));
  sink.write(record("b", "time", Verdict::info));
  Record wrong = record("b", "wrong", Verdict::fail, 3);
  wrong.threshold = 0;
  wrong.detail = "first: rank 1 element 7";
  sink.write(wrong);
  Record skip = record("c", "check", Verdict::skip, 0);
  skip.detail = "unsupported by ring(mpi)";
  sink.write(skip);
  Record timeout = record("d", "check", Verdict::timeout, 0);
  timeout.detail = "case d timed out after 2 s: ranks that did not arrive: 1";
  sink.write(timeout);
  sink.close();

  const auto root = parse_xml(read_file(path));
  ASSERT_TRUE(root);
  // 4 cases: one each of pass, fail, skip, timeout.
  EXPECT_EQ(root->attributes.at("tests"), "4");
  EXPECT_EQ(root->attributes.at("failures"), "1");
  EXPECT_EQ(root->attributes.at("errors"), "1");
  EXPECT_EQ(root->attributes.at("skipped"), "1");
  const Element* suite = suite_of(*root);
  ASSERT_TRUE(suite);
  EXPECT_EQ(suite->attributes.at("tests"), "4");
  EXPECT_EQ(suite->attributes.at("hostname"), "node-1");
  const auto cases = suite->all("testcase");
  ASSERT_EQ(cases.size(), 4u);
  EXPECT_EQ(cases[0]->attributes.at("name"), "a");
  EXPECT_EQ(cases[0]->attributes.at("classname"), "collectives.faulty(bitflip,mpi)-np2");
  EXPECT_FALSE(cases[0]->first("failure"));
  EXPECT_NE(cases[0]->first("system-out")->text.find("wrong in_place = 0 elements [pass]"), std::string::npos);

  const Element* failure = cases[1]->first("failure");
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->attributes.at("message"),
            "wrong in_place = 3 elements (threshold 0) [fail]: first: rank 1 element 7");
  ASSERT_TRUE(cases[2]->first("skipped"));
  EXPECT_EQ(cases[2]->first("skipped")->attributes.at("message"), "unsupported by ring(mpi)");
  const Element* error = cases[3]->first("error");
  ASSERT_TRUE(error);
  EXPECT_EQ(error->attributes.at("type"), "timeout");
  EXPECT_EQ(error->attributes.at("message"), timeout.detail);

  // Stack identity as properties.
  std::map<std::string, std::string> properties;
  for (const Element* p : suite->first("properties")->all("property")) {
    properties[p->attributes.at("name")] = p->attributes.at("value");
  }
  EXPECT_EQ(properties["backend"], "faulty(bitflip,mpi)");
  EXPECT_EQ(properties["world_size"], "2");
  EXPECT_EQ(properties["run_id"], "run-1");
}

// A fail record that says the case could not run to its end (error_type: a rank of the job was
// lost) is an <error> of that type, counted with the errors, not the failures; a case's earlier
// failing check stays in its body.
TEST_F(JunitSinkTest, AFailWithAnErrorTypeIsAnError) {
  const fs::path path = dir_ / "rank_lost.xml";
  JunitSink sink(path.string());
  sink.write(record("a", "wrong", Verdict::fail, 2));
  Record lost = record("a", "check", Verdict::fail, 0);
  lost.detail = "rank 3 (node n1) stopped answering (killed, or crashed) during the case";
  lost.error_type = "rank_lost";
  sink.write(lost);
  sink.write(record("b", "wrong", Verdict::fail, 1));  // no error_type: a failure, as before
  sink.close();
  const auto root = parse_xml(read_file(path));
  ASSERT_TRUE(root);
  EXPECT_EQ(root->attributes.at("tests"), "2");
  EXPECT_EQ(root->attributes.at("errors"), "1");
  EXPECT_EQ(root->attributes.at("failures"), "1");
  const auto cases = suite_of(*root)->all("testcase");
  ASSERT_EQ(cases.size(), 2u);
  const Element* error = cases[0]->first("error");
  ASSERT_TRUE(error);
  EXPECT_FALSE(cases[0]->first("failure"));
  EXPECT_EQ(error->attributes.at("type"), "rank_lost");
  EXPECT_EQ(error->attributes.at("message"), lost.detail);
  EXPECT_NE(error->text.find("wrong in_place = 2 elements [fail]"), std::string::npos) << error->text;
  ASSERT_TRUE(cases[1]->first("failure"));
  EXPECT_FALSE(cases[1]->first("error"));
}

// --repeat: a case runs once per pass, and a pass may start with the case that ended the one
// before; each pass's run is a testcase of its own, the later ones named with their repetition.
TEST_F(JunitSinkTest, EachRepetitionIsATestcase) {
  const fs::path path = dir_ / "repeat.xml";
  JunitSink sink(path.string());
  for (int repetition : {1, 2}) {
    Record time = record("a", "time", Verdict::info);
    time.repetition = repetition;
    sink.write(time);
    Record wrong = record("a", "wrong", repetition == 2 ? Verdict::fail : Verdict::pass, repetition == 2 ? 1 : 0);
    wrong.repetition = repetition;
    sink.write(wrong);
  }
  sink.close();
  const auto root = parse_xml(read_file(path));
  ASSERT_TRUE(root);
  EXPECT_EQ(root->attributes.at("tests"), "2");
  EXPECT_EQ(root->attributes.at("failures"), "1");
  const auto cases = suite_of(*root)->all("testcase");
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0]->attributes.at("name"), "a");
  EXPECT_EQ(cases[1]->attributes.at("name"), "a [repetition 2]");
  EXPECT_TRUE(cases[1]->first("failure"));
}

TEST_F(JunitSinkTest, SubWorldCasesBelongToTheirJob) {
  // Equivalence cases run on sub-worlds of 1..4 ranks of a 4-rank job on 2 nodes (world_size is
  // the case's ranks, config says job=4): one class per run and the job's identity in the header.
  const fs::path path = dir_ / "subworlds.xml";
  {
    JunitSink sink(path.string());
    for (int n = 1; n <= 4; ++n) {
      Record r = record("ddp/f32/sgd/dp" + std::to_string(n), "max_abs_error", Verdict::pass);
      r.suite = "equivalence";
      r.labels.world_size = n;
      r.labels.nodes = n > 2 ? 2 : 1;  // ranks 0-1 on one node, 2-3 on the other
      r.labels.ranks_per_node = std::min(n, 2);
      r.labels.config = "dp=" + std::to_string(n) + ";job=4";
      sink.write(r);
    }
    sink.close();
  }
  const auto root = parse_xml(read_file(path));
  ASSERT_TRUE(root);
  const Element* suite = suite_of(*root);
  ASSERT_TRUE(suite);
  for (const Element* c : suite->all("testcase")) EXPECT_EQ(c->attributes.at("classname"), "equivalence.faulty(bitflip,mpi)-np4");
  std::map<std::string, std::string> properties;
  for (const Element* p : suite->first("properties")->all("property")) {
    properties[p->attributes.at("name")] = p->attributes.at("value");
  }
  EXPECT_EQ(properties["world_size"], "4");
  EXPECT_EQ(properties["nodes"], "2");
  EXPECT_EQ(properties["ranks_per_node"], "2");
  // The header grew twice (ranks per node at dp2, nodes at dp3): the cases before stay.
  EXPECT_EQ(suite->all("testcase").size(), 4u);
  EXPECT_EQ(root->attributes.at("tests"), "4");
}

TEST_F(JunitSinkTest, WellFormedAfterEveryWrite) {
  const fs::path path = dir_ / "every.xml";
  JunitSink sink(path.string());
  // 7 cases of 1..3 records, failing every third case: after each write the document parses and
  // counts exactly the cases seen so far (the open one included).
  int cases = 0, failures = 0;
  for (int c = 0; c < 7; ++c) {
    ++cases;
    if (c % 3 == 2) ++failures;
    for (int k = 0; k <= c % 3; ++k) {
      const bool fail = c % 3 == 2 && k == 2;
      sink.write(record("case/" + std::to_string(c), "m" + std::to_string(k), fail ? Verdict::fail : Verdict::info));
      const auto root = parse_xml(read_file(path));
      ASSERT_TRUE(root) << "after case " << c << " record " << k;
      // The failing record is the case's last, so the failure count moves on its write.
      const int failures_now = failures - (c % 3 == 2 && k < 2 ? 1 : 0);
      EXPECT_EQ(root->attributes.at("tests"), std::to_string(cases));
      EXPECT_EQ(root->attributes.at("failures"), std::to_string(failures_now));
      EXPECT_EQ(suite_of(*root)->all("testcase").size(), static_cast<size_t>(cases));
      EXPECT_EQ(suite_of(*root)->all("testcase").back()->first("system-out")->text,
                [&] {
                  std::string lines;
                  for (int j = 0; j <= k; ++j) {
                    const bool failed = c % 3 == 2 && j == 2;
                    lines += "m" + std::to_string(j) + " in_place = 1 elements [" + (failed ? "fail" : "info") + "]\n";
                  }
                  return lines;
                }());
    }
  }
}

// A full disk part-way through a record: the file is the complete document of the records before
// (it was 12 KB of malformed XML), the error says so, and nothing of the refused record is in it.
TEST_F(JunitSinkTest, AFullDiskLeavesTheDocumentOfTheRecordsBefore) {
  const fs::path path = dir_ / "full.xml";
  int written = 0;
  std::string what, before;
  {
    JunitSink sink(path.string());
    sink.write(record("case/0", "m", Verdict::pass));  // the header (stack identity) is fixed here
    ++written;
    testing::FileSizeLimit full_disk(static_cast<rlim_t>(fs::file_size(path)) + 3000);
    try {
      for (; written < 1000; ++written) {
        before = read_file(path);
        Record r = record("case/" + std::to_string(written / 3), "m" + std::to_string(written % 3), Verdict::fail);
        r.detail = std::string(200, 'd');  // every record grows its case by two lines of about 250 bytes
        sink.write(r);
      }
    } catch (const Error& e) {
      what = e.what();
    }
  }
  ASSERT_LT(written, 1000);
  EXPECT_NE(what.find("the file is left as it was after the previous record"), std::string::npos) << what;
  const std::string after = read_file(path);
  EXPECT_EQ(after, before);  // byte for byte the document before the refused record
  const auto root = parse_xml(after);
  ASSERT_TRUE(root);
  EXPECT_EQ(root->attributes.at("tests"), std::to_string(suite_of(*root)->all("testcase").size()));
}

TEST_F(JunitSinkTest, EscapesTextAttributesAndBytesXmlCannotCarry) {
  const fs::path path = dir_ / "escape.xml";
  Record r = record("all_reduce/<f32>&\"'", "wrong", Verdict::fail, 1);
  // Markup characters, a line break and a tab (kept through character references), a control
  // character and an invalid UTF-8 byte (both replaced by U+FFFD), valid UTF-8 (kept).
  r.detail = std::string("a<b & c>d \"q\" 'a'\nnext\tline \x01 bad\xff ok \xc3\xa9 ]]>");
  {
    JunitSink sink(path.string());
    sink.write(r);
  }
  const auto root = parse_xml(read_file(path));
  ASSERT_TRUE(root);
  const Element* testcase = suite_of(*root)->first("testcase");
  EXPECT_EQ(testcase->attributes.at("name"), "all_reduce/<f32>&\"'");
  const std::string expected_detail = "a<b & c>d \"q\" 'a'\nnext\tline \xEF\xBF\xBD bad\xEF\xBF\xBD ok \xc3\xa9 ]]>";
  EXPECT_EQ(testcase->first("failure")->attributes.at("message"),
            "wrong in_place = 1 elements [fail]: " + expected_detail);
  EXPECT_NE(testcase->first("failure")->text.find(expected_detail), std::string::npos);
}

TEST(XmlEscape, Rules) {
  EXPECT_EQ(xml_escape("a&b<c>d", false), "a&amp;b&lt;c&gt;d");
  EXPECT_EQ(xml_escape("\"'", false), "\"'");            // quotes are plain in character data
  EXPECT_EQ(xml_escape("\"'", true), "&quot;&apos;");
  EXPECT_EQ(xml_escape("a\nb\tc", false), "a\nb\tc");
  EXPECT_EQ(xml_escape("a\nb\tc\rd", true), "a&#10;b&#9;c&#13;d");
  EXPECT_EQ(xml_escape("\x1b", false), "\xEF\xBF\xBD");
  EXPECT_EQ(xml_escape("\xed\xa0\x80", false), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate: 3 bad bytes
  EXPECT_EQ(xml_escape("\xef\xbf\xbf", false), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // U+FFFF
  EXPECT_EQ(xml_escape("\xf0\x9f\x98\x80", false), "\xf0\x9f\x98\x80");                  // U+1F600 kept
}

// SIGKILL skips destructors: only what reached the OS survives, and it must parse.
TEST_F(JunitSinkTest, ReportSurvivesSigkill) {
  constexpr int kCases = 50;  // enough that a lagging write would show; small enough to be quick
  const fs::path path = dir_ / "killed.xml";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      JunitSink sink(path.string());
      for (int i = 0; i < kCases; ++i) {
        sink.write(record("case/" + std::to_string(i), "time", Verdict::info));
        sink.write(record("case/" + std::to_string(i), "wrong", i % 10 == 0 ? Verdict::fail : Verdict::pass));
      }
      std::raise(SIGKILL);
    } catch (...) {
    }
    ::_exit(3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  const auto root = parse_xml(read_file(path));
  ASSERT_TRUE(root);
  EXPECT_EQ(root->attributes.at("tests"), std::to_string(kCases));
  EXPECT_EQ(root->attributes.at("failures"), "5");  // cases 0, 10, 20, 30, 40
  EXPECT_EQ(suite_of(*root)->all("testcase").size(), size_t{kCases});
}

// The bytes handed to the OS for each record of one long case: the cost of record i is
// written[i + 1] - written[i].
std::vector<int64_t> bytes_per_record(const fs::path& path, int records, Verdict verdict) {
  JunitSink sink(path.string());
  std::vector<int64_t> cost;
  for (int i = 0; i < records; ++i) {
    const int64_t before = sink.bytes_written();
    sink.write(record("convergence/gossip", "loss", verdict, 0.5));  // the same line every time
    cost.push_back(sink.bytes_written() - before);
  }
  sink.close();
  return cost;
}

// One case of 2,000 records (a convergence run has ~1,100): each write hands the OS its record's
// line and the case's tail, never the case's earlier lines, so record 2,000 costs what record 200
// does. Before, each write rewrote the whole <testcase>, so the cost grew with every line.
TEST_F(JunitSinkTest, AWriteCostsItsRecordNotItsCase) {
  constexpr int kRecords = 2000;  // 20 x kVerdictLines: well past the bounded verdict body
  const auto passing = bytes_per_record(dir_ / "pass.xml", kRecords, Verdict::info);
  EXPECT_EQ(passing[kRecords - 1], passing[199]);
  EXPECT_LT(passing[kRecords - 1], 1000);  // line (~40 B), tail, time (28 B) and counts (2 x 136 B)
  // Every record failing: the <failure> body stops growing at kVerdictLines lines; past it only
  // the digits of "... and K more" change (K from 100 to 1,900: one more digit).
  const auto failing = bytes_per_record(dir_ / "fail.xml", kRecords, Verdict::fail);
  EXPECT_LE(failing[kRecords - 1] - failing[2 * JunitSink::kVerdictLines - 1], 1);
  EXPECT_GE(failing[kRecords - 1] - failing[2 * JunitSink::kVerdictLines - 1], 0);
  const auto root = parse_xml(read_file(dir_ / "fail.xml"));
  ASSERT_TRUE(root);
  EXPECT_EQ(root->attributes.at("failures"), "1");
}

// A case whose records all fail: <system-out> has every record, in order; the <failure> body the
// first kVerdictLines and a line that counts the rest; <system-out> comes first (the order the
// sink appends in: the JUnit schema lets a testcase's children come in any order).
TEST_F(JunitSinkTest, TheVerdictBodyIsBoundedAndSystemOutHasEveryRecord) {
  const fs::path path = dir_ / "bounded.xml";
  constexpr int kFailing = 250;  // kVerdictLines shown, 150 counted
  Record lost = record("a", "check", Verdict::fail, 0);
  lost.detail = "rank 1 stopped answering";
  lost.error_type = "rank_lost";
  {
    JunitSink sink(path.string());
    for (int i = 0; i < kFailing; ++i) sink.write(record("a", "wrong", Verdict::fail, i));
    // Then a lost rank: the case becomes an <error>, its body the error line and the failures.
    sink.write(lost);
    sink.write(record("b", "wrong", Verdict::fail, 1));
    sink.close();
  }
  const auto root = parse_xml(read_file(path));
  ASSERT_TRUE(root);
  const auto cases = suite_of(*root)->all("testcase");
  ASSERT_EQ(cases.size(), 2u);
  const Element& a = *cases[0];
  ASSERT_EQ(a.children.size(), 2u);
  EXPECT_EQ(a.children[0]->name, "system-out");
  EXPECT_EQ(a.children[1]->name, "error");
  std::string every;
  for (int i = 0; i < kFailing; ++i) every += "wrong in_place = " + std::to_string(i) + " elements [fail]\n";
  EXPECT_EQ(a.first("system-out")->text, every + "check in_place = 0 elements [fail]: rank 1 stopped answering\n");
  std::string shown = "check in_place = 0 elements [fail]: rank 1 stopped answering\n";
  for (int i = 0; i < JunitSink::kVerdictLines; ++i) shown += "wrong in_place = " + std::to_string(i) + " elements [fail]\n";
  EXPECT_EQ(a.first("error")->text, shown + "... and 150 more (every record is in system-out)\n");
  EXPECT_EQ(a.first("error")->attributes.at("message"), lost.detail);
  // One failing record: its line, and no count of more.
  ASSERT_EQ(cases[1]->children.size(), 2u);
  EXPECT_EQ(cases[1]->children[1]->name, "failure");
  EXPECT_EQ(cases[1]->first("failure")->text, "wrong in_place = 1 elements [fail]\n");
  EXPECT_EQ(root->attributes.at("errors"), "1");
  EXPECT_EQ(root->attributes.at("failures"), "1");
}

// The records of KillBetweenAnyTwoSystemCalls: a passing case, one whose verdict element gets
// shorter (a long skip message, then a short failure: the write ends before the old end), a
// header that grows (a case on more nodes) and a timeout.
std::vector<Record> kill_script() {
  std::vector<Record> records{record("a", "time", Verdict::info), record("a", "wrong", Verdict::pass, 0)};
  Record skip = record("b", "check", Verdict::skip, 0);
  skip.detail = std::string(600, 's');
  records.push_back(skip);
  Record fail = record("b", "w", Verdict::fail, 1);
  fail.metric = "w";
  fail.unit.clear();
  fail.labels.placement.clear();
  records.push_back(fail);
  Record wide = record("c", "time", Verdict::info);
  wide.labels.nodes = 2;  // the header grows: the cases before move
  records.push_back(wide);
  records.push_back(record("c", "wrong", Verdict::fail, 2));
  Record timeout = record("d", "check", Verdict::timeout, 0);
  timeout.detail = "case d timed out";
  records.push_back(timeout);
  records.push_back(record("e", "time", Verdict::info));
  return records;
}

// Runs kill_script() in a child traced with ptrace, SIGKILLed at its `stop`-th system-call stop
// (entry or exit) after the sink's constructor: returns whether it was killed (false: it ran to
// its end first), or nullopt where this system forbids ptrace.
std::optional<bool> run_killed_at(const fs::path& path, int stop) {
  const pid_t child = ::fork();
  if (child < 0) return std::nullopt;
  if (child == 0) {
    if (::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) ::_exit(77);
    try {
      JunitSink sink(path.string());
      std::raise(SIGSTOP);  // the tracer counts from here
      for (const Record& r : kill_script()) sink.write(r);
      sink.close();
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) return std::nullopt;
  if (!WIFSTOPPED(status)) return false;  // the constructor failed: the file tells
  ::ptrace(PTRACE_SETOPTIONS, child, nullptr, PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL);
  int stops = 0, deliver = 0;
  for (;;) {
    ::ptrace(PTRACE_SYSCALL, child, nullptr, reinterpret_cast<void*>(static_cast<intptr_t>(deliver)));
    ::waitpid(child, &status, 0);
    if (WIFEXITED(status) || WIFSIGNALED(status)) return false;
    deliver = WSTOPSIG(status) == (SIGTRAP | 0x80) ? 0 : WSTOPSIG(status);
    if (deliver == 0 && ++stops == stop) break;
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  return true;
}

// The durability promise, checked at every point a kill can land: between any two system calls
// of any write, the file is a complete document holding a prefix of the records (never fewer than
// at the point before), whose counts lag by at most the record being written.
TEST_F(JunitSinkTest, KillBetweenAnyTwoSystemCalls) {
  const size_t total = kill_script().size();
  size_t lines_before = 0;
  for (int stop = 1;; ++stop) {
    const fs::path path = dir_ / ("killed" + std::to_string(stop) + ".xml");
    const auto killed = run_killed_at(path, stop);
    if (!killed) GTEST_SKIP() << "ptrace is not allowed here";
    const std::string text = read_file(path);
    const auto root = parse_xml(text);
    ASSERT_TRUE(root) << "killed at system-call stop " << stop;
    const auto cases = suite_of(*root)->all("testcase");
    size_t lines = 0, failed = 0;
    for (const Element* c : cases) {
      const std::string& out = c->first("system-out")->text;
      lines += static_cast<size_t>(std::count(out.begin(), out.end(), '\n'));
      failed += c->first("failure") != nullptr;
    }
#if defined(__SANITIZE_ADDRESS__)
    // ASan's runtime makes system calls of its own at points that vary from run to run, so stop N
    // of one run is not the same point as stop N of the next: only each run's own document holds.
    constexpr bool kSameStopsEveryRun = false;
#else
    constexpr bool kSameStopsEveryRun = true;
#endif
    if (kSameStopsEveryRun) {
      EXPECT_GE(lines, lines_before) << "stop " << stop;
    }
    lines_before = lines;
    const int64_t tests = std::stoll(root->attributes.at("tests"));
    EXPECT_TRUE(tests == static_cast<int64_t>(cases.size()) || tests + 1 == static_cast<int64_t>(cases.size()))
        << "stop " << stop << ": tests=" << tests << " with " << cases.size() << " testcases";
    const int64_t failures = std::stoll(root->attributes.at("failures"));
    EXPECT_TRUE(failures == static_cast<int64_t>(failed) || failures + 1 == static_cast<int64_t>(failed)) << "stop " << stop;
    fs::remove(path);
    if (!*killed) {
      EXPECT_EQ(lines, total);  // ran to its end: every record
      EXPECT_EQ(tests, 5);      // a to e
      break;
    }
    ASSERT_LT(stop, 10000) << "the script never ended";  // it makes well under 1,000 system calls
  }
}

TEST(JunitSinkErrors, UnwritablePathIsAnIoError) {
  try {
    JunitSink sink("/proc/version/x/report.xml");  // /proc/version is a file: no directory under it
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::io);
    EXPECT_NE(std::string(e.what()).find("/proc/version/x/report.xml"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dts
