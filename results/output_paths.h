// Where a command may write: every output of `run`, `report` and `compare` goes through these
// checks before anything is written, so an output never replaces a device, FIFO or socket, never
// overwrites one of the command's inputs and never shares a file with another output of it.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace dts {

// A path as the user named it: the flag ("--csv", "-o", "the baseline") for the message, and
// the path itself; an empty path is "not given" and is left out of every check.
struct NamedPath {
  std::string flag;
  std::string path;
};

// Throws Error{io} when `path` exists (following symbolic links) and is not a regular file:
// writing there would feed a device or FIFO, or rename a file over it.
void check_output_path(const NamedPath& output);

// open(2) of an output for `access` (O_WRONLY or O_RDWR), created 0644 before umask and truncated,
// refusing what check_output_path refuses even when the path changed since the check: O_NONBLOCK
// so a FIFO without a reader cannot hang the open, then fstat. Throws Error{io} naming the path
// and the reason; returns the descriptor.
int open_output_file(const NamedPath& output, int access);

// Where opening `path` lands: an absolute path without links, "." or "..". Symbolic links are
// followed one name at a time as the kernel does, dangling ones included (a target is read
// relative to the link's folder), and ".." after a linked folder leaves the folder linked to.
// Names that do not exist yet are kept as written, ".." among them taken by name, as the plain
// folders a writer creates for them would be. Throws Error{invalid_argument} after 40 links (the
// kernel's ELOOP bound: a loop), Error{io} when the working folder or a link cannot be read.
std::filesystem::path resolved_path(const NamedPath& named);

// The checks of one command, in one place: each output passes check_output_path, no output is
// one of `inputs`, and no two outputs are the same file. "The same" is by the file each path
// resolves to (resolved_path): the inode where it exists (hard links are one file), else the
// inode of the deepest folder that exists and the names below it (q.csv -> p.prom, dangling or
// not, is p.prom; sub/../x.csv with sub -> elsewhere is elsewhere/../x.csv). Throws
// Error{invalid_argument} with one line naming both flags and paths, or a loop of links (Error{io}
// from check_output_path).
void check_outputs(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs);

// Replaces `output` with `text` whole or not at all: the text goes to a new file beside it (same
// folder, so the rename cannot cross file systems; a name that ends in ".tmp", which
// node_exporter's textfile collector ignores), is fsync'd, then renamed over the path. Creates
// missing parent folders. On any failure (a full disk, a read-only folder) the temporary file is
// removed, whatever was at the path is left as it was, and Error{io} names the flag, the path and
// the OS reason. Refuses what check_output_path refuses (the rename would replace a device).
void replace_file_atomically(const NamedPath& output, std::string_view text);

}  // namespace dts
