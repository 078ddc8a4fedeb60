#pragma once
// Checked access to one JSON object of a config, by key path. Every getter validates the
// type and range, records the resolved value (default or given) in `resolved`, and finish()
// rejects any key that no getter asked for, so a typo never passes silently.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mpiddp::io {

using Json = nlohmann::ordered_json;

// The upper bound of a config's counts (epochs, steps, batch sizes, intervals): far above any
// real run, and far below int64's limit.
inline constexpr int64_t kMaxConfigCount = int64_t{1} << 40;

class JsonSection {
 public:
  // node may be null (absent section: all defaults). path is "" for the root.
  JsonSection(const Json* node, std::string path);

  bool has(const std::string& key) const;
  std::string key_path(const std::string& key) const;

  double number(const std::string& key, double fallback, double min, double max);
  int64_t integer(const std::string& key, int64_t fallback, int64_t min, int64_t max);
  bool boolean(const std::string& key, bool fallback);
  std::string text(const std::string& key, const std::string& fallback);
  // One of the allowed values.
  std::string choice(const std::string& key, const std::string& fallback,
                     const std::vector<std::string>& allowed);
  // A required key: a ConfigError if it is absent.
  std::string required_choice(const std::string& key, const std::vector<std::string>& allowed);
  // The raw value of a key (arrays and objects), or null when absent; marks it used.
  const Json* raw(const std::string& key);
  // Sub-section for an object-valued key; absent means all defaults. Its finish() stores
  // its resolved values under `key` here.
  JsonSection section(const std::string& key);
  // Records a resolved value that was read through raw().
  void put(const std::string& key, Json value) { resolved_[key] = std::move(value); }
  // Marks a key as known without reading it (read elsewhere).
  void accept(const std::string& key) { used_.insert(key); }
  // Throws for the first key that no getter read; hands the resolved values to the parent.
  void finish();

  const Json& resolved() const { return resolved_; }

 private:
  const Json* find(const std::string& key);
  const Json* node_;
  std::string path_;
  Json resolved_ = Json::object();
  JsonSection* parent_ = nullptr;
  std::string key_in_parent_;
  std::set<std::string> used_;
};

// "a.b.c" -> ["a","b","c"], with "[3]" or ".3" as array indices.
std::vector<std::string> split_key_path(const std::string& key_path);

}  // namespace mpiddp::io
