#pragma once
// The JSON Lines run log: one record per line, written by rank 0 only.
//
// What "atomic" means for a file that grows during the run (docs/reliability.md):
//   - the file is created under a temporary name next to the final one (".NAME.tmp",
//     io::temporary_name, the same as checkpoints) and
//     renamed to NAME when the first record is written, i.e. once setup has succeeded on
//     every rank: a run that fails in setup leaves a previous log at NAME intact;
//   - each record is written and flushed as one complete line, so a run that dies leaves
//     every record before the failure (only a crash of the machine itself can cut the last
//     line short; readers should ignore an incomplete last line);
//   - the file is fsync'ed when the run ends;
//   - a full disk or an unwritable directory is an Error(kExitOutput) naming the file.
// Numbers are written in the shortest form that reads back to the same double.
#include <cstdio>
#include <string>

#include "mpiddp/io/json_reader.hpp"

namespace mpiddp::io {

class JsonlLog {
 public:
  JsonlLog() = default;  // disabled: write() does nothing
  // Creates the temporary file; an Error(kExitOutput) names the path when that fails.
  explicit JsonlLog(const std::string& path);
  ~JsonlLog();  // fsyncs a published log; removes an unpublished temporary file
  JsonlLog(const JsonlLog&) = delete;
  JsonlLog& operator=(const JsonlLog&) = delete;

  bool enabled() const { return file_ != nullptr; }
  // The first write renames the temporary file to the final path.
  void write(const Json& record);
  // The same for a record already written out as one line of JSON (without its newline),
  // carried on verbatim from another log (checkpoint/restart.hpp).
  void write_line(const std::string& line);

 private:
  std::string path_, temporary_;
  std::FILE* file_ = nullptr;
  bool published_ = false;
};

}  // namespace mpiddp::io
