#pragma once
// The one registry of loss types, as layer_registry.hpp is of layers: each type is named,
// parsed, built and says which targets it takes in one place (its entry). The built-in
// types (mse, cross_entropy) are registered on first use; a program adds its own with
// register_loss_type before it parses a config (docs/library.md, examples/label_smoothing/).
//
// In a config, "loss" is a type's name ("mse") or an object with its keys
// ({"type": "cross_entropy"}); the name alone takes the type's defaults.
#include <any>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/core/target_kind.hpp"
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/nn/loss.hpp"

namespace mpiddp::nn {

// A config's loss, parsed.
struct LossSpec {
  std::string type = "mse";
  std::any options;  // the type's own options, as its entry's parse made them
};

template <typename T>
using LossBuilder = std::function<std::unique_ptr<Loss<T>>(const LossSpec&)>;

struct LossType {
  std::string name;
  std::vector<TargetKind> targets;  // the kinds of targets it trains on
  std::string needs;                // what they are called in a message: "class labels"
  // Reads and validates the loss's keys from its section ("type" already read; an absent
  // section when the config names the type alone); a ConfigError names the key path.
  std::function<std::any(io::JsonSection&)> parse = [](io::JsonSection&) { return std::any(); };
  LossBuilder<float> build_float;
  LossBuilder<double> build_double;

  bool takes(TargetKind kind) const {
    for (TargetKind t : targets)
      if (t == kind) return true;
    return false;
  }
};

// Registers a type for every parse and build after it; a second type of the same name is a
// programming error (std::logic_error).
void register_loss_type(LossType type);
// Null when no type has that name.
const LossType* find_loss_type(const std::string& name);
// Every registered name, in registration order.
std::vector<std::string> loss_type_names();
// The first registered type that takes `kind` (for a message's suggestion), or null.
const LossType* first_loss_type_taking(TargetKind kind);

// An entry for a loss class L<T> constructed as L<T>(const Options&), where
// Options::parse(io::JsonSection&) reads the keys.
template <typename Options, template <typename> class L>
LossType make_loss_type(std::string name, std::vector<TargetKind> targets, std::string needs) {
  LossType type;
  type.name = std::move(name);
  type.targets = std::move(targets);
  type.needs = std::move(needs);
  type.parse = [](io::JsonSection& section) -> std::any { return Options::parse(section); };
  type.build_float = [](const LossSpec& spec) -> std::unique_ptr<Loss<float>> {
    return std::make_unique<L<float>>(std::any_cast<const Options&>(spec.options));
  };
  type.build_double = [](const LossSpec& spec) -> std::unique_ptr<Loss<double>> {
    return std::make_unique<L<double>>(std::any_cast<const Options&>(spec.options));
  };
  return type;
}

// Reads `key` ("loss") of `parent`: a registered type's name, or an object with "type" and
// the type's keys. Records the resolved value in parent: the name as given, or the object.
LossSpec parse_loss(io::JsonSection& parent, const std::string& key = "loss");

// Builds the loss; a ConfigError on key "loss" when its type is not registered.
template <typename T>
std::unique_ptr<Loss<T>> build_loss(const LossSpec& spec);

}  // namespace mpiddp::nn
