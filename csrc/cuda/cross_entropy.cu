// CUDA tile kernels of the chunked cross-entropy (the loop and the cuBLAS products through ATen
// are csrc/cross_entropy_driver.h). Every kernel runs one block per tile row; the log-sum-exp
// kernels reduce a (max, sum of exp) summary in one pass (online softmax within the row, merged
// across threads).
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include "../cross_entropy_driver.h"
#include "common.cuh"

namespace rotmem {
namespace {

using cuda::exp_;
using cuda::kThreads;

// The host checks the targets first (check_index_range); this device-side assert remains for
// ROTMEM_CHECK_IDS=0 and the backward.
__device__ __forceinline__ void check_target(int64_t t, int64_t num_entities) {
  CUDA_KERNEL_ASSERT_MSG(t == kIgnoreIndex || (t >= 0 && t < num_entities),
                         "rotmem::cross_entropy_all: a target is out of range for the entity table");
}

// The (max, sum exp) summary of row values x[k] for k = threadIdx.x, +blockDim.x, ... merged over the block.
template <typename scalar_t, typename acc_t>
__device__ void row_summary(const scalar_t* __restrict__ x, int64_t cols, acc_t& m, acc_t& s) {
  __shared__ acc_t shared_m[32], shared_s[32];
  m = -INFINITY;
  s = 0;
  for (int64_t k = threadIdx.x; k < cols; k += blockDim.x) {
    const acc_t v = static_cast<acc_t>(x[k]);
    if (v > m) {
      s = s * exp_(m - v) + acc_t(1);
      m = v;
    } else {
      s += exp_(v - m);
    }
  }
  cuda::block_lse(m, s, shared_m, shared_s);
}

template <typename scalar_t, typename acc_t>
__global__ void lse_update_kernel(const scalar_t* __restrict__ tile, int64_t cols, int64_t c0, int64_t num_entities,
                                  const int64_t* __restrict__ target, acc_t* __restrict__ m, acc_t* __restrict__ s,
                                  acc_t* __restrict__ tgt) {
  const int64_t r = blockIdx.x;
  const scalar_t* row = tile + r * cols;
  acc_t row_m, row_s;
  row_summary(row, cols, row_m, row_s);
  if (threadIdx.x == 0) {
    check_target(target[r], num_entities);
    acc_t run_m = m[r], run_s = s[r];
    cuda::lse_merge(run_m, run_s, row_m, row_s);
    m[r] = run_m;
    s[r] = run_s;
    const int64_t t = target[r] - c0;
    if (t >= 0 && t < cols) tgt[r] = static_cast<acc_t>(row[t]);
  }
}

// row[k] <- coef * (exp(row[k] - lse) - [k == t]) for k = threadIdx.x, +blockDim.x, ...
template <typename scalar_t, typename acc_t>
__device__ void write_row_grad(scalar_t* __restrict__ row, int64_t cols, int64_t t, acc_t lse, acc_t coef) {
  for (int64_t k = threadIdx.x; k < cols; k += blockDim.x) {
    acc_t v = coef * exp_(static_cast<acc_t>(row[k]) - lse);
    if (k == t) v -= coef;
    row[k] = static_cast<scalar_t>(v);
  }
}

template <typename scalar_t, typename acc_t>
__global__ void grad_kernel(scalar_t* __restrict__ tile, int64_t cols, int64_t c0, const int64_t* __restrict__ target,
                            const acc_t* __restrict__ lse, const acc_t* __restrict__ coef) {
  const int64_t r = blockIdx.x;
  write_row_grad(tile + r * cols, cols, target[r] - c0, lse[r], coef[r]);
}

template <typename scalar_t, typename acc_t>
__global__ void lse_and_grad_kernel(scalar_t* __restrict__ tile, int64_t cols, const int64_t* __restrict__ target,
                                    const acc_t* __restrict__ coef, acc_t* __restrict__ lse, acc_t* __restrict__ tgt) {
  const int64_t r = blockIdx.x;
  scalar_t* row = tile + r * cols;
  const int64_t t = target[r];
  if (threadIdx.x == 0) check_target(t, cols);
  const bool has_target = t >= 0 && t < cols;
  // Read the target logit before any thread overwrites the row (row_summary synchronises).
  const acc_t target_logit = has_target && threadIdx.x == 0 ? static_cast<acc_t>(row[t]) : acc_t(0);
  acc_t m, s;
  row_summary(row, cols, m, s);
  const acc_t row_lse = m + log(s);
  if (threadIdx.x == 0) {
    lse[r] = row_lse;
    if (has_target) tgt[r] = target_logit;
  }
  write_row_grad(row, cols, t, row_lse, coef[r]);
}

template <typename scalar_t>
void lse_update(const at::Tensor& tile, int64_t c0, int64_t num_entities, const at::Tensor& target, at::Tensor& m,
                at::Tensor& s, at::Tensor& tgt) {
  using acc_t = at::opmath_type<scalar_t>;
  if (tile.size(0) == 0) return;
  lse_update_kernel<scalar_t, acc_t><<<static_cast<unsigned int>(tile.size(0)), kThreads, 0, cuda::stream()>>>(
      tile.const_data_ptr<scalar_t>(), tile.size(1), c0, num_entities, target.const_data_ptr<int64_t>(),
      m.mutable_data_ptr<acc_t>(), s.mutable_data_ptr<acc_t>(), tgt.mutable_data_ptr<acc_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename scalar_t>
void grad(at::Tensor& tile, int64_t c0, const at::Tensor& target, const at::Tensor& lse, const at::Tensor& coef) {
  using acc_t = at::opmath_type<scalar_t>;
  if (tile.size(0) == 0) return;
  grad_kernel<scalar_t, acc_t><<<static_cast<unsigned int>(tile.size(0)), kThreads, 0, cuda::stream()>>>(
      tile.mutable_data_ptr<scalar_t>(), tile.size(1), c0, target.const_data_ptr<int64_t>(), lse.const_data_ptr<acc_t>(),
      coef.const_data_ptr<acc_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename scalar_t>
void lse_and_grad(at::Tensor& tile, const at::Tensor& target, const at::Tensor& coef, at::Tensor& lse,
                  at::Tensor& tgt) {
  using acc_t = at::opmath_type<scalar_t>;
  if (tile.size(0) == 0) return;
  lse_and_grad_kernel<scalar_t, acc_t><<<static_cast<unsigned int>(tile.size(0)), kThreads, 0, cuda::stream()>>>(
      tile.mutable_data_ptr<scalar_t>(), tile.size(1), target.const_data_ptr<int64_t>(), coef.const_data_ptr<acc_t>(),
      lse.mutable_data_ptr<acc_t>(), tgt.mutable_data_ptr<acc_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename scalar_t>
struct KernelsOf {
  static constexpr TileKernels kernels{&lse_update<scalar_t>, &grad<scalar_t>, &lse_and_grad<scalar_t>};
};

TileKernels cuda_kernels(const at::Tensor& q) { return tile_kernels_for<KernelsOf>(q); }

std::tuple<at::Tensor, at::Tensor> cross_entropy_all_cuda(const at::Tensor& q, const at::Tensor& entity,
                                                          const at::Tensor& target, c10::string_view reduction,
                                                          int64_t block_rows, int64_t block_cols) {
  const c10::cuda::CUDAGuard guard(
      cuda::device_of("rotmem::cross_entropy_all", {{"q", &q}, {"entity", &entity}, {"target", &target}}));
  return cross_entropy_all_impl(q, entity, target, std::string(reduction), block_rows, block_cols, cuda_kernels(q));
}

std::tuple<at::Tensor, at::Tensor> cross_entropy_all_backward_cuda(const at::Tensor& grad, const at::Tensor& q,
                                                                   const at::Tensor& entity, const at::Tensor& target,
                                                                   const at::Tensor& lse, c10::string_view reduction,
                                                                   int64_t block_rows, int64_t block_cols,
                                                                   bool need_q, bool need_entity) {
  const c10::cuda::CUDAGuard guard(cuda::device_of(
      "rotmem::cross_entropy_all_backward",
      {{"grad", &grad}, {"q", &q}, {"entity", &entity}, {"target", &target}, {"lse", &lse}}));
  return cross_entropy_all_backward_impl(grad, q, entity, target, lse, std::string(reduction), block_rows, block_cols,
                                         need_q, need_entity, cuda_kernels(q));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> cross_entropy_all_train_cuda(
    const at::Tensor& q, const at::Tensor& entity, const at::Tensor& target, c10::string_view reduction,
    int64_t block_rows, int64_t block_cols, bool need_q, bool need_entity) {
  const c10::cuda::CUDAGuard guard(
      cuda::device_of("rotmem::cross_entropy_all_train", {{"q", &q}, {"entity", &entity}, {"target", &target}}));
  return cross_entropy_all_train_impl(q, entity, target, std::string(reduction), block_rows, block_cols, need_q,
                                      need_entity, cuda_kernels(q));
}

}  // namespace

TORCH_LIBRARY_IMPL(rotmem, CUDA, m) {
  m.impl("cross_entropy_all", &cross_entropy_all_cuda);
  m.impl("cross_entropy_all_backward", &cross_entropy_all_backward_cuda);
  m.impl("cross_entropy_all_train", &cross_entropy_all_train_cuda);
}

}  // namespace rotmem
