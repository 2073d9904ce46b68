// JunitSink implementation: the file layout and why it stays well-formed after every write are
// described in junit_sink.h. Writes go straight to the file descriptor (pwrite), as CsvSink's do.
#include "results/junit_sink.h"

#include <algorithm>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "core/error.h"
#include "results/output_paths.h"

namespace dts {

namespace {

// Width of each counts region: ` tests="N" failures="N" errors="N" skipped="N" time="S"` with
// 19-digit counts (int64) and a 20-character time is 131 characters; the rest is padding.
constexpr size_t kCountsWidth = 136;
// Width of a testcase's time region: ` time="S"` with a 20-character time is 28 characters.
constexpr size_t kTimeWidth = 28;
constexpr std::string_view kTrailer = "  </testsuite>\n</testsuites>\n";
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

[[noreturn]] void throw_io(const std::string& what, const std::string& path, const std::string& reason) {
  throw Error(Error::Kind::io, what + " '" + path + "': " + reason);
}

// Length of the valid UTF-8 sequence at text[i] that XML may carry, or 0.
size_t xml_char_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const auto continuation = [&](size_t k, unsigned lo, unsigned hi) {
    return k < text.size() && byte(k) >= lo && byte(k) <= hi;
  };
  const unsigned b = byte(i);
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return continuation(i + 1, 0x80, 0xBF) ? 2 : 0;
  if (b >= 0xE0 && b <= 0xEF) {
    const unsigned lo = b == 0xE0 ? 0xA0 : 0x80;  // no overlong forms
    const unsigned hi = b == 0xED ? 0x9F : 0xBF;  // no surrogates
    if (!continuation(i + 1, lo, hi) || !continuation(i + 2, 0x80, 0xBF)) return 0;
    // U+FFFE and U+FFFF are not XML characters.
    if (b == 0xEF && byte(i + 1) == 0xBF && byte(i + 2) >= 0xBE) return 0;
    return 3;
  }
  if (b >= 0xF0 && b <= 0xF4) {
    const unsigned lo = b == 0xF0 ? 0x90 : 0x80;
    const unsigned hi = b == 0xF4 ? 0x8F : 0xBF;  // nothing past U+10FFFF
    return continuation(i + 1, lo, hi) && continuation(i + 2, 0x80, 0xBF) && continuation(i + 3, 0x80, 0xBF) ? 4 : 0;
  }
  return 0;
}

std::string format_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", value);
  return buffer;
}

// "wrong in_place = 3 elements (threshold 0): first: rank 1 ..." — what a CI page shows per record.
std::string describe(const Record& r) {
  std::string text = r.metric;
  if (!r.labels.placement.empty()) text += " " + r.labels.placement;
  text += " = " + format_number(r.value);
  if (!r.unit.empty()) text += " " + r.unit;
  if (!std::isnan(r.threshold)) text += " (threshold " + format_number(r.threshold) + ")";
  text += " [" + std::string(name(r.verdict)) + "]";
  if (!r.detail.empty()) text += ": " + r.detail;
  return text;
}

std::string format_seconds(double seconds) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3f", seconds);
  return buffer;
}

}  // namespace

std::string xml_escape(std::string_view text, bool attribute) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    switch (c) {
      case '&': out += "&amp;"; ++i; continue;
      case '<': out += "&lt;"; ++i; continue;
      case '>': out += "&gt;"; ++i; continue;  // also keeps "]]>" out of character data
      case '"': out += attribute ? "&quot;" : "\""; ++i; continue;
      case '\'': out += attribute ? "&apos;" : "'"; ++i; continue;
      // A parser normalizes a raw line break or tab in an attribute to a space, and a raw CR in
      // text to LF; character references keep them.
      case '\n': out += attribute ? "&#10;" : "\n"; ++i; continue;
      case '\t': out += attribute ? "&#9;" : "\t"; ++i; continue;
      case '\r': out += "&#13;"; ++i; continue;
      default: break;
    }
    if (static_cast<unsigned char>(c) < 0x20) {  // not allowed in XML 1.0, even as a reference
      out += kReplacement;
      ++i;
      continue;
    }
    const size_t length = xml_char_length(text, i);
    if (length == 0) {
      out += kReplacement;  // one per invalid byte
      ++i;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

JunitSink::JunitSink(std::string path)
    : path_(std::move(path)), case_start_(std::chrono::steady_clock::now()), last_record_(case_start_) {
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) throw_io("cannot create directory for JUnit file", path_, ec.message());
  }
  fd_ = open_output_file({"JUnit file", path_}, O_RDWR);
  try {
    // An empty run is still a valid report: header (no properties yet) and trailer.
    const std::string header = render_header(closed_);
    pwrite_all(header + std::string(kTrailer), 0);
    header_text_ = header;
    header_size_ = static_cast<int64_t>(header.size());
    closed_end_ = tail_at_ = case_end_ = header_size_;
    tail_text_ = kTrailer;
    file_size_ = header_size_ + static_cast<int64_t>(kTrailer.size());
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

JunitSink::~JunitSink() {
  if (fd_ >= 0) ::close(fd_);  // no throw from a destructor; close() reports errors
}

std::string JunitSink::render_counts(const Counts& counts) const {
  std::string text = " tests=\"" + std::to_string(counts.tests) + "\" failures=\"" + std::to_string(counts.failures) +
                     "\" errors=\"" + std::to_string(counts.errors) + "\" skipped=\"" +
                     std::to_string(counts.skipped) + "\" time=\"" + format_seconds(counts.seconds) + "\"";
  if (text.size() > kCountsWidth) throw Error(Error::Kind::io, "JUnit counts overflow their field in '" + path_ + "'");
  text.resize(kCountsWidth, ' ');
  return text;
}

std::string JunitSink::render_time(double seconds) const {
  std::string text = " time=\"" + format_seconds(seconds) + "\"";
  if (text.size() > kTimeWidth) throw Error(Error::Kind::io, "JUnit case time overflows its field in '" + path_ + "'");
  text.resize(kTimeWidth, ' ');
  return text;
}

// The counts regions sit at fixed offsets: everything before them is fixed once the first record
// has arrived (its stack identity is in the header).
std::string JunitSink::render_header(const Counts& counts) const {
  std::string header = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"dtsuite\"";
  header += render_counts(counts);
  header += ">\n  <testsuite name=\"dtsuite\"";
  if (first_) {
    header += " timestamp=\"" + xml_escape(first_->timestamp, true) + "\" hostname=\"" +
              xml_escape(first_->labels.host, true) + "\"";
  }
  header += render_counts(counts);
  header += ">\n";
  if (first_) {
    const Labels& l = first_->labels;
    const std::pair<const char*, std::string> properties[] = {
        {"run_id", first_->run_id},          {"backend", l.backend},
        {"backend_version", l.backend_version}, {"mpi_version", l.mpi_version},
        {"device", l.device},                {"world_size", std::to_string(job_size(*first_))},
        {"nodes", std::to_string(l.nodes)},  {"ranks_per_node", std::to_string(l.ranks_per_node)}};
    header += "    <properties>\n";
    for (const auto& [key, value] : properties) {
      header += "      <property name=\"" + std::string(key) + "\" value=\"" + xml_escape(value, true) + "\"/>\n";
    }
    header += "    </properties>\n";
  }
  return header;
}

// `    <testcase name="..." classname="..."`: the time region and `>` follow.
std::string JunitSink::render_start(const Record& record) const {
  const std::string name =
      record.repetition > 1 ? record.case_id + " [repetition " + std::to_string(record.repetition) + "]" : record.case_id;
  // Suite as the package, the stack as the class: CI pages group by both.
  // The job's size, so one run is one class whatever sub-worlds its cases ran on.
  const std::string classname = record.suite + "." + record.labels.backend + "-np" + std::to_string(job_size(record));
  return "    <testcase name=\"" + xml_escape(name, true) + "\" classname=\"" + xml_escape(classname, true) + "\"";
}

// TAIL (from `</system-out>` to `</testcase>`) and the trailer: bounded by kVerdictLines lines.
std::string JunitSink::render_tail(const OpenCase& c) const {
  std::string xml = "</system-out>\n";
  const auto more = [&xml](int64_t hidden) {
    if (hidden > 0) xml += "... and " + std::to_string(hidden) + " more (every record is in system-out)\n";
  };
  if (c.errors > 0) {
    xml += "      <error type=\"" + c.error_type + "\" message=\"" + c.error_message + "\">";
    xml += c.error_body;
    xml += c.failure_body;
    more(c.errors + c.failures - c.errors_shown - c.failures_shown);
    xml += "</error>\n";
  } else if (c.failures > 0) {
    xml += "      <failure type=\"fail\" message=\"" + c.failure_message + "\">";
    xml += c.failure_body;
    more(c.failures - c.failures_shown);
    xml += "</failure>\n";
  } else if (c.skips > 0) {
    xml += "      <skipped message=\"" + c.skip_message + "\"/>\n";
  }
  xml += "    </testcase>\n";
  xml += kTrailer;
  return xml;
}

// What the record does to the open case's verdict: `line` is what it says, `escaped` that as text.
void JunitSink::add_verdict(const Record& record, const std::string& line, const std::string& escaped) {
  OpenCase& c = *open_;
  const auto add_line = [&escaped](std::string& body, int64_t& shown) {
    if (shown >= kVerdictLines) return;
    body += escaped;
    body += '\n';
    ++shown;
  };
  const auto add_error = [&](const std::string& type) {
    if (c.errors == 0) {
      c.error_message = xml_escape(record.detail.empty() ? line : record.detail, true);
      c.error_type = xml_escape(type, true);
    }
    ++c.errors;
    add_line(c.error_body, c.errors_shown);
  };
  switch (record.verdict) {
    case Verdict::xpass:  // a stale expectation: the run fails on it
    case Verdict::fail:
      if (!record.error_type.empty()) {
        add_error(record.error_type);
        break;
      }
      if (c.failures == 0) c.failure_message = xml_escape(line, true);
      ++c.failures;
      add_line(c.failure_body, c.failures_shown);
      break;
    case Verdict::timeout: add_error("timeout"); break;
    case Verdict::xfail:  // a known deviation: skipped, its message the expectation's citation
    case Verdict::skip:
      if (c.skips == 0) c.skip_message = xml_escape(record.detail.empty() ? line : record.detail, true);
      ++c.skips;
      break;
    case Verdict::pass:
    case Verdict::info: break;
  }
}

JunitSink::Counts JunitSink::counts_with_open_case() const {
  Counts counts = closed_;
  if (open_) {
    ++counts.tests;
    if (open_->errors > 0) {
      ++counts.errors;
    } else if (open_->failures > 0) {
      ++counts.failures;
    } else if (open_->skips > 0) {
      ++counts.skipped;
    }
    counts.seconds += open_->seconds;
  }
  return counts;
}

// Takes the stack identity from the first record, and the most nodes and ranks per node of any;
// true when the header changed.
bool JunitSink::take_identity(const Record& record) {
  if (!first_) {
    first_ = record;
    first_->samples.clear();  // only the identity is kept
    return true;
  }
  if (record.labels.nodes > first_->labels.nodes || record.labels.ranks_per_node > first_->labels.ranks_per_node) {
    // The job spans the most nodes and ranks per node any of its cases did (a sub-world case
    // says only its own ranks: results/SCHEMA.md), as compare's job_stacks reads it.
    first_->labels.nodes = std::max(first_->labels.nodes, record.labels.nodes);
    first_->labels.ranks_per_node = std::max(first_->labels.ranks_per_node, record.labels.ranks_per_node);
    return true;
  }
  return false;
}

// Closes the open case when the record belongs to another and opens the record's; true when it
// opened one.
bool JunitSink::enter_case(const Record& record) {
  if (open_ && open_->suite == record.suite && open_->case_id == record.case_id && open_->repetition == record.repetition) {
    return false;
  }
  if (open_) {
    closed_ = counts_with_open_case();  // the open case is final: it stays in the file as written
    closed_end_ = case_end_;
  }
  open_.emplace(OpenCase{});  // not emplace(): clang checks OpenCase{} before JunitSink is complete
  open_->suite = record.suite;
  open_->case_id = record.case_id;
  open_->repetition = record.repetition;
  case_start_ = last_record_;  // the previous case ended with its last record
  return true;
}

// Writes `text` at `at`, never ending before `old_size`: spaces after the trailer instead of a
// truncation, so there is no moment when the old end lies past the new trailer. A write the disk
// refuses part-way is taken back: `undo` (what was there, from `at` to `old_size`) is put back.
// Returns what was written.
std::string JunitSink::write_or_take_back(std::string text, int64_t at, const std::string& undo, int64_t old_size) {
  const int64_t end = at + static_cast<int64_t>(text.size());
  if (end < old_size) text.append(static_cast<size_t>(old_size - end), ' ');
  try {
    pwrite_all(text, at);
  } catch (const Error& e) {
    // Overwriting bytes the file already had needs no new space: the old document comes back whole.
    const bool restored = [&] {
      try {
        pwrite_all(undo, at);
        return ::ftruncate(fd_, old_size) == 0;
      } catch (const Error&) {
        return false;
      }
    }();
    throw Error(Error::Kind::io, std::string(e.what()) + (restored ? "; the file is left as it was after the previous record"
                                                                   : "; the file could not be restored"));
  }
  return text;
}

void JunitSink::write(const Record& record) {
  if (fd_ < 0) throw Error(Error::Kind::io, "JUnit file '" + path_ + "' is closed");
  // Everything a write changes, to put back when the file cannot take the record: all of it
  // bounded (the open case keeps at most kVerdictLines lines of each verdict body).
  const struct {
    std::optional<Record> first;
    std::optional<OpenCase> open;
    Counts closed;
    std::string header_text;
    int64_t header_size;
    std::vector<int64_t> counts_at;
    int64_t closed_end, time_at, tail_at;
    std::string tail_text;
    int64_t case_end, file_size;
    std::chrono::steady_clock::time_point case_start, last_record;
  } saved{first_,   open_,    closed_,    header_text_, header_size_, counts_at_,  closed_end_,
          time_at_, tail_at_, tail_text_, case_end_,    file_size_,   case_start_, last_record_};
  const bool rewrite_header = take_identity(record);
  const bool new_case = enter_case(record);
  // Where the new text goes, in the file as it is: after the closed cases, or where TAIL began.
  const int64_t at = new_case ? closed_end_ : tail_at_;
  const auto now = std::chrono::steady_clock::now();
  // A case's time: from the end of the previous case to its latest record.
  open_->seconds = std::chrono::duration<double>(now - case_start_).count();
  last_record_ = now;
  const std::string line = describe(record);
  const std::string escaped = xml_escape(line, false);
  add_verdict(record, line, escaped);
  try {
    // The new text: the start tag and <system-out> for a new case, the record's line, TAIL.
    std::string piece;
    size_t time_in_piece = 0;
    if (new_case) {
      piece = render_start(record);
      time_in_piece = piece.size();
      piece += render_time(open_->seconds) + ">\n      <system-out>";
    }
    piece += escaped;
    piece += '\n';
    const size_t tail_in_piece = piece.size();
    const std::string tail = render_tail(*open_);
    piece += tail;
    int64_t shift = 0;  // how far the cases move with a grown header
    std::string text;
    if (rewrite_header) {
      // The header (stack identity) changed length: the cases move with it. They are read back
      // from the file rather than kept in memory.
      const std::string body = read_back(saved.header_size, saved.file_size - saved.header_size);
      const std::string header = render_header(counts_with_open_case());
      text = write_or_take_back(header + body.substr(0, static_cast<size_t>(at - saved.header_size)) + piece, 0,
                                saved.header_text + body, saved.file_size);
      shift = static_cast<int64_t>(header.size()) - saved.header_size;
      header_text_ = header;
      header_size_ = static_cast<int64_t>(header.size());
      closed_end_ += shift;
      const size_t first = header.find(" tests=\"");
      counts_at_ = {static_cast<int64_t>(first), static_cast<int64_t>(header.find(" tests=\"", first + 1))};
    } else {
      text = write_or_take_back(piece, at, saved.tail_text.substr(static_cast<size_t>(at - saved.tail_at)), saved.file_size);
    }
    file_size_ = (rewrite_header ? 0 : at) + static_cast<int64_t>(text.size());
    const int64_t piece_at = at + shift;
    time_at_ = new_case ? piece_at + static_cast<int64_t>(time_in_piece) : time_at_ + shift;
    tail_at_ = piece_at + static_cast<int64_t>(tail_in_piece);
    tail_text_ = text.substr(text.size() - static_cast<size_t>(file_size_ - tail_at_));
    case_end_ = tail_at_ + static_cast<int64_t>(tail.size() - kTrailer.size());
  } catch (const Error&) {
    first_ = saved.first;
    open_ = saved.open;
    closed_ = saved.closed;
    header_text_ = saved.header_text;
    header_size_ = saved.header_size;
    counts_at_ = saved.counts_at;
    closed_end_ = saved.closed_end;
    time_at_ = saved.time_at;
    tail_at_ = saved.tail_at;
    tail_text_ = saved.tail_text;
    case_end_ = saved.case_end;
    file_size_ = saved.file_size;
    case_start_ = saved.case_start;
    last_record_ = saved.last_record;
    throw;
  }
  // The case's time and the counts last, in place: a kill between these writes leaves a valid
  // document whose time and counts lag by this one record.
  if (!new_case) pwrite_all(render_time(open_->seconds), time_at_);
  if (!rewrite_header) {
    const std::string region = render_counts(counts_with_open_case());
    for (const int64_t at_counts : counts_at_) pwrite_all(region, at_counts);
  }
}

std::string JunitSink::read_back(int64_t offset, int64_t size) const {
  std::string text(static_cast<size_t>(size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t got = ::pread(fd_, text.data() + done, text.size() - done, static_cast<off_t>(offset) + static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw_io("cannot read back JUnit file", path_, got < 0 ? std::strerror(errno) : "shorter than written");
    done += static_cast<size_t>(got);
  }
  return text;
}

void JunitSink::close() {
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw_io("cannot close JUnit file", path_, std::strerror(errno));
}

void JunitSink::pwrite_all(std::string_view text, int64_t offset) {
  while (!text.empty()) {
    const ssize_t written = ::pwrite(fd_, text.data(), text.size(), static_cast<off_t>(offset));
    if (written < 0) {
      if (errno == EINTR) continue;
      throw_io("cannot write JUnit file", path_, std::strerror(errno));
    }
    text.remove_prefix(static_cast<size_t>(written));
    offset += written;
    bytes_written_ += written;
  }
}

}  // namespace dts
