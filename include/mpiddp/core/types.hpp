#pragma once
// Matrix conventions used everywhere in mpiddp.
//
// Dimension letters: B = samples in a batch, F = features (inputs of a layer),
// O = outputs of a layer, P = total parameter count.
//
// Activations are Eigen column-major matrices of shape (features, B): each sample is one
// contiguous column, which is the same memory layout as PyTorch's row-major (B, features).
// A linear weight stored row-major [O, F] (PyTorch's layout) is, read column-major, the
// matrix W^T of shape (F, O); layers map it that way, so no transpose is ever copied.
#include <Eigen/Core>
#include <cstddef>
#include <cstdint>

namespace mpiddp {

using Index = Eigen::Index;

template <typename T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
template <typename T>
using MatrixView = Eigen::Map<Matrix<T>>;
template <typename T>
using ConstMatrixView = Eigen::Map<const Matrix<T>>;
// A view whose columns lie `outer stride` values apart: a head's (D, T) inside a (3C, B T)
// buffer, or a block of columns of a view.
template <typename T>
using StridedView = Eigen::Map<Matrix<T>, 0, Eigen::OuterStride<>>;
template <typename T>
using ConstStridedView = Eigen::Map<const Matrix<T>, 0, Eigen::OuterStride<>>;
template <typename T>
ConstStridedView<T> read_only(const StridedView<T>& view) {
  return {view.data(), view.rows(), view.cols(), Eigen::OuterStride<>(view.outerStride())};
}
template <typename T>
using VectorView = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>>;

}  // namespace mpiddp
