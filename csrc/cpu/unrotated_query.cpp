// CPU kernels of unrotated_query (q = Rot(Rot(h, theta) * w * w_hat, -theta)) and its backward.
// Rows run in parallel (at::parallel_for, OpenMP); sines and cosines on the fly (rotation.h).
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

at::Tensor unrotated_query_cpu(const at::Tensor& h_in, const at::Tensor& w_in, const std::optional<at::Tensor>& w_hat_in,
                               const at::Tensor& theta_in) {
  const char* op = "rotmem::unrotated_query";
  check_rows(op, h_in, theta_in, "h");
  check_same(op, h_in, "h", w_in, "w");
  if (w_hat_in) check_same(op, h_in, "h", *w_hat_in, "w_hat");
  const at::Tensor h = h_in.contiguous(), w = w_in.contiguous(), theta = theta_in.contiguous();
  const at::Tensor w_hat = w_hat_in ? w_hat_in->contiguous() : at::Tensor();
  const int64_t rows = theta.size(0), n = theta.size(1);
  at::Tensor q = at::empty_like(h);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, h.scalar_type(), "rotmem::unrotated_query", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* hp = h.const_data_ptr<scalar_t>();
    const scalar_t* wp = w.const_data_ptr<scalar_t>();
    const scalar_t* vp = w_hat.defined() ? w_hat.const_data_ptr<scalar_t>() : nullptr;
    const scalar_t* tp = theta.const_data_ptr<scalar_t>();
    scalar_t* qp = q.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, rows, row_grain(n), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t o = r * 2 * n;
        for_each_pair<acc_t>(tp + r * n, n, [&](int64_t j, acc_t c, acc_t s) {
          acc_t q_re, q_im;
          const acc_t rho_re = vp ? acc_t(wp[o + j]) * acc_t(vp[o + j]) : acc_t(wp[o + j]);
          const acc_t rho_im = vp ? acc_t(wp[o + n + j]) * acc_t(vp[o + n + j]) : acc_t(wp[o + n + j]);
          query_pair<acc_t>(hp[o + j], hp[o + n + j], rho_re, rho_im, c, s, q_re, q_im);
          qp[o + j] = q_re;
          qp[o + n + j] = q_im;
        });
      }
    });
  });
  return q;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> unrotated_query_backward_cpu(
    const at::Tensor& grad_in, const at::Tensor& h_in, const at::Tensor& w_in, const std::optional<at::Tensor>& w_hat_in,
    const at::Tensor& theta_in) {
  const char* op = "rotmem::unrotated_query_backward";
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
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, h.scalar_type(), "rotmem::unrotated_query", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* gp = grad.const_data_ptr<scalar_t>();
    const scalar_t* hp = h.const_data_ptr<scalar_t>();
    const scalar_t* wp = w.const_data_ptr<scalar_t>();
    const scalar_t* vp = w_hat.defined() ? w_hat.const_data_ptr<scalar_t>() : nullptr;
    const scalar_t* tp = theta.const_data_ptr<scalar_t>();
    scalar_t* ghp = grad_h.mutable_data_ptr<scalar_t>();
    scalar_t* gwp = grad_w.mutable_data_ptr<scalar_t>();
    scalar_t* gvp = vp ? grad_w_hat.mutable_data_ptr<scalar_t>() : nullptr;
    scalar_t* gtp = grad_theta.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, rows, row_grain(n), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t o = r * 2 * n;
        for_each_pair<acc_t>(tp + r * n, n, [&](int64_t j, acc_t c, acc_t s) {
          const int64_t re = o + j, im = o + n + j;
          const acc_t w_re = wp[re], w_im = wp[im];
          const acc_t v_re = vp ? acc_t(vp[re]) : acc_t(1), v_im = vp ? acc_t(vp[im]) : acc_t(1);
          const QueryPairGrad<acc_t> g = query_pair_backward<acc_t>(gp[re], gp[im], hp[re], hp[im], w_re * v_re,
                                                                    w_im * v_im, c, s);
          ghp[re] = g.h_re;
          ghp[im] = g.h_im;
          gwp[re] = g.rho_re * v_re;
          gwp[im] = g.rho_im * v_im;
          if (gvp) {
            gvp[re] = g.rho_re * w_re;
            gvp[im] = g.rho_im * w_im;
          }
          gtp[r * n + j] = g.theta;
        });
      }
    });
  });
  return {grad_h, grad_w, grad_w_hat, grad_theta};
}

}  // namespace

TORCH_LIBRARY_IMPL(rotmem, CPU, m) {
  m.impl("unrotated_query", &unrotated_query_cpu);
  m.impl("unrotated_query_backward", &unrotated_query_backward_cpu);
}

}  // namespace rotmem
