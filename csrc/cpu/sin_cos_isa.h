// The SIMD sine/cosine blocks of sin_cos.h, for one instruction set: included once per set by
// sin_cos.h with ROTMEM_ISA_NS and ROTMEM_ISA_TARGET defined (see row_math_isa.h). No include guard.

namespace rotmem::cpu::ROTMEM_ISA_NS {

ROTMEM_ISA_TARGET inline void sin_cos_block(const float* t, float* s, float* c) {
  int far = 0;
#pragma omp simd reduction(| : far)
  for (int64_t i = 0; i < kSinCosBlock; ++i) far |= sin_cos_reduced(t[i], s[i], c[i]);
  if (far) redo_far_angles(t, s, c);
}

ROTMEM_ISA_TARGET inline void sin_cos_scaled_block(float speed, const float* omega, float* s, float* c) {
  int far = 0;
#pragma omp simd reduction(| : far)
  for (int64_t i = 0; i < kSinCosBlock; ++i) far |= sin_cos_reduced(speed * omega[i], s[i], c[i]);
  if (far) {
    float t[kSinCosBlock];
    for (int64_t i = 0; i < kSinCosBlock; ++i) t[i] = speed * omega[i];
    redo_far_angles(t, s, c);
  }
}

}  // namespace rotmem::cpu::ROTMEM_ISA_NS
