#include "mpiddp/distributed/reduction_levels.hpp"

#include <set>

namespace mpiddp::distributed {

ReductionLevels reduction_levels(ReduceAlgorithm algorithm, const std::vector<std::string>& hosts,
                                 int ranks_on_node) {
  ReductionLevels levels;
  levels.nodes = static_cast<int>(std::set<std::string>(hosts.begin(), hosts.end()).size());
  levels.ranks_per_node = ranks_on_node;
  const char* transport = algorithm == ReduceAlgorithm::kShm ? "shm" : "mpi";
  levels.within_node = ranks_on_node > 1 ? transport : "none";
  // A shared-memory domain smaller than the world is a second node even on one host
  // (MPIDDP_TEST_RANKS_PER_NODE splits one host into several "nodes" for the tests).
  const bool several = levels.nodes > 1 || static_cast<int>(hosts.size()) > ranks_on_node;
  levels.between_nodes = several ? "mpi" : "none";
  return levels;
}

}  // namespace mpiddp::distributed
