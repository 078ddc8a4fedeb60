#include "mpiddp/train/deterministic_gemm.hpp"

#include "mpiddp/kernels/gemm_columns.hpp"
#include "mpiddp/kernels/grid_product.hpp"

namespace mpiddp::train {
namespace {

// The pieces of the chunked pass of steps with chunks of `chunk` samples under `backend`,
// none (both 0) when it cannot take it: every layer must support the pass, and the backend
// must give a column the same bits at every width the pass makes at any world size (Note
// [column bits by measurement]); for each kind of product the widest candidate piece at
// which every product of that kind does.
template <typename T>
PassPieces chunked_pass_pieces(kernels::GemmBackend backend, const nn::Model<T>& model, Index chunks, Index chunk) {
  if (!model.layers().supports_chunked_pass(chunk)) return {};
  const std::vector<Index> pieces = kernels::chunked_product_pieces(chunk);
  // Eigen: Linear::supports_chunked_pass's rule.
  if (backend == kernels::GemmBackend::kEigen) return {pieces.front(), pieces.front()};
  kernels::use_gemm_backend(backend, 1);
  // Every product of a chunk, the weight gradients' too (inner dimension: the chunk's
  // samples), unless the grid product makes those (Note [the grid product]).
  const std::vector<kernels::GemmCall> calls = model.gemm_calls(chunk);
  std::vector<kernels::GemmShape> shapes;
  for (const kernels::GemmCall& call : calls)
    if (call.role != kernels::GemmRole::kWeightGradient || !kernels::grid_product_serves<T>()) shapes.push_back(call.shape);
  if (!kernels::address_bits_hold<T>(shapes)) return {};
  auto widest = [&](kernels::GemmRole role) -> Index {
    const std::vector<kernels::GemmShape> products = kernels::column_products(calls, role);
    for (Index piece : pieces)
      if (kernels::column_bits_hold<T>(products, chunk, kernels::chunked_product_widths(chunks, chunk, piece))) return piece;
    return 0;
  };
  const PassPieces found{widest(kernels::GemmRole::kForward), widest(kernels::GemmRole::kInputGradient)};
  return found.chunked() ? found : PassPieces{};
}

#ifdef MPIDDP_NATIVE_BUILD
constexpr bool kNativeBuild = true;
#else
constexpr bool kNativeBuild = false;
#endif

}  // namespace

template <typename T>
DeterministicGemm choose_deterministic_gemm(const std::string& configured, const nn::Model<T>& model,
                                            Index chunks, Index chunk, Index last_chunk) {
  DeterministicGemm result;
  result.choice = choose_gemm<T>(configured == "auto" ? "eigen" : configured, {}, 1);
  result.choice.how = "deterministic";
  // Note [deterministic mode's library]: a measured library only for a chunked pass, only in
  // a native build, and only where the choice is remembered and its column bits hold.
  if (configured == "auto" && kNativeBuild && model.layers().supports_chunked_pass(chunk)) {
    GemmChoice measured = choose_gemm<T>("auto", model.gemm_calls(kernels::chunked_product_pieces(chunk).front()), 1);
    if (measured.backend != kernels::GemmBackend::kEigen && measured.remembered) {
      result.full = chunked_pass_pieces(measured.backend, model, chunks, chunk);
      if (result.full.chunked()) result.choice = measured;
    }
  }
  const kernels::GemmBackend backend = result.choice.backend;
  if (!result.full.chunked()) result.full = chunked_pass_pieces(backend, model, chunks, chunk);
  // The epoch's last step takes the chunked pass only with the full steps (the run record
  // speaks of those).
  result.last = !result.full.chunked() ? PassPieces{}
                : last_chunk == chunk  ? result.full
                                       : chunked_pass_pieces(backend, model, chunks, last_chunk);
  kernels::use_gemm_backend(backend, 1);
  return result;
}

template DeterministicGemm choose_deterministic_gemm<float>(const std::string&, const nn::Model<float>&, Index,
                                                            Index, Index);
template DeterministicGemm choose_deterministic_gemm<double>(const std::string&, const nn::Model<double>&, Index,
                                                             Index, Index);

}  // namespace mpiddp::train
