#pragma once
// Which gradients are reduced together: a pure function of the buffer's tensor layout.
#include <cstddef>
#include <vector>

namespace mpiddp::distributed {

// Elements [begin, end) of the flat gradient buffer, reduced by one collective.
struct Bucket {
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
};

// Note [bucket order]: backward produces gradients from the last layer to the first, so
// buckets are planned from the end of the buffer towards its start, and a bucket can be
// reduced as soon as backward has passed its first element. Whole tensors are kept together
// up to cap_bytes; a tensor larger than the cap is cut into cap-sized pieces from its end.
// The first bucket is capped smaller (first_cap_bytes) so the first collective starts
// early. Every rank computes the same plan from the same layout, which is what keeps the
// collectives in the same order on every rank.
//
// tensor_begins: ascending element offsets where tensors start (the first is 0);
// count: elements in the buffer. Returns buckets in reduction order (descending offsets),
// covering [0, count) exactly once.
std::vector<Bucket> plan_buckets(const std::vector<size_t>& tensor_begins, size_t count,
                                 size_t element_bytes, size_t first_cap_bytes, size_t cap_bytes);

}  // namespace mpiddp::distributed
