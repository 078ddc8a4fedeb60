#pragma once
// A batch as a model's first layer takes it: real values, or integer token ids that reach the
// first layer (embedding) as integers, never through a float conversion.
#include <cstdint>

#include "mpiddp/core/input_kind.hpp"
#include "mpiddp/core/types.hpp"
#include "mpiddp/nn/context.hpp"

namespace mpiddp::nn {

template <typename T>
struct BatchInput {
  InputKind kind = InputKind::kValues;
  const T* values = nullptr;           // (inputs, B), kind kValues
  const int32_t* token_ids = nullptr;  // (positions, B), kind kTokenIds
  Index rows = 0;                      // inputs or positions per sample
  Index columns = 0;                   // B

  static BatchInput of_values(ConstMatrixView<T> x) { return {InputKind::kValues, x.data(), nullptr, x.rows(), x.cols()}; }
  static BatchInput of_token_ids(const int32_t* ids, Index positions, Index batch) {
    return {InputKind::kTokenIds, nullptr, ids, positions, batch};
  }
  ConstMatrixView<T> value_view() const { return ConstMatrixView<T>(values, rows, columns); }
};

// A layer that takes token ids (embedding) implements this beside Layer<T>; a model whose
// first layer does is fed ids. Its Layer<T>::forward and backward on values are never called.
template <typename T>
class TakesTokenIds {
 public:
  virtual ~TakesTokenIds() = default;
  // ids: (positions, B), each in [0, vocabulary()) -> y: (outputs, B).
  virtual void forward_ids(const PassContext& context, const int32_t* ids, Index batch, MatrixView<T> y) = 0;
  // Adds dLoss/dparameters for dy = dLoss/dy of the forward over the same ids.
  virtual void backward_ids(const PassContext& context, const int32_t* ids, Index batch,
                            ConstMatrixView<T> dy) = 0;
  virtual Index vocabulary() const = 0;
};

}  // namespace mpiddp::nn
