// The tokenizers (tokenizer/tokenizer.hpp): bytes as tokens, SentencePiece models trained
// here, their descriptions (what weights files carry), and the UTF-8 and base64 they rest on.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "../data/fixture_files.hpp"
#include "mpiddp/core/crc32c.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/data/text.hpp"
#include "mpiddp/data/tokens.hpp"
#include "mpiddp/io/base64.hpp"
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/tokenizer/byte_tokenizer.hpp"
#include "mpiddp/tokenizer/sentencepiece_tokenizer.hpp"

namespace mpiddp::tokenizer {
namespace {

TEST(Utf8, FindsTheFirstByteOfABadForm) {
  EXPECT_FALSE(first_invalid_utf8("plain ASCII\n"));
  EXPECT_FALSE(first_invalid_utf8("caf\xC3\xA9 \xE2\x96\x81 \xF0\x9F\x98\x80"));  // é, U+2581, U+1F600
  EXPECT_EQ(first_invalid_utf8("ab\x80"), 2u);               // a continuation byte alone
  EXPECT_EQ(first_invalid_utf8("a\xC0\xAF"), 1u);            // "/" as an overlong 2-byte form
  EXPECT_EQ(first_invalid_utf8("\xE0\x80\xAF"), 0u);         // overlong 3-byte form
  EXPECT_EQ(first_invalid_utf8("xy\xED\xA0\x80"), 2u);       // U+D800, a surrogate
  EXPECT_EQ(first_invalid_utf8("\xF4\x90\x80\x80"), 0u);     // U+110000, past the last code point
  EXPECT_EQ(first_invalid_utf8("abc\xE2\x96"), 3u);          // cut off at the end
  EXPECT_EQ(first_invalid_utf8("\xFF"), 0u);                 // never a UTF-8 byte
}

TEST(Base64, RfcVectorsBothWays) {
  // RFC 4648, section 10.
  const std::vector<std::pair<std::string, std::string>> vectors = {
      {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"}};
  for (const auto& [bytes, text] : vectors) {
    EXPECT_EQ(io::base64_encode(bytes), text);
    EXPECT_EQ(io::base64_decode(text), bytes);
  }
  std::string all(256, '\0');
  std::iota(all.begin(), all.end(), '\0');
  EXPECT_EQ(io::base64_decode(io::base64_encode(all)), all);
  for (const char* bad : {"Zm9", "Zm=v", "Z!9v", "=m9v", "Zg==Zg=="}) EXPECT_FALSE(io::base64_decode(bad)) << bad;
}

TEST(ByteTokenizer, CharsAreTheSortedDistinctBytes) {
  const ByteTokenizer chars = ByteTokenizer::of_text("hello\n", "chars");
  // Sorted: '\n' (10) < 'e' < 'h' < 'l' < 'o'.
  EXPECT_EQ(chars.bytes(), (std::vector<unsigned char>{'\n', 'e', 'h', 'l', 'o'}));
  EXPECT_EQ(chars.encode("hole\n"), (std::vector<int32_t>{2, 4, 3, 1, 0}));
  const std::vector<int32_t> ids = {2, 1, 3, 3, 4};
  EXPECT_EQ(chars.decode(ids), "hello");
  const auto fault = chars.first_unencodable("hex");
  ASSERT_TRUE(fault);
  EXPECT_EQ(fault->offset, 2u);
  EXPECT_EQ(fault->why, "is character 'x' (byte 120), which is not in the vocabulary of 5 tokens");
  EXPECT_EQ(chars.start_of_text(), std::vector<int32_t>{0});

  const ByteTokenizer bytes = ByteTokenizer::of_text("hi", "bytes");
  EXPECT_EQ(bytes.vocabulary(), 256);
  EXPECT_EQ(bytes.encode("hi"), (std::vector<int32_t>{'h', 'i'}));
}

TEST(ByteTokenizer, DescriptionRoundTripsAndBadOnesAreRefused) {
  const ByteTokenizer chars = ByteTokenizer::of_text("abba\n", "chars");
  EXPECT_EQ(chars.description(), R"({"encoding":"chars","bytes":[10,97,98]})");  // what 0.2 wrote
  const auto back = tokenizer_from_description(chars.description(), "'w': ", kExitData);
  EXPECT_EQ(back->encoding(), "chars");
  EXPECT_EQ(back->description(), chars.description());
  for (const char* bad : {R"({"bytes":[10,10]})", R"({"bytes":[300]})", R"({"bytes":[]})", R"({"encoding":"chars"})", "[1]"}) {
    try {
      tokenizer_from_description(bad, "'w': ", kExitCheckpoint);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), kExitCheckpoint) << bad;
      EXPECT_EQ(std::string(e.what()).rfind("'w': ", 0), 0u) << e.what();
    }
  }
}

// A small corpus with what SentencePiece's defaults would change: runs of spaces, a leading
// space, empty lines, characters outside ASCII.
std::string corpus() {
  std::string text;
  const char* lines[] = {"In the beginning God created the heaven and the earth.",
                         "And the earth was without form, and void; and darkness was upon the face of the deep.",
                         "And God said, Let there be light: and there was light.",
                         "And God saw the light, that it was good: and God divided the light from the darkness.",
                         "  And the evening and the morning were the first day.",
                         "",
                         "Caf\xC3\xA9 na\xC3\xAFve \xE2\x80\x94 the   end."};
  for (int round = 0; round < 20; ++round)
    for (const char* line : lines) text += std::string(line) + "\n";
  return text;
}

const std::string& trained_model() {
  static const std::string model = [] {
    const std::string text = corpus();
    TrainingOptions options;
    options.vocabulary = 400;  // 3 specials + 256 bytes + 45 characters + about 100 merges
    return train_sentencepiece({text}, options);
  }();
  return model;
}

TEST(SentencePieceTokenizer, GivesBackTheTextByteForByte) {
  const SentencePieceTokenizer tokenizer(trained_model(), "'m': ", kExitData);
  EXPECT_EQ(tokenizer.vocabulary(), 400);
  EXPECT_EQ(tokenizer.encoding(), "sentencepiece");
  const std::string unseen = "\n\n  leading, trailing  \nZ\xC3\xBCrich \xE6\x97\xA5\xE6\x9C\xAC \xE2\x9C\x93\n";
  for (const std::string& text : {corpus(), unseen, std::string("no newline at the end"), std::string("\n")}) {
    const std::vector<int32_t> ids = tokenizer.encode(text);
    for (const int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tokenizer.vocabulary());
    EXPECT_EQ(tokenizer.decode(ids), text);
    // The bytes behind the ids are the text's: what bits per byte divides by.
    Index bytes = 0;
    for (const int32_t id : ids) bytes += tokenizer.text_bytes(id);
    EXPECT_EQ(bytes, static_cast<Index>(text.size())) << text;
  }
  // Merges happened: the corpus takes fewer tokens than bytes.
  EXPECT_LT(tokenizer.encode(corpus()).size(), corpus().size() / 2);
}

TEST(SentencePieceTokenizer, EncodesLineByLineWithTheNewlinePiece) {
  const SentencePieceTokenizer tokenizer(trained_model(), "'m': ", kExitData);
  ASSERT_EQ(tokenizer.newline().size(), 1u);  // the byte piece <0x0A>
  EXPECT_EQ(tokenizer.text_bytes(tokenizer.newline()[0]), 1);
  EXPECT_EQ(tokenizer.decode(tokenizer.newline()), "\n");
  std::vector<int32_t> by_hand;
  tokenizer.encode_line("And God said", by_hand);
  by_hand.push_back(tokenizer.newline()[0]);
  tokenizer.encode_line("the earth", by_hand);
  EXPECT_EQ(tokenizer.encode("And God said\nthe earth"), by_hand);
  EXPECT_EQ(tokenizer.start_of_text(), tokenizer.newline());
  // A space inside a piece is U+2581, one byte of text.
  const std::vector<int32_t> god = tokenizer.encode(" God");
  Index bytes = 0;
  for (const int32_t id : god) bytes += tokenizer.text_bytes(id);
  EXPECT_EQ(bytes, 4);
}

TEST(SentencePieceTokenizer, TrainingIsReproducible) {
  TrainingOptions options;
  options.vocabulary = 400;
  EXPECT_EQ(train_sentencepiece({corpus()}, options), trained_model());
  options.model_type = "unigram";
  options.vocabulary = 310;  // unigram's pieces are substrings the corpus holds often enough: 321 at most here
  const std::string unigram = train_sentencepiece({corpus()}, options);
  EXPECT_EQ(unigram, train_sentencepiece({corpus()}, options));
  const SentencePieceTokenizer tokenizer(unigram, "'u': ", kExitData);
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(corpus())), corpus());
}

TEST(SentencePieceTokenizer, AVocabularyTheTextCannotFillIsAConfigError) {
  TrainingOptions options;
  options.vocabulary = 100;  // below the 256 byte pieces
  try {
    train_sentencepiece({corpus()}, options);
    ADD_FAILURE() << "trained";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitConfig);
    EXPECT_NE(std::string(e.what()).find("--vocab 100"), std::string::npos) << e.what();
  }
}

TEST(SentencePieceTokenizer, InvalidUtf8IsUnencodable) {
  const SentencePieceTokenizer tokenizer(trained_model(), "'m': ", kExitData);
  const auto fault = tokenizer.first_unencodable("And God\xFF said");
  ASSERT_TRUE(fault);
  EXPECT_EQ(fault->offset, 7u);
  EXPECT_FALSE(tokenizer.first_unencodable(corpus()));
}

TEST(SentencePieceTokenizer, DescriptionCarriesTheModel) {
  const SentencePieceTokenizer tokenizer(trained_model(), "'m': ", kExitData);
  const auto back = tokenizer_from_description(tokenizer.description(), "'w': ", kExitCheckpoint);
  EXPECT_EQ(back->encoding(), "sentencepiece");
  EXPECT_EQ(back->encode(corpus()), tokenizer.encode(corpus()));
  EXPECT_EQ(back->description(), tokenizer.description());

  const io::Json good = io::Json::parse(tokenizer.description());
  const auto refused = [](const io::Json& description, const std::string& expected) {
    try {
      tokenizer_from_description(description.dump(), "'w': its mpiddp_vocabulary metadata ", kExitCheckpoint);
      ADD_FAILURE() << "accepted: " << expected;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), kExitCheckpoint);
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("'w': ", 0), 0u) << e.what();
    }
  };
  io::Json damaged = good;
  std::string bytes = *io::base64_decode(good["model"].get<std::string>());
  bytes[bytes.size() / 2] ^= 0x20;
  damaged["model"] = io::base64_encode(bytes);
  refused(damaged, "crc32c does not match");
  io::Json cut = good;
  const std::string half = trained_model().substr(0, trained_model().size() / 3);
  cut["model"] = io::base64_encode(half);
  cut["crc32c"] = crc32c(half.data(), half.size());
  refused(cut, "is not a SentencePiece model");
  io::Json not_base64 = good;
  not_base64["model"] = "***";
  refused(not_base64, "not base64");
  io::Json other_size = good;
  other_size["vocabulary"] = 4096;
  refused(other_size, "but its model has 400 pieces");
  io::Json no_model = good;
  no_model.erase("model");
  refused(no_model, "holds no \"model\"");
}

TEST(SentencePieceTokenizer, AMissingOrCorruptModelFileIsExit3NamingIt) {
  const std::string dir = data::testing::fixture_dir();
  const std::string missing = dir + "/missing.model";
  const std::string corrupt = dir + "/corrupt.model";
  std::ofstream(corrupt) << "not a model";
  for (const std::string& path : {missing, corrupt}) {
    try {
      SentencePieceTokenizer::load(path);
      ADD_FAILURE() << path << " loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), kExitData);
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

// The text source with "sentencepiece", the tokens source with "tokenizer", and the bytes
// behind their targets (what eval_bpb divides by).
class TokenizedData : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = data::testing::fixture_dir();  // one per test: ctest runs the tests side by side
    model_path_ = dir_ + "/m.model";
    std::ofstream(model_path_, std::ios::binary) << trained_model();
    text_path_ = dir_ + "/text.txt";
    std::ofstream(text_path_, std::ios::binary) << corpus();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_, model_path_, text_path_;
};

TEST_F(TokenizedData, TheTextSourceEncodesWithTheModel) {
  data::TextConfig config;
  config.path = text_path_;
  config.encoding = "sentencepiece";
  config.tokenizer = model_path_;
  config.windows.block = 16;
  const auto set = data::load_text<double>(config);
  const SentencePieceTokenizer tokenizer(trained_model(), "", kExitData);
  const std::vector<int32_t> ids = tokenizer.encode(corpus());
  EXPECT_EQ(set.vocabulary, 400);
  EXPECT_EQ(set.classes, 400);
  EXPECT_EQ(set.samples, (static_cast<Index>(ids.size()) - 17) / 16 + 1);
  EXPECT_EQ(std::vector<int32_t>(set.token_ids + set.token_offset(3), set.token_ids + set.token_offset(3) + 16),
            std::vector<int32_t>(ids.begin() + 48, ids.begin() + 64));
  ASSERT_TRUE(set.tokenizer);
  EXPECT_EQ(set.tokenizer->description(), tokenizer.description());

  // The mean bytes behind the targets, each target's bytes found by decoding it alone.
  double bytes = 0.0;
  for (Index i = 0; i < set.samples; ++i)
    for (Index p = 0; p < 16; ++p) bytes += static_cast<double>(tokenizer.decode(std::vector<int32_t>{ids[static_cast<size_t>(16 * i + p + 1)]}).size());
  EXPECT_DOUBLE_EQ(data::mean_target_text_bytes(set), bytes / static_cast<double>(set.samples * 16));
  EXPECT_GT(data::mean_target_text_bytes(set), 2.0);  // subwords: several bytes each

  config.encoding = "chars";
  EXPECT_EQ(data::mean_target_text_bytes(data::load_text<double>(config)), 1.0);
}

TEST_F(TokenizedData, TextThatIsNotUtf8IsRefusedNamingTheLine) {
  std::ofstream(text_path_, std::ios::binary) << "In the beginning\nGod \xC3( created\n";
  data::TextConfig config;
  config.path = text_path_;
  config.encoding = "sentencepiece";
  config.tokenizer = model_path_;
  config.windows.block = 2;
  try {
    data::load_text<float>(config);
    ADD_FAILURE() << "loaded";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(text_path_ + ": line 2, byte 21"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not UTF-8"), std::string::npos) << e.what();
  }
}

TEST_F(TokenizedData, TheTokensSourceTakesItsVocabularyFromTheTokenizer) {
  const SentencePieceTokenizer tokenizer(trained_model(), "", kExitData);
  const std::vector<int32_t> ids = tokenizer.encode(corpus());
  std::string bin;
  for (const int32_t id : ids) bin += {static_cast<char>(id & 0xFF), static_cast<char>(id >> 8)};
  const std::string bin_path = dir_ + "/train.bin";
  std::ofstream(bin_path, std::ios::binary) << bin;
  data::TokensConfig config;
  config.path = bin_path;
  config.tokenizer = model_path_;
  config.windows.block = 8;
  const auto set = data::load_tokens<float>(config);
  EXPECT_EQ(set.vocabulary, 400);
  ASSERT_TRUE(set.tokenizer);
  EXPECT_EQ(set.tokenizer->decode(std::vector<int32_t>(set.token_ids, set.token_ids + 8)),
            tokenizer.decode(std::vector<int32_t>(ids.begin(), ids.begin() + 8)));
  config.vocab = 300;
  try {
    data::load_tokens<float>(config);
    ADD_FAILURE() << "loaded with vocab 300";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("the tokenizer has 400 tokens"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mpiddp::tokenizer
