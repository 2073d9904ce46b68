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
// and each write() rewrites only the open testcase and the trailer at the end (pwrite at a known
// offset; closed testcases are not touched again unless the header grows: a sub-world case that
// spans more nodes than the job's first, read back then) plus the counts in the header, which
// live in fixed-width, space-padded attribute regions rewritten in place. A write the disk
// refuses part-way (full) is taken back: the bytes it overwrote are put back (they need no new
// space) and the file truncated to its old end, so the file stays the complete document of the
// records before, and the error says so. Whitespace between attributes is
// insignificant in XML, so the padding needs no special reader. Cost per record: the open case's
// element (a dozen lines), so a run of n records is O(n), not O(n^2).
//
// Verdicts: a fail record makes the case a <failure> (message: metric, value, threshold, detail of
// the first failing record; every failing record in the body); a timeout record an <error
// type="timeout"> carrying the watchdog's detail, and a fail record with an error_type (the case
// could not run to its end: a rank was lost) an <error> of that type carrying its detail; a skip,
// with nothing failed, <skipped>. Every record is also one line of <system-out>.
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

 private:
  struct OpenCase {
    std::string suite, case_id, classname;
    int repetition = 1;  // --repeat: a case runs once per pass, each pass its own testcase
    std::vector<std::string> failures, errors, skips, output;  // one line per record
    std::string failure_message, error_message, skip_message;
    std::string error_type;  // the first error's: "timeout", or a fail record's error_type
    double seconds = 0;
  };
  struct Counts {
    int64_t tests = 0, failures = 0, errors = 0, skipped = 0;
    double seconds = 0;
  };

  std::string render_header(const Counts& counts) const;
  std::string render_counts(const Counts& counts) const;
  std::string render_case(const OpenCase& c) const;
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
  std::string open_text_;              // the open testcase as last written
  int64_t file_size_ = 0;
  std::chrono::steady_clock::time_point case_start_;   // when the open case began
  std::chrono::steady_clock::time_point last_record_;  // when the latest record arrived
};

}  // namespace dts
