// CUDA kernels of the N3 / L4 regulariser (see csrc/cpu/n3.cpp for the math). The forward sums
// per block and then over blocks (deterministic, no atomics); backward reads the output gradient
// from the device (no host sync).
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include <string>

#include "../n3_kind.h"
#include "common.cuh"

namespace rotmem {
namespace {

using cuda::kThreads;

template <typename scalar_t, typename acc_t>
__global__ void n3_partial_kernel(const scalar_t* __restrict__ x, int64_t rows, int64_t width, bool l4,
                                  acc_t* __restrict__ partial) {
  __shared__ acc_t shared[32];
  const int64_t n = width / 2, items = l4 ? rows * width : rows * n;
  acc_t sum = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < items; i += int64_t(gridDim.x) * blockDim.x) {
    if (l4) {
      const acc_t v = x[i], v2 = v * v;
      sum += v2 * v2;
    } else {
      const int64_t r = i / n, j = i - r * n;
      const acc_t re = x[r * width + j], im = x[r * width + n + j];
      const acc_t m2 = re * re + im * im;
      sum += m2 * sqrt(m2);
    }
  }
  sum = cuda::block_sum(sum, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

template <typename scalar_t, typename acc_t>
__global__ void n3_backward_kernel(const acc_t* __restrict__ grad, const scalar_t* __restrict__ x, int64_t rows,
                                   int64_t width, bool l4, scalar_t* __restrict__ out) {
  const int64_t n = width / 2, items = l4 ? rows * width : rows * n;
  const acc_t g = *grad;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < items; i += int64_t(gridDim.x) * blockDim.x) {
    if (l4) {
      const acc_t v = x[i];
      out[i] = static_cast<scalar_t>(acc_t(4) * g * v * v * v);
    } else {
      const int64_t r = i / n, j = i - r * n, re_i = r * width + j, im_i = re_i + n;
      const acc_t re = x[re_i], im = x[im_i];
      const acc_t f = acc_t(3) * g * sqrt(re * re + im * im);
      out[re_i] = static_cast<scalar_t>(f * re);
      out[im_i] = static_cast<scalar_t>(f * im);
    }
  }
}

int64_t n3_items(const at::Tensor& x, N3Kind kind) {
  return kind == N3Kind::kL4 ? x.numel() : x.size(0) * (x.size(1) / 2);
}

at::Tensor n3_cuda(const at::Tensor& x_in, c10::string_view kind_name) {
  const c10::cuda::CUDAGuard guard(cuda::device_of("rotmem::n3", {{"x", &x_in}}));
  const N3Kind kind = parse_n3_kind(std::string(kind_name), x_in);
  const at::Tensor x = x_in.contiguous();
  const auto acc = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const unsigned int blocks = std::min<unsigned int>(cuda::grid_for(n3_items(x, kind)), 1024);
  at::Tensor partial = at::zeros({blocks}, x.options().dtype(acc));
  if (n3_items(x, kind) > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "rotmem::n3", [&] {
      using acc_t = at::opmath_type<scalar_t>;
      n3_partial_kernel<scalar_t, acc_t><<<blocks, kThreads, 0, cuda::stream()>>>(
          x.const_data_ptr<scalar_t>(), x.size(0), x.size(1), kind == N3Kind::kL4, partial.mutable_data_ptr<acc_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  }
  return partial.sum();
}

at::Tensor n3_backward_cuda(const at::Tensor& grad, const at::Tensor& x_in, c10::string_view kind_name) {
  // (grad, a scalar, may come from any device: it is copied to x's)
  const c10::cuda::CUDAGuard guard(cuda::device_of("rotmem::n3_backward", {{"x", &x_in}}));
  const N3Kind kind = parse_n3_kind(std::string(kind_name), x_in);
  TORCH_CHECK(grad.numel() == 1, "rotmem::n3_backward: grad must be a scalar, got ", grad.sizes());
  const at::Tensor x = x_in.contiguous();
  at::Tensor out = at::empty_like(x);
  if (n3_items(x, kind) == 0) return out;
  const auto acc = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor g = grad.reshape({}).to(x.device(), acc).contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "rotmem::n3_backward", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    n3_backward_kernel<scalar_t, acc_t><<<cuda::grid_for(n3_items(x, kind)), kThreads, 0, cuda::stream()>>>(
        g.const_data_ptr<acc_t>(), x.const_data_ptr<scalar_t>(), x.size(0), x.size(1), kind == N3Kind::kL4,
        out.mutable_data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(rotmem, CUDA, m) {
  m.impl("n3", &n3_cuda);
  m.impl("n3_backward", &n3_backward_cuda);
}

}  // namespace rotmem
