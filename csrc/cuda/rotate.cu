// CUDA kernels of rotate (y = Rot(x, theta)) and its backward: one thread per complex pair
// (grid-stride); sines and cosines in float (double for double).
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include "../checks.h"
#include "../pair_math.h"
#include "common.cuh"

namespace rotmem {
namespace {

using cuda::grid_for;
using cuda::kThreads;
using cuda::sin_cos;

template <typename scalar_t>
__global__ void rotate_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ theta,
                              scalar_t* __restrict__ y, int64_t rows, int64_t n) {
  using acc_t = at::opmath_type<scalar_t>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / n, j = i - r * n, re = r * 2 * n + j, im = re + n;
    acc_t s, c, y_re, y_im;
    sin_cos(static_cast<acc_t>(theta[i]), s, c);
    rotate_pair<acc_t>(x[re], x[im], c, s, y_re, y_im);
    y[re] = y_re;
    y[im] = y_im;
  }
}

template <typename scalar_t>
__global__ void rotate_backward_kernel(const scalar_t* __restrict__ grad, const scalar_t* __restrict__ x,
                                       const scalar_t* __restrict__ theta, scalar_t* __restrict__ grad_x,
                                       scalar_t* __restrict__ grad_theta, int64_t rows, int64_t n) {
  using acc_t = at::opmath_type<scalar_t>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / n, j = i - r * n, re = r * 2 * n + j, im = re + n;
    acc_t s, c, dx_re, dx_im, dtheta;
    sin_cos(static_cast<acc_t>(theta[i]), s, c);
    rotate_pair_backward<acc_t>(grad[re], grad[im], x[re], x[im], c, s, dx_re, dx_im, dtheta);
    grad_x[re] = dx_re;
    grad_x[im] = dx_im;
    grad_theta[i] = dtheta;
  }
}

at::Tensor rotate_cuda(const at::Tensor& x_in, const at::Tensor& theta_in) {
  const c10::cuda::CUDAGuard guard(cuda::device_of("rotmem::rotate", {{"x", &x_in}, {"theta", &theta_in}}));
  check_rows("rotmem::rotate", x_in, theta_in, "x");
  const at::Tensor x = x_in.contiguous(), theta = theta_in.contiguous();
  const int64_t rows = theta.size(0), n = theta.size(1);
  at::Tensor y = at::empty_like(x);
  if (rows * n == 0) return y;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "rotmem::rotate", [&] {
    rotate_kernel<scalar_t><<<grid_for(rows * n), kThreads, 0, cuda::stream()>>>(
        x.const_data_ptr<scalar_t>(), theta.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(), rows, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return y;
}

std::tuple<at::Tensor, at::Tensor> rotate_backward_cuda(const at::Tensor& grad_in, const at::Tensor& x_in,
                                                         const at::Tensor& theta_in) {
  const c10::cuda::CUDAGuard guard(
      cuda::device_of("rotmem::rotate_backward", {{"grad", &grad_in}, {"x", &x_in}, {"theta", &theta_in}}));
  check_rows("rotmem::rotate_backward", x_in, theta_in, "x");
  check_same("rotmem::rotate_backward", x_in, "x", grad_in, "grad");
  const at::Tensor grad = grad_in.contiguous(), x = x_in.contiguous(), theta = theta_in.contiguous();
  const int64_t rows = theta.size(0), n = theta.size(1);
  at::Tensor grad_x = at::empty_like(x), grad_theta = at::empty_like(theta);
  if (rows * n == 0) return {grad_x, grad_theta};
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "rotmem::rotate_backward", [&] {
    rotate_backward_kernel<scalar_t><<<grid_for(rows * n), kThreads, 0, cuda::stream()>>>(
        grad.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(), theta.const_data_ptr<scalar_t>(),
        grad_x.mutable_data_ptr<scalar_t>(), grad_theta.mutable_data_ptr<scalar_t>(), rows, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {grad_x, grad_theta};
}

}  // namespace

TORCH_LIBRARY_IMPL(rotmem, CUDA, m) {
  m.impl("rotate", &rotate_cuda);
  m.impl("rotate_backward", &rotate_backward_cuda);
}

}  // namespace rotmem
