#include "mpiddp/optim/update_rule.hpp"

#include <algorithm>

#include "mpiddp/core/error.hpp"
#include "mpiddp/optim/adam.hpp"
#include "mpiddp/optim/sgd.hpp"

namespace mpiddp::optim {

template <typename T>
void UpdateRule<T>::step(T* params, const T* grads, double lr, T gradient_scale) {
  const Index parameters = runs_.back().end;
  // The average starts from the parameters the first step starts from (a resumed run's
  // comes from its checkpoint).
  if (!average_.empty() && steps_ == 0) std::copy_n(params, parameters, average_.data());
  ++steps_;
  for (const Run& run : runs_)
    if (run.begin < run.end) update(params, grads, run.begin, run.end, run.decayed ? weight_decay_ : 0.0, lr, gradient_scale);
  if (average_.empty() || steps_ % average_every_ != 0) return;
  const double decay = average_decay_, rest = 1.0 - average_decay_;
  for (Index i = 0; i < parameters; ++i)
    average_[i] = static_cast<T>(decay * static_cast<double>(average_[i]) + rest * static_cast<double>(params[i]));
}

template <typename T>
std::vector<typename UpdateRule<T>::StateBuffer> UpdateRule<T>::state_buffers() {
  std::vector<StateBuffer> buffers = own_state_buffers();
  if (!average_.empty()) buffers.push_back({"ema", &average_});
  return buffers;
}

template <typename T>
void UpdateRule<T>::keep_average(double decay, int64_t every_steps) {
  average_.assign(static_cast<size_t>(runs_.back().end), T(0));
  average_decay_ = decay;
  average_every_ = every_steps;
}

template <typename T>
void UpdateRule<T>::exempt_from_decay(const ParameterRanges& ranges) {
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

namespace {

template <typename T>
std::unique_ptr<UpdateRule<T>> make_rule_of_type(const OptimizerConfig& config, Index parameters) {
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

}  // namespace

template <typename T>
std::unique_ptr<UpdateRule<T>> make_update_rule(const OptimizerConfig& config, Index parameters) {
  auto rule = make_rule_of_type<T>(config, parameters);
  if (config.ema_decay > 0.0) rule->keep_average(config.ema_decay, config.ema_every_steps);
  return rule;
}

int state_values_per_parameter(const OptimizerConfig& config) {
  const int rule = config.type == "sgd" ? (config.momentum != 0.0 ? 1 : 0) : 2;  // Sgd's, Adam's buffers
  // ema: the average, and the live parameters the evaluator keeps while the average stands in
  // their place (Evaluator's live_parameters_).
  return rule + (config.ema_decay > 0.0 ? 2 : 0);
}

template class UpdateRule<float>;
template class UpdateRule<double>;
template std::unique_ptr<UpdateRule<float>> make_update_rule<float>(const OptimizerConfig&, Index);
template std::unique_ptr<UpdateRule<double>> make_update_rule<double>(const OptimizerConfig&, Index);

}  // namespace mpiddp::optim
