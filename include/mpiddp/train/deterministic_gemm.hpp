#pragma once
// Which library computes deterministic mode's products, and whether its steps take the
// chunked pass (Note [the chunked pass] in src/train/deterministic_step.cpp).
//
// Note [deterministic mode's library]
// The bits of a deterministic run follow the library, so the choice must not depend on the
// world size, and it must be the same in every run and on every machine of a kind: `auto` is
// decided by a rule, never by a timing. (Two libraries time within a microsecond of each
// other on small products, so a timed choice, even a remembered one, Note [the choice is
// remembered], can differ between two machines of a kind, or after the cache is cleared.)
// Chunk by chunk, every product has the same shape at every N, and any library gives the
// same bits at every N. The chunked pass makes its products over all of a rank's chunks at
// once, so it needs a library whose column bits do not follow the width: Eigen's do on whole
// panels; another library's are checked by computing, not by timing (Note [column bits by
// measurement] in kernels/gemm_columns.hpp), which gives one verdict for one CPU, library
// and set of shapes. The rule takes oneDNN where its products were measured faster than
// Eigen's and its column bits held on pieces of many chunks (docs/benchmarks.md: AVX-512 on a
// Zen 4, a Zen 5 and a Xeon; on the Zen 5 a deterministic mlp step took 1.44 x the default
// mode's with oneDNN, 2.18 x with Eigen), and Eigen everywhere else. In this order, the first
// step that fails decides Eigen:
//   1. the model takes the chunked pass at B/C samples a chunk (else Eigen, compiled in);
//   2. a native build (a portable build, -DMPIDDP_NATIVE=OFF, keeps Eigen, whose bits are
//      the same on any x86-64 machine);
//   3. oneDNN is built in;
//   4. float32 (oneDNN has no float64 product);
//   5. the CPU has AVX-512 F, read at run time. oneDNN's AVX2 kernels (a Zen 3) keep a
//      column's bits on mlp's chunks of 16 samples only at one chunk a product, which packs
//      the weights again for every chunk: the cost the chunked pass exists to remove (Note
//      [the chunked pass]), where Eigen's products take pieces of 128 columns;
//   6. the pass's typical forward or input-gradient product (kernels::
//      typical_product_multiply_adds), at the widest piece a product can take (kernels::
//      chunked_product_pieces: 128 columns for chunks of 16 samples, 96 for chunks of 48, one
//      chunk where that is wider than 128), has at least
//      kRuleLibraryMultiplyAdds multiply-adds: below, a pass's products take tens of
//      microseconds and the libraries tie;
//   7. oneDNN's column bits hold at every width the pass makes at any world size (computed on
//      rank 0 at start-up: the one step that only the machine can tell).
// OpenBLAS and BLIS are never this `auto`'s: OpenBLAS keeps a column's bits at one chunk only,
// and BLIS's were never studied (either may be named in compute.gemm). Every input is the same
// at every N (the shapes follow B/C, not a rank's share), and none is timed or read from the
// cache. The run record's gemm says "chosen":"rule" and, in "rule", what the rule looked at.
// A library named in compute.gemm is used as named, and takes the chunked pass only where its
// column bits hold.
#include <string>
#include <vector>

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

// The CPU features the rule reads: the level the kernels run at (kernels/isa.hpp), the CPU's
// own as read when the run starts, capped by compute.isa.
struct CpuFeatures {
  bool avx512f = false;
};
CpuFeatures this_cpu_features();

// Step 6's bound: 2^20 multiply-adds, a 64 -> 128 linear layer at 128 columns.
inline constexpr double kRuleLibraryMultiplyAdds = 1 << 20;

// What the rule decides from (Note [deterministic mode's library]), steps 1 to 6.
struct GemmRuleInputs {
  bool chunked_pass = false;                     // every layer supports the pass at B/C
  bool native_build = false;                     // MPIDDP_NATIVE
  std::vector<kernels::GemmBackend> built;       // kernels::available_gemm_backends()
  bool float32 = false;                          // the model's number type
  CpuFeatures cpu;
  // The pass's forward and input-gradient products at its widest piece.
  std::vector<kernels::GemmCall> products;
};

struct GemmRule {
  kernels::GemmBackend backend = kernels::GemmBackend::kEigen;
  // What it looked at, in the rule's order, up to the step that decided, then the library:
  // "chunked pass, native build, onednn built in, float32, cpu avx512f, typical product
  // 6291456 multiply-adds >= 1048576: onednn".
  std::string text;
};

// Steps 1 to 6 of the rule, a pure function; step 7 is choose_deterministic_gemm's.
GemmRule deterministic_gemm_rule(const GemmRuleInputs& inputs);

// The rule's inputs for `model` at chunks of `chunk` samples, on this build and CPU.
template <typename T>
GemmRuleInputs deterministic_gemm_rule_inputs(const nn::Model<T>& model, Index chunk);

// Rank 0's decision (the trainer sends it to the others). `configured`: compute.gemm;
// chunks: C; chunk and last_chunk: the samples a chunk holds in a full step and in the
// epoch's last one. Leaves the chosen backend in use, at one thread. With `auto`, neither
// times a library nor reads or writes the cache of the default mode's choice.
template <typename T>
DeterministicGemm choose_deterministic_gemm(const std::string& configured, const nn::Model<T>& model,
                                            Index chunks, Index chunk, Index last_chunk);

}  // namespace mpiddp::train
