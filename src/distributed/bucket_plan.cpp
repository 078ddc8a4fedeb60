#include "mpiddp/distributed/bucket_plan.hpp"

#include <algorithm>

namespace mpiddp::distributed {

std::vector<Bucket> plan_buckets(const std::vector<size_t>& tensor_begins, size_t count,
                                 size_t element_bytes, size_t first_cap_bytes, size_t cap_bytes) {
  std::vector<Bucket> plan;
  auto cap_elements = [&](size_t bytes) { return std::max<size_t>(1, bytes / element_bytes); };
  size_t cap = cap_elements(first_cap_bytes);
  size_t end = count;  // the bucket being planned is [?, end)
  // Tensor boundaries strictly inside [0, count), from the last one down.
  std::vector<size_t> starts;
  for (size_t b : tensor_begins)
    if (b > 0 && b < count) starts.push_back(b);
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  starts.insert(starts.begin(), 0);
  size_t tensor = starts.size();  // tensors 0 .. tensor-1 are not yet (wholly) placed
  while (end > 0) {
    size_t begin = end;
    // Take whole tensors while they fit.
    while (tensor > 0 && end - starts[tensor - 1] <= cap) {
      begin = starts[--tensor];
    }
    if (begin == end) {
      // The next tensor alone is larger than the cap: cut a cap-sized piece off its end
      // (end - starts[tensor - 1] > cap, so the piece stays inside that tensor).
      begin = end - cap;
    }
    plan.push_back({begin, end});
    end = begin;
    cap = cap_elements(cap_bytes);
  }
  return plan;
}

}  // namespace mpiddp::distributed
