// CPU kernel of top_inner_products: each query's k best stored rows by the exact float32 scores of
// inner_products (the same bits), found by reading an int8 copy of the rows instead of the rows.
//
// A flat search over N x D float32 vectors is bound by reading them (150 MB for 100k x 384). Every
// row x_r also has int8 codes c_r and a scale s_r (x_r ~ s_r c_r, a quarter of the bytes), with
// e_r >= |x_r - s_r c_r| and |x_r| (Euclidean norms, rotmem/index/int8_rows.py). Per batch:
//
// 1. Each query q is coded too: t = max|q_k| / Q, q~ = round(q / t) as int16 (Q below), and every
//    row is estimated as est_r = float(<c_r, q~>) * (s_r * t): an exact int32 dot product (int8 x
//    int16 multiply-adds, the codes read once for the whole batch), then three roundings.
// 2. How far the estimate can be from the exact float32 score, with u = 2^-24, g_m = m u / (1 - m u),
//    delta = q - t q~ (each |delta_k| <= t (1/2 + u Q), the division q_k / t rounded before it is,
//    and t <= (1 + u) max|q_k| / Q, so |delta| <= rho |q|, rho = sqrt(D) (1/2 + u Q) (1 + u) / Q)
//    and |s_r c_r| <= |x_r| + e_r:
//      |exact_r - <q, x_r>|                <= g_(D+1) |q| |x_r|   (a D-term float32 dot product)
//      |<q, x_r> - <q, s_r c_r>|           <= |q| e_r            (Cauchy-Schwarz)
//      |<q, s_r c_r> - s_r t <c_r, q~>|    <= |delta| |s_r c_r|
//      |s_r t <c_r, q~> - est_r|           <= g_3 |s_r c_r| (|q| + |delta|)
//    so |exact_r - est_r| <= |q| slack_r, slack_r = e_r + g_(D+1) |x_r| + (rho + g_3 (1 + rho))
//    (|x_r| + e_r), computed in double and rounded up.
// 3. Per query, T = the k-th largest lower bound est_r - |q| slack_r: k rows score at least T, so
//    every row of the exact top k does, and its upper bound est_r + |q| slack_r is >= T.
// 4. The rows whose upper bound reaches T (a few more than k) are rescored exactly with
//    inner_products' scan (inner_products.h: a row's bits do not depend on its batch), and their k
//    best kept by score, equal scores in row order: what a stable sort of the full scan gives.
//
// Q = min(32767, floor((2^31 - 1) / (127 D))): the dot product of 127s and Qs fits in int32.
// Far from float32's range the bound needs care: each margin also gets 1e-35 (the estimate's
// product s_r t may round in the subnormal range: at most 2^-118 off), an estimate that is not
// finite makes its row a candidate, and a query whose largest |q_k| is below 2^-100 (t subnormal)
// is rescored against every row. The scores themselves must be finite: rows and queries finite
// (the index checks its vectors; the queries and norms are checked here) and |q| |x_r| < FLT_MAX.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "inner_products.h"
#include "isa.h"

#if ROTMEM_X86_ISAS
#define ROTMEM_ISA_NS avx512
#define ROTMEM_ISA_TARGET ROTMEM_TARGET_AVX512
#include "top_inner_products_isa.h"
#undef ROTMEM_ISA_NS
#undef ROTMEM_ISA_TARGET
#define ROTMEM_ISA_NS avx2
#define ROTMEM_ISA_TARGET ROTMEM_TARGET_AVX2
#include "top_inner_products_isa.h"
#undef ROTMEM_ISA_NS
#undef ROTMEM_ISA_TARGET
#endif

namespace rotmem::cpu::baseline::int8_rows {

// The portable estimate: the same integers and roundings, one (row, query) at a time.
void estimate(const int8_t* codes, const float* scales, int64_t n, int64_t d, const int16_t* q,
              const float* query_scales, int64_t b, float* estimate) {
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < b; ++j) {
      int32_t sum = 0;
      for (int64_t k = 0; k < d; ++k) sum += int32_t{codes[r * d + k]} * q[j * d + k];
      estimate[j * n + r] = static_cast<float>(sum) * (scales[r] * query_scales[j]);
    }
  }
}

}  // namespace rotmem::cpu::baseline::int8_rows

namespace rotmem::cpu {
namespace {

constexpr double kUnit = 1.0 / (1 << 24);  // float32 unit roundoff
constexpr double kAbsolute = 1e-35;        // added to every margin (the file's comment)

double gamma(int64_t m) { return m * kUnit / (1.0 - m * kUnit); }

// Q of the file's comment.
int64_t query_code_limit(int64_t d) { return std::min<int64_t>(32767, 2147483647 / (127 * std::max<int64_t>(d, 1))); }

void estimate_all(const int8_t* codes, const float* scales, int64_t n, int64_t d, const int16_t* q,
                  const float* query_scales, int64_t b, float* estimate) {
  ROTMEM_ISA_DISPATCH(int8_rows::estimate, codes, scales, n, d, q, query_scales, b, estimate)
}

// Step 1 for one query: its int16 codes and scale t; returns |q| rounded up a little, or infinity
// when the query is too small to code (every row is then rescored).
double code_query(const float* q, int64_t d, int64_t limit, int16_t* codes, float* scale) {
  float largest = 0.0f;
  double sum = 0.0;
  for (int64_t k = 0; k < d; ++k) {
    largest = std::max(largest, std::fabs(q[k]));
    sum += static_cast<double>(q[k]) * q[k];
  }
  if (largest < 0x1p-100f) {
    std::fill(codes, codes + d, int16_t{0});
    *scale = 0.0f;
    return std::numeric_limits<double>::infinity();
  }
  *scale = largest / static_cast<float>(limit);
  for (int64_t k = 0; k < d; ++k) {
    const float code = std::nearbyint(q[k] / *scale);
    codes[k] = static_cast<int16_t>(std::clamp(code, -static_cast<float>(limit), static_cast<float>(limit)));
  }
  return std::sqrt(sum) * (1.0 + 1e-12);
}

// The k-th largest of values[0, size) (1 <= k <= size); reorders them.
double kth_largest(double* values, int64_t size, int64_t k) {
  std::nth_element(values, values + size - k, values + size);
  return values[size - k];
}

// A rescored row.
struct Scored {
  float score;
  int64_t row;
};

// Scratch space of one query's search, reused across the batch.
struct Scratch {
  std::vector<double> lows;
  std::vector<int64_t> rows;
  std::vector<float> exact;
  std::vector<Scored> best;
};

// Steps 3 and 4 for one query (k <= n).
void top_k_of_query(const float* x, const double* slack, const float* estimate, int64_t n, int64_t d,
                    const float* q, double norm, int64_t k, float* out_scores, int64_t* out_rows,
                    Scratch& scratch) {
  // the bounds of row r's exact score (step 3); NaN (an estimate that is not finite) counts as
  // -infinity below and +infinity above
  auto low = [&](int64_t r) {
    const double value = static_cast<double>(estimate[r]) - (norm * slack[r] + kAbsolute);
    return std::isnan(value) ? -std::numeric_limits<double>::infinity() : value;
  };
  auto below = [&](int64_t r, double threshold) {  // the upper bound is below threshold
    return static_cast<double>(estimate[r]) + (norm * slack[r] + kAbsolute) < threshold;
  };
  // T in two selections: first a lower bound of it, the k-th largest lower bound of every stride-th
  // row (those rows' k best are k rows of all), then T among the rows at or above that.
  const int64_t stride = std::max<int64_t>(1, static_cast<int64_t>(std::sqrt(static_cast<double>(n) / k)));
  std::vector<double>& lows = scratch.lows;
  lows.resize(n);
  int64_t size = 0;
  for (int64_t r = 0; r < n; r += stride) lows[size++] = low(r);
  double threshold = kth_largest(lows.data(), size, k);
  if (stride > 1) {
    const double floor = threshold;
    size = 0;
    for (int64_t r = 0; r < n; ++r) {  // without a branch: about one row in stride is kept
      lows[size] = low(r);
      size += lows[size] >= floor;
    }
    threshold = kth_largest(lows.data(), size, k);
  }
  std::vector<int64_t>& rows = scratch.rows;
  rows.resize(n);
  int64_t m = 0;
  for (int64_t r = 0; r < n; ++r) {
    rows[m] = r;
    m += !below(r, threshold);
  }
  std::vector<float>& exact = scratch.exact;
  exact.resize(m);
  scan_inner_products_at(x, rows.data(), m, d, q, exact.data());
  std::vector<Scored>& best = scratch.best;
  best.resize(m);
  for (int64_t i = 0; i < m; ++i) best[i] = {exact[i], rows[i]};
  // all m sorted (introsort): with k most of m, faster than a partial (heap) sort
  std::sort(best.begin(), best.end(), [](const Scored& a, const Scored& b) {
    return a.score > b.score || (a.score == b.score && a.row < b.row);
  });
  for (int64_t i = 0; i < k; ++i) {
    out_scores[i] = best[i].score;
    out_rows[i] = best[i].row;
  }
}

std::tuple<at::Tensor, at::Tensor> top_inner_products_cpu(const at::Tensor& vectors, const at::Tensor& codes,
                                                          const at::Tensor& scales, const at::Tensor& errors,
                                                          const at::Tensor& norms, const at::Tensor& queries,
                                                          int64_t k) {
  const char* op = "rotmem::top_inner_products: ";
  TORCH_CHECK(vectors.dim() == 2 && codes.dim() == 2 && queries.dim() == 2, op,
              "vectors and codes must be [N, D] and queries [B, D], got ", vectors.sizes(), ", ", codes.sizes(),
              " and ", queries.sizes());
  TORCH_CHECK(codes.sizes() == vectors.sizes(), op, "codes ", codes.sizes(), " for vectors ", vectors.sizes());
  const int64_t n = vectors.size(0), d = vectors.size(1), b = queries.size(0);
  for (const at::Tensor* t : {&scales, &errors, &norms}) {
    TORCH_CHECK(t->dim() == 1 && t->size(0) == n, op, "scales, errors and norms must be [N] with N = ", n,
                ", got ", t->sizes());
    TORCH_CHECK(t->scalar_type() == at::kFloat, op, "float32 scales, errors and norms, got ", t->scalar_type());
  }
  TORCH_CHECK(queries.size(1) == d, op, "vectors have width ", d, ", queries ", queries.size(1));
  TORCH_CHECK(vectors.scalar_type() == at::kFloat && queries.scalar_type() == at::kFloat, op,
              "float32 vectors and queries, got ", vectors.scalar_type(), " and ", queries.scalar_type());
  TORCH_CHECK(codes.scalar_type() == at::kChar, op, "int8 codes, got ", codes.scalar_type());
  TORCH_CHECK(k >= 0, op, "k must be >= 0, got ", k);
  TORCH_CHECK(queries.isfinite().all().item<bool>(), op, "queries hold NaN or inf");
  TORCH_CHECK(norms.isfinite().all().item<bool>(), op, "norms hold NaN or inf (rows too long for float32)");
  k = std::min(k, n);
  const at::Tensor x = vectors.contiguous(), c = codes.contiguous(), q = queries.contiguous();
  const at::Tensor s = scales.contiguous(), e = errors.contiguous(), w = norms.contiguous();
  at::Tensor scores = at::empty({b, k}, x.options());
  at::Tensor rows = at::empty({b, k}, x.options().dtype(at::kLong));
  if (k == 0 || b == 0) return {scores, rows};

  const int64_t limit = query_code_limit(d);
  std::vector<int16_t> query_codes(static_cast<size_t>(b * d));
  std::vector<float> query_scales(b);
  std::vector<double> query_norms(b);
  for (int64_t j = 0; j < b; ++j) {
    query_norms[j] = code_query(q.const_data_ptr<float>() + j * d, d, limit, query_codes.data() + j * d,
                                query_scales.data() + j);
  }
  const double rho = std::sqrt(static_cast<double>(d)) * (0.5 + kUnit * limit) * (1.0 + kUnit) / limit;
  const double copy_term = rho + gamma(3) * (1.0 + rho), exact_term = gamma(d + 1);
  std::vector<double> slack(n);
  const float* error = e.const_data_ptr<float>();
  const float* norm = w.const_data_ptr<float>();
  for (int64_t r = 0; r < n; ++r) {
    const double bound = error[r] + exact_term * norm[r] + copy_term * (norm[r] + static_cast<double>(error[r]));
    slack[r] = bound * (1.0 + 1e-9);  // the double arithmetic's own rounding
  }
  std::vector<float> estimate(static_cast<size_t>(b * n));
  estimate_all(c.const_data_ptr<int8_t>(), s.const_data_ptr<float>(), n, d, query_codes.data(), query_scales.data(),
               b, estimate.data());
  Scratch scratch;
  for (int64_t j = 0; j < b; ++j) {
    top_k_of_query(x.const_data_ptr<float>(), slack.data(), estimate.data() + j * n, n, d,
                   q.const_data_ptr<float>() + j * d, query_norms[j], k, scores.mutable_data_ptr<float>() + j * k,
                   rows.mutable_data_ptr<int64_t>() + j * k, scratch);
  }
  return {scores, rows};
}

}  // namespace
}  // namespace rotmem::cpu

TORCH_LIBRARY_IMPL(rotmem, CPU, m) { m.impl("top_inner_products", &rotmem::cpu::top_inner_products_cpu); }
