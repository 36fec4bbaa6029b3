// CPU tile kernels of the chunked cross-entropy (the loop itself is csrc/cross_entropy_driver.h).
// Each row of a tile is reduced by one thread; float rows use the SIMD helpers of row_math.h,
// bfloat16/half rows are widened to float in a per-thread buffer, double rows use libm.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cmath>
#include <type_traits>
#include <vector>

#include "../cross_entropy_driver.h"
#include "row_math.h"

namespace rotmem {
namespace {

// Double rows (tests, gradcheck): plain loops with libm.
inline double row_max(const double* x, int64_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t k = 0; k < n; ++k) m = x[k] > m ? x[k] : m;
  return m;
}
inline double row_sum_exp(const double* x, int64_t n, double shift) {
  double s = 0.0;
  for (int64_t k = 0; k < n; ++k) s += std::exp(x[k] - shift);
  return s;
}
inline double row_exp_inplace(double* x, int64_t n, double shift) {
  double s = 0.0;
  for (int64_t k = 0; k < n; ++k) s += (x[k] = std::exp(x[k] - shift));
  return s;
}
inline void row_scaled_exp(double* x, int64_t n, double shift, double scale) {
  for (int64_t k = 0; k < n; ++k) x[k] = scale * std::exp(x[k] - shift);
}
inline void row_scale(double* x, int64_t n, double scale) {
  for (int64_t k = 0; k < n; ++k) x[k] *= scale;
}
using cpu::row_exp_inplace;
using cpu::row_max;
using cpu::row_scale;
using cpu::row_scaled_exp;
using cpu::row_sum_exp;

int64_t tile_grain(int64_t cols) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)); }

// Runs fn(row r, acc_t* values) over the rows of a tile in parallel. Rows already in acc_t are
// handed over in place; narrower rows are widened into a per-thread buffer and, if `write_back`,
// narrowed back afterwards.
template <typename scalar_t, typename Fn>
void for_each_row(const at::Tensor& tile, bool write_back, const Fn& fn) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t rows = tile.size(0), cols = tile.size(1);
  scalar_t* base = static_cast<scalar_t*>(tile.data_ptr());
  at::parallel_for(0, rows, tile_grain(cols), [&](int64_t r0, int64_t r1) {
    if constexpr (std::is_same_v<scalar_t, acc_t>) {
      for (int64_t r = r0; r < r1; ++r) fn(r, base + r * cols);
    } else {
      std::vector<acc_t> buffer(cols);
      for (int64_t r = r0; r < r1; ++r) {
        scalar_t* row = base + r * cols;
        for (int64_t k = 0; k < cols; ++k) buffer[k] = static_cast<acc_t>(row[k]);
        fn(r, buffer.data());
        if (write_back) {
          for (int64_t k = 0; k < cols; ++k) row[k] = static_cast<scalar_t>(buffer[k]);
        }
      }
    }
  });
}

template <typename scalar_t>
void lse_update(const at::Tensor& tile, int64_t c0, int64_t /*num_entities: checked on the host*/,
                const at::Tensor& target, at::Tensor& m, at::Tensor& s, at::Tensor& tgt) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t cols = tile.size(1);
  const int64_t* tp = target.const_data_ptr<int64_t>();
  acc_t* mp = m.mutable_data_ptr<acc_t>();
  acc_t* sp = s.mutable_data_ptr<acc_t>();
  acc_t* gp = tgt.mutable_data_ptr<acc_t>();
  for_each_row<scalar_t>(tile, false, [&](int64_t r, acc_t* x) {
    const acc_t new_m = std::max(mp[r], row_max(x, cols));
    sp[r] = sp[r] * std::exp(mp[r] - new_m) + row_sum_exp(x, cols, new_m);
    mp[r] = new_m;
    const int64_t t = tp[r] - c0;
    if (t >= 0 && t < cols) gp[r] = x[t];
  });
}

template <typename scalar_t>
void grad(at::Tensor& tile, int64_t c0, const at::Tensor& target, const at::Tensor& lse, const at::Tensor& coef) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t cols = tile.size(1);
  const int64_t* tp = target.const_data_ptr<int64_t>();
  const acc_t* lp = lse.const_data_ptr<acc_t>();
  const acc_t* cp = coef.const_data_ptr<acc_t>();
  for_each_row<scalar_t>(tile, true, [&](int64_t r, acc_t* x) {
    row_scaled_exp(x, cols, lp[r], cp[r]);
    const int64_t t = tp[r] - c0;
    if (t >= 0 && t < cols) x[t] -= cp[r];
  });
}

template <typename scalar_t>
void lse_and_grad(at::Tensor& tile, const at::Tensor& target, const at::Tensor& coef, at::Tensor& lse,
                  at::Tensor& tgt) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t cols = tile.size(1);
  const int64_t* tp = target.const_data_ptr<int64_t>();
  const acc_t* cp = coef.const_data_ptr<acc_t>();
  acc_t* lp = lse.mutable_data_ptr<acc_t>();
  acc_t* gp = tgt.mutable_data_ptr<acc_t>();
  for_each_row<scalar_t>(tile, true, [&](int64_t r, acc_t* x) {
    const int64_t t = tp[r];
    const bool has_target = t >= 0 && t < cols;
    if (has_target) gp[r] = x[t];
    const acc_t m = row_max(x, cols);
    const acc_t sum = row_exp_inplace(x, cols, m);
    lp[r] = m + std::log(sum);
    row_scale(x, cols, cp[r] / sum);
    if (has_target) x[t] -= cp[r];
  });
}

template <typename scalar_t>
struct KernelsOf {
  static constexpr TileKernels kernels{&lse_update<scalar_t>, &grad<scalar_t>, &lse_and_grad<scalar_t>};
};

TileKernels cpu_kernels(const at::Tensor& q) { return tile_kernels_for<KernelsOf>(q); }

std::tuple<at::Tensor, at::Tensor> cross_entropy_all_cpu(const at::Tensor& q, const at::Tensor& entity,
                                                         const at::Tensor& target, c10::string_view reduction,
                                                         int64_t block_rows, int64_t block_cols) {
  return cross_entropy_all_impl(q, entity, target, std::string(reduction), block_rows, block_cols, cpu_kernels(q));
}

std::tuple<at::Tensor, at::Tensor> cross_entropy_all_backward_cpu(const at::Tensor& grad, const at::Tensor& q,
                                                                  const at::Tensor& entity, const at::Tensor& target,
                                                                  const at::Tensor& lse, c10::string_view reduction,
                                                                  int64_t block_rows, int64_t block_cols, bool need_q,
                                                                  bool need_entity) {
  return cross_entropy_all_backward_impl(grad, q, entity, target, lse, std::string(reduction), block_rows, block_cols,
                                         need_q, need_entity, cpu_kernels(q));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> cross_entropy_all_train_cpu(
    const at::Tensor& q, const at::Tensor& entity, const at::Tensor& target, c10::string_view reduction,
    int64_t block_rows, int64_t block_cols, bool need_q, bool need_entity) {
  return cross_entropy_all_train_impl(q, entity, target, std::string(reduction), block_rows, block_cols, need_q,
                                      need_entity, cpu_kernels(q));
}

}  // namespace

TORCH_LIBRARY_IMPL(rotmem, CPU, m) {
  m.impl("cross_entropy_all", &cross_entropy_all_cpu);
  m.impl("cross_entropy_all_backward", &cross_entropy_all_backward_cpu);
  m.impl("cross_entropy_all_train", &cross_entropy_all_train_cpu);
}

}  // namespace rotmem
