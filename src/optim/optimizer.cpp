#include "mpiddp/optim/optimizer.hpp"

#include "mpiddp/core/error.hpp"
#include "mpiddp/optim/adam.hpp"
#include "mpiddp/optim/sgd.hpp"

namespace mpiddp::optim {

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

template std::unique_ptr<Optimizer<float>> make_optimizer<float>(const OptimizerConfig&, Index);
template std::unique_ptr<Optimizer<double>> make_optimizer<double>(const OptimizerConfig&, Index);

}  // namespace mpiddp::optim
