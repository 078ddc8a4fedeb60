#pragma once
// The gradient reducer: the one place where gradients are combined across ranks.
#include <cstddef>

#include "mpiddp/dist/communicator.hpp"

namespace mpiddp::dist {

template <typename T>
class GradientReducer {
 public:
  explicit GradientReducer(Communicator& comm) : comm_(comm) {}
  // grads: (count) flat, in place. Afterwards every rank holds the mean over ranks.
  void reduce(T* grads, size_t count);

 private:
  Communicator& comm_;
};

}  // namespace mpiddp::dist
