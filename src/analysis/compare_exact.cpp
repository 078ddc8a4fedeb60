#include "mpiddp/analysis/compare_exact.hpp"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "mpiddp/analysis/compare.hpp"

namespace mpiddp::analysis {

using io::Json;

namespace {

// The records that carry results; run records differ by design (world size, hosts), and
// other kinds (checkpoints) name paths.
bool compared_kind(const std::string& kind) {
  return kind == "step" || kind == "eval" || kind == "epoch" || kind == "end";
}

// Wall-clock figures differ between any two runs.
bool timing(const std::string& key) {
  return key == "time_s" || key == "samples_per_s" ||
         (key.size() > 2 && key.compare(key.size() - 2, 2, "_s") == 0);
}

std::vector<Json> records(const std::string& path, Json* run_record) {
  std::ifstream in(path);
  if (!in) throw Incomparable("cannot open '" + path + "'");
  std::vector<Json> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    Json record = Json::parse(line, nullptr, false);
    if (record.is_discarded() || !record.is_object())
      throw Incomparable("'" + path + "' has a line that is not a JSON object");
    const std::string kind = record.value("kind", "");
    if (kind == "run" && run_record && run_record->is_null()) *run_record = record;
    if (compared_kind(kind)) out.push_back(std::move(record));
  }
  return out;
}

// Equal to the last bit: numbers as the doubles (or integers) they were written from.
bool same_bits(const Json& a, const Json& b) {
  if (a.is_number_float() || b.is_number_float()) {
    if (!a.is_number() || !b.is_number()) return false;
    const double x = a.get<double>(), y = b.get<double>();
    return std::memcmp(&x, &y, sizeof x) == 0;
  }
  return a == b;
}

std::string describe_record(const Json& record, size_t index) {
  const std::string kind = record.value("kind", "");
  std::string text = kind + " record " + std::to_string(index + 1);
  if (kind == "step")
    text += " (epoch " + record.value("epoch", Json()).dump() + ", step " +
            record.value("step", Json()).dump() + ")";
  if (kind == "epoch") text += " (epoch " + record.value("epoch", Json()).dump() + ")";
  return text;
}

}  // namespace

std::optional<int64_t> deterministic_chunks(const std::string& log_path) {
  Json run;
  records(log_path, &run);
  if (!run.is_object() || !run.contains("deterministic") || !run["deterministic"].is_object())
    return std::nullopt;
  return run["deterministic"].value("chunks", int64_t{0});
}

BitComparison compare_bits(const std::string& baseline_path, const std::string& run_path) {
  const std::vector<Json> a = records(baseline_path, nullptr), b = records(run_path, nullptr);
  BitComparison c;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    ++c.records;
    const std::string where = describe_record(a[i], i);
    if (a[i].value("kind", "") != b[i].value("kind", "")) {
      c.first_difference = where + ": the run has a " + b[i].value("kind", "") + " record there";
      return c;
    }
    for (auto it = a[i].begin(); it != a[i].end(); ++it) {
      if (it.key() == "kind" || timing(it.key())) continue;
      ++c.fields;
      const Json other = b[i].contains(it.key()) ? b[i][it.key()] : Json();
      if (!same_bits(it.value(), other)) {
        c.first_difference = where + ", field " + it.key() + ": " + it.value().dump() + " vs " +
                             (other.is_null() ? std::string("absent") : other.dump());
        return c;
      }
    }
  }
  if (a.size() != b.size())
    c.first_difference = "the baseline has " + std::to_string(a.size()) + " step, epoch and end "
                         "records, the run " + std::to_string(b.size());
  return c;
}

}  // namespace mpiddp::analysis
