// Fuzz target: parse_command_line (harness/cli.h), dtsuite's command line with every suite's
// flags. The input is the arguments after the program name, one per line (or NUL-separated);
// text after the first "\0\0" is the profile that `--profile` reads, so a profile's [run] table
// meets the command line too. Every input gives a Command or UsageError on one line; nothing may
// exit() (--help and --version return a Command), throw anything else or crash.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "harness/cli.h"

namespace {

// The file `--profile` names, whatever path the input gave: the fuzzer must not read the disk.
std::string& profile_path() {
  static std::string path;
  return path;
}

void remove_profile_directory() {
  std::error_code ignored;
  std::filesystem::remove_all(std::filesystem::path(profile_path()).parent_path(), ignored);
}

void write_profile(std::string_view text) {
  std::ofstream out(profile_path(), std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/dtsuite-fuzz-cli-XXXXXX";
  if (!::mkdtemp(dir.data())) {
    std::perror("fuzz_cli: mkdtemp");
    std::abort();
  }
  profile_path() = dir + "/profile.toml";
  std::atexit(remove_profile_directory);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string_view profile;
  if (const size_t split = input.find(std::string_view("\0\0", 2)); split != std::string_view::npos) {
    profile = input.substr(split + 2);
    input = input.substr(0, split);
  }
  std::vector<std::string> args{"dtsuite"};
  if (!input.empty()) {
    size_t start = 0;
    for (;;) {
      const size_t end = input.find_first_of(std::string_view("\n\0", 2), start);
      args.emplace_back(input.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
      if (end == std::string_view::npos) break;
      start = end + 1;
    }
  }
  bool reads_profile = false;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--profile" && i + 1 < args.size()) {
      args[++i] = profile_path();
      reads_profile = true;
    } else if (args[i].rfind("--profile=", 0) == 0) {
      args[i] = "--profile=" + profile_path();
      reads_profile = true;
    }
  }
  if (reads_profile) write_profile(profile);

  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  try {
    const dts::Command command = dts::parse_command_line(static_cast<int>(args.size()), argv.data());
    DTS_FUZZ_CHECK(command.kind != dts::Command::Kind::help || !command.help_text.empty(), "help without text");
    DTS_FUZZ_CHECK(command.kind != dts::Command::Kind::run || !command.run.suites.empty(), "run without suites");
  } catch (const dts::UsageError& e) {
    DTS_FUZZ_CHECK(*e.what() != '\0', "an empty usage error");
    dts::fuzz::check_one_line(e.what());
  }
  return 0;
}
