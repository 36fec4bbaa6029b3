// CPU kernels of rotate (y = Rot(x, theta)) and its backward. Rows run in parallel
// (at::parallel_for, OpenMP); sines and cosines on the fly (rotation.h).
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "../checks.h"
#include "../pair_math.h"
#include "rotation.h"

namespace rotmem {
namespace {

using cpu::for_each_pair;
using cpu::row_grain;

at::Tensor rotate_cpu(const at::Tensor& x_in, const at::Tensor& theta_in) {
  check_rows("rotmem::rotate", x_in, theta_in, "x");
  const at::Tensor x = x_in.contiguous(), theta = theta_in.contiguous();
  const int64_t rows = theta.size(0), n = theta.size(1);
  at::Tensor y = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "rotmem::rotate", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* xp = x.const_data_ptr<scalar_t>();
    const scalar_t* tp = theta.const_data_ptr<scalar_t>();
    scalar_t* yp = y.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, rows, row_grain(n), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const scalar_t* xr = xp + r * 2 * n;
        scalar_t* yr = yp + r * 2 * n;
        for_each_pair<acc_t>(tp + r * n, n, [&](int64_t j, acc_t c, acc_t s) {
          acc_t y_re, y_im;
          rotate_pair<acc_t>(xr[j], xr[n + j], c, s, y_re, y_im);
          yr[j] = y_re;
          yr[n + j] = y_im;
        });
      }
    });
  });
  return y;
}

std::tuple<at::Tensor, at::Tensor> rotate_backward_cpu(const at::Tensor& grad_in, const at::Tensor& x_in,
                                                        const at::Tensor& theta_in) {
  check_rows("rotmem::rotate_backward", x_in, theta_in, "x");
  check_same("rotmem::rotate_backward", x_in, "x", grad_in, "grad");
  const at::Tensor grad = grad_in.contiguous(), x = x_in.contiguous(), theta = theta_in.contiguous();
  const int64_t rows = theta.size(0), n = theta.size(1);
  at::Tensor grad_x = at::empty_like(x), grad_theta = at::empty_like(theta);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "rotmem::rotate_backward", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* gp = grad.const_data_ptr<scalar_t>();
    const scalar_t* xp = x.const_data_ptr<scalar_t>();
    const scalar_t* tp = theta.const_data_ptr<scalar_t>();
    scalar_t* gxp = grad_x.mutable_data_ptr<scalar_t>();
    scalar_t* gtp = grad_theta.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, rows, row_grain(n), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t o = r * 2 * n;
        for_each_pair<acc_t>(tp + r * n, n, [&](int64_t j, acc_t c, acc_t s) {
          acc_t dx_re, dx_im, dtheta;
          rotate_pair_backward<acc_t>(gp[o + j], gp[o + n + j], xp[o + j], xp[o + n + j], c, s, dx_re,
                                      dx_im, dtheta);
          gxp[o + j] = dx_re;
          gxp[o + n + j] = dx_im;
          gtp[r * n + j] = dtheta;
        });
      }
    });
  });
  return {grad_x, grad_theta};
}

}  // namespace

TORCH_LIBRARY_IMPL(rotmem, CPU, m) {
  m.impl("rotate", &rotate_cpu);
  m.impl("rotate_backward", &rotate_backward_cpu);
}

}  // namespace rotmem
