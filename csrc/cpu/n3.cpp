// CPU kernels of the N3 / L4 regulariser of a [M, 2n] block of rows (ROMEM.md, Phase 2):
//   "l4":       sum of x^4 over every real coordinate      -> d/dx = 4 x^3
//   "modulus3": sum over complex pairs of |z|^3             -> d/dre = 3 |z| re, d/dim = 3 |z| im
// Each row sums in float (double for double inputs), rows in double; the result is float (double).
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cmath>
#include <string>

#include "../n3_kind.h"

namespace rotmem {
namespace {

// One row, summed in acc_t with SIMD (rows are then summed in double).
template <typename scalar_t, typename acc_t = at::opmath_type<scalar_t>>
acc_t row_l4(const scalar_t* row, int64_t width) {
  acc_t sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t k = 0; k < width; ++k) {
    const acc_t v = static_cast<acc_t>(row[k]), v2 = v * v;
    sum += v2 * v2;
  }
  return sum;
}

template <typename scalar_t, typename acc_t = at::opmath_type<scalar_t>>
acc_t row_modulus3(const scalar_t* row, int64_t n) {
  acc_t sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    const acc_t re = static_cast<acc_t>(row[j]), im = static_cast<acc_t>(row[n + j]);
    const acc_t m2 = re * re + im * im;
    sum += m2 * std::sqrt(m2);
  }
  return sum;
}

at::Tensor n3_cpu(const at::Tensor& x_in, c10::string_view kind_name) {
  const N3Kind kind = parse_n3_kind(std::string(kind_name), x_in);
  const at::Tensor x = x_in.contiguous();
  const int64_t rows = x.size(0), width = x.size(1), n = width / 2;
  double total = 0.0;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "rotmem::n3", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* p = x.const_data_ptr<scalar_t>();
    total = at::parallel_reduce(
        0, rows, std::max<int64_t>(1, 32768 / std::max<int64_t>(width, 1)), 0.0,
        [&](int64_t r0, int64_t r1, double sum) {
          for (int64_t r = r0; r < r1; ++r) {
            const scalar_t* row = p + r * width;
            const acc_t row_sum = kind == N3Kind::kL4 ? row_l4<scalar_t>(row, width) : row_modulus3<scalar_t>(row, n);
            sum += static_cast<double>(row_sum);
          }
          return sum;
        },
        std::plus<double>());
  });
  return at::scalar_tensor(total, x.options().dtype(x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat));
}

at::Tensor n3_backward_cpu(const at::Tensor& grad, const at::Tensor& x_in, c10::string_view kind_name) {
  const N3Kind kind = parse_n3_kind(std::string(kind_name), x_in);
  TORCH_CHECK(grad.numel() == 1, "rotmem::n3_backward: grad must be a scalar, got ", grad.sizes());
  const at::Tensor x = x_in.contiguous();
  const int64_t rows = x.size(0), width = x.size(1), n = width / 2;
  at::Tensor out = at::empty_like(x);
  const double g = grad.item<double>();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "rotmem::n3_backward", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* p = x.const_data_ptr<scalar_t>();
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, rows, std::max<int64_t>(1, 32768 / std::max<int64_t>(width, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const scalar_t* row = p + r * width;
        scalar_t* orow = o + r * width;
        if (kind == N3Kind::kL4) {
          const acc_t scale = static_cast<acc_t>(4.0 * g);
          for (int64_t k = 0; k < width; ++k) {
            const acc_t v = row[k];
            orow[k] = scale * v * v * v;
          }
        } else {
          const acc_t scale = static_cast<acc_t>(3.0 * g);
          for (int64_t j = 0; j < n; ++j) {
            const acc_t re = row[j], im = row[n + j];
            const acc_t f = scale * std::sqrt(re * re + im * im);
            orow[j] = f * re;
            orow[n + j] = f * im;
          }
        }
      }
    });
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(rotmem, CPU, m) {
  m.impl("n3", &n3_cpu);
  m.impl("n3_backward", &n3_backward_cpu);
}

}  // namespace rotmem
