#include "mpiddp/nn/shape.hpp"

namespace mpiddp::nn {

Index shape_size(const Shape& shape) {
  Index n = 1;
  for (Index d : shape) n *= d;
  return n;
}

std::string shape_text(const Shape& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + ")";
}

std::string shape_tag(const Shape& shape) {
  std::string text;
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "x" : "") + std::to_string(shape[i]);
  return text;
}

}  // namespace mpiddp::nn
