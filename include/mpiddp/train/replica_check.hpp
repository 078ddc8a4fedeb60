#pragma once
// Verifies that every rank holds bit-identical parameters.
#include <string>
#include <vector>

#include "mpiddp/core/types.hpp"
#include "mpiddp/distributed/communicator.hpp"
#include "mpiddp/nn/model.hpp"

namespace mpiddp::train {

struct ReplicaReport {
  std::string checksum;      // rank 0's parameter checksum (FNV-1a of the bytes, hex)
  bool identical = true;     // every rank's checksum equals rank 0's and no value's bits differ
  double max_diff = 0.0;     // largest |p - p_rank0| over all ranks and parameters whose bits
                             // differ; NaN when one of those is NaN on either side
  int first_differing_rank = -1;
  std::vector<int> differing_ranks;  // every rank whose checksum differs from rank 0's
};

// A collective: every rank calls it with its parameters (P = count) and a scratch buffer of
// scratch_count >= 1 elements that receives rank 0's parameters piece by piece, so the check
// needs no second copy of a big model. Every rank gets the same report. scratch_count has
// no default on purpose: it must be the size the scratch really has, which may be less
// than P (the trainer's holds min(P, 2^18)).
template <typename T>
ReplicaReport check_replicas(distributed::Communicator& comm, const T* params, Index count, T* scratch,
                             Index scratch_count);

// Rank 0's buffers (BatchNorm's running statistics) become every rank's. Collective.
template <typename T>
void broadcast_buffers(distributed::Communicator& comm, nn::Model<T>& model);

}  // namespace mpiddp::train
