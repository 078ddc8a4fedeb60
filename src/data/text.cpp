#include "mpiddp/data/text.hpp"

#include <algorithm>
#include <array>
#include <memory>

#include "mpiddp/core/error.hpp"
#include "mpiddp/data/input_file.hpp"

namespace mpiddp::data {

std::vector<unsigned char> text_vocabulary(const std::string& bytes, const std::string& encoding) {
  std::vector<unsigned char> vocabulary;
  if (encoding == "bytes") {
    for (int b = 0; b < 256; ++b) vocabulary.push_back(static_cast<unsigned char>(b));
    return vocabulary;
  }
  std::array<bool, 256> seen{};
  for (const char c : bytes) seen[static_cast<unsigned char>(c)] = true;
  for (int b = 0; b < 256; ++b)
    if (seen[static_cast<size_t>(b)]) vocabulary.push_back(static_cast<unsigned char>(b));
  return vocabulary;
}

std::string read_text_file(const std::string& path) {
  InputFile file(path);
  std::string bytes(static_cast<size_t>(file.size()), '\0');
  file.read_at(0, bytes.data(), bytes.size());
  return bytes;
}

template <typename T>
Dataset<T> load_text(const TextConfig& config) {
  const std::string bytes = read_text_file(config.path);
  if (bytes.empty()) throw DataError(config.path + ": the text is empty");
  const std::vector<unsigned char> vocabulary = text_vocabulary(bytes, config.encoding);
  std::array<int32_t, 256> id_of{};
  for (size_t i = 0; i < vocabulary.size(); ++i) id_of[vocabulary[i]] = static_cast<int32_t>(i);
  auto tokens = std::make_shared<std::vector<int32_t>>(bytes.size());
  std::transform(bytes.begin(), bytes.end(), tokens->begin(), [&](char c) { return id_of[static_cast<unsigned char>(c)]; });
  Dataset<T> windows = token_windows<T>(std::move(tokens), static_cast<Index>(vocabulary.size()), config.windows, config.path);
  windows.token_bytes = vocabulary;
  return windows;
}

template Dataset<float> load_text<float>(const TextConfig&);
template Dataset<double> load_text<double>(const TextConfig&);

}  // namespace mpiddp::data
