// JunitSink: writes Records as JUnit XML for CI systems (Jenkins, GitLab, GitHub test reporters):
// one <testcase> per case, failed when any of its records failed. Sits beside CsvSink in results/;
// `dtsuite run --junit FILE` and `dtsuite compare --junit FILE` use it.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "results/record.h"

namespace dts {

// Text for XML character data (attribute == false) or a double-quoted attribute value: markup
// characters escaped, line breaks and tabs in attributes kept as character references, and what
// XML 1.0 cannot carry at all (other control characters, invalid UTF-8, U+FFFE/U+FFFF) replaced
// by U+FFFD.
std::string xml_escape(std::string_view text, bool attribute);

// Records arrive case by case (the harness runs one case at a time); a record whose suite or case
// differs from the previous one starts a new <testcase>.
//
// Durability: the file is a complete, well-formed document after every write(), so a run that is
// killed keeps every case already measured, as the CSV does. The file is laid out as
//   header (XML declaration, <testsuites>, <testsuite>, <properties>) | closed testcases |
//   the open testcase | trailer (</testsuite></testsuites>)
// and the open testcase as
//   <testcase name classname TIME> <system-out> one line per record | TAIL
// where TAIL is `</system-out>`, the verdict element (<failure>, <error> or <skipped>) and
// `</testcase>`. A record appends its line where TAIL began and writes TAIL and the trailer after
// it (one pwrite); then the case's time and the counts in the header, which live in fixed-width,
// space-padded attribute regions, are rewritten in place. Nothing before the new line is touched
// again unless the header grows (a sub-world case that spans more nodes than the job's first: the
// cases are read back and moved then). So a write costs its record's line plus TAIL, which is
// bounded (the verdict bodies keep kVerdictLines lines): a run of n records is O(n), also within
// one case. A write that would leave the file shorter is padded with spaces after the trailer
// (whitespace after the root element is allowed), so no truncation is needed and a kill between
// any two writes leaves a complete document whose time and counts lag by at most this record.
// A write the disk refuses part-way (full) is taken back: the bytes it overwrote are put back
// (they need no new space) and the file truncated to its old end, so the file stays the complete
// document of the records before, and the error says so. Whitespace between attributes is
// insignificant in XML, so the padding needs no special reader.
//
// Verdicts: a fail record makes the case a <failure> (message: metric, value, threshold, detail of
// the first failing record; in the body the first kVerdictLines failing records, then "... and K
// more (every record is in system-out)"); a timeout record an <error type="timeout"> carrying the
// watchdog's detail, and a fail record with an error_type (the case could not run to its end: a
// rank was lost) an <error> of that type carrying its detail (in the body the first kVerdictLines
// error records, then the failing ones, bounded as in <failure>); a skip, with nothing failed,
// <skipped>. Every record is one line of <system-out>, which comes before the verdict element:
// the JUnit format lets a testcase's children come in any order (the Jenkins xunit plugin's
// schema, junit-10.xsd, declares them an unbounded xs:choice of skipped, error, failure,
// system-out and system-err).
//
// Not thread-safe: the harness serializes writes (the watchdog's timeout record included).
class JunitSink : public Sink {
 public:
  // Creates parent directories, truncates or creates the file and writes an empty (valid)
  // document. Throws Error{io} naming the path and the OS reason.
  explicit JunitSink(std::string path);
  ~JunitSink() override;
  JunitSink(const JunitSink&) = delete;
  JunitSink& operator=(const JunitSink&) = delete;

  void write(const Record& record) override;
  void close() override;

  const std::string& path() const { return path_; }
  // Bytes handed to the OS so far (every pwrite): how tests and the benchmark see that a write
  // costs its record, not its case.
  int64_t bytes_written() const { return bytes_written_; }

  // Lines of failing (and of error) records a verdict body shows before "... and K more": a CI
  // page shows the body whole, and 100 lines is more than a reader scans there before turning to
  // <system-out>, which has every record; it also bounds what each write rewrites after the new
  // line (about 100 lines, ~10-20 KB) when every record of a long case fails.
  static constexpr int64_t kVerdictLines = 100;

 private:
  // What the open case needs to render its start tag and TAIL; its <system-out> lines are only in
  // the file, so this stays bounded by kVerdictLines records, however long the case.
  struct OpenCase {
    std::string suite, case_id;
    int repetition = 1;  // --repeat: a case runs once per pass, each pass its own testcase
    int64_t failures = 0, errors = 0, skips = 0;    // its records of each kind
    int64_t failures_shown = 0, errors_shown = 0;  // lines of each in the verdict body
    std::string failure_body, error_body;  // the shown lines, escaped, one per line
    std::string failure_message, error_message, skip_message;  // escaped for an attribute
    std::string error_type;  // the first error's: "timeout", or a fail record's error_type
    double seconds = 0;
  };
  struct Counts {
    int64_t tests = 0, failures = 0, errors = 0, skipped = 0;
    double seconds = 0;
  };

  std::string render_header(const Counts& counts) const;
  std::string render_counts(const Counts& counts) const;
  std::string render_time(double seconds) const;
  std::string render_start(const Record& record) const;
  std::string render_tail(const OpenCase& c) const;
  void add_verdict(const Record& record, const std::string& line, const std::string& escaped);
  bool take_identity(const Record& record);
  bool enter_case(const Record& record);
  std::string write_or_take_back(std::string text, int64_t at, const std::string& undo, int64_t old_size);
  Counts counts_with_open_case() const;
  void pwrite_all(std::string_view text, int64_t offset);
  std::string read_back(int64_t offset, int64_t size) const;

  std::string path_;
  int fd_ = -1;
  std::optional<Record> first_;        // stack identity for the header, from the first record
  std::optional<OpenCase> open_;
  Counts closed_;                      // counts of the closed testcases
  std::string header_text_;            // the header as written at offset 0
  int64_t header_size_ = 0;            // its bytes
  std::vector<int64_t> counts_at_;     // offsets of the two fixed-width counts regions
  int64_t closed_end_ = 0;             // where the open testcase starts
  int64_t time_at_ = 0;                // offset of the open testcase's fixed-width time region
  int64_t tail_at_ = 0;                // where its TAIL starts (the end of its <system-out> lines)
  std::string tail_text_;              // what lies from tail_at_ to the end: TAIL, trailer, padding
  int64_t case_end_ = 0;               // where its `</testcase>\n` ends
  int64_t file_size_ = 0;
  int64_t bytes_written_ = 0;
  std::chrono::steady_clock::time_point case_start_;   // when the open case began
  std::chrono::steady_clock::time_point last_record_;  // when the latest record arrived
};

}  // namespace dts
