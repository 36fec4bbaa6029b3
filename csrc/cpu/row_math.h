// Vectorisable row reductions for the CPU cross-entropy and rank-count tiles (float rows).
//
// libm's expf is scalar; this exp (Cody-Waite reduction + degree-6 polynomial, the Cephes expf
// scheme, max error about 2 ulp) is plain arithmetic that the compiler turns into SIMD code. On
// x86-64 each function is compiled for AVX-512, AVX2 and the baseline and picked at load time
// (GCC/Clang target_clones), so one wheel runs everywhere and uses the widest unit present.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#define ROTMEM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ROTMEM_CLONES
#endif

namespace rotmem::cpu {

inline float exp_approx(float x) {
  // Inputs here are <= 0 (logits minus a running max); the clamp keeps 2^k finite.
  x = x < -87.33654f ? -87.33654f : (x > 88.37626f ? 88.37626f : x);
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to the nearest integer
  const float k = (x * 1.44269504088896341f + magic) - magic;
  const float r = (x - k * 0.693359375f) + k * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(k) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

ROTMEM_CLONES inline float row_max(const float* x, int64_t n) {
  float m = -__builtin_inff();
#pragma omp simd reduction(max : m)
  for (int64_t k = 0; k < n; ++k) m = x[k] > m ? x[k] : m;
  return m;
}

// sum_k exp(x_k - shift)
ROTMEM_CLONES inline float row_sum_exp(const float* x, int64_t n, float shift) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t k = 0; k < n; ++k) s += exp_approx(x[k] - shift);
  return s;
}

// x_k <- exp(x_k - shift), returning their sum
ROTMEM_CLONES inline float row_exp_inplace(float* x, int64_t n, float shift) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t k = 0; k < n; ++k) {
    const float e = exp_approx(x[k] - shift);
    x[k] = e;
    s += e;
  }
  return s;
}

// x_k <- scale * exp(x_k - shift)
ROTMEM_CLONES inline void row_scaled_exp(float* x, int64_t n, float shift, float scale) {
#pragma omp simd
  for (int64_t k = 0; k < n; ++k) x[k] = scale * exp_approx(x[k] - shift);
}

ROTMEM_CLONES inline void row_scale(float* x, int64_t n, float scale) {
#pragma omp simd
  for (int64_t k = 0; k < n; ++k) x[k] *= scale;
}

// Of x[0 .. n): how many are > s and == s, and whether any is NaN or infinite (x - x is then not 0).
ROTMEM_CLONES inline void row_rank_counts(const float* x, int64_t n, float s, int64_t& higher, int64_t& ties,
                                          bool& nonfinite) {
  int64_t h = 0, e = 0, bad = 0;
#pragma omp simd reduction(+ : h, e, bad)
  for (int64_t k = 0; k < n; ++k) {
    h += x[k] > s;
    e += x[k] == s;
    bad += !(x[k] - x[k] == 0.0f);
  }
  higher = h;
  ties = e;
  nonfinite = bad != 0;
}

}  // namespace rotmem::cpu
