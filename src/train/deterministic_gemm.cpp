#include "mpiddp/train/deterministic_gemm.hpp"

#include <algorithm>
#include <type_traits>

#include "mpiddp/kernels/gemm_columns.hpp"
#include "mpiddp/kernels/grid_product.hpp"
#include "mpiddp/kernels/isa.hpp"

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

// "6291456": the rule's text gives whole numbers of multiply-adds.
std::string multiply_adds_text(double value) { return std::to_string(static_cast<long long>(value)); }

}  // namespace

CpuFeatures this_cpu_features() {
  // The level the kernels run at (kernels/isa.hpp): the CPU that runs, not the one that
  // built, as compute.isa caps it, so that a cap below AVX-512 takes no library that would.
  return {kernels::active_isa() >= kernels::Isa::kAvx512};
}

GemmRule deterministic_gemm_rule(const GemmRuleInputs& in) {
  // Each step appends what it looked at; the first that fails ends the text with eigen.
  std::string text;
  auto looked_at = [&](const std::string& fact) { text += (text.empty() ? "" : ", ") + fact; };
  auto eigen = [&]() { return GemmRule{kernels::GemmBackend::kEigen, text + ": eigen"}; };
  looked_at(in.chunked_pass ? "chunked pass" : "chunk by chunk");
  if (!in.chunked_pass) return eigen();
  looked_at(in.native_build ? "native build" : "portable build");
  if (!in.native_build) return eigen();
  const bool onednn = std::find(in.built.begin(), in.built.end(), kernels::GemmBackend::kOneDnn) != in.built.end();
  looked_at(onednn ? "onednn built in" : "no onednn built in");
  if (!onednn) return eigen();
  looked_at(in.float32 ? "float32" : "float64");
  if (!in.float32) return eigen();
  looked_at(in.cpu.avx512f ? "cpu avx512f" : "cpu no-avx512f");
  if (!in.cpu.avx512f) return eigen();
  const double typical = kernels::typical_product_multiply_adds(in.products);
  const bool large = typical >= kRuleLibraryMultiplyAdds;
  looked_at("typical product " + multiply_adds_text(typical) + " multiply-adds " + (large ? ">= " : "< ") +
            multiply_adds_text(kRuleLibraryMultiplyAdds));
  if (!large) return eigen();
  return {kernels::GemmBackend::kOneDnn, text + ": onednn"};
}

template <typename T>
GemmRuleInputs deterministic_gemm_rule_inputs(const nn::Model<T>& model, Index chunk) {
  GemmRuleInputs in;
  in.chunked_pass = model.layers().supports_chunked_pass(chunk);
  in.native_build = kNativeBuild;
  in.built = kernels::available_gemm_backends();
  in.float32 = std::is_same_v<T, float>;
  in.cpu = this_cpu_features();
  // The products a library makes over many chunks at once, at the widest piece: the same
  // at every N, since the pieces follow B/C alone.
  for (const kernels::GemmCall& call : model.gemm_calls(kernels::chunked_product_pieces(chunk).front()))
    if (call.role != kernels::GemmRole::kWeightGradient) in.products.push_back(call);
  return in;
}

template <typename T>
DeterministicGemm choose_deterministic_gemm(const std::string& configured, const nn::Model<T>& model,
                                            Index chunks, Index chunk, Index last_chunk) {
  DeterministicGemm result;
  if (configured == "auto") {
    // Note [deterministic mode's library]: steps 1 to 6, then step 7, the column check.
    // Nothing is timed, and the default mode's cache is neither read nor written.
    const GemmRule rule = deterministic_gemm_rule(deterministic_gemm_rule_inputs(model, chunk));
    result.choice.backend = rule.backend;
    result.choice.how = "rule";
    result.choice.rule = rule.text;
    if (rule.backend != kernels::GemmBackend::kEigen) {
      result.full = chunked_pass_pieces(rule.backend, model, chunks, chunk);
      if (!result.full.chunked()) {
        result.choice.backend = kernels::GemmBackend::kEigen;
        result.choice.rule += ", its column bits do not hold: eigen";
      }
    }
  } else {
    result.choice = choose_gemm<T>(configured, {}, 1);
    result.choice.how = "deterministic";
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

template GemmRuleInputs deterministic_gemm_rule_inputs<float>(const nn::Model<float>&, Index);
template GemmRuleInputs deterministic_gemm_rule_inputs<double>(const nn::Model<double>&, Index);
template DeterministicGemm choose_deterministic_gemm<float>(const std::string&, const nn::Model<float>&, Index,
                                                            Index, Index);
template DeterministicGemm choose_deterministic_gemm<double>(const std::string&, const nn::Model<double>&, Index,
                                                             Index, Index);

}  // namespace mpiddp::train
