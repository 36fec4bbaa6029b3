// CUDA tile kernels of the filtered rank counts (the loop and the cuBLAS products through ATen are
// csrc/rank_counts_driver.h). The count kernel runs one block per tile row: threads stride over the
// row's scores, then over the row's filtered ids that fall in the tile (a binary search finds them,
// as in the CPU kernel), and block sums finish the counts.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include <optional>

#include "../rank_counts_driver.h"
#include "common.cuh"

namespace rotmem {
namespace {

using cuda::kThreads;

template <typename scalar_t, typename acc_t>
__global__ void pick_target_kernel(const scalar_t* __restrict__ tile, int64_t rows, int64_t cols, int64_t r0,
                                   int64_t c0, const int64_t* __restrict__ target, acc_t* __restrict__ score) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= rows) return;
  const int64_t k = target[r0 + i] - c0;
  if (k >= 0 && k < cols) score[r0 + i] = static_cast<acc_t>(tile[i * cols + k]);
}

// The first position in sorted ids[0, len) whose id is >= value (len when none is).
__device__ __forceinline__ int64_t lower_bound(const int64_t* __restrict__ ids, int64_t len, int64_t value) {
  int64_t low = 0;
  while (len > 0) {
    const int64_t half = len / 2;
    if (ids[low + half] < value) {
      low += half + 1;
      len -= half + 1;
    } else {
      len = half;
    }
  }
  return low;
}

template <typename scalar_t, typename acc_t>
__global__ void count_kernel(const scalar_t* __restrict__ tile, int64_t cols, int64_t r0, int64_t c0, int64_t batch,
                             int64_t filters, int64_t stride, const acc_t* __restrict__ score,
                             const int64_t* __restrict__ target, const int64_t* __restrict__ filter_ptr,
                             const int64_t* __restrict__ filter_idx, int64_t* __restrict__ higher,
                             int64_t* __restrict__ ties, bool* __restrict__ nonfinite) {
  __shared__ long long shared[32];
  const int64_t r = r0 + blockIdx.x;
  const scalar_t* x = tile + blockIdx.x * cols;
  const acc_t s = score[r];
  long long h = 0, e = 0, bad = 0;
  for (int64_t k = threadIdx.x; k < cols; k += blockDim.x) {
    const acc_t v = static_cast<acc_t>(x[k]);
    h += v > s;
    e += v == s;
    bad += !(v - v == acc_t(0));  // NaN or infinite
  }
  const int64_t t = target[r] - c0;
  const bool has_target = t >= 0 && t < cols;
  if (threadIdx.x == 0 && has_target) {  // the target is never a candidate
    const acc_t v = static_cast<acc_t>(x[t]);
    h -= v > s;
    e -= v == s;
  }
  h = cuda::block_sum(h, shared);
  e = cuda::block_sum(e, shared);
  bad = cuda::block_sum(bad, shared);
  for (int64_t f = 0; f < filters; ++f) {
    long long drop_h = 0, drop_e = 0;
    // The row's ids are sorted: those inside [c0, c0 + cols) are one run, found by binary search
    // (every thread searches: the same few addresses, served by the cache) instead of a rescan
    // of the whole row for every entity chunk.
    const int64_t* row_ids = filter_idx + filter_ptr[f * stride + r];
    const int64_t row_len = filter_ptr[f * stride + r + 1] - filter_ptr[f * stride + r];
    const int64_t first = lower_bound(row_ids, row_len, c0);
    const int64_t end = first + lower_bound(row_ids + first, row_len - first, c0 + cols);
    for (int64_t j = first + threadIdx.x; j < end; j += blockDim.x) {
      const int64_t k = row_ids[j] - c0;
      if (k == t) continue;  // the target, removed above
      const acc_t v = static_cast<acc_t>(x[k]);
      drop_h += v > s;
      drop_e += v == s;
    }
    drop_h = cuda::block_sum(drop_h, shared);
    drop_e = cuda::block_sum(drop_e, shared);
    if (threadIdx.x == 0) {
      higher[f * batch + r] += h - drop_h;
      ties[f * batch + r] += e - drop_e;
    }
  }
  if (threadIdx.x == 0 && (bad != 0 || !(s - s == acc_t(0)))) nonfinite[r] = true;
}

template <typename scalar_t>
void pick_target(const at::Tensor& tile, int64_t r0, int64_t c0, const at::Tensor& target, at::Tensor& score) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t rows = tile.size(0);
  if (rows == 0) return;
  pick_target_kernel<scalar_t, acc_t><<<cuda::grid_for(rows), kThreads, 0, cuda::stream()>>>(
      tile.const_data_ptr<scalar_t>(), rows, tile.size(1), r0, c0, target.const_data_ptr<int64_t>(),
      score.mutable_data_ptr<acc_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename scalar_t>
void count(const at::Tensor& tile, int64_t r0, int64_t c0, const at::Tensor& score, const at::Tensor& target,
           const at::Tensor& filter_ptr, const at::Tensor& filter_idx, at::Tensor& higher, at::Tensor& ties,
           at::Tensor& nonfinite) {
  using acc_t = at::opmath_type<scalar_t>;
  if (tile.size(0) == 0) return;
  count_kernel<scalar_t, acc_t><<<static_cast<unsigned int>(tile.size(0)), cuda::threads_for_row(tile.size(1)), 0,
                                  cuda::stream()>>>(
      tile.const_data_ptr<scalar_t>(), tile.size(1), r0, c0, score.size(0), filter_ptr.size(0), filter_ptr.size(1),
      score.const_data_ptr<acc_t>(), target.const_data_ptr<int64_t>(), filter_ptr.const_data_ptr<int64_t>(),
      filter_idx.const_data_ptr<int64_t>(), higher.mutable_data_ptr<int64_t>(), ties.mutable_data_ptr<int64_t>(),
      nonfinite.mutable_data_ptr<bool>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename scalar_t>
struct KernelsOf {
  static constexpr RankKernels kernels{&pick_target<scalar_t>, &count<scalar_t>};
};

std::tuple<at::Tensor, at::Tensor> filtered_rank_counts_cuda(const at::Tensor& q, const at::Tensor& entity,
                                                             const at::Tensor& target,
                                                             const std::optional<at::Tensor>& target_score,
                                                             const at::Tensor& filter_ptr, const at::Tensor& filter_idx,
                                                             int64_t entity_offset, int64_t block_rows,
                                                             int64_t block_cols) {
  const c10::cuda::CUDAGuard guard(cuda::device_of("rotmem::filtered_rank_counts",
                                                   {{"q", &q},
                                                    {"entity", &entity},
                                                    {"target", &target},
                                                    {"target_score", target_score ? &*target_score : nullptr},
                                                    {"filter_ptr", &filter_ptr},
                                                    {"filter_idx", &filter_idx}}));
  return filtered_rank_counts_impl(q, entity, target, target_score, filter_ptr, filter_idx, entity_offset, block_rows,
                                   block_cols, rank_kernels_for<KernelsOf>(q));
}

at::Tensor target_scores_cuda(const at::Tensor& q, const at::Tensor& entity, const at::Tensor& target,
                              int64_t entity_offset, int64_t block_rows, int64_t block_cols) {
  const c10::cuda::CUDAGuard guard(
      cuda::device_of("rotmem::target_scores", {{"q", &q}, {"entity", &entity}, {"target", &target}}));
  return target_scores_impl(q, entity, target, entity_offset, block_rows, block_cols, rank_kernels_for<KernelsOf>(q));
}

}  // namespace

TORCH_LIBRARY_IMPL(rotmem, CUDA, m) {
  m.impl("filtered_rank_counts", &filtered_rank_counts_cuda);
  m.impl("target_scores", &target_scores_cuda);
}

}  // namespace rotmem
