#include "mpiddp/io/jsonl_log.hpp"

#include <cerrno>
#include <cstring>

#include "mpiddp/core/error.hpp"

namespace mpiddp::io {

JsonlLog::JsonlLog(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "w");
  if (!file_)
    throw Error(kExitOutput, "cannot create the log file '" + path + "': " + std::strerror(errno) +
                                 " (does its directory exist and is it writable?)");
}

JsonlLog::~JsonlLog() {
  if (file_) std::fclose(file_);
}

void JsonlLog::write(const Json& record) {
  if (!file_) return;
  const std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    throw Error(kExitOutput, "cannot write the log file '" + path_ + "': " + std::strerror(errno));
}

}  // namespace mpiddp::io
