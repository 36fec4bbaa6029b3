// The two regulariser kinds of rotmem::n3 and their input check (shared by CPU and CUDA).
#pragma once

#include <ATen/ATen.h>

#include <string>

namespace rotmem {

enum class N3Kind { kL4, kModulus3 };

inline N3Kind parse_n3_kind(const std::string& kind, const at::Tensor& x) {
  TORCH_CHECK(kind == "l4" || kind == "modulus3", "rotmem::n3: unknown regulariser kind '", kind,
              "'; expected 'l4' or 'modulus3'");
  TORCH_CHECK(x.dim() == 2, "rotmem::n3: expected rows [M, 2n], got ", x.sizes());
  TORCH_CHECK(kind == "l4" || x.size(1) % 2 == 0, "rotmem::n3: 'modulus3' needs an even last dimension (complex ",
              "pairs in split halves), got ", x.sizes());
  return kind == "l4" ? N3Kind::kL4 : N3Kind::kModulus3;
}

}  // namespace rotmem
