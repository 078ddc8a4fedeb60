#pragma once
// The one registry of layer types: each type is named, parsed, validated, built and
// described in one place (its entry). The built-in types are registered on first use
// (builtin_layer_types in layer_registry.cpp); a program adds its own with
// register_layer_type before it parses a config.
//
// Parsing needs no shapes and happens with the config; building knows the input shape, so
// shape errors (a kernel larger than its input) are found there and name the same key path.
#include <any>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/core/input_kind.hpp"
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/nn/layer.hpp"

namespace mpiddp::nn {

// One layer of a model description, parsed: {"type":"conv2d","out":16,"kernel":3}.
struct LayerSpec {
  std::string type;
  std::string key;    // "model.layers[3]": its place in the config, for messages
  std::any options;   // the type's own options, as its entry's parse made them
};

template <typename T>
using LayerBuilder = std::function<std::unique_ptr<Layer<T>>(const LayerSpec&, const Shape& input)>;

struct LayerType {
  std::string name;
  // Reads and validates the layer's keys from its section ("type" already read); a
  // ConfigError names the key path. Returns the options that build receives in spec.options.
  std::function<std::any(io::JsonSection&)> parse;
  LayerBuilder<float> build_float;
  LayerBuilder<double> build_double;
  // What the type takes as a model's first layer: values, or token ids (embedding, whose
  // class also implements TakesTokenIds, nn/batch_input.hpp). A model's data must give it.
  InputKind input = InputKind::kValues;
};

// Registers a type for every parse and build after it; ConfigError-free: a second type of
// the same name is a programming error (std::logic_error).
void register_layer_type(LayerType type);
// Null when no type has that name.
const LayerType* find_layer_type(const std::string& name);
// Every registered name, in registration order (for messages).
std::vector<std::string> layer_type_names();

// An entry for a layer class L<T> constructed as L<T>(const Options&, const Shape& input,
// const std::string& key), where Options::parse(io::JsonSection&) reads the keys.
template <typename Options, template <typename> class L>
LayerType make_layer_type(std::string name) {
  LayerType type;
  type.name = std::move(name);
  type.parse = [](io::JsonSection& section) -> std::any { return Options::parse(section); };
  type.build_float = [](const LayerSpec& spec, const Shape& input) -> std::unique_ptr<Layer<float>> {
    return std::make_unique<L<float>>(std::any_cast<const Options&>(spec.options), input, spec.key);
  };
  type.build_double = [](const LayerSpec& spec, const Shape& input) -> std::unique_ptr<Layer<double>> {
    return std::make_unique<L<double>>(std::any_cast<const Options&>(spec.options), input, spec.key);
  };
  return type;
}

// What a model with these layers takes: its first layer's input kind.
InputKind model_input_kind(const std::vector<LayerSpec>& layers);

// Parses the list under `key` of `parent` (a residual's "layers", the model's "layers"):
// a non-empty array of layer objects, each with a registered "type". Records the resolved
// list in parent.
std::vector<LayerSpec> parse_layer_list(io::JsonSection& parent, const std::string& key);
// The same for a JSON array on its own (tests, library callers); key_path names it in errors.
std::vector<LayerSpec> parse_layer_list(const io::Json& list, const std::string& key_path = "model.layers");

// Builds one layer for its input shape; a ConfigError names spec.key when they do not fit.
template <typename T>
std::unique_ptr<Layer<T>> build_layer(const LayerSpec& spec, const Shape& input);

}  // namespace mpiddp::nn
