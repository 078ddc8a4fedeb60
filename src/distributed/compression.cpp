#include "mpiddp/distributed/compression.hpp"

#include "mpiddp/core/error.hpp"

namespace mpiddp::distributed {

Compression parse_compression(const std::string& name) {
  if (name == "none") return Compression::kNone;
  if (name == "bf16") return Compression::kBf16;
  throw ConfigError("reduce.compress", "unknown compression '" + name + "'; expected none or bf16");
}

std::string to_string(Compression compression) {
  return compression == Compression::kBf16 ? "bf16" : "none";
}

CompressionChoice choose_compression(Compression requested, int world_size, int ranks_on_node) {
  // Compression exists to halve the bytes between nodes; inside one node the sum goes
  // through memory, where it would only cost accuracy. So on one node it changes nothing,
  // and the run record says so rather than ignore the key silently.
  if (requested == Compression::kNone) return {};
  if (world_size == 1) return {Compression::kNone, "one process: there is no exchange to compress"};
  if (ranks_on_node == world_size)
    return {Compression::kNone, "one node: there is no exchange between nodes to compress"};
  return {requested, ""};
}

}  // namespace mpiddp::distributed
