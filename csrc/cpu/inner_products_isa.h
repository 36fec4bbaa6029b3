// The AVX2 / AVX-512 scan of inner_products.cpp, for one instruction set: included once per set with
// ROTMEM_ISA_NS (the namespace) and ROTMEM_ISA_TARGET (its target attribute) defined. Both sets run
// these 8-lane (256-bit) FMA loops, so they round alike; AVX-512 compiles them with its 32 registers.
// No include guard, on purpose.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

namespace rotmem::cpu::ROTMEM_ISA_NS {

// The 8 lanes added halves first (4 + 4, 2 + 2, 1 + 1), as lane_sum in inner_products.cpp.
ROTMEM_ISA_TARGET inline float lane_sum_8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// scores[j * n + r] = <row r, q row j> for Rows rows (row[r]: D floats) and Queries rows of q (width
// d). With next (the tile's first pass), the next tile's rows are fetched into cache meanwhile: the
// rows come from memory once per batch, and the hardware prefetcher alone leaves the loop waiting.
template <int Rows, int Queries>
ROTMEM_ISA_TARGET inline void scan_tile(const float* const* row, const float* const* next, const float* q, int64_t d,
                                        int64_t n, float* scores) {
  __m256 acc[Queries][Rows];
  for (int j = 0; j < Queries; ++j)
    for (int r = 0; r < Rows; ++r) acc[j][r] = _mm256_setzero_ps();
  const int64_t body = d - d % 8;
  for (int64_t k = 0; k < body; k += 8) {
    if (next != nullptr && k % 16 == 0) {  // one 64-byte line of each next row per 16 floats
      for (int r = 0; r < Rows; ++r) __builtin_prefetch(next[r] + k, 0, 3);
    }
    __m256 xk[Rows];
    for (int r = 0; r < Rows; ++r) xk[r] = _mm256_loadu_ps(row[r] + k);
    for (int j = 0; j < Queries; ++j) {
      const __m256 qk = _mm256_loadu_ps(q + j * d + k);
      for (int r = 0; r < Rows; ++r) acc[j][r] = _mm256_fmadd_ps(xk[r], qk, acc[j][r]);
    }
  }
  for (int j = 0; j < Queries; ++j) {
    for (int r = 0; r < Rows; ++r) {
      float tail = 0.0f;
      for (int64_t k = body; k < d; ++k) tail = std::fma(row[r][k], q[j * d + k], tail);
      scores[j * n + r] = lane_sum_8(acc[j][r]) + tail;
    }
  }
}

// The Rows consecutive rows from x (and the Rows after them, to prefetch when prefetch is set).
template <int Rows>
struct Consecutive {
  const float* row[Rows];
  const float* next[Rows];
  ROTMEM_ISA_TARGET Consecutive(const float* x, int64_t d) {
    for (int r = 0; r < Rows; ++r) row[r] = x + r * d, next[r] = x + (Rows + r) * d;
  }
};

template <int Rows>
ROTMEM_ISA_TARGET inline void scan_rows(const float* x, int64_t n, int64_t d, const float* q, int64_t b,
                                        float* scores) {
  const Consecutive<Rows> tile(x, d);
  if (b == 1) return scan_tile<Rows, 1>(tile.row, tile.next, q, d, n, scores);
  scan_tile<Rows, 2>(tile.row, tile.next, q, d, n, scores);
  int64_t j = 2;
  for (; j + 2 <= b; j += 2) scan_tile<Rows, 2>(tile.row, nullptr, q + j * d, d, n, scores + j * n);
  if (j < b) scan_tile<Rows, 1>(tile.row, nullptr, q + j * d, d, n, scores + j * n);
}

ROTMEM_ISA_TARGET void inner_products(const float* x, int64_t n, int64_t d, const float* q, int64_t b,
                                      float* scores) {
  int64_t r = 0;
  if (b == 1) {  // one query streams the rows: 8 at a time keeps more loads in flight (no prefetch needed)
    for (; r + 8 <= n; r += 8) scan_tile<8, 1>(Consecutive<8>(x + r * d, d).row, nullptr, q, d, n, scores + r);
  }
  for (; r + 4 <= n; r += 4) scan_rows<4>(x + r * d, n, d, q, b, scores + r);
  if (n - r == 3) scan_rows<3>(x + r * d, n, d, q, b, scores + r);
  if (n - r == 2) scan_rows<2>(x + r * d, n, d, q, b, scores + r);
  if (n - r == 1) scan_rows<1>(x + r * d, n, d, q, b, scores + r);
}

// scores[i] = <x row rows[i], q> for one query and m rows anywhere in x (ascending or not), four at a
// time, the four after them prefetched: the same bits as inner_products gives those rows.
ROTMEM_ISA_TARGET void inner_products_at(const float* x, const int64_t* rows, int64_t m, int64_t d, const float* q,
                                         float* scores) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) {
    const float* row[4];
    const float* next[4];
    for (int r = 0; r < 4; ++r) row[r] = x + rows[i + r] * d, next[r] = x + rows[i + 4 + r < m ? i + 4 + r : i + r] * d;
    scan_tile<4, 1>(row, next, q, d, 1, scores + i);
  }
  for (; i < m; ++i) {
    const float* row[1] = {x + rows[i] * d};
    scan_tile<1, 1>(row, nullptr, q, d, 1, scores + i);
  }
}

}  // namespace rotmem::cpu::ROTMEM_ISA_NS
