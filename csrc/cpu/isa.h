// The x86-64 instruction set the CPU kernels' SIMD loops run with: AVX-512, AVX2 (with FMA) or the
// baseline (SSE2), chosen once per process and changeable at run time (tests run every path the
// CPU can execute).
//
// row_math.h and sin_cos.h compile each SIMD loop once per instruction set (row_math_isa.h and
// sin_cos_isa.h are included once per set, each copy in its own namespace with its own target
// attribute), and a small dispatcher calls the copy of the active set. The active set starts as the
// widest one the CPU (and OS) supports; `rotmem._C.set_cpu_isa` (which `rotmem.ops.native` calls
// with $ROTMEM_CPU_ISA at import) forces a narrower one. Elsewhere than x86-64 with GCC/Clang there is
// only the baseline.
#pragma once

#include <atomic>
#include <initializer_list>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#define ROTMEM_X86_ISAS 1
// AVX-512F implies AVX2 and FMA; AVX2 is taken with FMA (x86-64-v3: every AVX2 CPU has it), so the
// two wide paths round alike.
#define ROTMEM_TARGET_AVX512 __attribute__((target("avx512f")))
#define ROTMEM_TARGET_AVX2 __attribute__((target("avx2,fma")))
#else
#define ROTMEM_X86_ISAS 0
#endif

namespace rotmem::cpu {

enum class Isa : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

inline const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    default:
      return "baseline";
  }
}

// Whether this build has kernels for `isa` and the CPU can run them.
inline bool isa_supported(Isa isa) {
#if ROTMEM_X86_ISAS
  __builtin_cpu_init();  // may run before libgcc's own constructor
  switch (isa) {
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f");  // also checks that the OS saves the zmm state
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    default:
      return true;
  }
#else
  return isa == Isa::kBaseline;
#endif
}

// The widest supported set: the default.
inline Isa best_isa() {
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2}) {
    if (isa_supported(isa)) return isa;
  }
  return Isa::kBaseline;
}

inline std::atomic<int>& active_isa_slot() {
  static std::atomic<int> slot{static_cast<int>(best_isa())};
  return slot;
}

// The set the kernels use now (read once per row or block of work).
inline Isa active_isa() { return static_cast<Isa>(active_isa_slot().load(std::memory_order_relaxed)); }

// Callers check isa_supported(isa) first.
inline void set_active_isa(Isa isa) { active_isa_slot().store(static_cast<int>(isa), std::memory_order_relaxed); }

}  // namespace rotmem::cpu

// `return ns::fn(args...)` for the namespace (avx512, avx2, baseline) of the active set.
#if ROTMEM_X86_ISAS
#define ROTMEM_ISA_DISPATCH(fn, ...)               \
  switch (::rotmem::cpu::active_isa()) {           \
    case ::rotmem::cpu::Isa::kAvx512:              \
      return ::rotmem::cpu::avx512::fn(__VA_ARGS__); \
    case ::rotmem::cpu::Isa::kAvx2:                \
      return ::rotmem::cpu::avx2::fn(__VA_ARGS__);   \
    default:                                       \
      return ::rotmem::cpu::baseline::fn(__VA_ARGS__); \
  }
#else
#define ROTMEM_ISA_DISPATCH(fn, ...) return ::rotmem::cpu::baseline::fn(__VA_ARGS__);
#endif
