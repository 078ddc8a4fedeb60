#pragma once
// Writing a file so that a reader never sees it half-written: the bytes go to a temporary
// name in the same directory, are flushed and fsync'd, and only then renamed over the final
// name (rename is atomic within a file system); the directory is fsync'd so the rename
// itself survives a crash. A process killed at any moment leaves either the old file (or
// none) or the complete new one, plus at worst a stray temporary file.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace mpiddp::io {

// One piece of the file's contents, written in order.
struct ByteSpan {
  const void* data;
  size_t bytes;
};

// The temporary name used while `path` is written: ".NAME.tmp" in the same directory.
// Readers that list a directory must skip names of this form.
std::string temporary_name(const std::string& path);

// Writes the pieces to `path` atomically. An Error(kExitOutput) names the file and the
// failing call; the temporary file is removed on failure. before_rename, when given, runs
// once the temporary file is complete and synced, just before the rename: the crash tests
// kill the process there (debug.fail_kind "kill_writing_best", config/fault.hpp).
void write_file_atomically(const std::string& path, const std::vector<ByteSpan>& pieces,
                           const std::function<void()>& before_rename = nullptr);

// Writes what `produce` appends, piece by piece, atomically as above: a file larger than
// memory can be written one piece at a time. An error the producer throws removes the
// temporary file and passes on.
using AppendBytes = std::function<void(const void* data, size_t bytes)>;
void write_file_atomically(const std::string& path, const std::function<void(const AppendBytes&)>& produce,
                           const std::function<void()>& before_rename = nullptr);

// Reads a whole file. An Error with `code` names the file, and what it is for (`role`, such
// as "sampler.order"), when it cannot be read.
std::vector<char> read_whole_file(const std::string& path, int code, const std::string& role = "");

}  // namespace mpiddp::io
