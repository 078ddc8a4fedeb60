#include "mpiddp/io/json_reader.hpp"

#include <cmath>
#include <sstream>

#include "mpiddp/core/error.hpp"

namespace mpiddp::io {

namespace {

std::string describe_range(double min, double max) {
  std::ostringstream text;
  if (max >= 1e300)
    text << "a number >= " << min;
  else
    text << "a number in [" << min << ", " << max << "]";
  return text.str();
}

std::string type_name(const Json& value) { return value.type_name(); }

// A value as JSON text for an error message. Strings from --set are not checked for UTF-8
// by a parser, and the default dump() throws on invalid bytes: replace them instead.
std::string shown(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

JsonSection::JsonSection(const Json* node, std::string path)
    : node_(node), path_(std::move(path)) {
  if (node_ && !node_->is_object())
    throw ConfigError(path_.empty() ? "(top level)" : path_,
                      "expected an object, got " + type_name(*node_));
}

std::string JsonSection::key_path(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

bool JsonSection::has(const std::string& key) const { return node_ && node_->contains(key); }

const Json* JsonSection::find(const std::string& key) {
  used_.insert(key);
  if (!node_) return nullptr;
  auto it = node_->find(key);
  if (it == node_->end() || it->is_null()) return nullptr;
  return &*it;
}

double JsonSection::number(const std::string& key, double fallback, double min, double max) {
  const Json* value = find(key);
  double result = fallback;
  if (value) {
    if (!value->is_number())
      throw ConfigError(key_path(key), "expected " + describe_range(min, max) + ", got " +
                                           type_name(*value) + " " + shown(*value));
    result = value->get<double>();
  }
  if (!std::isfinite(result) || result < min || result > max)
    throw ConfigError(key_path(key), "expected " + describe_range(min, max) + ", got " +
                                         shown(Json(result)));
  resolved_[key] = result;
  return result;
}

int64_t JsonSection::integer(const std::string& key, int64_t fallback, int64_t min, int64_t max) {
  const Json* value = find(key);
  int64_t result = fallback;
  if (value) {
    const bool whole_float = value->is_number_float() &&
                             std::floor(value->get<double>()) == value->get<double>() &&
                             std::fabs(value->get<double>()) < 9e15;
    if (!value->is_number_integer() && !whole_float)
      throw ConfigError(key_path(key), "expected an integer in [" + std::to_string(min) + ", " +
                                           std::to_string(max) + "], got " + shown(*value));
    if (value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      throw ConfigError(key_path(key), "integer too large: " + shown(*value));
    result = whole_float ? static_cast<int64_t>(value->get<double>()) : value->get<int64_t>();
  }
  if (result < min || result > max)
    throw ConfigError(key_path(key), "expected an integer in [" + std::to_string(min) + ", " +
                                         std::to_string(max) + "], got " + std::to_string(result));
  resolved_[key] = result;
  return result;
}

bool JsonSection::boolean(const std::string& key, bool fallback) {
  const Json* value = find(key);
  bool result = fallback;
  if (value) {
    if (!value->is_boolean())
      throw ConfigError(key_path(key), "expected true or false, got " + shown(*value));
    result = value->get<bool>();
  }
  resolved_[key] = result;
  return result;
}

std::string JsonSection::text(const std::string& key, const std::string& fallback) {
  const Json* value = find(key);
  std::string result = fallback;
  if (value) {
    if (!value->is_string()) throw ConfigError(key_path(key), "expected a string, got " + shown(*value));
    result = value->get<std::string>();
  }
  resolved_[key] = result;
  return result;
}

std::string JsonSection::choice(const std::string& key, const std::string& fallback,
                                const std::vector<std::string>& allowed) {
  const std::string result = text(key, fallback);
  for (const auto& option : allowed)
    if (option == result) return result;
  std::string list;
  for (const auto& option : allowed) list += (list.empty() ? "\"" : ", \"") + option + "\"";
  throw ConfigError(key_path(key), "unknown value \"" + result + "\"; expected one of " + list);
}

std::string JsonSection::required_choice(const std::string& key,
                                         const std::vector<std::string>& allowed) {
  if (!has(key) || (*node_)[key].is_null())
    throw ConfigError(key_path(key), "required key is missing");
  return choice(key, "", allowed);
}

const Json* JsonSection::raw(const std::string& key) { return find(key); }

JsonSection JsonSection::section(const std::string& key) {
  const Json* value = find(key);
  resolved_[key] = Json::object();  // keeps the key's place in the resolved order
  JsonSection child(value, key_path(key));
  child.parent_ = this;
  child.key_in_parent_ = key;
  return child;
}

void JsonSection::finish() {
  if (parent_) parent_->resolved_[key_in_parent_] = resolved_;
  if (!node_) return;
  for (auto it = node_->begin(); it != node_->end(); ++it) {
    if (used_.count(it.key())) continue;
    std::string known;
    for (const auto& key : used_) known += (known.empty() ? "" : ", ") + key;
    throw ConfigError(key_path(it.key()), "unknown key; known keys here: " + known);
  }
}

std::vector<std::string> split_key_path(const std::string& key_path) {
  std::vector<std::string> parts;
  std::string current;
  for (char c : key_path) {
    if (c == '.' || c == '[' || c == ']') {
      if (!current.empty()) parts.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) parts.push_back(current);
  return parts;
}

}  // namespace mpiddp::io
