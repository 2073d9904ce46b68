// Fuzz target: every reader of a trace (trace/): the JSON-lines reader and checker, and the
// importers of PyTorch execution traces, Kineto traces and Chakra traces, each given the same
// bytes as one rank's file. Every input is read within its bounds or refused with one line
// (Error{invalid_argument}, or Error{io} for what zlib or the file system refuse); anything else
// (another exception, a crash, a hang, memory past the bounds: -rss_limit_mb) is a bug. The
// readers take files (they stream), so each input is written to a file of this process first.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "fuzz/fuzz_check.h"
#include "trace/check.h"
#include "trace/import_chakra.h"
#include "trace/import_pytorch.h"
#include "trace/trace.h"

namespace {

namespace fs = std::filesystem;

// Takes the ops and checks what every reader promises of them.
class Checking final : public dts::trace::TraceSink {
 public:
  void header(const dts::trace::Header& h) override {
    DTS_FUZZ_CHECK(h.world >= 1 && h.rank >= 0 && h.rank < h.world, "a header outside its world");
  }
  void group(const dts::trace::Group& g) override { DTS_FUZZ_CHECK(!g.ranks.empty(), "an empty group"); }
  void op(const dts::trace::Op& op) override {
    DTS_FUZZ_CHECK(op.seq == next_++, "ops out of order");
    DTS_FUZZ_CHECK(op.count >= 0, "a negative count");
  }

 private:
  int64_t next_ = 0;
};

template <class Read>
void refused_in_one_line(Read&& read) {
  try {
    read();
  } catch (const dts::Error& e) {
    DTS_FUZZ_CHECK(e.kind() == dts::Error::Kind::invalid_argument || e.kind() == dts::Error::Kind::io,
                   "bad bytes are neither invalid_argument nor io");
    dts::fuzz::check_one_line(e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fs::path dir = fs::temp_directory_path() / ("dts_fuzz_trace_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "rank-0.jsonl";
  {
    std::FILE* out = std::fopen(file.c_str(), "wb");
    DTS_FUZZ_CHECK(out != nullptr, "cannot write the input's file");
    std::fwrite(data, 1, size, out);
    std::fclose(out);
  }
  refused_in_one_line([&] {
    dts::trace::TraceReader reader(file.string());
    dts::trace::Group g;
    dts::trace::Op op;
    bool is_op = false;
    int64_t seq = 0;
    while (reader.next(g, op, is_op)) {
      if (!is_op) continue;
      DTS_FUZZ_CHECK(op.seq == seq++, "the reader let a seq out of order through");
      DTS_FUZZ_CHECK(op.count >= 0 && op.count <= (int64_t{1} << 50), "a count past its bound");
    }
  });
  refused_in_one_line([&] { dts::trace::check_trace(dir.string()); });
  dts::trace::ImportOptions options;
  options.rank = 0;
  options.world = 2;
  refused_in_one_line([&] {
    Checking sink;
    dts::trace::import_chakra(file.string(), sink, options);
  });
  refused_in_one_line([&] {
    Checking sink;
    dts::trace::import_pytorch_et(file.string(), sink, options);
  });
  refused_in_one_line([&] {
    Checking sink;
    dts::trace::import_kineto(file.string(), sink, options);
  });
  return 0;
}
