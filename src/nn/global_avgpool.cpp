#include "mpiddp/nn/global_avgpool.hpp"

#include "mpiddp/nn/window2d.hpp"

namespace mpiddp::nn {

namespace {

template <typename T>
using RowView = Eigen::Map<Eigen::Matrix<T, 1, Eigen::Dynamic>>;
template <typename T>
using ConstRowView = Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>;

}  // namespace

template <typename T>
GlobalAvgPool<T>::GlobalAvgPool(const GlobalAvgPoolOptions&, const Shape& input,
                                const std::string& key)
    : Layer<T>(input, {image_input(input, key, "global_avgpool").channels}) {}

// A batch (C*H*W, B) is, read as (H*W, C*B), one column per channel of each sample: the
// means are its column means, (C*B) = (C, B).
template <typename T>
void GlobalAvgPool<T>::forward(const PassContext&, ConstMatrixView<T> x, MatrixView<T> y) {
  const Index pixels = this->inputs() / this->outputs(), planes = this->outputs() * x.cols();
  RowView<T>(y.data(), planes) =
      ConstMatrixView<T>(x.data(), pixels, planes).colwise().sum() / static_cast<T>(pixels);
}

// dx = dy / (H*W) at every pixel of the channel.
template <typename T>
void GlobalAvgPool<T>::backward(const PassContext&, ConstMatrixView<T>, ConstMatrixView<T>,
                                ConstMatrixView<T> dy, MatrixView<T>* dx) {
  if (!dx) return;
  const Index pixels = this->inputs() / this->outputs(), planes = this->outputs() * dy.cols();
  MatrixView<T>(dx->data(), pixels, planes).rowwise() =
      ConstRowView<T>(dy.data(), planes) / static_cast<T>(pixels);
}

template class GlobalAvgPool<float>;
template class GlobalAvgPool<double>;

}  // namespace mpiddp::nn
