// Vectorisable sines and cosines for the CPU rotation kernels, a block of kSinCosBlock angles at a time.
//
// libm's sincosf is a scalar call per pair and held the rotation kernels to about 1 GB/s. Here each
// float angle is reduced to [-pi/4, pi/4] by the nearest multiple of pi/2 (Cody-Waite, pi/2 split
// into three parts so the reduction is exact for |t| <= 8192) and evaluated with the Cephes
// sinf/cosf minimax polynomials (max error about 1 ulp on that range). The loops are plain
// arithmetic and selects with a fixed trip count, so they become SIMD code without a scalar tail;
// like row_math.h they are compiled for AVX-512, AVX2 and the baseline (sin_cos_isa.h) and the
// active instruction set's copy runs (isa.h).
// Angles beyond 8192 rad (or NaN / inf) are redone with libm afterwards, so every input gets
// libm-quality results. Doubles always use libm.
#pragma once

#include <cmath>
#include <cstdint>

#include "isa.h"

namespace rotmem::cpu {

// Angles per block: callers pad a short last block (its extra results are ignored).
constexpr int64_t kSinCosBlock = 64;
constexpr float kSinCosReducedMax = 8192.0f;

// sin and cos of x for |x| <= kSinCosReducedMax; returns whether x needs libm instead.
__attribute__((always_inline)) inline bool sin_cos_reduced(float x, float& s, float& c) {
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to the nearest integer
  const float j = (x * 0.636619772367581343f + magic) - magic;
  const float r = ((x - j * 1.5703125f) - j * 4.837512969970703125e-4f) - j * 7.54978995489188216e-8f;
  const float r2 = r * r;
  const float sin_r = r + r * r2 * (-1.6666654611e-1f + r2 * (8.3321608736e-3f + r2 * -1.9515295891e-4f));
  const float cos_r =
      1.0f - 0.5f * r2 + r2 * r2 * (4.166664568298827e-2f + r2 * (-1.388731625493765e-3f + r2 * 2.443315711809948e-5f));
  // x = j * pi/2 + r; far angles (and NaN) convert a harmless 0 and are redone by the caller
  const int32_t quadrant = static_cast<int32_t>(std::fabs(j) < 1e9f ? j : 0.0f) & 3;
  const float sin_abs = (quadrant & 1) ? cos_r : sin_r;
  const float cos_abs = (quadrant & 1) ? sin_r : cos_r;
  s = (quadrant & 2) ? -sin_abs : sin_abs;
  c = ((quadrant + 1) & 2) ? -cos_abs : cos_abs;
  return !(std::fabs(x) <= kSinCosReducedMax);
}

inline void redo_far_angles(const float* t, float* s, float* c) {
  for (int64_t i = 0; i < kSinCosBlock; ++i) {
    if (!(std::fabs(t[i]) <= kSinCosReducedMax)) ::sincosf(t[i], &s[i], &c[i]);
  }
}

}  // namespace rotmem::cpu

#if ROTMEM_X86_ISAS
#define ROTMEM_ISA_NS avx512
#define ROTMEM_ISA_TARGET ROTMEM_TARGET_AVX512
#include "sin_cos_isa.h"
#undef ROTMEM_ISA_NS
#undef ROTMEM_ISA_TARGET
#define ROTMEM_ISA_NS avx2
#define ROTMEM_ISA_TARGET ROTMEM_TARGET_AVX2
#include "sin_cos_isa.h"
#undef ROTMEM_ISA_NS
#undef ROTMEM_ISA_TARGET
#endif
#define ROTMEM_ISA_NS baseline
#define ROTMEM_ISA_TARGET
#include "sin_cos_isa.h"
#undef ROTMEM_ISA_NS
#undef ROTMEM_ISA_TARGET

namespace rotmem::cpu {

// s[i], c[i] = sin, cos of t[i] for the kSinCosBlock angles at t.
inline void sin_cos_block(const float* t, float* s, float* c) { ROTMEM_ISA_DISPATCH(sin_cos_block, t, s, c) }

// The same for the angles speed * omega[i] (the fused query's theta_j), never stored in memory.
inline void sin_cos_scaled_block(float speed, const float* omega, float* s, float* c) {
  ROTMEM_ISA_DISPATCH(sin_cos_scaled_block, speed, omega, s, c)
}

inline void sin_cos_block(const double* t, double* s, double* c) {
  for (int64_t i = 0; i < kSinCosBlock; ++i) ::sincos(t[i], &s[i], &c[i]);
}

inline void sin_cos_scaled_block(double speed, const double* omega, double* s, double* c) {
  for (int64_t i = 0; i < kSinCosBlock; ++i) ::sincos(speed * omega[i], &s[i], &c[i]);
}

}  // namespace rotmem::cpu
