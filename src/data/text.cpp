#include "mpiddp/data/text.hpp"

#include <algorithm>

#include "mpiddp/core/error.hpp"
#include "mpiddp/data/input_file.hpp"
#include "mpiddp/tokenizer/byte_tokenizer.hpp"
#include "mpiddp/tokenizer/sentencepiece_tokenizer.hpp"

namespace mpiddp::data {

namespace {

std::shared_ptr<const tokenizer::Tokenizer> tokenizer_of(const TextConfig& config, const std::string& bytes) {
  if (config.encoding == "sentencepiece") return tokenizer::SentencePieceTokenizer::load(config.tokenizer);
  return std::make_shared<const tokenizer::ByteTokenizer>(tokenizer::ByteTokenizer::of_text(bytes, config.encoding));
}

}  // namespace

std::string read_text_file(const std::string& path) {
  InputFile file(path);
  std::string bytes(static_cast<size_t>(file.size()), '\0');
  file.read_at(0, bytes.data(), bytes.size());
  return bytes;
}

std::string position_in_text(const std::string& path, std::string_view text, size_t offset) {
  const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
  return path + ": line " + std::to_string(line) + ", byte " + std::to_string(offset) + " (0-based, in the file)";
}

std::shared_ptr<const tokenizer::Tokenizer> load_text_tokenizer(const TextConfig& config) {
  return tokenizer_of(config, config.encoding == "chars" ? read_text_file(config.path) : std::string());
}

template <typename T>
Dataset<T> load_text(const TextConfig& config) {
  const std::string bytes = read_text_file(config.path);
  if (bytes.empty()) throw DataError(config.path + ": the text is empty");
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer = tokenizer_of(config, bytes);
  if (const std::optional<tokenizer::Unencodable> fault = tokenizer->first_unencodable(bytes))
    throw DataError(position_in_text(config.path, bytes, fault->offset) + " " + fault->why);
  auto tokens = std::make_shared<std::vector<int32_t>>(tokenizer->encode(bytes));
  Dataset<T> windows = token_windows<T>(std::move(tokens), tokenizer->vocabulary(), config.windows, config.path);
  windows.tokenizer = std::move(tokenizer);
  return windows;
}

template Dataset<float> load_text<float>(const TextConfig&);
template Dataset<double> load_text<double>(const TextConfig&);

}  // namespace mpiddp::data
