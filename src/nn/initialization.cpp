#include "mpiddp/nn/initialization.hpp"

#include <algorithm>
#include <limits>

namespace mpiddp::nn {

InitStd InitStd::parse(io::JsonSection& section) {
  if (!section.has("init_std")) return {};
  return {section.number("init_std", 0.02, std::numeric_limits<double>::min(), 1e6)};
}

template <typename T>
void fill_normal(T* values, Index count, double std, Rng& rng) {
  for (Index i = 0; i < count; ++i) values[i] = static_cast<T>(std * rng.normal());
}

template <typename T>
void fill_uniform(T* values, Index count, double bound, Rng& rng) {
  for (Index i = 0; i < count; ++i) values[i] = static_cast<T>(rng.uniform(-bound, bound));
}

template <typename T>
void initialize_weights(T* weights, Index count, const InitStd& init, double bound, Rng& rng) {
  if (init.given()) fill_normal(weights, count, init.std, rng);
  else fill_uniform(weights, count, bound, rng);
}

template <typename T>
void initialize_bias(T* bias, Index count, const InitStd& init, double bound, Rng& rng) {
  if (init.given()) std::fill_n(bias, count, T(0));
  else fill_uniform(bias, count, bound, rng);
}

template void initialize_weights<float>(float*, Index, const InitStd&, double, Rng&);
template void initialize_weights<double>(double*, Index, const InitStd&, double, Rng&);
template void initialize_bias<float>(float*, Index, const InitStd&, double, Rng&);
template void initialize_bias<double>(double*, Index, const InitStd&, double, Rng&);
template void fill_normal<float>(float*, Index, double, Rng&);
template void fill_normal<double>(double*, Index, double, Rng&);
template void fill_uniform<float>(float*, Index, double, Rng&);
template void fill_uniform<double>(double*, Index, double, Rng&);

}  // namespace mpiddp::nn
