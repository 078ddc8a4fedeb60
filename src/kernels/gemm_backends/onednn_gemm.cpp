// oneDNN's dnnl_sgemm, and its matmul primitive on bfloat16 operands for compute.precision
// "bf16". Both are row-major, so the column-major c = op(a) op(b) is computed as the row-major
// c^T = op(b)^T op(a)^T: the same memory, with the operands swapped. It has no double product;
// kernels/gemm.cpp sends those to Eigen. Its threads are OpenMP's.
#include <oneapi/dnnl/dnnl.h>

#include <map>
#include <mutex>
#include <tuple>
#include <oneapi/dnnl/dnnl.hpp>

#include "gemm_kernels.hpp"

namespace mpiddp::kernels::gemm_detail {
namespace {

char dnnl_op(Op op) { return op == Op::kTranspose ? 'T' : 'N'; }

void onednn_sgemm(Op op_a, Op op_b, Index m, Index n, Index k, const float* a, Index lda,
                  const float* b, Index ldb, float beta, float* c, Index ldc) {
  dnnl_sgemm(dnnl_op(op_b), dnnl_op(op_a), n, m, k, 1.0f, b, ldb, a, lda, beta, c, ldc);
}

// Note [bf16 matmul primitives]
// oneDNN has no bf16 gemm call like dnnl_sgemm: a bf16 product is a matmul primitive, built
// for one shape, one layout and one beta, and building one (choosing and generating its
// kernel) costs far more than running a small product. A model makes the same few shapes at
// every step, so each is built once, on its first use, and kept for the run. The operands'
// layouts are given as strides (the transposes cost nothing), and beta 1 is the primitive's
// sum post-op. The primitive runs on this thread's OpenMP count, as dnnl_sgemm does.
struct Bf16Shape {
  Index m, n, k, lda, ldb, ldc;
  Op op_a, op_b;
  bool add;
  auto key() const { return std::tie(m, n, k, lda, ldb, ldc, op_a, op_b, add); }
  bool operator<(const Bf16Shape& other) const { return key() < other.key(); }
};

struct Bf16Matmul {
  dnnl::matmul primitive;
  dnnl::memory::desc src, weights, dst;
};

Bf16Matmul build_bf16_matmul(const Bf16Shape& s, const dnnl::engine& engine) {
  using dims = dnnl::memory::dims;
  using dt = dnnl::memory::data_type;
  // Row-major: dst (n, m) = src (n, k) weights (k, m), with src = op(b)^T and weights = op(a)^T.
  // A column-major x of leading dimension ld read as its row-major transpose has strides (ld, 1);
  // read as itself, strides (1, ld).
  const dims src_strides = s.op_b == Op::kNone ? dims{s.ldb, 1} : dims{1, s.ldb};
  const dims weight_strides = s.op_a == Op::kNone ? dims{s.lda, 1} : dims{1, s.lda};
  Bf16Matmul made;
  made.src = dnnl::memory::desc({s.n, s.k}, dt::bf16, src_strides);
  made.weights = dnnl::memory::desc({s.k, s.m}, dt::bf16, weight_strides);
  made.dst = dnnl::memory::desc({s.n, s.m}, dt::f32, dims{s.ldc, 1});
  dnnl::primitive_attr attributes;
  if (s.add) {
    dnnl::post_ops sum;
    sum.append_sum(1.0f);
    attributes.set_post_ops(sum);
  }
  const dnnl::matmul::primitive_desc description(dnnl::matmul::desc(made.src, made.weights, made.dst), attributes,
                                                 engine);
  made.primitive = dnnl::matmul(description);
  return made;
}

void onednn_bf16gemm(Op op_a, Op op_b, Index m, Index n, Index k, const uint16_t* a, Index lda, const uint16_t* b,
                     Index ldb, float beta, float* c, Index ldc) {
  // One object, so that the engine is made before the primitives and destroyed after them.
  static struct {
    const dnnl::engine engine{dnnl::engine::kind::cpu, 0};
    std::mutex mutex;
    std::map<Bf16Shape, Bf16Matmul> built;
  } matmuls;
  const Bf16Shape shape{m, n, k, lda, ldb, ldc, op_a, op_b, beta != 0.0f};
  const Bf16Matmul* matmul = nullptr;
  {
    std::lock_guard<std::mutex> lock(matmuls.mutex);
    auto found = matmuls.built.find(shape);
    if (found == matmuls.built.end())
      found = matmuls.built.emplace(shape, build_bf16_matmul(shape, matmuls.engine)).first;
    matmul = &found->second;  // std::map never moves its elements
  }
  // oneDNN's memory objects only name the operands: nothing is copied.
  const dnnl::engine& engine = matmuls.engine;
  thread_local dnnl::stream stream(engine);
  matmul->primitive.execute(stream, {{DNNL_ARG_SRC, dnnl::memory(matmul->src, engine, const_cast<uint16_t*>(b))},
                                     {DNNL_ARG_WEIGHTS, dnnl::memory(matmul->weights, engine, const_cast<uint16_t*>(a))},
                                     {DNNL_ARG_DST, dnnl::memory(matmul->dst, engine, c)}});
  stream.wait();
}

void onednn_threads(int) {}  // OpenMP's count, which core/threads.cpp sets

std::string onednn_threading() {
  const dnnl_version_t* v = dnnl_version();
  return std::string(v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other") + ", oneDNN " +
         std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

}  // namespace

const GemmKernels* onednn_kernels() {
  static const GemmKernels kernels{GemmBackend::kOneDnn, onednn_sgemm, nullptr, onednn_threads,
                                   reinterpret_cast<const void*>(&dnnl_sgemm), onednn_threading,
                                   onednn_bf16gemm};
  return &kernels;
}

}  // namespace mpiddp::kernels::gemm_detail
