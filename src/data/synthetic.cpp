#include "mpiddp/data/synthetic.hpp"

#include <cmath>
#include <vector>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/rng.hpp"

namespace mpiddp::data {

namespace {

template <typename T>
struct Storage {
  std::vector<T> x, y;
  std::vector<int32_t> labels;
};

// Values are drawn in double and rounded once to T, so float32 and float64 runs see the
// same data up to that rounding.
template <typename T>
void fill_regression(const SyntheticConfig& c, Rng& task, Rng& rng, Storage<T>& s) {
  std::vector<double> x(c.samples * c.features), w(c.features * c.outputs);
  for (double& v : w) v = task.normal();
  for (double& v : x) v = rng.normal();
  s.x.assign(x.begin(), x.end());
  s.y.resize(c.samples * c.outputs);
  for (Index i = 0; i < c.samples; ++i)
    for (Index o = 0; o < c.outputs; ++o) {
      double t = 0.0;
      for (Index f = 0; f < c.features; ++f) t += x[i * c.features + f] * w[f * c.outputs + o];
      s.y[i * c.outputs + o] = static_cast<T>(t + c.noise * rng.normal());
    }
}

template <typename T>
void fill_teacher(const SyntheticConfig& c, Rng& task, Rng& rng, Storage<T>& s) {
  constexpr Index kHidden = 32;
  std::vector<double> w1(kHidden * c.features), w2(c.classes * kHidden);
  for (double& v : w1) v = task.normal() / std::sqrt(static_cast<double>(c.features));
  for (double& v : w2) v = task.normal() / std::sqrt(static_cast<double>(kHidden));
  std::vector<double> x(c.features), h(kHidden);
  s.x.resize(c.samples * c.features);
  s.labels.resize(c.samples);
  for (Index i = 0; i < c.samples; ++i) {
    for (Index f = 0; f < c.features; ++f) {
      x[f] = rng.normal();
      s.x[i * c.features + f] = static_cast<T>(x[f]);
    }
    for (Index j = 0; j < kHidden; ++j) {
      double a = 0.0;
      for (Index f = 0; f < c.features; ++f) a += w1[j * c.features + f] * x[f];
      h[j] = std::tanh(a);
    }
    int32_t best = 0;
    double best_logit = -INFINITY;
    for (Index k = 0; k < c.classes; ++k) {
      double z = 0.0;
      for (Index j = 0; j < kHidden; ++j) z += w2[k * kHidden + j] * h[j];
      if (z > best_logit) best_logit = z, best = static_cast<int32_t>(k);
    }
    s.labels[i] = best;
  }
}

template <typename T>
void fill_blobs(const SyntheticConfig& c, Rng& task, Rng& rng, Storage<T>& s) {
  std::vector<double> centres(c.classes * c.features);
  for (double& v : centres) v = c.spread * task.normal();
  s.x.resize(c.samples * c.features);
  s.labels.resize(c.samples);
  for (Index i = 0; i < c.samples; ++i) {
    const auto label = static_cast<int32_t>(rng.below(static_cast<uint64_t>(c.classes)));
    s.labels[i] = label;
    for (Index f = 0; f < c.features; ++f)
      s.x[i * c.features + f] = static_cast<T>(centres[label * c.features + f] + rng.normal());
  }
}

}  // namespace

template <typename T>
Dataset<T> make_synthetic(const SyntheticConfig& config, uint64_t task_seed, uint64_t sample_seed) {
  auto storage = std::make_shared<Storage<T>>();
  Rng task(task_seed), rng(sample_seed);
  Dataset<T> d;
  d.name = config.source;
  d.samples = config.samples;
  d.features = config.features;
  if (config.source == "synthetic_regression") {
    fill_regression(config, task, rng, *storage);
    d.outputs = config.outputs;
  } else if (config.generator == "teacher") {
    fill_teacher(config, task, rng, *storage);
    d.classes = config.classes;
  } else {
    fill_blobs(config, task, rng, *storage);
    d.classes = config.classes;
  }
  d.x = storage->x.data();
  d.y = storage->y.empty() ? nullptr : storage->y.data();
  d.labels = storage->labels.empty() ? nullptr : storage->labels.data();
  d.storage = storage;
  return d;
}

template Dataset<float> make_synthetic<float>(const SyntheticConfig&, uint64_t, uint64_t);
template Dataset<double> make_synthetic<double>(const SyntheticConfig&, uint64_t, uint64_t);

}  // namespace mpiddp::data
