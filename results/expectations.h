// Expectations: known deviations of a stack, written down with a citation, so that regression CI
// can pass on a stack whose library has bugs nobody here can fix, and still fail on anything new.
// An expectation file (TOML, schema in results/expectations/README.md) holds [[expect]] entries;
// each matches on the stack's identity (library and version as a glob, "Open MPI 4.1.*"; backend),
// selects rows like a profile's threshold (collective, dtype, redop, placement, bytes,
// world_size, ...) and names the deviation kinds the collectives check classifies ("saturates at
// 127", "NaN dropped by max", ...), with a required citation.
//
// A failed row matched by entries, whose every deviation kind some matching entry names, becomes
// `xfail`; a failed row with any other kind stays `fail` ("not expected: ..."). An entry may name
// only the kinds a check classifies (the suite catalog's deviation_kinds): never "wrong value",
// never a misspelt kind, and its library must be named, not a wildcard. An entry one of whose
// kinds shows on none of the selected rows that could carry it is `xpass`, which fails the run:
// the deviation is gone, and a stale waiver would hide its return. An entry for this stack that
// selects no row is `unused`.
// No MPI here: the harness judges on rank 0 (`run --expect`), and `compare --expect` judges the
// candidate file's rows.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/input_file.h"
#include "results/record.h"
#include "results/selector.h"

namespace dts {

struct Expectation : RecordSelector {
  int index = 0;  // 1-based position among the file's [[expect]] tables
  int line = 0;   // line of its [[expect]] header

  std::vector<std::string> libraries;   // required: globs on stack_library() ("Open MPI 4.1.*")
  // The backend's name ("ring" for ring(mpi)), or a glob on its whole spec ("faulty(saturate,*)");
  // any of them; empty: any backend.
  std::vector<std::string> backend_patterns;
  std::vector<std::string> redops;      // any of these in config's redop; empty: any
  std::vector<std::string> mpi_datatypes;  // any of these in config's mpi_datatype; empty: any
  std::string metric = "wrong";         // the row judged: the collectives' `wrong` by default
  std::vector<std::string> deviations;  // required: the kinds waived, as the check names them
  std::string citation;                 // required: an upstream issue, or a sentence of a standard
  std::string note;                     // optional: what happens, in a sentence
};

struct ExpectationFile {
  std::string path;  // as given
  std::string description;
  std::vector<Expectation> entries;
  std::string file_name() const;  // "openmpi-4.1.toml", used in citations
};

// Bounds of an expectation file, as a profile's (core/input_file.h refuses a device, a file past
// them, a line past them).
inline constexpr int64_t kExpectationsMaxBytes = 1 << 20;
inline constexpr int64_t kExpectationsMaxLine = 64 * 1024;
// timeout_seconds: how long a FIFO or pipe may give no bytes (the command's -T); 0: no limit.
InputLimits expectation_limits(double timeout_seconds = 0);

// Any problem (TOML syntax, unknown key, wrong type, no library, deviation or citation) throws
// Error{invalid_argument} "PATH:LINE: reason"; an unreadable file Error{io}; a FIFO or pipe that
// gives no bytes for `timeout_seconds` (the command's -T; 0: no limit) Error{timeout}.
ExpectationFile load_expectations(const std::string& path, double timeout_seconds = 0);
ExpectationFile parse_expectations(std::string_view text, const std::string& path);

// The library a row ran on, in a few words without "v": "Open MPI 4.1.4", "MPICH 4.0.2",
// "NCCL 2.28.9" (from backend_version, or mpi_version when that is empty).
std::string stack_library(const Labels& labels);

// Shell-style glob: '*' any run of characters, '?' one; everything else literally.
bool glob_match(std::string_view pattern, std::string_view text);

// The deviation kinds a collectives `wrong` row's detail names, in order, each once:
// "overflow inputs: 6 wrong (...): saturates at 127: 4, NaN dropped by max: 2; first: ..." ->
// {"saturates at 127", "NaN dropped by max"}. Empty when the detail names none (a row that did
// not fail, or a failure of another suite).
std::vector<std::string> deviation_kinds(std::string_view detail);

// Judges rows against expectation files. Not thread-safe: the harness calls it under its sinks'
// lock.
class ExpectationJudge {
 public:
  explicit ExpectationJudge(std::vector<ExpectationFile> files);

  // Rows that are pass, fail or xfail are selected and counted; a failed one whose kinds are all
  // expected becomes xfail (detail: "expected: FILE #N (CITATION) | " then the row's own); one with
  // other kinds stays fail ("not expected: KIND | ..."). Other verdicts and the judge's own
  // records (suite "expect") are left alone.
  void apply(Record& record);

  // One `check` record per entry for the stack that ran (suite "expect", case "FILE#N"), judged
  // kind by kind: xpass when some kind it lists showed on none of the selected rows that could
  // carry it (their dtype and redop), info when every such kind was seen (value: rows), skip
  // ("unused") when it selected no row, or none that could carry any of its kinds; and per file one info record counting the entries for
  // other stacks. Identity labels are for the caller to fill.
  std::vector<Record> summary() const;

  int64_t xfailed_rows() const { return xfailed_; }
  const std::vector<ExpectationFile>& files() const { return files_; }

 private:
  struct Tally {
    const ExpectationFile* file = nullptr;
    const Expectation* entry = nullptr;
    bool this_stack = false;
    int64_t selected = 0, seen = 0;
    // Per deviation kind of the entry, in its order: the selected rows that could carry it (their
    // dtype and redop), and those that showed it.
    std::vector<int64_t> could_show, showed;
  };
  std::vector<ExpectationFile> files_;
  std::vector<Tally> tallies_;
  std::string library_, backend_;  // of the first row judged: the stack that ran
  int64_t xfailed_ = 0;
};

}  // namespace dts
