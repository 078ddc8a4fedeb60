#pragma once
// Which library computes the matrix products of a run (compute.gemm; kernels/gemm.hpp). With
// `auto`, rank 0 times the libraries on the model's own products and every rank takes its
// answer (the trainer broadcasts it: replicas must not mix libraries, which round apart).
// Deterministic mode's `auto` times nothing and reads no cache: a rule decides it (Note
// [deterministic mode's library] in train/deterministic_gemm.hpp).
//
// Note [the choice is remembered]
// Timings on a busy machine can put two libraries within noise of each other, and a choice
// that flips between runs would break what users rely on: a resumed run continuing bit for
// bit, two runs of one config giving the same numbers. So the first measurement for a machine
// (CPU model and flags), build (version, compiler, libraries), thread count and set of
// products is written to a cache file, and every later run reads it instead of measuring.
// The file is locked while it is read, measured for and written, so concurrent runs agree
// on one answer. MPIDDP_CACHE_DIR names its directory (default $XDG_CACHE_HOME/mpiddp or
// ~/.cache/mpiddp); delete the file to measure again.
#include <string>
#include <vector>

#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/kernels/gemm_calibration.hpp"

namespace mpiddp::train {

struct GemmChoice {
  kernels::GemmBackend backend = kernels::GemmBackend::kEigen;
  // "config", "measured" or "cached"; in deterministic mode "rule" (auto) or "deterministic"
  // (a library named in compute.gemm).
  std::string how;
  std::vector<kernels::GemmTiming> timings;  // of the measurement (also when read from the cache)
  // The cache file, or why there is none or why the answer was not written to it (a measured
  // answer that was not written may differ in the next run).
  std::string cache;
  // Deterministic mode's `auto`: what its rule looked at, and what it chose (Note
  // [deterministic mode's library] in train/deterministic_gemm.hpp).
  std::string rule;
};

// Rank 0's decision: `configured` is compute.gemm, T the model's number type.
template <typename T>
GemmChoice choose_gemm(const std::string& configured, const std::vector<kernels::GemmCall>& calls, int threads);

// The run record's "gemm" field: {"backend", "library", "chosen": how, "seconds": {library:
// seconds per pass} when measured, "cache", "rule" in deterministic mode's auto}.
io::Json gemm_record(const GemmChoice& choice);

// The directory of the cache file (Note [the choice is remembered]); "" when none is set.
std::string gemm_cache_directory();

}  // namespace mpiddp::train
