// What the CPU kernels of the rotation ops (rotate.cpp, unrotated_query.cpp,
// unrotated_query_indexed.cpp) share: a row's sines and cosines, computed on the fly in float
// (double for double inputs), a block of kSinCosBlock pairs at a time into stack buffers
// (sin_cos.h, vectorised), so no angle, cos or sin tensor is ever stored; and the rows per
// parallel task.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "sin_cos.h"

namespace rotmem::cpu {

// Sines and cosines of one block of a row's pairs j0 .. j0 + k (k <= kSinCosBlock).
template <typename acc_t>
struct SinCosBlock {
  acc_t t[kSinCosBlock] = {}, s[kSinCosBlock], c[kSinCosBlock];

  // theta given as a tensor row, theta[0 .. k): read in place when it is a full float block.
  template <typename scalar_t>
  void of(const scalar_t* theta, int64_t k) {
    if constexpr (std::is_same_v<scalar_t, acc_t>) {
      if (k == kSinCosBlock) return sin_cos_block(theta, s, c);
    }
    for (int64_t i = 0; i < k; ++i) t[i] = static_cast<acc_t>(theta[i]);
    sin_cos_block(t, s, c);
  }
};

// pair(j, cos theta_j, sin theta_j) for every pair j < n of a row whose angles are theta[0 .. n).
// The pairs of a block are independent, so the calls vectorise.
template <typename acc_t, typename scalar_t, typename Pair>
inline void for_each_pair(const scalar_t* theta, int64_t n, Pair&& pair) {
  SinCosBlock<acc_t> sc;
  for (int64_t j0 = 0; j0 < n; j0 += kSinCosBlock) {
    const int64_t k = std::min(kSinCosBlock, n - j0);
    sc.of(theta + j0, k);
    _Pragma("omp simd") for (int64_t i = 0; i < k; ++i) pair(j0 + i, sc.c[i], sc.s[i]);
  }
}

// The same for the fused query's theta_j = speed * omega_j (omega zero-padded to whole blocks).
template <typename acc_t, typename Pair>
inline void for_each_pair_scaled(acc_t speed, const acc_t* omega, int64_t n, Pair&& pair) {
  acc_t s[kSinCosBlock], c[kSinCosBlock];
  for (int64_t j0 = 0; j0 < n; j0 += kSinCosBlock) {
    const int64_t k = std::min(kSinCosBlock, n - j0);
    sin_cos_scaled_block(speed, omega + j0, s, c);
    _Pragma("omp simd") for (int64_t i = 0; i < k; ++i) pair(j0 + i, c[i], s[i]);
  }
}

// Rows per parallel task: about 4096 pairs of work each.
inline int64_t row_grain(int64_t n) { return std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)); }

}  // namespace rotmem::cpu
