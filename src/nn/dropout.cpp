#include "mpiddp/nn/dropout.hpp"

#include <cmath>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/hash.hpp"
#include "mpiddp/core/philox.hpp"
#include "mpiddp/core/rng.hpp"

namespace mpiddp::nn {

// Note [the dropout counter]
// Value j of the sample at global position q, in step `step` of epoch `epoch`, is dropped
// when u < p, where u = w * 2^-32 and w is lane j % 4 of
//   philox4x32_10(counter = (j / 4, q, step, epoch), key = mix_seed(seed, salt))
// (the key's low 32 bits first), salt = fnv1a of the layer's key path, so two dropout
// layers of one model draw different masks. Every word must fit in 32 bits:
//   j / 4  < 2^32  since a sample has at most 2^34 values (checked when the layer is built);
//   q      < 2^32  a position inside one step's global batch, far below that in practice;
//   step   < 2^32  the global step, counted from 1: 4 billion steps;
//   epoch  < 2^32.
// The last three are checked in every training pass, so a wrap can never repeat a mask.

namespace {

constexpr int64_t kWord = int64_t{1} << 32;

const Shape& dropout_input(const Shape& input, const std::string& key) {
  if ((shape_size(input) + 3) / 4 > kWord)
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
  // Note [the dropout counter]
  if (context.step < 0 || context.step >= kWord || context.epoch < 0 || context.epoch >= kWord)
    throw Error(kExitFailure,
                key_ + ": dropout's counter needs step and epoch in [0, 2^32), got step " +
                    std::to_string(context.step) + ", epoch " + std::to_string(context.epoch),
                Scope::kEveryRank);
  const uint64_t seed = mix_seed(context.seed, salt_);
  const PhiloxKey key = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  const auto step = static_cast<uint32_t>(context.step);
  const auto epoch = static_cast<uint32_t>(context.epoch);
  const Index values = this->inputs();
  MatrixView<T> mask(mask_, values, x.cols());
  for (Index b = 0; b < x.cols(); ++b) {
    const Index q = context.position(b);
    if (q < 0 || q >= kWord)
      throw Error(kExitFailure,
                  key_ + ": dropout's counter needs sample positions in [0, 2^32), got " +
                      std::to_string(q));
    T* m = mask.col(b).data();  // (inputs)
    for (Index j = 0; j < values; j += 4) {
      const PhiloxCounter words = philox4x32_10(
          {static_cast<uint32_t>(j / 4), static_cast<uint32_t>(q), step, epoch}, key);
      for (Index lane = 0; lane < 4 && j + lane < values; ++lane) {
        const double u = static_cast<double>(words[static_cast<size_t>(lane)]) * 0x1p-32;
        m[j + lane] = u < p_ ? T(0) : scale_;
      }
    }
  }
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
