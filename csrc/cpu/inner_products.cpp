// CPU kernel of inner_products: scores[j, i] = <queries[j], vectors[i]> for a handful of queries
// against many stored vectors (an exact flat search's scan), float32, one thread.
//
// Why not a matrix product: with B = 1-16 queries, BLAS (FAISS's and torch's) packs the N x D matrix
// on every call and runs its narrow-M kernels far from the core's FMA rate, and FAISS's own per-query
// scan reads the N x D vectors once per query. This scan reads them from memory once for the whole
// batch: a tile of 4 rows stays in registers and L1 while the queries pass over it, two at a time.
//
// Every score is computed the same way wherever its row and query sit in the batch (8 float lanes
// over D in order, the lanes added in one fixed order, then the D % 8 tail), so a batch gives bit for
// bit what each query alone gives. Instruction sets (isa.h): AVX-512 and AVX2 run the same 8-lane FMA
// loops (inner_products_isa.h) and agree bit for bit; the baseline (SSE2) rounds each product before
// adding it, so it agrees with them to the float32 rounding of a sum of D products.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstdint>
#include <cstring>

#include "inner_products.h"
#include "isa.h"

#if ROTMEM_X86_ISAS
#define ROTMEM_ISA_NS avx512
// GCC's "avx512f" target leaves out the FMA intrinsics the loops use; every AVX-512 CPU has FMA.
#define ROTMEM_ISA_TARGET __attribute__((target("avx512f,fma")))
#include "inner_products_isa.h"
#undef ROTMEM_ISA_NS
#undef ROTMEM_ISA_TARGET
#define ROTMEM_ISA_NS avx2
#define ROTMEM_ISA_TARGET ROTMEM_TARGET_AVX2
#include "inner_products_isa.h"
#undef ROTMEM_ISA_NS
#undef ROTMEM_ISA_TARGET
#endif

namespace rotmem::cpu::baseline {
namespace {

typedef float Lanes __attribute__((vector_size(8 * sizeof(float))));

// An unaligned load, into a reference: a 32-byte vector returned by value changes the ABI without AVX.
inline void load(Lanes& v, const float* p) { std::memcpy(&v, p, sizeof v); }

// The 8 lanes added halves first (4 + 4, 2 + 2, 1 + 1), as lane_sum_8 in inner_products_isa.h.
inline float lane_sum(const Lanes& v) {
  float s[8];
  std::memcpy(s, &v, sizeof s);
  for (int width = 4; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) s[l] += s[l + width];
  }
  return s[0];
}

// One score with the same lanes and order as inner_products_isa.h.
float dot(const float* row, const float* query, int64_t d) {
  const int64_t body = d - d % 8;
  Lanes acc = {};
  for (int64_t k = 0; k < body; k += 8) {
    Lanes xk, qk;
    load(xk, row + k);
    load(qk, query + k);
    acc += xk * qk;
  }
  float tail = 0.0f;
  for (int64_t k = body; k < d; ++k) tail += row[k] * query[k];
  return lane_sum(acc) + tail;
}

}  // namespace

// The portable scan, one (row, query) at a time.
void inner_products(const float* x, int64_t n, int64_t d, const float* q, int64_t b, float* scores) {
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < b; ++j) scores[j * n + r] = dot(x + r * d, q + j * d, d);
  }
}

void inner_products_at(const float* x, const int64_t* rows, int64_t m, int64_t d, const float* q, float* scores) {
  for (int64_t i = 0; i < m; ++i) scores[i] = dot(x + rows[i] * d, q, d);
}

}  // namespace rotmem::cpu::baseline

namespace rotmem::cpu {

void scan_inner_products(const float* x, int64_t n, int64_t d, const float* q, int64_t b, float* scores) {
  ROTMEM_ISA_DISPATCH(inner_products, x, n, d, q, b, scores)
}

void scan_inner_products_at(const float* x, const int64_t* rows, int64_t m, int64_t d, const float* q,
                            float* scores) {
  ROTMEM_ISA_DISPATCH(inner_products_at, x, rows, m, d, q, scores)
}

namespace {

at::Tensor inner_products_cpu(const at::Tensor& vectors, const at::Tensor& queries) {
  TORCH_CHECK(vectors.dim() == 2 && queries.dim() == 2,
              "rotmem::inner_products: vectors must be [N, D] and queries [B, D], got ", vectors.sizes(), " and ",
              queries.sizes());
  TORCH_CHECK(vectors.size(1) == queries.size(1), "rotmem::inner_products: vectors have width ", vectors.size(1),
              ", queries ", queries.size(1));
  TORCH_CHECK(vectors.scalar_type() == at::kFloat && queries.scalar_type() == at::kFloat,
              "rotmem::inner_products: float32 vectors and queries, got ", vectors.scalar_type(), " and ",
              queries.scalar_type());
  const at::Tensor x = vectors.contiguous(), q = queries.contiguous();
  const int64_t n = x.size(0), d = x.size(1), b = q.size(0);
  at::Tensor scores = at::empty({b, n}, x.options());
  if (n > 0 && b > 0) {
    scan_inner_products(x.const_data_ptr<float>(), n, d, q.const_data_ptr<float>(), b,
                        scores.mutable_data_ptr<float>());
  }
  return scores;
}

}  // namespace
}  // namespace rotmem::cpu

TORCH_LIBRARY_IMPL(rotmem, CPU, m) { m.impl("inner_products", &rotmem::cpu::inner_products_cpu); }
