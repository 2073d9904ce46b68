// ConsoleTable implementation: column widths follow nccl-tests' print_header()/print_line so
// that people (and their awk one-liners) read our rows the way they read all_reduce_perf's.
#include "results/console_table.h"

#include <cmath>
#include <cstdarg>
#include <string_view>

#include "core/dtype.h"
#include "core/error.h"

namespace dts {

namespace {

constexpr std::string_view kCollectivesSuite = "collectives";

// The 1..3 lines under "# <op>": titles, then units. Widths match the rows printed below.
constexpr const char* kHeaderLines =
    "#                                                              out-of-place"
    "                       in-place\n"
    "#       size         count      type   redop    root"
    "     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
    "             (us)  (GB/s)  (GB/s)\n";

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buffer[256];  // only numbers and the five row-prefix cells (under 60 chars) go through here
  va_list args;
  va_start(args, fmt);
  const int n = std::vsnprintf(buffer, sizeof buffer, fmt, args);
  va_end(args);
  if (n < 0) return {};
  return std::string(buffer, static_cast<size_t>(n) < sizeof buffer ? static_cast<size_t>(n) : sizeof buffer - 1);
}

// nccl-tests' time column: fewer decimals as the number grows, always 7 wide.
std::string format_time_us(double seconds) {
  if (std::isnan(seconds)) return "N/A";
  const double us = seconds * 1e6;
  if (us >= 10000.0) return format("%.0f", us);
  if (us >= 100.0) return format("%.1f", us);
  return format("%.2f", us);
}

std::string format_gbps(double bytes_per_second) {
  return std::isnan(bytes_per_second) ? "N/A" : format("%.2f", bytes_per_second / 1e9);
}

std::string format_count(double count) {
  if (std::isnan(count)) return "N/A";
  return format("%lld", static_cast<long long>(count));
}

}  // namespace

bool ConsoleTable::PlacementCells::any() const {
  return !std::isnan(time) || !std::isnan(algbw) || !std::isnan(busbw) || !std::isnan(wrong);
}

ConsoleTable::ConsoleTable(std::FILE* out) : out_(out) {}

int ConsoleTable::failed_cases() const { return failed_cases_ + (case_failed_ ? 1 : 0); }

void ConsoleTable::write(const Record& record) {
  if (closed_) return;
  const std::string key = record.suite + '\n' + record.case_id;
  if (key != case_key_) {
    finish_case();
    case_key_ = key;
    if (record.suite == kCollectivesSuite) start_case(record);
  }
  if (is_failure(record.verdict)) case_failed_ = true;
  if (record.verdict == Verdict::xfail) case_xfailed_ = true;
  if (record.suite == kCollectivesSuite) {
    add_to_row(record);
  } else if (record.suite != "inventory" || record.verdict != Verdict::info) {
    // The inventory's facts are the preamble's "# node" and "# rank" lines already; its checks print.
    print_generic(record);
  }
}

void ConsoleTable::close() {
  if (closed_) return;
  finish_case();
  closed_ = true;
  print(format("# Failed cases : %d\n", failed_cases_));
  if (xfailed_cases_ > 0) print(format("# Expected failures (known deviations, --expect) : %d\n", xfailed_cases_));
  if (busbw_count_ > 0) {
    print(format("# Avg bus bandwidth : %.4f GB/s\n", busbw_sum_ / static_cast<double>(busbw_count_) / 1e9));
  } else {
    print("# Avg bus bandwidth : N/A\n");  // no collective measured a bandwidth
  }
}

void ConsoleTable::start_case(const Record& record) {
  row_ = PendingRow{};
  row_.active = true;
  row_.op = record.labels.op;
  row_.dtype = record.labels.dtype;
  row_.config = record.labels.config;
  row_.bytes = record.labels.bytes;
}

void ConsoleTable::finish_case() {
  if (row_.active) print_row(row_);
  row_ = PendingRow{};
  if (case_failed_) ++failed_cases_;
  else if (case_xfailed_) ++xfailed_cases_;
  case_failed_ = false;
  case_xfailed_ = false;
  case_key_.clear();
}

void ConsoleTable::add_to_row(const Record& record) {
  const std::string& metric = record.metric;
  if (metric == "check") {
    std::string_view prefix;
    switch (record.verdict) {
      case Verdict::skip: prefix = "skipped: "; break;
      case Verdict::timeout: prefix = "TIMEOUT: "; break;
      case Verdict::fail: prefix = "FAILED: "; break;
      case Verdict::xpass: prefix = "XPASS: "; break;
      case Verdict::xfail: prefix = "xfail: "; break;
      case Verdict::pass:
      case Verdict::info: return;  // nothing to show beyond the row itself
    }
    if (!row_.status.empty()) row_.status += "; ";
    row_.status += prefix;
    row_.status += record.detail;
    return;
  }
  PlacementCells* cells = nullptr;
  if (record.labels.placement == "out_of_place") cells = &row_.out_of_place;
  if (record.labels.placement == "in_place") cells = &row_.in_place;
  if (cells == nullptr) return;
  if (metric == "time") cells->time = record.value;
  if (metric == "algbw") cells->algbw = record.value;
  if (metric == "busbw") {
    cells->busbw = record.value;
    if (std::isfinite(record.value)) {
      busbw_sum_ += record.value;
      ++busbw_count_;
    }
  }
  if (metric == "wrong") {
    cells->wrong = record.value;
    if (record.verdict == Verdict::xfail) row_.xfail = true;
  }
  // max_ulp has no column in nccl-tests' table; its verdict still counts toward failed cases.
}

void ConsoleTable::print_row(const PendingRow& row) {
  if (row.op != header_op_) print_header(row.op);

  std::string type = row.dtype;
  size_t element_size = 0;
  try {
    const DType dtype = parse_dtype(row.dtype);
    type = std::string(nccl_name(dtype));
    element_size = size_of(dtype);
  } catch (const Error&) {
    // An unknown dtype label is shown as written; the table is no place to reject a record.
  }
  // nccl-tests prints size / element size: for all_gather, reduce_scatter and all_to_all that is
  // the full buffer, n times config's per-rank count. Config's count is the fallback.
  std::string count;
  if (row.bytes >= 0 && element_size > 0) {
    count = format("%lld", static_cast<long long>(row.bytes / static_cast<int64_t>(element_size)));
  } else {
    count = config_value(row.config, "count").value_or("");
  }
  std::string redop = config_value(row.config, "redop").value_or("");
  if (redop.empty()) redop = "none";
  std::string root = config_value(row.config, "root").value_or("");
  if (root.empty()) root = "-1";
  const std::string size = row.bytes >= 0 ? format("%lld", static_cast<long long>(row.bytes)) : "";

  std::string line = format("%12s  %12s  %8s  %6s  %6s", size.c_str(), count.c_str(), type.c_str(),
                            redop.c_str(), root.c_str());
  if (row.out_of_place.any() || row.in_place.any()) {
    for (const PlacementCells* cells : {&row.out_of_place, &row.in_place}) {
      line += format("  %7s  %6s  %6s  %6s", format_time_us(cells->time).c_str(),
                     format_gbps(cells->algbw).c_str(), format_gbps(cells->busbw).c_str(),
                     format_count(cells->wrong).c_str());
    }
  }
  if (row.xfail) line += "  xfail";  // every wrong element a known deviation (--expect)
  if (!row.status.empty()) line += "  " + row.status;
  // The mpi backend's other names of the dtype (MPI_LONG beside MPI_INT64_T): the row says which.
  if (const auto mpi_name = config_value(row.config, "mpi_datatype")) line += "  " + *mpi_name;
  print(line + '\n');
}

void ConsoleTable::print_header(const std::string& op) {
  header_op_ = op;
  print("# " + op + '\n' + kHeaderLines);
}

void ConsoleTable::print_generic(const Record& record) {
  std::string line = "# " + record.suite + ' ' + record.case_id + ' ' + record.metric + " = " +
                     format("%g", record.value);
  if (!record.unit.empty()) line += ' ' + record.unit;
  line += " [" + std::string(name(record.verdict)) + ']';
  if (!record.detail.empty()) line += ' ' + record.detail;
  print(line + '\n');
  header_op_.clear();  // the table was interrupted: show its header again before the next row
}

void ConsoleTable::print(const std::string& line) {
  // Text from a CSV or a stack (details, names) must not drive the terminal: keep the line breaks
  // this table writes, replace every other control byte and anything that is not UTF-8.
  std::fputs(printable(line, true).c_str(), out_);
  std::fflush(out_);  // progress must be visible (and survive a kill) as the run goes
}

}  // namespace dts
