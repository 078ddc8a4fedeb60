#pragma once
// `mpiddp compare` of two deterministic runs (docs/compare.md): their records must be
// bitwise identical, times aside. A tolerance would hide exactly what deterministic mode
// promises, so none is applied unless asked for.
#include <cstdint>
#include <optional>
#include <string>

#include "mpiddp/io/run_log_reader.hpp"

namespace mpiddp::analysis {

// The run record's "deterministic" settings ({"chunks": C}), or nothing for a default run.
std::optional<int64_t> deterministic_chunks(const std::string& log_path);

struct BitComparison {
  int64_t records = 0;  // step, epoch and end records compared
  int64_t fields = 0;   // values compared in them
  // Empty when identical; otherwise the first differing record and field with both values:
  // "step record 3 (epoch 1, step 3), field loss: 0.52 vs 0.52000000000000002".
  std::string first_difference;
  bool identical() const { return first_difference.empty(); }
};

// Compares the step, epoch and end records of two logs in file order, every field but the
// timings (time_s, samples_per_s), numbers by their bits. Throws Incomparable when the
// logs cannot be read as JSON Lines.
BitComparison compare_bits(const std::string& baseline_path, const std::string& run_path);

}  // namespace mpiddp::analysis
