// check_outputs: stat(2) for the file type and identity; lstat(2) and readlink(2), one name at a
// time, for where a path that does not exist yet will be created. Callers run it before they
// open anything (results/output_paths.h).
#include "results/output_paths.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <utility>

#include "core/error.h"

namespace dts {

namespace {

const char* type_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

std::string quoted(const NamedPath& p) { return p.flag + " '" + p.path + "'"; }

// Linux's own bound on the links of one lookup (MAXSYMLINKS): where open(2) would fail with ELOOP,
// the check fails too, and a loop of links ends after this many hops instead of running on.
constexpr int kMaxSymlinkHops = 40;

void push_components(std::deque<std::string>& pending, const std::filesystem::path& path) {
  std::vector<std::string> parts;
  for (const std::filesystem::path& part : path.relative_path()) parts.push_back(part.string());
  pending.insert(pending.begin(), parts.begin(), parts.end());
}

}  // namespace

std::filesystem::path resolved_path(const NamedPath& named) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // getcwd(3) names the real folder, without links: the walk below keeps `now` free of them.
  fs::path now = fs::path(named.path).is_absolute() ? fs::path("/") : fs::current_path(ec);
  if (ec) throw Error(Error::Kind::io, "cannot check " + quoted(named) + ": " + ec.message());
  std::deque<std::string> pending;
  push_components(pending, named.path);
  int hops = 0;
  while (!pending.empty()) {
    const std::string part = std::move(pending.front());
    pending.pop_front();
    if (part.empty() || part == ".") continue;
    // `now` holds no link, so its parent is the folder ".." reaches (a link's parent need not be).
    if (part == "..") {
      now = now.parent_path();
      continue;
    }
    fs::path next = now / part;
    struct stat st {};
    // A name that does not exist (yet) is kept: the folders a writer creates for it are plain ones.
    if (::lstat(next.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) {
      now = std::move(next);
      continue;
    }
    if (++hops > kMaxSymlinkHops) {
      throw Error(Error::Kind::invalid_argument, "cannot check " + quoted(named) + ": " + std::strerror(ELOOP) +
                                                     " (more than " + std::to_string(kMaxSymlinkHops) + ", a loop?)");
    }
    const fs::path target = fs::read_symlink(next, ec);
    if (ec) throw Error(Error::Kind::io, "cannot check " + quoted(named) + ": " + ec.message());
    // The target, dangling or not, replaces the link: relative to the link's folder, or from "/".
    if (target.is_absolute()) now = "/";
    push_components(pending, target);
  }
  return now;
}

namespace {

// What makes two paths one file: the deepest existing file or folder on the path each resolves
// to, by inode (a hard link, or a bind mount of the folder, is the same one), and the names below
// it that are still to be created (none where the file exists).
struct FileIdentity {
  std::pair<dev_t, ino_t> existing{};
  std::filesystem::path below_existing;
  bool operator==(const FileIdentity& other) const = default;
};

FileIdentity identity_of(const NamedPath& named) {
  struct stat st {};
  // Where the kernel finds a file, its inode is the answer (so too for /proc's links, which name
  // no path); else the walk below finds where it will be, or names a loop.
  if (::stat(named.path.c_str(), &st) == 0) return {std::make_pair(st.st_dev, st.st_ino), {}};
  std::filesystem::path path = resolved_path(named);
  std::filesystem::path below;
  // `path` is absolute and free of links, "." and "..": walking up by name ends at "/" at the latest.
  while (::stat(path.c_str(), &st) != 0) {
    if (!path.has_relative_path()) {
      throw Error(Error::Kind::io, "cannot check " + quoted(named) + ": " + std::strerror(errno));
    }
    below = below.empty() ? path.filename() : path.filename() / below;
    path = path.parent_path();
  }
  return {std::make_pair(st.st_dev, st.st_ino), below};
}

}  // namespace

void check_output_path(const NamedPath& output) {
  if (output.path.empty()) return;
  struct stat st {};
  if (::stat(output.path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return;  // to be created (or its open names the reason)
    throw Error(Error::Kind::io, "cannot check " + quoted(output) + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    throw Error(Error::Kind::io,
                quoted(output) + " is " + type_of(st.st_mode) + ", not a regular file: refusing to write there");
  }
}

int open_output_file(const NamedPath& output, int access) {
  check_output_path(output);  // the clear message for the common case, before open() touches it
  const int fd = ::open(output.path.c_str(), access | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0) throw Error(Error::Kind::io, "cannot open " + quoted(output) + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const mode_t mode = st.st_mode;
    ::close(fd);
    throw Error(Error::Kind::io,
                quoted(output) + " is " + type_of(mode) + ", not a regular file: refusing to write there");
  }
  // Regular files ignore O_NONBLOCK; cleared anyway so the descriptor is an ordinary one.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

void check_outputs(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs) {
  std::vector<std::pair<const NamedPath*, FileIdentity>> seen;
  for (const NamedPath& input : inputs) {
    if (!input.path.empty()) seen.emplace_back(&input, identity_of(input));
  }
  const size_t input_count = seen.size();
  for (const NamedPath& output : outputs) {
    if (output.path.empty()) continue;
    const FileIdentity id = identity_of(output);  // first: a loop of links is named as a loop
    check_output_path(output);
    for (size_t i = 0; i < seen.size(); ++i) {
      if (!(seen[i].second == id)) continue;
      const bool is_input = i < input_count;
      throw Error(Error::Kind::invalid_argument,
                  quoted(output) + " is the same file as " + quoted(*seen[i].first) +
                      (is_input ? ": refusing to overwrite an input" : ": each output needs a file of its own"));
    }
    seen.emplace_back(&output, id);
  }
}

void replace_file_atomically(const NamedPath& output, std::string_view text) {
  check_output_path(output);
  const std::filesystem::path parent = std::filesystem::path(output.path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) throw Error(Error::Kind::io, "cannot create the folder of " + quoted(output) + ": " + ec.message());
  }
  // A name of its own per call (pid and a counter): two writers never share a temporary file.
  static std::atomic<unsigned> serial{0};
  const std::string temporary =
      output.path + "." + std::to_string(::getpid()) + "-" + std::to_string(serial.fetch_add(1)) + ".tmp";
  // 0644 before umask: results are read by others (CI, dashboards, node_exporter).
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(Error::Kind::io, "cannot write " + quoted(output) + ": " + std::strerror(errno));
  const auto fail = [&](const char* what, int error) {
    ::close(fd);
    ::unlink(temporary.c_str());
    throw Error(Error::Kind::io, std::string(what) + " " + quoted(output) + ": " + std::strerror(error) +
                                     " (left as it was)");
  };
  while (!text.empty()) {
    const ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      fail("cannot write", errno);
    }
    text.remove_prefix(static_cast<size_t>(written));
  }
  // fsync before the rename: after a crash the name points at the whole new text or the old file,
  // never at an empty one (ext4 and xfs may commit the rename before the data otherwise).
  if (::fsync(fd) != 0) fail("cannot write", errno);
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    throw Error(Error::Kind::io, "cannot write " + quoted(output) + ": " + std::strerror(error) + " (left as it was)");
  }
  if (::rename(temporary.c_str(), output.path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    throw Error(Error::Kind::io, "cannot replace " + quoted(output) + ": " + std::strerror(error) + " (left as it was)");
  }
  // The rename is durable once the folder is synced; best effort (the file is whole either way).
  const std::string folder = parent.empty() ? "." : parent.string();
  if (const int dir_fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

}  // namespace dts
