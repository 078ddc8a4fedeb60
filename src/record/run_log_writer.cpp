#include "mpiddp/record/run_log_writer.hpp"

#include "mpiddp/record/csv_log.hpp"
#include "mpiddp/record/tensorboard_log.hpp"

namespace mpiddp::record {

RunLogWriter::RunLogWriter() : jsonl_(std::make_unique<io::JsonlLog>()) {}

RunLogWriter::RunLogWriter(const RunLogPaths& paths)
    : jsonl_(paths.jsonl.empty() ? std::make_unique<io::JsonlLog>() : std::make_unique<io::JsonlLog>(paths.jsonl)) {
  if (!paths.csv.empty()) csv_ = std::make_unique<CsvLog>(paths.csv);
  if (!paths.tensorboard.empty()) tensorboard_ = std::make_unique<TensorboardLog>(paths.tensorboard);
}

RunLogWriter::~RunLogWriter() = default;

void RunLogWriter::write(const io::Json& record) {
  jsonl_->write(record);
  if (csv_) csv_->write(record);
  if (tensorboard_) tensorboard_->write(record);
}

void RunLogWriter::write_carried_line(const std::string& line) {
  jsonl_->write_line(line);
  if (!csv_) return;
  const io::Json record = io::Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (record.is_object()) csv_->write(record);
}

}  // namespace mpiddp::record
