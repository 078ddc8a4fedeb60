#include "mpiddp/data/tokens.hpp"

#include <memory>
#include <vector>

#include "mpiddp/core/error.hpp"
#include "mpiddp/data/input_file.hpp"
#include "mpiddp/data/loaded_array.hpp"
#include "mpiddp/data/npy.hpp"
#include "mpiddp/tokenizer/sentencepiece_tokenizer.hpp"

namespace mpiddp::data {

namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// What read_labels calls each id of a flat token file.
const LabelLayout kTokenInFile = {1, "token id", "token ids", "token"};

std::vector<int32_t> npy_tokens(const TokensConfig& config) {
  InputFile file(config.path);
  const NpyHeader header = read_npy_header(file);
  if (header.shape.size() != 1)
    throw DataError(config.path + ": token ids must be a 1-D array, got " + std::to_string(header.shape.size()) +
                    " dimensions");
  std::vector<int32_t> ids(static_cast<size_t>(header.elements));
  FileSlice slice(file, header.data_offset);
  read_labels(slice, header.encoding, header.elements, config.vocab, ids.data(), kTokenInFile);
  return ids;
}

// Raw little-endian uint16, nanoGPT's and llm.c's format.
std::vector<int32_t> bin_tokens(const TokensConfig& config) {
  InputFile file(config.path);
  const uint64_t header = static_cast<uint64_t>(config.header_bytes);
  if (file.size() < header || (file.size() - header) % 2 != 0)
    throw DataError(config.path + ": " + std::to_string(file.size()) + " bytes, which after a header of " +
                    std::to_string(header) + " bytes are not whole uint16 tokens");
  std::vector<unsigned char> bytes(static_cast<size_t>(file.size() - header));
  if (!bytes.empty()) file.read_at(header, bytes.data(), bytes.size());
  std::vector<int32_t> ids(bytes.size() / 2);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = bytes[2 * i] | (bytes[2 * i + 1] << 8);
    if (id >= config.vocab)
      throw DataError(config.path + ": token " + std::to_string(i) + " (0-based) is " + std::to_string(id) +
                      ", outside [0, " + std::to_string(config.vocab) + ")");
    ids[i] = id;
  }
  return ids;
}

}  // namespace

template <typename T>
Dataset<T> load_tokens(const TokensConfig& given) {
  TokensConfig config = given;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  if (!config.tokenizer.empty()) {
    tokenizer = tokenizer::SentencePieceTokenizer::load(config.tokenizer);
    if (config.vocab == 0) config.vocab = tokenizer->vocabulary();
    if (config.vocab != tokenizer->vocabulary())
      throw DataError(config.tokenizer + ": the tokenizer has " + std::to_string(tokenizer->vocabulary()) +
                      " tokens, but the tokens source of '" + config.path + "' says \"vocab\": " +
                      std::to_string(config.vocab) + " (leave \"vocab\" out to take the tokenizer's)");
  }
  auto ids = std::make_shared<std::vector<int32_t>>(ends_with(config.path, ".npy") ? npy_tokens(config)
                                                                                    : bin_tokens(config));
  Dataset<T> windows = token_windows<T>(std::move(ids), config.vocab, config.windows, config.path);
  windows.tokenizer = std::move(tokenizer);
  return windows;
}

template Dataset<float> load_tokens<float>(const TokensConfig&);
template Dataset<double> load_tokens<double>(const TokensConfig&);

}  // namespace mpiddp::data
