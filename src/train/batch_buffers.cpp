// A set of batch buffers and what it holds (include/mpiddp/train/batch_buffers.hpp).
#include "mpiddp/train/batch_buffers.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace mpiddp::train {

namespace {

// The alignment of every buffer's start (allocate_buffer in core/memory.hpp: AVX-512's).
constexpr size_t kBufferAlignment = 64;

}  // namespace

void BatchContents::assign(const Index* indices, Index n, uint64_t seed_drawn, int64_t epoch_drawn) {
  if (n > static_cast<Index>(samples.size())) throw std::logic_error("a batch larger than its buffers");
  std::copy_n(indices, n, samples.data());
  count = n;
  seed = seed_drawn;
  epoch = epoch_drawn;
}

Index BatchContents::find(const Index* indices, Index n, uint64_t seed_asked, int64_t epoch_asked) const {
  if (n <= 0 || n > count || seed_asked != seed || epoch_asked != epoch) return -1;
  for (Index first = 0; first + n <= count; ++first)
    if (std::equal(indices, indices + n, samples.data() + first)) return first;
  return -1;
}

template <typename T>
BatchBuffers<T>::BatchBuffers(Index capacity, Index inputs, InputKind kind, Index target_outputs,
                              Index label_rows)
    : kind_(kind), contents_(capacity) {
  if (kind == InputKind::kTokenIds)
    token_ids_.assign(inputs * capacity, 0);
  else
    x_.assign(inputs * capacity, T(0));
  y_.assign(target_outputs * capacity, T(0));
  labels_.assign(label_rows * capacity, 0);
}

template <typename T>
void BatchBuffers<T>::gather(const data::Dataset<T>& set, const Index* samples, Index count) {
  contents_.count = 0;
  const Index f = set.features, l = set.label_positions;
  for (Index j = 0; j < count; ++j) {
    const Index i = samples[j];
    if (set.token_ids)
      std::copy_n(set.token_ids + set.token_offset(i), f, token_ids_.data() + j * f);
    else
      std::copy_n(set.x + i * f, f, x_.data() + j * f);
    if (set.is_classification()) {
      std::copy_n(set.labels + set.label_offset(i), l, labels_.data() + j * l);
    } else {
      std::memcpy(y_.data() + j * set.outputs, set.y + i * set.outputs,
                  static_cast<size_t>(set.outputs) * sizeof(T));
    }
  }
  x_rows_ = set.features;
  y_rows_ = set.outputs;
  label_rows_ = l;
}

template <typename T>
void BatchBuffers<T>::gather_training(const data::Dataset<T>& set, const Index* samples, Index count,
                                      data::Augmentation<T>& augmentation, uint64_t seed, int64_t epoch) {
  gather(set, samples, count);
  if (!augmentation.empty()) augmentation.apply(x_.data(), count, samples, seed, epoch);
  contents_.assign(samples, count, seed, epoch);
}

// Note [a part of a held batch]
// A pass over a part of the batch held (micro-batch m of accumulate_steps K is columns
// [m b/K, (m + 1) b/K) of its step's prefetched batch) reads it where it lies, without a copy,
// when that gives the bits a gather of the part alone would: the gather puts its first sample
// at column 0, at the start of a buffer, on a 64-byte boundary (allocate_buffer). Where a
// value buffer starts can change the arithmetic: Eigen's vectorised reductions add the scalars
// before the first aligned packet on their own (first_default_aligned), so a column starting
// 16 bytes past a boundary is summed in another order, and a library may pick its kernel by
// alignment. So a part stays in place only when its offset into each value buffer (the inputs
// and the regression targets) is a whole number of 64 bytes, and every address then has the
// remainder modulo 64 that column 0's has. Integers (token ids, labels) are exact wherever they
// lie. Otherwise the part moves to column 0 (memmove: it may overlap), and the contents say so;
// the columns from `count` on are untouched, and with them the later micro-batches.
template <typename T>
Index BatchBuffers<T>::place(Index first, Index count) {
  const size_t x_offset = kind_ == InputKind::kValues ? static_cast<size_t>(first * x_rows_) * sizeof(T) : 0;
  const size_t y_offset = static_cast<size_t>(first * y_rows_) * sizeof(T);
  if (x_offset % kBufferAlignment == 0 && y_offset % kBufferAlignment == 0) return first;
  auto move_columns = [&](auto* data, Index rows) {
    if (rows > 0) std::memmove(data, data + first * rows, static_cast<size_t>(count * rows) * sizeof(*data));
  };
  if (kind_ == InputKind::kTokenIds)
    move_columns(token_ids_.data(), x_rows_);
  else
    move_columns(x_.data(), x_rows_);
  move_columns(y_.data(), y_rows_);
  move_columns(labels_.data(), label_rows_);
  std::copy_n(contents_.samples.data() + first, count, contents_.samples.data());  // forward: dst before src
  return 0;
}

template <typename T>
nn::BatchInput<T> BatchBuffers<T>::input(Index first, Index count) const {
  if (kind_ == InputKind::kTokenIds)
    return nn::BatchInput<T>::of_token_ids(token_ids_.data() + first * x_rows_, x_rows_, count);
  return nn::BatchInput<T>::of_values(ConstMatrixView<T>(x_.data() + first * x_rows_, x_rows_, count));
}

template <typename T>
nn::BatchTargets<T> BatchBuffers<T>::targets(Index first) const {
  return {y_.data() + first * y_rows_, labels_.data() + first * label_rows_, label_rows_};
}

template <typename T>
void BatchBuffers<T>::swap(BatchBuffers& other) noexcept {
  using std::swap;
  swap(kind_, other.kind_);
  swap(x_rows_, other.x_rows_);
  swap(y_rows_, other.y_rows_);
  swap(label_rows_, other.label_rows_);
  swap(x_, other.x_);
  swap(token_ids_, other.token_ids_);
  swap(y_, other.y_);
  swap(labels_, other.labels_);
  swap(contents_, other.contents_);
}

template class BatchBuffers<float>;
template class BatchBuffers<double>;

}  // namespace mpiddp::train
