#pragma once
// The token data of the language-model tests: a text of windows from a Markov chain over 7
// tokens with a favourite next token (v -> 2v + 1 mod 7, half of the time), so a model has
// something to learn. Written as npy ids (x the windows' first `positions` tokens, y their
// last) and as text (token v the letter 'a' + v: the text source's windows of `positions` at
// stride `positions` are the npy's samples, and its vocabulary the same ids).
#include <cstdint>
#include <string>
#include <vector>

#include "mpiddp/distributed/communicator.hpp"
#include "../data/fixture_files.hpp"
#include "scratch_dir.hpp"

namespace mpiddp::test {

constexpr int kTokenVocabulary = 7;

inline void write_token_files(const std::string& dir, int samples, int positions) {
  std::vector<int64_t> text;
  uint64_t s = 12345;
  int64_t token = 0;
  for (int i = 0; i < samples * positions + 1; ++i) {
    text.push_back(token);
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    const uint64_t draw = s >> 33;
    token = draw % 2 == 0 ? (2 * token + 1) % kTokenVocabulary : static_cast<int64_t>((draw >> 1) % kTokenVocabulary);
  }
  std::vector<int64_t> x, y;
  for (int k = 0; k < samples; ++k)
    for (int t = 0; t < positions; ++t) {
      x.push_back(text[static_cast<size_t>(k * positions + t)]);
      y.push_back(text[static_cast<size_t>(k * positions + t + 1)]);
    }
  std::string letters;
  for (const int64_t t : text) letters += static_cast<char>('a' + t);
  data::testing::write_file(dir + "/input.txt", letters);
  const std::string shape = "(" + std::to_string(samples) + ", " + std::to_string(positions) + ")";
  data::testing::write_file(dir + "/x.npy", data::testing::npy_bytes("<i8", shape, data::testing::bytes_of(x)));
  data::testing::write_file(dir + "/y.npy", data::testing::npy_bytes("<i8", shape, data::testing::bytes_of(y)));
}

// The token files in a directory every rank sees, written by rank 0.
inline std::string shared_token_files(distributed::Communicator& comm, const std::string& name, int samples,
                                      int positions) {
  const std::string dir = shared_scratch_dir(comm, name);
  if (comm.rank() == 0) write_token_files(dir, samples, positions);
  comm.barrier();
  return dir;
}

}  // namespace mpiddp::test
