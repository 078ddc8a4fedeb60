#include "mpiddp/nn/dropout.hpp"

#include <cmath>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/hash.hpp"
#include "mpiddp/nn/dropout_mask.hpp"

namespace mpiddp::nn {

namespace {

const Shape& dropout_input(const Shape& input, const std::string& key) {
  if (shape_size(input) > DropoutStream::kMaxValues)
    throw ConfigError(key, "dropout over " + shape_text(input) +
                               ": more than 2^34 values per sample do not fit its counter");
  return input;
}

}  // namespace

DropoutOptions DropoutOptions::parse(io::JsonSection& section) {
  DropoutOptions options;
  // p in [0, 1): number() only knows closed ranges, and p = 1 would zero every value.
  const io::Json* p = section.raw("p");
  if (p) {
    if (!p->is_number() || !(p->get<double>() >= 0.0 && p->get<double>() < 1.0))
      throw ConfigError(section.key_path("p"),
                        "expected a drop probability in [0, 1), got " +
                            p->dump(-1, ' ', false, io::Json::error_handler_t::replace));
    options.p = p->get<double>();
  }
  section.put("p", options.p);
  return options;
}

template <typename T>
Dropout<T>::Dropout(const DropoutOptions& options, const Shape& input, const std::string& key)
    : Layer<T>(dropout_input(input, key), input),
      p_(options.p),
      scale_(static_cast<T>(1.0 / (1.0 - options.p))),
      salt_(fnv1a(key)),
      key_(key) {}

template <typename T>
size_t Dropout<T>::scratch_bytes(Index max_batch) const {
  return p_ > 0.0 ? static_cast<size_t>(this->inputs() * max_batch) * sizeof(T) : 0;
}

template <typename T>
void Dropout<T>::bind(const LayerMemory<T>& memory) {
  mask_ = p_ > 0.0 ? reinterpret_cast<T*>(memory.scratch) : nullptr;
}

template <typename T>
void Dropout<T>::forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) {
  if (!active(context)) {
    y = x;
    return;
  }
  // Note [the dropout counter] in dropout_mask.cpp
  const DropoutStream stream(context, salt_, key_);
  const Index values = this->inputs();
  MatrixView<T> mask(mask_, values, x.cols());
  for (Index b = 0; b < x.cols(); ++b) stream.fill(mask.col(b).data(), 0, values, context.position(b), p_, scale_);
  y = x.cwiseProduct(mask);
}

template <typename T>
void Dropout<T>::backward(const PassContext& context, ConstMatrixView<T>, ConstMatrixView<T>,
                          ConstMatrixView<T> dy, MatrixView<T>* dx) {
  if (!dx) return;
  if (!active(context)) {
    *dx = dy;
    return;
  }
  // The mask forward wrote for this pass.
  *dx = dy.cwiseProduct(ConstMatrixView<T>(mask_, this->inputs(), dy.cols()));
}

template class Dropout<float>;
template class Dropout<double>;

}  // namespace mpiddp::nn
