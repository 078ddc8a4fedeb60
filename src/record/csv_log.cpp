#include "mpiddp/record/csv_log.hpp"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "mpiddp/core/error.hpp"

namespace mpiddp::record {

namespace {

[[noreturn]] void csv_fail(const std::string& what, const std::string& path) {
  throw Error(kExitOutput, "cannot " + what + " the CSV log '" + path + "': " + std::strerror(errno) +
                               " (does its directory exist, is it writable, is the disk full?)");
}

// A text cell, quoted (RFC 4180) only when it holds a comma, a quote or a line break.
std::string csv_quoted(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

// A field's cell. null is how the JSON log carries a NaN (a record read back from it).
std::string csv_cell(const io::Json& value) {
  if (value.is_null()) return "nan";
  if (value.is_number_float()) {
    const double x = value.get<double>();
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  }
  if (value.is_number()) return value.dump();  // shortest round-trip form, as the JSON log
  if (value.is_string()) return csv_quoted(value.get_ref<const std::string&>());
  return csv_quoted(value.dump());
}

bool csv_logged_kind(const io::Json& record) {
  const auto kind = record.find("kind");
  if (kind == record.end() || !kind->is_string()) return false;
  const auto& k = kind->get_ref<const std::string&>();
  return k == "step" || k == "eval" || k == "epoch";
}

}  // namespace

CsvLog::CsvLog(const std::string& path) : path_(path) {
  if (path.empty() || path.back() == '/') {
    errno = EISDIR;
    csv_fail("create", path);
  }
  file_ = std::fopen(path.c_str(), "w");
  if (!file_) csv_fail("create", path);
  std::string header;
  for (const char* column : kCsvColumns) header += std::string(header.empty() ? "" : ",") + column;
  try {
    write_line(header);
  } catch (...) {
    std::fclose(file_);  // the destructor does not run for a constructor that throws
    throw;
  }
}

CsvLog::~CsvLog() {
  if (!file_) return;
  std::fflush(file_);
  ::fsync(fileno(file_));  // the end of a run is durable; failures were reported by write()
  std::fclose(file_);
}

void CsvLog::write(const io::Json& record) {
  if (!csv_logged_kind(record)) return;
  std::string row;
  for (size_t c = 0; c < kCsvColumns.size(); ++c) {
    if (c > 0) row += ',';
    const auto field = record.find(kCsvColumns[c]);
    if (field != record.end()) row += csv_cell(*field);
  }
  write_line(row);
}

void CsvLog::write_line(const std::string& text) {
  const std::string line = text + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    csv_fail("write", path_);
}

}  // namespace mpiddp::record
