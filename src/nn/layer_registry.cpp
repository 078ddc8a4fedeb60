#include "mpiddp/nn/layer_registry.hpp"

#include <type_traits>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/registry.hpp"
#include "mpiddp/nn/activation.hpp"
#include "mpiddp/nn/attention.hpp"
#include "mpiddp/nn/avgpool2d.hpp"
#include "mpiddp/nn/batchnorm.hpp"
#include "mpiddp/nn/conv2d.hpp"
#include "mpiddp/nn/dropout.hpp"
#include "mpiddp/nn/embedding.hpp"
#include "mpiddp/nn/flatten.hpp"
#include "mpiddp/nn/global_avgpool.hpp"
#include "mpiddp/nn/layernorm.hpp"
#include "mpiddp/nn/linear.hpp"
#include "mpiddp/nn/maxpool2d.hpp"
#include "mpiddp/nn/position_embedding.hpp"
#include "mpiddp/nn/residual.hpp"

namespace mpiddp::nn {

namespace {

LayerType activation_type(std::string name, ActivationKind kind) {
  LayerType type;
  type.name = std::move(name);
  type.parse = [kind](io::JsonSection&) -> std::any { return kind; };
  type.build_float = [](const LayerSpec& spec, const Shape& input) -> std::unique_ptr<Layer<float>> {
    return std::make_unique<Activation<float>>(std::any_cast<ActivationKind>(spec.options), input);
  };
  type.build_double = [](const LayerSpec& spec, const Shape& input) -> std::unique_ptr<Layer<double>> {
    return std::make_unique<Activation<double>>(std::any_cast<ActivationKind>(spec.options), input);
  };
  return type;
}

// gelu's "approximate": "none" (the erf form, PyTorch's default) or "tanh". Read only when
// given, so a config without it resolves as it always did.
LayerType gelu_type() {
  LayerType type = activation_type("gelu", ActivationKind::kGelu);
  type.parse = [](io::JsonSection& section) -> std::any {
    if (!section.has("approximate")) return ActivationKind::kGelu;
    return section.choice("approximate", "none", {"none", "tanh"}) == "tanh" ? ActivationKind::kGeluTanh
                                                                              : ActivationKind::kGelu;
  };
  return type;
}

// Every built-in layer type: the one list (docs/config.md describes their keys).
std::vector<LayerType> builtin_layer_types() {
  std::vector<LayerType> types;
  types.push_back(make_layer_type<LinearOptions, Linear>("linear"));
  types.push_back(activation_type("tanh", ActivationKind::kTanh));
  types.push_back(activation_type("relu", ActivationKind::kRelu));
  types.push_back(activation_type("sigmoid", ActivationKind::kSigmoid));
  types.push_back(gelu_type());
  types.push_back(make_layer_type<Conv2dOptions, Conv2d>("conv2d"));
  types.push_back(make_layer_type<Pool2dOptions, MaxPool2d>("maxpool2d"));
  types.push_back(make_layer_type<Pool2dOptions, AvgPool2d>("avgpool2d"));
  types.push_back(make_layer_type<GlobalAvgPoolOptions, GlobalAvgPool>("global_avgpool"));
  types.push_back(make_layer_type<FlattenOptions, Flatten>("flatten"));
  types.push_back(make_layer_type<BatchNorm1dOptions, BatchNorm>("batchnorm1d"));
  types.push_back(make_layer_type<BatchNorm2dOptions, BatchNorm>("batchnorm2d"));
  types.push_back(make_layer_type<DropoutOptions, Dropout>("dropout"));
  types.push_back(make_layer_type<ResidualOptions, Residual>("residual"));
  types.push_back(make_layer_type<PositionEmbeddingOptions, PositionEmbedding>("position_embedding"));
  types.push_back(make_layer_type<LayerNormOptions, LayerNorm>("layernorm"));
  types.push_back(make_layer_type<AttentionOptions, Attention>("attention"));
  LayerType embedding = make_layer_type<EmbeddingOptions, Embedding>("embedding");
  embedding.input = InputKind::kTokenIds;
  types.push_back(std::move(embedding));
  return types;
}

NamedRegistry<LayerType>& layer_registry() {
  static NamedRegistry<LayerType> instance(builtin_layer_types(), "layer type");
  return instance;
}

std::string names_text() { return alternatives_text(layer_type_names()); }

}  // namespace

InputKind model_input_kind(const std::vector<LayerSpec>& layers) {
  const LayerType* first = layers.empty() ? nullptr : find_layer_type(layers.front().type);
  return first ? first->input : InputKind::kValues;
}

void register_layer_type(LayerType type) { layer_registry().add(std::move(type)); }

const LayerType* find_layer_type(const std::string& name) { return layer_registry().find(name); }

std::vector<std::string> layer_type_names() { return layer_registry().names(); }

namespace {

// An unread key of a layer's section is an error. A "recompute" there is a residual's key
// put on the layers inside it, so the message says where it belongs.
void finish_layer_section(io::JsonSection& section, const LayerSpec& spec) {
  try {
    section.finish();
  } catch (const ConfigError& e) {
    if (e.key_path() != spec.key + ".recompute") throw;
    throw ConfigError(e.key_path(), "unknown key of a " + spec.type +
                                        " layer: recompute belongs to a residual (its body's forward "
                                        "runs again in backward); set it on the residual around the "
                                        "layers: {\"type\": \"residual\", \"recompute\": true, "
                                        "\"layers\": [...]}");
  }
}

std::vector<LayerSpec> parse_list(const io::Json* list, const std::string& key_path,
                                  io::Json& resolved_out) {
  if (!list) throw ConfigError(key_path, "required key is missing");
  if (!list->is_array() || list->empty())
    throw ConfigError(key_path, "expected a non-empty list of layers like "
                                "[{\"type\":\"linear\",\"out\":48}, {\"type\":\"tanh\"}]");
  std::vector<LayerSpec> specs;
  resolved_out = io::Json::array();
  for (size_t i = 0; i < list->size(); ++i) {
    LayerSpec spec;
    spec.key = key_path + "[" + std::to_string(i) + "]";
    io::JsonSection section(&(*list)[i], spec.key);
    const io::Json* type = section.raw("type");
    if (!type) throw ConfigError(spec.key + ".type", "required key is missing");
    if (!type->is_string()) throw ConfigError(spec.key + ".type", "expected a layer type name");
    spec.type = type->get<std::string>();
    const LayerType* entry = find_layer_type(spec.type);
    if (!entry)
      throw ConfigError(spec.key + ".type",
                        "unknown layer type '" + spec.type + "'; expected " + names_text());
    section.put("type", spec.type);
    spec.options = entry->parse(section);
    finish_layer_section(section, spec);
    resolved_out.push_back(section.resolved());
    specs.push_back(std::move(spec));
  }
  return specs;
}

}  // namespace

std::vector<LayerSpec> parse_layer_list(io::JsonSection& parent, const std::string& key) {
  io::Json resolved;
  auto specs = parse_list(parent.raw(key), parent.key_path(key), resolved);
  parent.put(key, std::move(resolved));
  return specs;
}

std::vector<LayerSpec> parse_layer_list(const io::Json& list, const std::string& key_path) {
  io::Json resolved;
  return parse_list(&list, key_path, resolved);
}

template <typename T>
std::unique_ptr<Layer<T>> build_layer(const LayerSpec& spec, const Shape& input) {
  const LayerType* entry = find_layer_type(spec.type);
  if (!entry) throw ConfigError(spec.key + ".type", "unknown layer type '" + spec.type + "'");
  if constexpr (std::is_same_v<T, float>) return entry->build_float(spec, input);
  else return entry->build_double(spec, input);
}

template std::unique_ptr<Layer<float>> build_layer<float>(const LayerSpec&, const Shape&);
template std::unique_ptr<Layer<double>> build_layer<double>(const LayerSpec&, const Shape&);

}  // namespace mpiddp::nn
