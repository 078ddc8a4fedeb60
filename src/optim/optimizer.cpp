#include "mpiddp/optim/optimizer.hpp"

#include <algorithm>

#include "mpiddp/core/error.hpp"
#include "mpiddp/optim/adam.hpp"
#include "mpiddp/optim/sgd.hpp"

namespace mpiddp::optim {

template <typename T>
void Optimizer<T>::step(T* params, const T* grads, double lr) {
  ++steps_;
  for (const Run& run : runs_)
    if (run.begin < run.end) update(params, grads, run.begin, run.end, run.decayed ? weight_decay_ : 0.0, lr);
}

template <typename T>
void Optimizer<T>::exempt_from_decay(const ParameterRanges& ranges) {
  const Index parameters = runs_.back().end;
  std::vector<Run> runs;
  Index at = 0;
  for (auto [begin, end] : ranges) {
    begin = std::clamp(begin, at, parameters);
    end = std::clamp(end, begin, parameters);
    if (at < begin) runs.push_back({at, begin, true});
    if (begin < end) runs.push_back({begin, end, false});
    at = end;
  }
  if (at < parameters || runs.empty()) runs.push_back({at, parameters, true});
  runs_ = std::move(runs);
}

template <typename T>
std::unique_ptr<Optimizer<T>> make_optimizer(const OptimizerConfig& config, Index parameters) {
  if (config.type == "sgd") {
    if (config.nesterov && (config.momentum <= 0.0 || config.dampening != 0.0))
      throw ConfigError("optimizer.nesterov", "nesterov needs momentum > 0 and dampening 0");
    return std::make_unique<Sgd<T>>(config, parameters);
  }
  if (config.type == "adam") return std::make_unique<Adam<T>>(config, parameters, false);
  if (config.type == "adamw") return std::make_unique<Adam<T>>(config, parameters, true);
  throw ConfigError("optimizer.type",
                    "unknown optimizer '" + config.type + "'; expected sgd, adam or adamw");
}

template class Optimizer<float>;
template class Optimizer<double>;
template std::unique_ptr<Optimizer<float>> make_optimizer<float>(const OptimizerConfig&, Index);
template std::unique_ptr<Optimizer<double>> make_optimizer<double>(const OptimizerConfig&, Index);

}  // namespace mpiddp::optim
