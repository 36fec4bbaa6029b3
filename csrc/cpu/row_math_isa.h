// The SIMD row loops of row_math.h, for one instruction set: included once per set by row_math.h
// with ROTMEM_ISA_NS (the namespace) and ROTMEM_ISA_TARGET (its target attribute) defined.
// No include guard, on purpose.

namespace rotmem::cpu::ROTMEM_ISA_NS {

ROTMEM_ISA_TARGET inline float row_max(const float* x, int64_t n) {
  float m = -__builtin_inff();
#pragma omp simd reduction(max : m)
  for (int64_t k = 0; k < n; ++k) m = x[k] > m ? x[k] : m;
  return m;
}

// The sums accumulate in double: a float lane accumulator of n / lanes terms (655 to 2622 of them for
// ICEWS's 10,488 entities at 16 to 4 lanes) would make the row's softmax, and so its gradient, depend on
// the instruction set, up to ~n / lanes ulp when many small terms round away against a large partial sum.
// In double the sum is exact to float rounding whatever the lanes, for the cost of one widening.
ROTMEM_ISA_TARGET inline float row_sum_exp(const float* x, int64_t n, float shift) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t k = 0; k < n; ++k) s += exp_approx(x[k] - shift);
  return static_cast<float>(s);
}

ROTMEM_ISA_TARGET inline float row_exp_inplace(float* x, int64_t n, float shift) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t k = 0; k < n; ++k) {
    const float e = exp_approx(x[k] - shift);
    x[k] = e;
    s += e;
  }
  return static_cast<float>(s);
}

ROTMEM_ISA_TARGET inline void row_scaled_exp(float* x, int64_t n, float shift, float scale) {
#pragma omp simd
  for (int64_t k = 0; k < n; ++k) x[k] = scale * exp_approx(x[k] - shift);
}

ROTMEM_ISA_TARGET inline void row_scale(float* x, int64_t n, float scale) {
#pragma omp simd
  for (int64_t k = 0; k < n; ++k) x[k] *= scale;
}

// Of x[0 .. n): how many are > s and == s, and whether any is NaN or infinite (x - x is then not 0).
ROTMEM_ISA_TARGET inline void row_rank_counts(const float* x, int64_t n, float s, int64_t& higher, int64_t& ties,
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

}  // namespace rotmem::cpu::ROTMEM_ISA_NS
