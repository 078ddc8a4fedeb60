#include "mpiddp/nn/residual.hpp"

#include "mpiddp/core/error.hpp"
#include "mpiddp/nn/layer_registry.hpp"

namespace mpiddp::nn {

ResidualOptions ResidualOptions::parse(io::JsonSection& section) {
  return {parse_layer_list(section, "layers")};
}

namespace {

template <typename T>
const Shape& kept_shape(const Sequential<T>& body, const Shape& input, const std::string& key) {
  if (body.takes_token_ids())
    throw ConfigError(key, "the residual's body starts with a layer that takes token ids; only the "
                           "model's first layer can");
  if (body.output_shape() != input)
    throw ConfigError(key, "the residual's body maps " + shape_text(input) + " to " +
                               shape_text(body.output_shape()) +
                               "; x + body(x) needs the body to keep the shape");
  return input;
}

}  // namespace

template <typename T>
Residual<T>::Residual(const ResidualOptions& options, const Shape& input, const std::string& key)
    : Layer<T>(input, input), body_(options.body, input) {
  kept_shape(body_, input, key);
}

template <typename T>
std::vector<TensorSpec> Residual<T>::parameters() const {
  auto all = body_.parameters();
  for (TensorSpec& t : all) t.name = "body." + t.name;
  return all;
}

template <typename T>
std::vector<BufferSpec> Residual<T>::buffers() const {
  auto all = body_.buffers();
  for (BufferSpec& b : all) b.name = "body." + b.name;
  return all;
}

template <typename T>
std::vector<TiedTensor> Residual<T>::tied_tensors() const {
  auto all = body_.tied_tensors();
  for (TiedTensor& t : all) t.name = "body." + t.name;
  return all;
}

template <typename T>
size_t Residual<T>::scratch_bytes(Index max_batch) const {
  return scratch_values_bytes<T>(this->outputs() * max_batch) + align_scratch(body_.scratch_bytes(max_batch));
}

template <typename T>
void Residual<T>::bind(const LayerMemory<T>& memory) {
  body_out_ = reinterpret_cast<T*>(memory.scratch);
  LayerMemory<T> body = memory;
  body.scratch = memory.scratch + scratch_values_bytes<T>(this->outputs() * memory.max_batch);
  body_.bind(body);
}

template <typename T>
void Residual<T>::forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) {
  MatrixView<T> body_out(body_out_, this->outputs(), x.cols());
  body_.forward(context, x, body_out);
  y = x + body_out;
}

template <typename T>
void Residual<T>::backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T>,
                           ConstMatrixView<T> dy, MatrixView<T>* dx) {
  // d(x + body(x))/dx = I + dbody/dx: the body's input gradient plus dy itself.
  ConstMatrixView<T> body_out(body_out_, this->outputs(), x.cols());
  body_.backward(context, x, body_out, dy, dx);
  if (dx) *dx += dy;
}

template class Residual<float>;
template class Residual<double>;

}  // namespace mpiddp::nn
