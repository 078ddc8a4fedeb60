#include "mpiddp/nn/flatten.hpp"

namespace mpiddp::nn {

template <typename T>
Flatten<T>::Flatten(const FlattenOptions&, const Shape& input, const std::string&)
    : Layer<T>(input, {shape_size(input)}) {}

template <typename T>
void Flatten<T>::forward(const PassContext&, ConstMatrixView<T> x, MatrixView<T> y) {
  y = x;  // (C*H*W, B) either way: the same values in the same order
}

template <typename T>
void Flatten<T>::backward(const PassContext&, ConstMatrixView<T>, ConstMatrixView<T>,
                          ConstMatrixView<T> dy, MatrixView<T>* dx) {
  if (dx) *dx = dy;
}

template class Flatten<float>;
template class Flatten<double>;

}  // namespace mpiddp::nn
