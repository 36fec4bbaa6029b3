// CUDA kernels of unrotated_query (q = Rot(Rot(h, theta) * w * w_hat, -theta)) and its backward:
// one thread per complex pair (grid-stride); sines and cosines in float (double for double).
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
using cuda::maybe;
using cuda::maybe_mut;
using cuda::sin_cos;

template <typename scalar_t>
__global__ void query_kernel(const scalar_t* __restrict__ h, const scalar_t* __restrict__ w,
                             const scalar_t* __restrict__ w_hat, const scalar_t* __restrict__ theta,
                             scalar_t* __restrict__ q, int64_t rows, int64_t n) {
  using acc_t = at::opmath_type<scalar_t>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / n, j = i - r * n, re = r * 2 * n + j, im = re + n;
    acc_t s, c, q_re, q_im;
    sin_cos(static_cast<acc_t>(theta[i]), s, c);
    const acc_t rho_re = w_hat ? acc_t(w[re]) * acc_t(w_hat[re]) : acc_t(w[re]);
    const acc_t rho_im = w_hat ? acc_t(w[im]) * acc_t(w_hat[im]) : acc_t(w[im]);
    query_pair<acc_t>(h[re], h[im], rho_re, rho_im, c, s, q_re, q_im);
    q[re] = q_re;
    q[im] = q_im;
  }
}

template <typename scalar_t>
__global__ void query_backward_kernel(const scalar_t* __restrict__ grad, const scalar_t* __restrict__ h,
                                      const scalar_t* __restrict__ w, const scalar_t* __restrict__ w_hat,
                                      const scalar_t* __restrict__ theta, scalar_t* __restrict__ grad_h,
                                      scalar_t* __restrict__ grad_w, scalar_t* __restrict__ grad_w_hat,
                                      scalar_t* __restrict__ grad_theta, int64_t rows, int64_t n) {
  using acc_t = at::opmath_type<scalar_t>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / n, j = i - r * n, re = r * 2 * n + j, im = re + n;
    acc_t s, c;
    sin_cos(static_cast<acc_t>(theta[i]), s, c);
    const acc_t w_re = w[re], w_im = w[im];
    const acc_t v_re = w_hat ? acc_t(w_hat[re]) : acc_t(1), v_im = w_hat ? acc_t(w_hat[im]) : acc_t(1);
    const QueryPairGrad<acc_t> d = query_pair_backward<acc_t>(grad[re], grad[im], h[re], h[im], w_re * v_re,
                                                              w_im * v_im, c, s);
    grad_h[re] = d.h_re;
    grad_h[im] = d.h_im;
    grad_w[re] = d.rho_re * v_re;
    grad_w[im] = d.rho_im * v_im;
    if (grad_w_hat) {
      grad_w_hat[re] = d.rho_re * w_re;
      grad_w_hat[im] = d.rho_im * w_im;
    }
    grad_theta[i] = d.theta;
  }
}

at::Tensor unrotated_query_cuda(const at::Tensor& h_in, const at::Tensor& w_in,
                                const std::optional<at::Tensor>& w_hat_in, const at::Tensor& theta_in) {
  const char* op = "rotmem::unrotated_query";
  const c10::cuda::CUDAGuard guard(cuda::device_of(
      op, {{"h", &h_in}, {"w", &w_in}, {"w_hat", w_hat_in ? &*w_hat_in : nullptr}, {"theta", &theta_in}}));
  check_rows(op, h_in, theta_in, "h");
  check_same(op, h_in, "h", w_in, "w");
  if (w_hat_in) check_same(op, h_in, "h", *w_hat_in, "w_hat");
  const at::Tensor h = h_in.contiguous(), w = w_in.contiguous(), theta = theta_in.contiguous();
  const at::Tensor w_hat = w_hat_in ? w_hat_in->contiguous() : at::Tensor();
  const int64_t rows = theta.size(0), n = theta.size(1);
  at::Tensor q = at::empty_like(h);
  if (rows * n == 0) return q;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, h.scalar_type(), "rotmem::unrotated_query", [&] {
    query_kernel<scalar_t><<<grid_for(rows * n), kThreads, 0, cuda::stream()>>>(
        h.const_data_ptr<scalar_t>(), w.const_data_ptr<scalar_t>(), maybe<scalar_t>(w_hat),
        theta.const_data_ptr<scalar_t>(), q.mutable_data_ptr<scalar_t>(), rows, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return q;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> unrotated_query_backward_cuda(
    const at::Tensor& grad_in, const at::Tensor& h_in, const at::Tensor& w_in, const std::optional<at::Tensor>& w_hat_in,
    const at::Tensor& theta_in) {
  const char* op = "rotmem::unrotated_query_backward";
  const c10::cuda::CUDAGuard guard(cuda::device_of(op, {{"grad", &grad_in},
                                                        {"h", &h_in},
                                                        {"w", &w_in},
                                                        {"w_hat", w_hat_in ? &*w_hat_in : nullptr},
                                                        {"theta", &theta_in}}));
  check_rows(op, h_in, theta_in, "h");
  check_same(op, h_in, "h", w_in, "w");
  check_same(op, h_in, "h", grad_in, "grad");
  if (w_hat_in) check_same(op, h_in, "h", *w_hat_in, "w_hat");
  const at::Tensor grad = grad_in.contiguous(), h = h_in.contiguous(), w = w_in.contiguous();
  const at::Tensor theta = theta_in.contiguous();
  const at::Tensor w_hat = w_hat_in ? w_hat_in->contiguous() : at::Tensor();
  const int64_t rows = theta.size(0), n = theta.size(1);
  at::Tensor grad_h = at::empty_like(h), grad_w = at::empty_like(w), grad_theta = at::empty_like(theta);
  at::Tensor grad_w_hat = w_hat.defined() ? at::empty_like(w_hat) : h.new_empty({0});
  if (rows * n == 0) return {grad_h, grad_w, grad_w_hat, grad_theta};
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, h.scalar_type(), "rotmem::unrotated_query_backward", [&] {
    query_backward_kernel<scalar_t><<<grid_for(rows * n), kThreads, 0, cuda::stream()>>>(
        grad.const_data_ptr<scalar_t>(), h.const_data_ptr<scalar_t>(), w.const_data_ptr<scalar_t>(),
        maybe<scalar_t>(w_hat), theta.const_data_ptr<scalar_t>(), grad_h.mutable_data_ptr<scalar_t>(),
        grad_w.mutable_data_ptr<scalar_t>(), maybe_mut<scalar_t>(grad_w_hat), grad_theta.mutable_data_ptr<scalar_t>(),
        rows, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {grad_h, grad_w, grad_w_hat, grad_theta};
}

}  // namespace

TORCH_LIBRARY_IMPL(rotmem, CUDA, m) {
  m.impl("unrotated_query", &unrotated_query_cuda);
  m.impl("unrotated_query_backward", &unrotated_query_backward_cuda);
}

}  // namespace rotmem
