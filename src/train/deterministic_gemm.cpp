#include "mpiddp/train/deterministic_gemm.hpp"

#include "mpiddp/nn/gemm_columns.hpp"

namespace mpiddp::train {
namespace {

// The most columns one product may take in the chunked pass of steps with chunks of `chunk`
// samples under `backend`, 0 for none: every layer must support the pass, and the backend
// must give a column the same bits at every width the pass makes at any world size (Note
// [column bits by measurement]); the widest candidate piece at which it does.
template <typename T>
Index chunked_pass_piece(nn::GemmBackend backend, const nn::Sequential<T>& model, Index chunks, Index chunk) {
  if (!model.layers().supports_chunked_pass(chunk)) return 0;
  const std::vector<Index> pieces = nn::chunked_product_pieces(chunk);
  if (backend == nn::GemmBackend::kEigen) return pieces.front();  // Linear::supports_chunked_pass's rule
  nn::use_gemm_backend(backend, 1);
  // Every product of a chunk, the weight gradients' too (inner dimension: the chunk's samples).
  const std::vector<nn::GemmCall> calls = model.gemm_calls(chunk);
  std::vector<nn::GemmShape> shapes;
  for (const nn::GemmCall& call : calls) shapes.push_back(call.shape);
  if (!nn::address_bits_hold<T>(shapes)) return 0;
  const std::vector<nn::GemmShape> products = nn::column_products(calls);
  for (Index piece : pieces)
    if (nn::column_bits_hold<T>(products, chunk, nn::chunked_product_widths(chunks, chunk, piece))) return piece;
  return 0;
}

#ifdef MPIDDP_NATIVE_BUILD
constexpr bool kNativeBuild = true;
#else
constexpr bool kNativeBuild = false;
#endif

}  // namespace

template <typename T>
DeterministicGemm choose_deterministic_gemm(const std::string& configured, const nn::Sequential<T>& model,
                                            Index chunks, Index chunk, Index last_chunk) {
  DeterministicGemm result;
  result.choice = choose_gemm<T>(configured == "auto" ? "eigen" : configured, {}, 1);
  result.choice.how = "deterministic";
  // Note [deterministic mode's library]: a measured library only for a chunked pass, only in
  // a native build, and only where the choice is remembered and its column bits hold.
  if (configured == "auto" && kNativeBuild && model.layers().supports_chunked_pass(chunk)) {
    GemmChoice measured = choose_gemm<T>("auto", model.gemm_calls(nn::chunked_product_pieces(chunk).front()), 1);
    if (measured.backend != nn::GemmBackend::kEigen && measured.remembered) {
      result.full_piece = chunked_pass_piece(measured.backend, model, chunks, chunk);
      if (result.full_piece > 0) result.choice = measured;
    }
  }
  const nn::GemmBackend backend = result.choice.backend;
  if (result.full_piece == 0) result.full_piece = chunked_pass_piece(backend, model, chunks, chunk);
  // The epoch's last step takes the chunked pass only with the full steps (the run record
  // speaks of those).
  result.last_piece = result.full_piece == 0 ? 0
                      : last_chunk == chunk  ? result.full_piece
                                             : chunked_pass_piece(backend, model, chunks, last_chunk);
  nn::use_gemm_backend(backend, 1);
  return result;
}

template DeterministicGemm choose_deterministic_gemm<float>(const std::string&, const nn::Sequential<float>&, Index,
                                                            Index, Index);
template DeterministicGemm choose_deterministic_gemm<double>(const std::string&, const nn::Sequential<double>&, Index,
                                                             Index, Index);

}  // namespace mpiddp::train
