// SharedMemorySum::sum_scattered: the reduce-scatter of the optimizer sharded across the
// world when each node runs several ranks (Note [the scattered sum on a node]).
#include "mpi_check.hpp"
#include "mpi_scattered_sum.hpp"
#include "mpi_shared_memory_sum.hpp"
#include "mpiddp/core/error.hpp"
#include "sum_kernels.hpp"

namespace mpiddp::distributed {

// Note [the scattered sum on a node]
// With several nodes of several ranks, reduce.shard_optimizer on the shm path cuts the
// parameters among every rank of the world (Note [the optimizer sharded across the world]
// in src/optim/optimizer.cpp). Node rank s on node n owns world part s * nodes + n, so
// the parts of node rank s on all the nodes form one run of the buffer, its "node range".
// Within a bucket, rank s sums the node's gradients over its node range (in node-rank
// order, as sum_resident does over its slice), and then the ranks of node rank s, one per
// node, reduce-scatter that range among themselves (Note [the scattered sum]): each ends
// with its own part summed over the world, in node order, and scaled. That is the shm
// path's sum with the allreduce among the nodes cut in half: no rank receives the parts it
// does not update, and nothing is stored into the other ranks' buffers, since only the
// owner of a part reads its gradients. At two nodes the bits are the allreduce's
// (a + b = b + a); at more the order among the nodes is the node order, not the MPI
// library's. The reducer sums such a buffer as one bucket (Note [one scattered sum on a
// node] in gradient_reducer.cpp), so each rank sums and exchanges its whole range at once.
size_t SharedMemorySum::node_run(const std::vector<size_t>& begins) {
  const auto nodes = static_cast<size_t>(nodes_);
  const size_t first_part = static_cast<size_t>(local_rank_) * nodes;
  cross_begins_.resize(nodes + 1);  // sized once, by the first call
  for (size_t n = 0; n <= nodes; ++n) cross_begins_[n] = begins[first_part + n] - begins[first_part];
  return begins[first_part];
}

void SharedMemorySum::sum_scattered(void* data, ElementType type, double scale,
                                    const std::vector<size_t>& begins) {
  const size_t elem = element_bytes(type);
  const size_t count = begins.back();
  const Window* window = resident_window_of(data, count * elem);
  if (window == nullptr)
    throw Error(kExitFailure,
                "a scattered sum on nodes of several ranks needs the buffer in the node's shared "
                "window (Communicator::allocate_shared_buffer)",
                Scope::kEveryRank);
  void* const* segments = window->segments.data();
  char* const mine = static_cast<char*>(segments[local_rank_]);
  const size_t base = static_cast<size_t>(static_cast<char*>(data) - mine) / elem;
  const size_t first = node_run(begins), last = first + cross_begins_.back();
  node_barrier(window->handle);  // every rank's buffer is final
  if (nodes_ == 1) {  // one node: the node range is the rank's part
    sum_slice(mine, segments, local_size_, base + first, base + last, type, scale);
  } else {
    sum_slice(mine, segments, local_size_, base + first, base + last, type, 1.0);
    scattered_->wait(scattered_->start(mine + (base + first) * elem, type, scale, cross_begins_));
    scattered_->release_all();
  }
  // Nobody's gradients may change (the next backward) while another rank still reads them.
  node_barrier(window->handle);
}

}  // namespace mpiddp::distributed
