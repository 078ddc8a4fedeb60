#pragma once
// Which library computes deterministic mode's products, and whether its steps take the
// chunked pass (Note [the chunked pass] in src/train/deterministic_step.cpp).
//
// Note [deterministic mode's library]
// The bits of a deterministic run follow the library, so the choice must not depend on the
// world size, and it must stay the same from run to run. Chunk by chunk, every product has
// the same shape at every N, and any library gives the same bits at every N; `auto` is Eigen
// there, compiled in, so that a portable build (-DMPIDDP_NATIVE=OFF) gives the same bits on
// any x86-64 machine. The chunked pass makes its products over all of a rank's chunks at
// once, so it needs a library whose column bits do not follow the width: Eigen's do on whole
// panels; another library's are measured (Note [column bits by measurement] in
// kernels/gemm_columns.hpp). In a native build, `auto` for a chunked pass takes the library the
// default mode's `auto` measures as fastest on the pass's own products at the most columns a
// product takes (the same products at every N, so the same entry of the remembered choice,
// Note [the choice is remembered]), when its column bits hold; otherwise Eigen. A choice that
// could not be remembered (no cache directory) is not taken: a second measurement might
// differ. A library named in compute.gemm is used as named, and takes the chunked pass
// only where its column bits hold.
#include <string>

#include "mpiddp/nn/model.hpp"
#include "mpiddp/train/gemm_choice.hpp"

namespace mpiddp::train {

// The most columns one forward product and one input-gradient product take in a chunked
// pass: each kind at the widest piece at which the library keeps every such product's column
// bits (oneDNN on a Zen 5: 128 for mlp's forward products, 64 for its 1024 x 1024 input
// gradient). Both 0: the step goes chunk by chunk.
struct PassPieces {
  Index forward = 0;
  Index input_gradient = 0;
  bool chunked() const { return forward > 0 && input_gradient > 0; }
  Index widest() const { return forward > input_gradient ? forward : input_gradient; }
};

struct DeterministicGemm {
  GemmChoice choice;
  // The pieces of the chunked pass of a step with chunks of the full size (B/C), and of the
  // epoch's last step with its shorter chunks.
  PassPieces full;
  PassPieces last;
};

// Rank 0's decision (the trainer sends it to the others). `configured`: compute.gemm;
// chunks: C; chunk and last_chunk: the samples a chunk holds in a full step and in the
// epoch's last one. Leaves the chosen backend in use, at one thread.
template <typename T>
DeterministicGemm choose_deterministic_gemm(const std::string& configured, const nn::Model<T>& model,
                                            Index chunks, Index chunk, Index last_chunk);

}  // namespace mpiddp::train
