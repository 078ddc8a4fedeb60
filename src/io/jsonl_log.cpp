#include "mpiddp/io/jsonl_log.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mpiddp/core/error.hpp"
#include "mpiddp/io/atomic_file.hpp"

namespace mpiddp::io {

namespace {

[[noreturn]] void fail_log_file(const std::string& what, const std::string& path) {
  throw Error(kExitOutput, "cannot " + what + " the log file '" + path + "': " +
                               std::strerror(errno) +
                               " (does its directory exist, is it writable, is the disk full?)");
}

}  // namespace

JsonlLog::JsonlLog(const std::string& path) : path_(path), temporary_(temporary_name(path)) {
  if (path.empty() || path.back() == '/') {
    errno = EISDIR;
    fail_log_file("create", path);
  }
  file_ = std::fopen(temporary_.c_str(), "w");
  if (!file_) fail_log_file("create", temporary_);
}

JsonlLog::~JsonlLog() {
  if (!file_) return;
  if (published_) {
    std::fflush(file_);
    ::fsync(fileno(file_));  // the end of a run is durable; failures were reported by write()
    std::fclose(file_);
  } else {
    std::fclose(file_);
    std::remove(temporary_.c_str());
  }
}

void JsonlLog::write(const Json& record) {
  if (file_) write_line(record.dump());
}

void JsonlLog::write_line(const std::string& record) {
  if (!file_) return;
  if (!published_) {
    if (std::rename(temporary_.c_str(), path_.c_str()) != 0) fail_log_file("create", path_);
    published_ = true;
  }
  const std::string line = record + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    fail_log_file("write", path_);
}

}  // namespace mpiddp::io
