#include "mpiddp/distributed/local_communicator.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "sum_kernels.hpp"

namespace mpiddp::distributed {

void LocalCommunicator::abort(int exit_code, const std::string& message) {
  std::fprintf(stderr, "rank 0: %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(exit_code);
}

int LocalCommunicator::start_sum(void* data, size_t count, ElementType type, double scale,
                                 ReduceAlgorithm, Compression) {
  scale_in_place(data, count, type, scale);
  return 0;
}

void LocalCommunicator::gather_node_parts(const void* part, void* whole,
                                          const std::vector<size_t>& begins) {
  std::memcpy(static_cast<char*>(whole) + begins[0], part, begins[1] - begins[0]);
}

std::string LocalCommunicator::host_name() const {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

}  // namespace mpiddp::distributed
