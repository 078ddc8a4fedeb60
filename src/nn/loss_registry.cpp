#include "mpiddp/nn/loss_registry.hpp"

#include <type_traits>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/registry.hpp"

namespace mpiddp::nn {

namespace {

// An entry for a loss class L<T> that has no keys of its own.
template <template <typename> class L>
LossType keyless_loss_type(std::string name, std::vector<TargetKind> targets, std::string needs) {
  LossType type;
  type.name = std::move(name);
  type.targets = std::move(targets);
  type.needs = std::move(needs);
  type.build_float = [](const LossSpec&) -> std::unique_ptr<Loss<float>> { return std::make_unique<L<float>>(); };
  type.build_double = [](const LossSpec&) -> std::unique_ptr<Loss<double>> { return std::make_unique<L<double>>(); };
  return type;
}

// Every built-in loss type: the one list (docs/config.md describes them).
std::vector<LossType> builtin_loss_types() {
  std::vector<LossType> types;
  types.push_back(keyless_loss_type<MseLoss>("mse", {TargetKind::kValues}, "regression targets"));
  types.push_back(keyless_loss_type<CrossEntropyLoss>(
      "cross_entropy", {TargetKind::kClassPerSample, TargetKind::kClassPerPosition}, "class labels"));
  return types;
}

NamedRegistry<LossType>& loss_registry() {
  static NamedRegistry<LossType> instance(builtin_loss_types(), "loss type");
  return instance;
}

// "\"mse\" or \"cross_entropy\"": the names, quoted, as a message lists them.
std::string quoted_names() {
  std::vector<std::string> names = loss_type_names();
  for (std::string& name : names) name = "\"" + name + "\"";
  return alternatives_text(names);
}

}  // namespace

void register_loss_type(LossType type) { loss_registry().add(std::move(type)); }

const LossType* find_loss_type(const std::string& name) { return loss_registry().find(name); }

std::vector<std::string> loss_type_names() { return loss_registry().names(); }

const LossType* first_loss_type_taking(TargetKind kind) {
  for (const std::string& name : loss_type_names())
    if (const LossType* type = find_loss_type(name); type->takes(kind)) return type;
  return nullptr;
}

namespace {

// A loss given by its name alone, with its type's default options (an unknown name is left
// for build_loss to report).
LossSpec with_defaults(const std::string& type, const std::string& key_path) {
  LossSpec spec;
  spec.type = type;
  if (const LossType* entry = find_loss_type(type)) {
    io::JsonSection defaults(nullptr, key_path);
    spec.options = entry->parse(defaults);
  }
  return spec;
}

}  // namespace

LossSpec parse_loss(io::JsonSection& parent, const std::string& key) {
  LossSpec spec;
  const io::Json* value = parent.raw(key);
  // The name alone: the resolved config keeps it as given, with the type's defaults.
  if (!value || value->is_string())
    return with_defaults(parent.choice(key, spec.type, loss_type_names()), parent.key_path(key));
  if (!value->is_object())
    throw ConfigError(parent.key_path(key), "expected a loss name like \"mse\" or an object like "
                                            "{\"type\": \"cross_entropy\"}, got " + value->dump());
  io::JsonSection section = parent.section(key);
  spec.type = section.required_choice("type", loss_type_names());
  spec.options = find_loss_type(spec.type)->parse(section);
  section.finish();
  return spec;
}

template <typename T>
std::unique_ptr<Loss<T>> build_loss(const LossSpec& spec) {
  const LossType* entry = find_loss_type(spec.type);
  if (!entry) throw ConfigError("loss", "unknown loss '" + spec.type + "'; expected " + quoted_names());
  if constexpr (std::is_same_v<T, float>) return entry->build_float(spec);
  else return entry->build_double(spec);
}

template <typename T>
std::unique_ptr<Loss<T>> make_loss(const std::string& name) {
  return build_loss<T>(with_defaults(name, "loss"));
}

template std::unique_ptr<Loss<float>> build_loss<float>(const LossSpec&);
template std::unique_ptr<Loss<double>> build_loss<double>(const LossSpec&);
template std::unique_ptr<Loss<float>> make_loss<float>(const std::string&);
template std::unique_ptr<Loss<double>> make_loss<double>(const std::string&);

}  // namespace mpiddp::nn
