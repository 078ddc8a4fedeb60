#include "mpiddp/io/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "mpiddp/core/error.hpp"

namespace mpiddp::io {

namespace {

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error(kExitOutput, "cannot write '" + path + "': " + what + ": " + std::strerror(errno) +
                               " (is the directory writable and the disk not full?)");
}

}  // namespace

std::string temporary_name(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return dir + "." + base + ".tmp";
}

void write_file_atomically(const std::string& path, const std::vector<ByteSpan>& pieces,
                           const std::function<void()>& before_rename) {
  write_file_atomically(
      path, [&](const AppendBytes& append) {
        for (const auto& piece : pieces) append(piece.data, piece.bytes);
      },
      before_rename);
}

void write_file_atomically(const std::string& path, const std::function<void(const AppendBytes&)>& produce,
                           const std::function<void()>& before_rename) {
  const std::string temp = temporary_name(path);
  std::FILE* file = std::fopen(temp.c_str(), "wb");
  if (!file) fail(temp, "fopen");
  bool ok = true;
  try {
    produce([&](const void* data, size_t bytes) { ok = ok && std::fwrite(data, 1, bytes, file) == bytes; });
  } catch (...) {  // the producer's own error (a part it reads is damaged, say): no stray file
    std::fclose(file);
    std::remove(temp.c_str());
    throw;
  }
  ok = ok && std::fflush(file) == 0;
  ok = ok && ::fsync(fileno(file)) == 0;  // the data is on disk before the rename publishes it
  const int saved_errno = errno;
  ok = (std::fclose(file) == 0) && ok;
  if (!ok) {
    errno = saved_errno;
    std::remove(temp.c_str());
    fail(temp, "write/fflush/fsync");
  }
  if (before_rename) before_rename();
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int rename_errno = errno;
    std::remove(temp.c_str());
    errno = rename_errno;
    fail(path, "rename from " + temp);
  }
  // fsync the directory so the new name itself is durable.
  const std::string dir = directory_of(path);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) fail(dir, "open directory for fsync");
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced) fail(dir, "fsync directory");
}

std::vector<char> read_whole_file(const std::string& path, int code, const std::string& role) {
  const std::string prefix = role.empty() ? "" : role + ": ";
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    throw Error(static_cast<ExitCode>(code),
                prefix + "cannot open '" + path + "': " + std::strerror(errno));
  const std::streamsize size = in.tellg();
  std::vector<char> bytes(static_cast<size_t>(size < 0 ? 0 : size));
  in.seekg(0);
  if (size < 0 || !in.read(bytes.data(), size))
    throw Error(static_cast<ExitCode>(code), prefix + "cannot read '" + path + "' (is it a directory?)");
  return bytes;
}

}  // namespace mpiddp::io
