// ConsoleTable: the human view of a run, printed as records arrive. Collectives results take
// the table shape nccl-tests users know (one row per case, out-of-place then in-place columns,
// "# Avg bus bandwidth" footer); records of other suites print one "# ..." line each.
#pragma once
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include "results/record.h"

namespace dts {

// Not thread-safe: the harness writes every record from one thread on rank 0.
class ConsoleTable : public Sink {
 public:
  // `out` is borrowed (stdout, a file); it is flushed after every printed line, never closed.
  explicit ConsoleTable(std::FILE* out);

  // A collectives row is printed when the next case starts (or at close()), since a case's
  // records (time, algbw, busbw, wrong per placement) arrive one by one.
  void write(const Record& record) override;
  // Prints the last row and the footer (failed cases, average bus bandwidth). Idempotent.
  void close() override;

  // Cases (suite + case id) with any record of verdict fail or timeout, so far.
  int failed_cases() const;

 private:
  static constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();

  // What one placement of one collectives case measured; NaN: not reported.
  struct PlacementCells {
    double time = kMissing, algbw = kMissing, busbw = kMissing, wrong = kMissing;
    bool any() const;
  };
  // The collectives case being collected: its labels and cells, until its row is printed.
  struct PendingRow {
    bool active = false;
    std::string op, dtype, config;
    int64_t bytes = -1;
    PlacementCells out_of_place, in_place;
    std::string status;  // "skipped: ...", "TIMEOUT: ...", "FAILED: ..." from check records
    bool xfail = false;  // a `wrong` record of the case is xfail (a known deviation, --expect)
  };
  void start_case(const Record& record);
  void finish_case();
  void add_to_row(const Record& record);
  void print_row(const PendingRow& row);
  void print_header(const std::string& op);
  void print_generic(const Record& record);
  void print(const std::string& line);

  std::FILE* out_;
  bool closed_ = false;
  std::string case_key_;          // suite + '\n' + case_id of the case now arriving
  bool case_failed_ = false;      // that case has a fail, timeout or xpass record
  bool case_xfailed_ = false;     // ... an xfail record
  int failed_cases_ = 0;          // finished cases that failed
  int xfailed_cases_ = 0;         // finished cases whose only failures were expected (xfail)
  PendingRow row_;
  std::string header_op_;         // op of the table header in force; empty: none printed
  double busbw_sum_ = 0;          // bytes_per_second, over every busbw record
  int64_t busbw_count_ = 0;
};

}  // namespace dts
