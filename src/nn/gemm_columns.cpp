#include "mpiddp/nn/gemm_columns.hpp"

#include <algorithm>
#include <cstring>
#include <set>

#include "mpiddp/core/rng.hpp"

namespace mpiddp::nn {

std::vector<Index> chunked_product_pieces(Index chunk) {
  constexpr Index kMostColumns = 128;
  std::vector<Index> pieces;
  for (Index piece = chunk; piece <= kMostColumns || pieces.empty(); piece *= 2) pieces.insert(pieces.begin(), piece);
  return pieces;
}

std::vector<Index> chunked_product_widths(Index chunks, Index chunk, Index piece) {
  std::set<Index> widths;
  for (Index world = 1; world <= chunks; ++world) {
    if (chunks % world != 0) continue;
    const Index columns = chunks / world * chunk;  // a rank's
    if (columns >= piece) widths.insert(piece);
    if (columns % piece != 0) widths.insert(columns % piece);
  }
  return {widths.begin(), widths.end()};
}

std::vector<GemmShape> column_products(const std::vector<GemmCall>& calls) {
  std::vector<GemmShape> products;
  for (const GemmCall& call : calls)
    if (call.shape.op_b == Op::kNone &&
        std::find(products.begin(), products.end(), call.shape) == products.end())
      products.push_back(call.shape);
  return products;
}

template <typename T>
bool column_bits_hold(const std::vector<GemmShape>& products, Index chunk, const std::vector<Index>& widths) {
  if (widths.empty()) return true;
  const Index columns = *std::max_element(widths.begin(), widths.end());
  Rng rng(20261202);
  for (const GemmShape& shape : products) {
    // a: op(a) is (m, k); b: (k, columns); values of either sign, so that the order of the
    // additions shows in the last bits.
    const Index a_rows = shape.op_a == Op::kTranspose ? shape.k : shape.m;
    const Index a_cols = shape.op_a == Op::kTranspose ? shape.m : shape.k;
    std::vector<T> a(static_cast<size_t>(shape.m * shape.k)), b(static_cast<size_t>(shape.k * columns));
    for (T& v : a) v = static_cast<T>(rng.uniform(-1.0, 1.0));
    for (T& v : b) v = static_cast<T>(rng.uniform(-1.0, 1.0));
    ConstMatrixView<T> av(a.data(), a_rows, a_cols);
    // The reference: each chunk's columns in a product of their own.
    std::vector<T> reference(static_cast<size_t>(shape.m * columns)), c(reference.size());
    for (Index first = 0; first + chunk <= columns; first += chunk)
      multiply(MatrixView<T>(reference.data() + first * shape.m, shape.m, chunk), av, shape.op_a,
               ConstMatrixView<T>(b.data() + first * shape.k, shape.k, chunk), Op::kNone, Accumulate::kOverwrite);
    for (Index width : widths) {
      const Index used = columns / width * width;
      multiply_in_pieces(MatrixView<T>(c.data(), shape.m, used), av, shape.op_a,
                         ConstMatrixView<T>(b.data(), shape.k, used), Accumulate::kOverwrite, width);
      if (std::memcmp(c.data(), reference.data(), static_cast<size_t>(shape.m * used) * sizeof(T)) != 0)
        return false;
    }
  }
  return true;
}

template bool column_bits_hold<float>(const std::vector<GemmShape>&, Index, const std::vector<Index>&);
template bool column_bits_hold<double>(const std::vector<GemmShape>&, Index, const std::vector<Index>&);

}  // namespace mpiddp::nn
