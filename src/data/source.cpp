#include "mpiddp/data/source.hpp"

#include "mpiddp/core/hash.hpp"
#include "mpiddp/core/rng.hpp"

namespace mpiddp::data {

template <typename T>
Dataset<T> load_source(const SourceConfig& config, uint64_t run_seed, const std::string& split) {
  if (config.source == "npy") return load_npy<T>(config.npy);
  if (config.source == "csv") return load_csv<T>(config.csv);
  if (config.source == "idx") return load_idx<T>(config.idx);
  if (config.source == "fashion_mnist") return load_fashion_mnist<T>(config.fashion_mnist);
  if (config.source == "text") return load_text<T>(config.text);
  if (config.source == "tokens") return load_tokens<T>(config.tokens);
  const uint64_t task_seed =
      config.synthetic.seed != 0 ? config.synthetic.seed : mix_seed(run_seed, fnv1a("task"));
  return make_synthetic<T>(config.synthetic, task_seed, mix_seed(task_seed, fnv1a(split)));
}

const std::string& named_tokenizer(const SourceConfig& config) {
  static const std::string none;
  if (config.source == "tokens") return config.tokens.tokenizer;
  if (config.source == "text" && config.text.encoding == "sentencepiece") return config.text.tokenizer;
  return none;
}

template Dataset<float> load_source<float>(const SourceConfig&, uint64_t, const std::string&);
template Dataset<double> load_source<double>(const SourceConfig&, uint64_t, const std::string&);

}  // namespace mpiddp::data
