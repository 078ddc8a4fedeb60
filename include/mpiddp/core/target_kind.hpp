#pragma once
// What a dataset's targets are, and so which losses can train on it: a dataset declares its
// kind (data/dataset.hpp), a loss type the kinds it takes (nn/loss_registry.hpp).
#include <string>

namespace mpiddp {

enum class TargetKind {
  kNone,              // no targets
  kValues,            // regression: `outputs` float values per sample
  kClassPerSample,    // classification: one class index per sample
  kClassPerPosition,  // one class index per position of a sequence (a language model's)
};

// How a message describes a set with such targets: "(name) is a regression dataset".
inline std::string target_kind_phrase(TargetKind kind) {
  switch (kind) {
    case TargetKind::kNone: return "has no targets";
    case TargetKind::kValues: return "is a regression dataset";
    case TargetKind::kClassPerSample: return "has class labels";
    case TargetKind::kClassPerPosition: return "has a class label per position";
  }
  return "";
}

// What the model's output width is compared with: "10 classes", "3 targets per sample",
// "640 outputs per sample (classes at each position)".
inline std::string target_width_noun(TargetKind kind) {
  switch (kind) {
    case TargetKind::kValues: return "targets per sample";
    case TargetKind::kClassPerPosition: return "outputs per sample (classes at each position)";
    default: return "classes";
  }
}

}  // namespace mpiddp
