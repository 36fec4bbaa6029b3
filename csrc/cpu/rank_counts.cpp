// CPU tile kernels of the filtered rank counts (the loop itself is csrc/rank_counts_driver.h).
// One thread counts a row of a tile; float rows use the SIMD count of row_math.h, other dtypes a plain
// loop in their opmath type (float for bfloat16/half, which is exact and keeps the order).
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>

#include "../rank_counts_driver.h"
#include "row_math.h"

namespace rotmem {
namespace {

template <typename scalar_t, typename acc_t>
void row_counts(const scalar_t* x, int64_t n, acc_t s, int64_t& higher, int64_t& ties, bool& nonfinite) {
  if constexpr (std::is_same_v<scalar_t, float>) {
    cpu::row_rank_counts(x, n, s, higher, ties, nonfinite);
  } else {
    int64_t h = 0, e = 0;
    bool bad = false;
    for (int64_t k = 0; k < n; ++k) {
      const acc_t v = static_cast<acc_t>(x[k]);
      h += v > s;
      e += v == s;
      bad |= !(v - v == acc_t(0));  // NaN or infinite
    }
    higher = h;
    ties = e;
    nonfinite = bad;
  }
}

template <typename scalar_t>
void pick_target(const at::Tensor& tile, int64_t r0, int64_t c0, const at::Tensor& target, at::Tensor& score) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t rows = tile.size(0), cols = tile.size(1);
  const scalar_t* x = tile.const_data_ptr<scalar_t>();
  const int64_t* t = target.const_data_ptr<int64_t>() + r0;
  acc_t* s = score.mutable_data_ptr<acc_t>() + r0;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t k = t[i] - c0;
    if (k >= 0 && k < cols) s[i] = static_cast<acc_t>(x[i * cols + k]);
  }
}

template <typename scalar_t>
void count(const at::Tensor& tile, int64_t r0, int64_t c0, const at::Tensor& score, const at::Tensor& target,
           const at::Tensor& filter_ptr, const at::Tensor& filter_idx, at::Tensor& higher, at::Tensor& ties,
           at::Tensor& nonfinite) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t rows = tile.size(0), cols = tile.size(1), filters = filter_ptr.size(0);
  const int64_t batch = score.size(0), stride = filter_ptr.size(1);
  const scalar_t* base = tile.const_data_ptr<scalar_t>();
  const acc_t* sp = score.const_data_ptr<acc_t>();
  const int64_t* tp = target.const_data_ptr<int64_t>();
  const int64_t* ptr = filter_ptr.const_data_ptr<int64_t>();
  const int64_t* idx = filter_idx.const_data_ptr<int64_t>();
  int64_t* hp = higher.mutable_data_ptr<int64_t>();
  int64_t* ep = ties.mutable_data_ptr<int64_t>();
  bool* np = nonfinite.mutable_data_ptr<bool>();
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1));
  at::parallel_for(0, rows, grain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t r = r0 + i;
      const scalar_t* x = base + i * cols;
      const acc_t s = sp[r];
      int64_t h, e;
      bool bad;
      row_counts(x, cols, s, h, e, bad);
      // What the target itself added, if it is in this tile.
      const int64_t t = tp[r] - c0;
      int64_t target_h = 0, target_e = 0;
      if (t >= 0 && t < cols) {
        const acc_t v = static_cast<acc_t>(x[t]);
        target_h = v > s;
        target_e = v == s;
      }
      for (int64_t f = 0; f < filters; ++f) {
        // The row's ids are sorted: those inside [c0, c0 + cols) are one run.
        const int64_t* first = std::lower_bound(idx + ptr[f * stride + r], idx + ptr[f * stride + r + 1], c0);
        const int64_t* last = std::lower_bound(first, idx + ptr[f * stride + r + 1], c0 + cols);
        int64_t drop_h = target_h, drop_e = target_e;
        for (const int64_t* id = first; id < last; ++id) {
          if (*id - c0 == t) continue;  // the target, removed above
          const acc_t v = static_cast<acc_t>(x[*id - c0]);
          drop_h += v > s;
          drop_e += v == s;
        }
        hp[f * batch + r] += h - drop_h;
        ep[f * batch + r] += e - drop_e;
      }
      if (bad || !(s - s == acc_t(0))) np[r] = true;
    }
  });
}

template <typename scalar_t>
struct KernelsOf {
  static constexpr RankKernels kernels{&pick_target<scalar_t>, &count<scalar_t>};
};

std::tuple<at::Tensor, at::Tensor> filtered_rank_counts_cpu(const at::Tensor& q, const at::Tensor& entity,
                                                            const at::Tensor& target,
                                                            const std::optional<at::Tensor>& target_score,
                                                            const at::Tensor& filter_ptr, const at::Tensor& filter_idx,
                                                            int64_t entity_offset, int64_t block_rows,
                                                            int64_t block_cols) {
  return filtered_rank_counts_impl(q, entity, target, target_score, filter_ptr, filter_idx, entity_offset, block_rows,
                                   block_cols, rank_kernels_for<KernelsOf>(q));
}

at::Tensor target_scores_cpu(const at::Tensor& q, const at::Tensor& entity, const at::Tensor& target,
                             int64_t entity_offset, int64_t block_rows, int64_t block_cols) {
  return target_scores_impl(q, entity, target, entity_offset, block_rows, block_cols, rank_kernels_for<KernelsOf>(q));
}

}  // namespace

TORCH_LIBRARY_IMPL(rotmem, CPU, m) {
  m.impl("filtered_rank_counts", &filtered_rank_counts_cpu);
  m.impl("target_scores", &target_scores_cpu);
}

}  // namespace rotmem
