#pragma once
// reduce.compress: how the gradient sum crosses the links between nodes (docs/design.md,
// Note [bf16 between nodes] in src/distributed/mpi_compressed_sum.cpp). MPI-free: the
// reducer decides here, from the job's layout, whether there is anything to compress.
#include <string>

namespace mpiddp::distributed {

enum class Compression {
  kNone,  // float32/float64 as the gradients are: bit-equivalent to one process
  kBf16,  // bfloat16 on the wire, float32 accumulation: half the bytes, not bit-equivalent
};

// "none" | "bf16"; anything else throws ConfigError("reduce.compress", ...).
Compression parse_compression(const std::string& name);
std::string to_string(Compression compression);

// What a requested compression becomes in a job of world_size ranks with ranks_on_node
// on this rank's node. `applied` is what the sums use; `note` says why a request was not
// applied (empty otherwise), for the run record.
struct CompressionChoice {
  Compression applied = Compression::kNone;
  std::string note;
};
// Every rank gets the same answer: ranks_on_node == world_size holds on every rank or on none.
CompressionChoice choose_compression(Compression requested, int world_size, int ranks_on_node);

}  // namespace mpiddp::distributed
