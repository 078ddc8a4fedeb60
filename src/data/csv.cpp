#include "mpiddp/data/csv.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <string_view>

#include "mpiddp/core/error.hpp"
#include "mpiddp/data/loaded_array.hpp"

namespace mpiddp::data {

namespace {

// No sane numeric CSV line is this long; a file without newlines must not be read whole
// into one string.
constexpr size_t kMaxLineBytes = 16 << 20;

class LineReader {
 public:
  explicit LineReader(const std::string& path) : path_(path), in_(path, std::ios::binary) {
    if (!in_) throw DataError(path + ": cannot open");
  }
  // The next line without its end-of-line characters; false at the end of the file.
  bool next(std::string& line) {
    line.clear();
    if (in_.peek() == std::char_traits<char>::eof()) return false;
    ++number_;
    char c;
    while (in_.get(c) && c != '\n') {
      if (line.size() >= kMaxLineBytes)
        throw DataError(where() + ": line longer than " + std::to_string(kMaxLineBytes) + " bytes");
      line.push_back(c);
    }
    if (in_.bad()) throw DataError(path_ + ": read failed");
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  }
  std::string where() const { return path_ + ":" + std::to_string(number_); }
  size_t number() const { return number_; }

 private:
  std::string path_;
  std::ifstream in_;
  size_t number_ = 0;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view line, char delimiter) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  for (;;) {
    const size_t end = line.find(delimiter, start);
    fields.push_back(trim(line.substr(start, end == std::string_view::npos ? end : end - start)));
    if (end == std::string_view::npos) return fields;
    start = end + 1;
  }
}

bool is_blank(std::string_view line) { return trim(line).empty(); }

double parse_number(std::string_view field, const LineReader& reader, size_t column) {
  std::string_view text = field;
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);  // from_chars rejects '+'
  double value = 0.0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (field.empty() || error != std::errc() || end != text.data() + text.size())
    throw DataError(reader.where() + ": column " + std::to_string(column) + ": '" +
                    std::string(field) + "' is not a number" +
                    (reader.number() == 1 ? " (if this line names the columns, set \"header\": true)" : ""));
  return value;
}

// Resolves the configured target columns to sorted, distinct 0-based indices.
std::vector<size_t> target_indices(const CsvConfig& config, const std::vector<std::string>& names,
                                   size_t columns) {
  std::vector<size_t> indices;
  for (const CsvColumn& c : config.target_columns) {
    size_t index = 0;
    if (!c.name.empty()) {
      if (names.empty())
        throw DataError(config.path + ": target column \"" + c.name +
                        "\" is given by name, but the file has no header (set \"header\": true)");
      const auto it = std::find(names.begin(), names.end(), c.name);
      if (it == names.end())
        throw DataError(config.path + ": no column named \"" + c.name + "\" in the header");
      index = static_cast<size_t>(it - names.begin());
    } else {
      const Index resolved = c.index < 0 ? c.index + static_cast<Index>(columns) : c.index;
      if (resolved < 0 || resolved >= static_cast<Index>(columns))
        throw DataError(config.path + ": target column " + std::to_string(c.index) +
                        " is outside the file's " + std::to_string(columns) + " columns");
      index = static_cast<size_t>(resolved);
    }
    if (std::find(indices.begin(), indices.end(), index) != indices.end())
      throw DataError(config.path + ": target column " + std::to_string(index) + " is listed twice");
    indices.push_back(index);
  }
  if (indices.size() >= columns)
    throw DataError(config.path + ": every one of the " + std::to_string(columns) +
                    " columns is a target; at least one must remain as a feature");
  if (config.classes > 0 && indices.size() != 1)
    throw DataError(config.path + ": classification needs exactly one target column, got " +
                    std::to_string(indices.size()));
  return indices;
}

std::string unquote(std::string_view s) {
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return std::string(s);
}

}  // namespace

template <typename T>
Dataset<T> load_csv(const CsvConfig& config) {
  LineReader reader(config.path);
  std::string line;
  std::vector<std::string> names;
  size_t columns = 0;
  std::vector<size_t> targets;
  std::vector<int> target_slot;  // (columns) position among the targets, or -1 for a feature
  std::vector<T> row_targets;    // (targets) one line's targets, in target_columns order
  auto x = std::make_shared<std::vector<T>>();
  auto y = std::make_shared<std::vector<T>>();
  auto labels = std::make_shared<std::vector<int32_t>>();
  Index samples = 0;

  auto set_columns = [&](size_t n) {
    columns = n;
    targets = target_indices(config, names, columns);
    target_slot.assign(columns, -1);
    for (size_t k = 0; k < targets.size(); ++k) target_slot[targets[k]] = static_cast<int>(k);
    row_targets.assign(targets.size(), T(0));
  };

  while (reader.next(line)) {
    if (is_blank(line)) continue;
    const auto fields = split(line, config.delimiter);
    if (config.header && names.empty()) {
      for (auto f : fields) names.push_back(unquote(f));
      set_columns(names.size());
      continue;
    }
    if (columns == 0) set_columns(fields.size());
    if (fields.size() != columns)
      throw DataError(reader.where() + ": " + std::to_string(fields.size()) + " fields, expected " +
                      std::to_string(columns) + " like the " +
                      (config.header ? "header" : "first data line"));
    const std::string sample = ": sample " + std::to_string(samples);
    for (size_t c = 0; c < columns; ++c) {
      const double value = parse_number(fields[c], reader, c);
      // Checked after rounding to T: 1e39 is finite in double but Inf in float32.
      if (!std::isfinite(static_cast<T>(value)))
        throw DataError(reader.where() + sample + ": column " + std::to_string(c) + " is " +
                        (std::isnan(value) ? "NaN" : "Inf") + "; every value must be finite");
      if (target_slot[c] < 0) {
        x->push_back(static_cast<T>(value));
      } else if (config.classes > 0) {
        if (value != std::floor(value) || value < 0 || value >= static_cast<double>(config.classes))
          throw DataError(reader.where() + sample + ": class label " + std::string(fields[c]) +
                          " is not an integer in [0, " + std::to_string(config.classes) + ")");
        labels->push_back(static_cast<int32_t>(value));
      } else {
        row_targets[target_slot[c]] = static_cast<T>(value);
      }
    }
    if (config.classes == 0) y->insert(y->end(), row_targets.begin(), row_targets.end());
    ++samples;
  }
  if (samples == 0) throw DataError(config.path + ": holds no data lines");

  Dataset<T> d;
  d.name = config.path;
  d.samples = samples;
  d.features = static_cast<Index>(columns - targets.size());
  d.x = x->data();
  if (config.classes > 0) {
    d.classes = config.classes;
    d.labels = labels->data();
  } else {
    d.outputs = static_cast<Index>(targets.size());
    d.y = y->data();
  }
  d.storage = keep_together({x, y, labels});
  return d;
}

template Dataset<float> load_csv<float>(const CsvConfig&);
template Dataset<double> load_csv<double>(const CsvConfig&);

}  // namespace mpiddp::data
