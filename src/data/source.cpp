#include "mpiddp/data/source.hpp"

#include "mpiddp/core/hash.hpp"
#include "mpiddp/core/rng.hpp"

namespace mpiddp::data {

template <typename T>
Dataset<T> load_source(const SourceConfig& config, uint64_t run_seed, const std::string& split) {
  const uint64_t task_seed =
      config.synthetic.seed != 0 ? config.synthetic.seed : mix_seed(run_seed, fnv1a("task"));
  return make_synthetic<T>(config.synthetic, task_seed, mix_seed(task_seed, fnv1a(split)));
}

template Dataset<float> load_source<float>(const SourceConfig&, uint64_t, const std::string&);
template Dataset<double> load_source<double>(const SourceConfig&, uint64_t, const std::string&);

}  // namespace mpiddp::data
