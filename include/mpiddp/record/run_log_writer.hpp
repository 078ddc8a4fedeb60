#pragma once
// Where rank 0's records go: the JSON Lines log (log.path, io/jsonl_log.hpp) and, beside it,
// the same step and evaluation records as CSV (log.csv, csv_log.hpp) and as TensorBoard
// event files (log.tensorboard, tensorboard_log.hpp). The trainer writes each record once,
// here; the other ranks hold a RunLogWriter that writes nothing.
#include <memory>
#include <string>

#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/io/jsonl_log.hpp"

namespace mpiddp::record {

class CsvLog;
class TensorboardLog;

struct RunLogPaths {
  std::string jsonl;        // log.path; "": none
  std::string csv;          // log.csv; "": none
  std::string tensorboard;  // log.tensorboard, a directory; "": none
};

class RunLogWriter {
 public:
  RunLogWriter();  // writes nothing (the ranks other than 0)
  // Creates every configured file (and the TensorBoard directory) now, before the first
  // step: an Error(kExitOutput) names the one that cannot be created.
  explicit RunLogWriter(const RunLogPaths& paths);
  ~RunLogWriter();
  RunLogWriter(const RunLogWriter&) = delete;
  RunLogWriter& operator=(const RunLogWriter&) = delete;

  // Whether the JSON Lines log is written (the one a restart carries on, restart.hpp).
  bool jsonl_enabled() const { return jsonl_->enabled(); }
  void write(const io::Json& record);
  // A record of a previous attempt, carried on verbatim into the JSON Lines log, and into
  // the CSV file, which a restarted attempt writes anew. TensorBoard keeps the previous
  // attempt's event file beside the new one, so it is not written there again.
  void write_carried_line(const std::string& line);

 private:
  std::unique_ptr<io::JsonlLog> jsonl_;  // disabled when log.path is ""
  std::unique_ptr<CsvLog> csv_;
  std::unique_ptr<TensorboardLog> tensorboard_;
};

}  // namespace mpiddp::record
