#include "mpiddp/nn/residual.hpp"

#include "mpiddp/core/error.hpp"
#include "mpiddp/nn/layer_registry.hpp"

namespace mpiddp::nn {

ResidualOptions ResidualOptions::parse(io::JsonSection& section) {
  ResidualOptions options;
  options.body = parse_layer_list(section, "layers");
  // Read only when given, so a config without it resolves (and hashes) as it always did.
  if (section.has("recompute")) options.recompute = section.boolean("recompute", false);
  return options;
}

io::Json without_recompute(io::Json layers) {
  if (!layers.is_array()) return layers;
  for (io::Json& layer : layers) {
    if (!layer.is_object() || layer.value("type", "") != "residual") continue;
    layer.erase("recompute");
    if (layer.contains("layers")) layer["layers"] = without_recompute(std::move(layer["layers"]));
  }
  return layers;
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

// Recomputing runs the body's forward twice in a step: each of its layers must give the same
// bits, and leave the same state, the second time.
template <typename T>
void check_recomputable(const Sequential<T>& body, const std::vector<LayerSpec>& specs, const std::string& key) {
  for (size_t l = 0; l < body.size(); ++l)
    if (!body.layer(l).can_run_forward_twice())
      throw ConfigError(key + ".recompute",
                        "the body's layer " + specs[l].key + " (" + body.layer(l).describe() +
                            ") cannot run its forward twice in a step, as recomputing does (a "
                            "batchnorm's training forward moves its running statistics, so a second "
                            "one would move them again); keep recompute false on this residual");
}

}  // namespace

template <typename T>
Residual<T>::Residual(const ResidualOptions& options, const Shape& input, const std::string& key)
    : Layer<T>(input, input), body_(options.body, input), recompute_(options.recompute) {
  kept_shape(body_, input, key);
  if (recompute_) check_recomputable(body_, options.body, key);
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
size_t Residual<T>::kept_bytes(Index max_batch) const {
  return scratch_values_bytes<T>(this->outputs() * max_batch) + align_scratch(body_.scratch_bytes(max_batch));
}

template <typename T>
size_t Residual<T>::scratch_bytes(Index max_batch) const {
  return recompute_ ? 0 : kept_bytes(max_batch);
}

// Recomputing: body_out_, the body's scratch, then the body's own transient memory (where a
// recomputing residual inside the body keeps its body's), all used within one call.
template <typename T>
size_t Residual<T>::transient_bytes(Index max_batch) const {
  const size_t body_transient = body_.transient_bytes(max_batch);
  return recompute_ ? kept_bytes(max_batch) + align_scratch(body_transient) : body_transient;
}

template <typename T>
void Residual<T>::bind(const LayerMemory<T>& memory) {
  std::byte* kept = recompute_ ? memory.transient : memory.scratch;
  body_out_ = reinterpret_cast<T*>(kept);
  LayerMemory<T> body = memory;
  body.scratch = kept + scratch_values_bytes<T>(this->outputs() * memory.max_batch);
  if (recompute_) body.transient = kept + kept_bytes(memory.max_batch);
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
  const Index batch = x.cols();
  // The layers after this one have overwritten forward's transient memory. The same input
  // and context (step, epoch, positions: dropout's masks) give the body's activations and
  // scratch again, bit for bit (Layer::can_run_forward_twice).
  if (recompute_) body_.forward(context, x, MatrixView<T>(body_out_, this->outputs(), batch));
  // d(x + body(x))/dx = I + dbody/dx: the body's input gradient plus dy itself.
  body_.backward(context, x, ConstMatrixView<T>(body_out_, this->outputs(), batch), dy, dx);
  if (dx) *dx += dy;
}

template class Residual<float>;
template class Residual<double>;

}  // namespace mpiddp::nn
