// Vectorisable row reductions for the CPU cross-entropy and rank-count tiles (float rows).
//
// libm's expf is scalar; this exp (Cody-Waite reduction + degree-6 polynomial, the Cephes expf
// scheme, max error about 2 ulp) is plain arithmetic that the compiler turns into SIMD code. Each
// row loop is compiled for AVX-512, AVX2 and the baseline (row_math_isa.h) and the one of the active
// instruction set runs (isa.h), so one wheel runs everywhere and uses the widest unit present.
#pragma once

#include <cstdint>
#include <cstring>

#include "isa.h"

namespace rotmem::cpu {

// exp(x) to about 2 ulp, clamped to x in [-87.3, 88.3] so that 2^k stays a normal float (callers
// pass logits minus a running maximum, x <= 0). Two plain selects: GCC vectorises them only under
// -fno-trapping-math (setup.py sets it), else a float select is control flow and the loop runs
// scalar for AVX2 and SSE.
__attribute__((always_inline)) inline float exp_approx(float x) {
  x = x < -87.33654f ? -87.33654f : x;
  x = x > 88.37626f ? 88.37626f : x;
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to the nearest integer
  const float k = (x * 1.44269504088896341f + magic) - magic;
  const float r = (x - k * 0.693359375f) + k * 2.12194440e-4f;  // x - k ln 2 in two parts (Cody-Waite)
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(k) + 127) << 23;
  float scale;  // 2^k; memcpy is C++17's bit_cast (one register move after optimisation)
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;  // p * 2^k
}

}  // namespace rotmem::cpu

#if ROTMEM_X86_ISAS
#define ROTMEM_ISA_NS avx512
#define ROTMEM_ISA_TARGET ROTMEM_TARGET_AVX512
#include "row_math_isa.h"
#undef ROTMEM_ISA_NS
#undef ROTMEM_ISA_TARGET
#define ROTMEM_ISA_NS avx2
#define ROTMEM_ISA_TARGET ROTMEM_TARGET_AVX2
#include "row_math_isa.h"
#undef ROTMEM_ISA_NS
#undef ROTMEM_ISA_TARGET
#endif
#define ROTMEM_ISA_NS baseline
#define ROTMEM_ISA_TARGET
#include "row_math_isa.h"
#undef ROTMEM_ISA_NS
#undef ROTMEM_ISA_TARGET

namespace rotmem::cpu {

inline float row_max(const float* x, int64_t n) { ROTMEM_ISA_DISPATCH(row_max, x, n) }

// sum_k exp(x_k - shift)
inline float row_sum_exp(const float* x, int64_t n, float shift) { ROTMEM_ISA_DISPATCH(row_sum_exp, x, n, shift) }

// x_k <- exp(x_k - shift), returning their sum
inline float row_exp_inplace(float* x, int64_t n, float shift) { ROTMEM_ISA_DISPATCH(row_exp_inplace, x, n, shift) }

// x_k <- scale * exp(x_k - shift)
inline void row_scaled_exp(float* x, int64_t n, float shift, float scale) {
  ROTMEM_ISA_DISPATCH(row_scaled_exp, x, n, shift, scale)
}

inline void row_scale(float* x, int64_t n, float scale) { ROTMEM_ISA_DISPATCH(row_scale, x, n, scale) }

// Of x[0 .. n): how many are > s and == s, and whether any is NaN or infinite.
inline void row_rank_counts(const float* x, int64_t n, float s, int64_t& higher, int64_t& ties, bool& nonfinite) {
  ROTMEM_ISA_DISPATCH(row_rank_counts, x, n, s, higher, ties, nonfinite)
}

}  // namespace rotmem::cpu
