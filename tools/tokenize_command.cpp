// mpiddp tokenize: a SentencePiece tokenizer from raw text, and the text as token files
// (tokenizer/sentencepiece_tokenizer.hpp). One process, no MPI.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "command_args.hpp"
#include "commands.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/data/text.hpp"
#include "mpiddp/io/atomic_file.hpp"
#include "mpiddp/record/step_profile.hpp"
#include "mpiddp/tokenizer/sentencepiece_tokenizer.hpp"

namespace mpiddp::tools {

namespace {

const char* kTokenizeUsage =
    "usage: mpiddp tokenize TEXT... -o PREFIX [--vocab N] [--model-type bpe|unigram]\n"
    "                       [--model EXISTING.model] [--eval-fraction F] [--format nanogpt|llmc]\n"
    "                       [--threads N]\n";

// The largest vocabulary whose ids a uint16 token file holds, as nanoGPT's and llm.c's do.
constexpr int64_t kLargestVocabulary = 65535;

struct TokenizeArgs {
  std::vector<std::string> texts;
  std::string prefix;
  std::string model;  // an existing .model instead of training one
  tokenizer::TrainingOptions training;
  bool vocab_given = false, model_type_given = false;
  double eval_fraction = 0.1;
  std::string format = "nanogpt";  // "nanogpt": raw uint16; "llmc": after llm.c's 1024-byte header
};

TokenizeArgs parse_tokenize_args(int argc, char** argv) {
  TokenizeArgs args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw ConfigError(arg, "needs a value");
      return argv[++i];
    };
    if (arg == "-o" || arg == "--output") {
      args.prefix = next();
    } else if (arg == "--vocab") {
      args.training.vocabulary = parse_whole(arg, next(), 1, kLargestVocabulary,
                                             " (the token files hold uint16 ids, as nanoGPT's and llm.c's do)");
      args.vocab_given = true;
    } else if (arg == "--model-type") {
      args.training.model_type = next();
      if (args.training.model_type != "bpe" && args.training.model_type != "unigram")
        throw ConfigError(arg, "expected \"bpe\" or \"unigram\", got '" + args.training.model_type + "'");
      args.model_type_given = true;
    } else if (arg == "--model") {
      args.model = next();
    } else if (arg == "--threads") {
      args.training.threads = static_cast<int>(parse_whole(arg, next(), 1, 1024));
    } else if (arg == "--format") {
      args.format = next();
      if (args.format != "nanogpt" && args.format != "llmc")
        throw ConfigError(arg, "expected \"nanogpt\" (raw uint16) or \"llmc\" (llm.c's header, then uint16), got '" +
                                   args.format + "'");
    } else if (arg == "--eval-fraction") {
      args.eval_fraction = parse_number_below(arg, next(), 0.0, 1.0, "a fraction in [0, 1)");
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw ConfigError(arg, "unknown option\n" + std::string(kTokenizeUsage));
    } else {
      args.texts.push_back(arg);
    }
  }
  if (args.texts.empty()) throw ConfigError("TEXT", std::string("no text file given\n") + kTokenizeUsage);
  if (args.prefix.empty()) throw ConfigError("-o", std::string("missing: the prefix of the files written\n") + kTokenizeUsage);
  if (!args.model.empty() && (args.vocab_given || args.model_type_given))
    throw ConfigError(args.vocab_given ? "--vocab" : "--model-type",
                      "--model gives an existing tokenizer, whose vocabulary and type are its own");
  return args;
}

// The text of a file, refused (exit 3, naming the file, line and byte) where it is not UTF-8.
std::string read_utf8_text(const std::string& path) {
  std::string text = data::read_text_file(path);
  if (text.empty()) throw DataError(path + ": the text is empty");
  if (const std::optional<size_t> at = tokenizer::first_invalid_utf8(text))
    throw DataError(data::position_in_text(path, text, *at) + " is not UTF-8, which SentencePiece reads");
  return text;
}

// The ids of the texts, one after another, with a progress line on stderr for long inputs;
// text_ends[i]: where text i's ids end. Chunks end after a '\n', so that encoding them one by
// one is encoding the whole (Note [a text line by line]).
std::vector<int32_t> encode_texts(const tokenizer::SentencePieceTokenizer& tokenizer,
                                  const std::vector<std::string>& texts, size_t total_bytes,
                                  std::vector<size_t>& text_ends) {
  constexpr size_t kChunk = size_t{4} << 20;
  const bool report = total_bytes > 2 * kChunk;
  const auto start = std::chrono::steady_clock::now();
  std::vector<int32_t> ids;
  ids.reserve(total_bytes / 3);
  size_t done = 0;
  for (const std::string& text : texts) {
    for (size_t begin = 0; begin < text.size();) {
      size_t end = text.find('\n', std::min(text.size(), begin + kChunk));
      end = end == std::string::npos ? text.size() : end + 1;
      const std::vector<int32_t> chunk = tokenizer.encode(std::string_view(text).substr(begin, end - begin));
      ids.insert(ids.end(), chunk.begin(), chunk.end());
      done += end - begin;
      begin = end;
      if (report)
        std::fprintf(stderr, "tokenize: encoded %.1f of %.1f MB (%.0f%%), %zu tokens, %.1f s\n", done / 1e6,
                     total_bytes / 1e6, 100.0 * static_cast<double>(done) / static_cast<double>(total_bytes), ids.size(),
                     record::seconds_since(start));
    }
    text_ends.push_back(ids.size());
  }
  return ids;
}

// ids [begin, end) as a token file: raw little-endian uint16 (nanoGPT's prepare.py), after
// llm.c's header with "llmc" (256 int32: magic 20240520, version 1, the token count).
void write_token_file(const std::string& path, const std::vector<int32_t>& ids, size_t begin, size_t end,
                      const std::string& format) {
  std::vector<unsigned char> bytes;
  const size_t header = format == "llmc" ? 1024 : 0;
  bytes.resize(header + 2 * (end - begin));
  if (header > 0) {
    const uint32_t fields[3] = {20240520u, 1u, static_cast<uint32_t>(end - begin)};
    for (size_t f = 0; f < 3; ++f)
      for (size_t b = 0; b < 4; ++b) bytes[4 * f + b] = static_cast<unsigned char>(fields[f] >> (8 * b));
  }
  for (size_t i = begin; i < end; ++i) {
    bytes[header + 2 * (i - begin)] = static_cast<unsigned char>(ids[i] & 0xFF);
    bytes[header + 2 * (i - begin) + 1] = static_cast<unsigned char>((ids[i] >> 8) & 0xFF);
  }
  io::write_file_atomically(path, {{bytes.data(), bytes.size()}});
}

// Whether decoding gives the texts back; a warning names the first file that differs (a
// model of another program may normalise the text, or add a space before each line).
void check_round_trip(const tokenizer::SentencePieceTokenizer& tokenizer, const std::vector<std::string>& paths,
                      const std::vector<std::string>& texts, const std::vector<int32_t>& ids,
                      const std::vector<size_t>& text_ends) {
  for (size_t i = 0; i < texts.size(); ++i) {
    const size_t begin = i == 0 ? 0 : text_ends[i - 1];
    const std::string decoded = tokenizer.decode(std::span<const int32_t>(ids.data() + begin, text_ends[i] - begin));
    if (decoded == texts[i]) continue;
    const auto differs = std::mismatch(decoded.begin(), decoded.end(), texts[i].begin(), texts[i].end());
    std::fprintf(stderr,
                 "tokenize: warning: the model does not give back %s byte for byte (the first difference is at "
                 "byte %zu): generated text will not be written as the training text is\n",
                 paths[i].c_str(), static_cast<size_t>(differs.second - texts[i].begin()));
  }
}

}  // namespace

int tokenize_command(int argc, char** argv) {
  try {
    const TokenizeArgs args = parse_tokenize_args(argc, argv);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::string> texts;
    size_t total_bytes = 0;
    for (const std::string& path : args.texts) {
      texts.push_back(read_utf8_text(path));
      total_bytes += texts.back().size();
    }
    std::shared_ptr<const tokenizer::SentencePieceTokenizer> trained_or_given;
    if (args.model.empty()) {
      std::fprintf(stderr, "tokenize: training a %s model of %lld tokens on %.1f MB of text\n",
                   args.training.model_type.c_str(), static_cast<long long>(args.training.vocabulary), total_bytes / 1e6);
      trained_or_given = std::make_shared<const tokenizer::SentencePieceTokenizer>(
          tokenizer::train_sentencepiece(std::vector<std::string_view>(texts.begin(), texts.end()), args.training),
          "the trained model: ", kExitData);
    } else {
      trained_or_given = tokenizer::SentencePieceTokenizer::load(args.model);
    }
    const tokenizer::SentencePieceTokenizer& tokenizer = *trained_or_given;
    const std::string& model = tokenizer.model_bytes();
    if (tokenizer.vocabulary() > kLargestVocabulary)
      throw ConfigError("--model", "'" + args.model + "' has " + std::to_string(tokenizer.vocabulary()) +
                                       " tokens; the token files hold uint16 ids, at most " +
                                       std::to_string(kLargestVocabulary) + " tokens (--vocab)");
    const std::string model_path = args.prefix + ".model";
    // PREFIX may name a directory that does not exist yet ("data/kjv_bpe" in a fresh clone).
    const std::filesystem::path directory = std::filesystem::path(model_path).parent_path();
    std::error_code ignored;
    if (!directory.empty()) std::filesystem::create_directories(directory, ignored);
    io::write_file_atomically(model_path, {{model.data(), model.size()}});

    std::vector<size_t> text_ends;
    const std::vector<int32_t> ids = encode_texts(tokenizer, texts, total_bytes, text_ends);
    check_round_trip(tokenizer, args.texts, texts, ids, text_ends);
    // The evaluation's tokens are the last ones, as nanoGPT's prepare.py splits its text.
    const size_t eval_tokens = static_cast<size_t>(std::floor(args.eval_fraction * static_cast<double>(ids.size())));
    const size_t train_tokens = ids.size() - eval_tokens;
    write_token_file(args.prefix + ".train.bin", ids, 0, train_tokens, args.format);
    const std::string eval_path = args.prefix + ".eval.bin";
    if (eval_tokens > 0) write_token_file(eval_path, ids, train_tokens, ids.size(), args.format);
    // An older run's evaluation ids must not pass for this model's.
    else std::filesystem::remove(eval_path);

    std::printf("%s: a SentencePiece model of %lld tokens\n", model_path.c_str(),
                static_cast<long long>(tokenizer.vocabulary()));
    std::printf("%s.train.bin: %zu tokens\n", args.prefix.c_str(), train_tokens);
    if (eval_tokens > 0) std::printf("%s.eval.bin: %zu tokens\n", args.prefix.c_str(), eval_tokens);
    std::printf("%zu bytes of text, %zu tokens, %.3f bytes per token, %.1f s\n", total_bytes, ids.size(),
                ids.empty() ? 0.0 : static_cast<double>(total_bytes) / static_cast<double>(ids.size()),
                record::seconds_since(start));
    std::printf("data source: {\"source\": \"tokens\", \"path\": \"%s.train.bin\", \"tokenizer\": \"%s\"%s, \"block\": ...}\n",
                args.prefix.c_str(), model_path.c_str(), args.format == "llmc" ? ", \"header_bytes\": 1024" : "");
    return kExitOk;
  } catch (const Error& e) {
    std::fprintf(stderr, "mpiddp tokenize: %s\n", e.what());
    return e.code();
  }
}

}  // namespace mpiddp::tools
