// The AVX2 / AVX-512 estimate loop of top_inner_products.cpp, for one instruction set: included once
// per set with ROTMEM_ISA_NS (the namespace) and ROTMEM_ISA_TARGET (its target attribute) defined.
// Integer arithmetic (int8 codes widened to int16, times int16 query codes, summed in int32), so
// every set, the baseline included, gives the same estimate bit for bit. No include guard, on purpose.
#include <immintrin.h>

#include <cstdint>

namespace rotmem::cpu::ROTMEM_ISA_NS::int8_rows {

ROTMEM_ISA_TARGET inline int32_t lane_sum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// estimate[j * n + r] = float(<codes row r, query codes j>) * (scales[r] * query_scales[j]) for Rows
// rows and Queries queries: each row's 16 codes widened once and used by every query of the tile
// (one multiply-add of 16 int16 pairs per query). With prefetch (a row tile's first pass), the next
// tile's codes are fetched meanwhile.
template <int Rows, int Queries>
ROTMEM_ISA_TARGET inline void estimate_tile(const int8_t* codes, const float* scales, const int16_t* q,
                                            const float* query_scales, int64_t d, int64_t n, bool prefetch,
                                            float* estimate) {
  __m256i acc[Queries][Rows];
  for (int j = 0; j < Queries; ++j)
    for (int r = 0; r < Rows; ++r) acc[j][r] = _mm256_setzero_si256();
  const int64_t body = d - d % 16;
  for (int64_t k = 0; k < body; k += 16) {
    if (prefetch && k % 64 == 0) {
      for (int r = 0; r < Rows; ++r) __builtin_prefetch(codes + (Rows + r) * d + k, 0, 3);
    }
    __m256i xk[Rows];
    for (int r = 0; r < Rows; ++r) {
      xk[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + r * d + k)));
    }
    for (int j = 0; j < Queries; ++j) {
      const __m256i qk = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + j * d + k));
      for (int r = 0; r < Rows; ++r) acc[j][r] = _mm256_add_epi32(acc[j][r], _mm256_madd_epi16(xk[r], qk));
    }
  }
  for (int j = 0; j < Queries; ++j) {
    for (int r = 0; r < Rows; ++r) {
      int32_t sum = lane_sum(acc[j][r]);
      for (int64_t k = body; k < d; ++k) sum += int32_t{codes[r * d + k]} * q[j * d + k];
      estimate[j * n + r] = static_cast<float>(sum) * (scales[r] * query_scales[j]);
    }
  }
}

// Every query of the batch over Rows rows: the queries four at a time (then the rest).
template <int Rows>
ROTMEM_ISA_TARGET inline void estimate_rows(const int8_t* codes, const float* scales, int64_t n, int64_t d,
                                            const int16_t* q, const float* query_scales, int64_t b,
                                            float* estimate) {
  int64_t j = 0;
  for (; j + 4 <= b; j += 4) {
    estimate_tile<Rows, 4>(codes, scales, q + j * d, query_scales + j, d, n, j == 0, estimate + j * n);
  }
  const bool first = j == 0;
  const int16_t* rest = q + j * d;
  if (b - j == 3) estimate_tile<Rows, 3>(codes, scales, rest, query_scales + j, d, n, first, estimate + j * n);
  if (b - j == 2) estimate_tile<Rows, 2>(codes, scales, rest, query_scales + j, d, n, first, estimate + j * n);
  if (b - j == 1) estimate_tile<Rows, 1>(codes, scales, rest, query_scales + j, d, n, first, estimate + j * n);
}

ROTMEM_ISA_TARGET void estimate(const int8_t* codes, const float* scales, int64_t n, int64_t d, const int16_t* q,
                                const float* query_scales, int64_t b, float* estimate) {
  int64_t r = 0;
  if (b == 1) {  // one query: 4 rows at a time keeps 4 independent sums in flight
    for (; r + 4 <= n; r += 4) {
      estimate_tile<4, 1>(codes + r * d, scales + r, q, query_scales, d, n, true, estimate + r);
    }
  }
  for (; r + 2 <= n; r += 2) estimate_rows<2>(codes + r * d, scales + r, n, d, q, query_scales, b, estimate + r);
  if (r < n) estimate_rows<1>(codes + r * d, scales + r, n, d, q, query_scales, b, estimate + r);
}

}  // namespace rotmem::cpu::ROTMEM_ISA_NS::int8_rows
