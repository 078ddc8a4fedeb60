#pragma once
// The JSON Lines run log: one record per line, written by rank 0 only. Each record is
// flushed as it is written, so a run that dies leaves every record before the failure.
// Numbers are written in the shortest form that reads back to the same double.
#include <cstdio>
#include <string>

#include "mpiddp/io/json_reader.hpp"

namespace mpiddp::io {

class JsonlLog {
 public:
  JsonlLog() = default;  // disabled: write() does nothing
  // Creates (truncates) the file; an Error(kExitOutput) names it when that fails.
  explicit JsonlLog(const std::string& path);
  ~JsonlLog();
  JsonlLog(const JsonlLog&) = delete;
  JsonlLog& operator=(const JsonlLog&) = delete;

  bool enabled() const { return file_ != nullptr; }
  void write(const Json& record);

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace mpiddp::io
