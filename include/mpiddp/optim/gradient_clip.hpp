#pragma once
// optimizer.clip_grad_norm: PyTorch's torch.nn.utils.clip_grad_norm_(parameters, max_norm)
// on the averaged gradient, before the update. The norm is the 2-norm over every parameter
// (a tied tensor is one tensor of the buffer, so it counts once); the coefficient
// max_norm / (norm + 1e-6), when below 1, multiplies every gradient. The norm is the same
// bits on every rank, at every world size and on every reduction path (Note [the norm on a
// grid] in src/optim/gradient_clip.cpp).
#include "mpiddp/core/types.hpp"
#include "mpiddp/distributed/part_exchange.hpp"

namespace mpiddp::optim {

// The 2-norm of a gradient of `whole` values of which this rank holds `values` (count): the
// whole, or its part when the parts are the world's (combined through `parts`, collective
// then). Allocates nothing.
template <typename T>
double gradient_norm(const T* values, Index count, Index whole, distributed::PartExchange& parts);

// PyTorch's coefficient for `norm`, as clip_grad_norm_ computes it in the gradients' type:
// (1 / (norm + 1e-6)) * max_norm when that is below 1, else 1 (nothing is clipped). The update
// multiplies each gradient by it as it reads it (UpdateRule::step): the bits of clip_grad_norm_'s
// multiplication in place (Note [the decay's one rounding] in optim/adam.cpp), without its pass
// over the gradient.
template <typename T>
T clip_coefficient(double norm, double max_norm);

}  // namespace mpiddp::optim
