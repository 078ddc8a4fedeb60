#pragma once
// The CSV run log: one row per step, eval and epoch record of the run (the records of the
// JSON Lines log, docs/log-format.md), for a spreadsheet or pandas. Written by rank 0 only.
//
// The columns are fixed, in the order of kCsvColumns; a row's cell is empty where its record
// lacks the field (an epoch row has no step, a step row no eval_loss), and a record's other
// fields are left out, so every row of every run has the same columns. Numbers are written
// as the JSON Lines log writes them, in the shortest form that reads back to the same double;
// NaN and the infinities (null in the JSON log) as nan, inf and -inf, which pandas reads.
//
// What survives a failure (as the JSON Lines log, docs/reliability.md):
//   - the file is created, with its header row, by the constructor, which the trainer calls
//     before the first step, so a bad path fails before any work is done;
//   - each row is written and flushed whole, so a run that dies keeps every row before it;
//   - the file is fsync'ed when the run ends;
//   - a full disk or an unwritable directory is an Error(kExitOutput) naming the file.
#include <array>
#include <cstdio>
#include <string>

#include "mpiddp/io/json_reader.hpp"

namespace mpiddp::record {

// The header row, and the record field each column holds.
// eval_bpb, appended (the earlier columns keep their places): text models' bits per byte.
inline constexpr std::array<const char*, 13> kCsvColumns = {
    "kind",          "epoch",         "step",       "loss",   "lr",           "grad_norm", "eval_loss",
    "eval_accuracy", "eval_loss_ema", "train_loss", "time_s", "samples_per_s", "eval_bpb"};

class CsvLog {
 public:
  // Creates (or truncates) the file and writes the header row; an Error(kExitOutput) names
  // the path and the reason when that fails.
  explicit CsvLog(const std::string& path);
  ~CsvLog();  // fsyncs the file
  CsvLog(const CsvLog&) = delete;
  CsvLog& operator=(const CsvLog&) = delete;

  // Appends the record's row if its kind is step, eval or epoch; ignores other records.
  void write(const io::Json& record);

 private:
  void write_line(const std::string& line);

  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace mpiddp::record
