#pragma once
// What a model's first layer takes, and so what a dataset must give it: a dataset declares its
// kind (data/dataset.hpp), a layer type the kind it takes when first (nn/layer_registry.hpp).
#include <string>

namespace mpiddp {

enum class InputKind {
  kValues,    // real features, (features, B)
  kTokenIds,  // integer token ids in [0, vocabulary), one per position: (positions, B)
};

// How a message names it: "values", "token ids".
inline std::string input_kind_name(InputKind kind) { return kind == InputKind::kTokenIds ? "token ids" : "values"; }

}  // namespace mpiddp
