// CPU kernels of the fused, indexed query unrotated_query_indexed and its backward: gathers rows,
// computes theta = alpha * s * (tau - tau0) * omega_j on the fly, and builds q. Only omega [n] is
// precomputed (once per call). Rows run in parallel (at::parallel_for, OpenMP).
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "../checks.h"
#include "../pair_math.h"
#include "rotation.h"

namespace rotmem {
namespace {

using cpu::for_each_pair_scaled;
using cpu::kSinCosBlock;
using cpu::row_grain;

// omega_j = base^(-j/n), rounded exactly as reference.spectrum computes it in acc_t; zero-padded to
// whole sine/cosine blocks.
template <typename acc_t>
std::vector<acc_t> spectrum(double log_base, int64_t n) {
  const acc_t neg_lb = -static_cast<acc_t>(std::max(log_base, kLogBaseMin));
  std::vector<acc_t> omega((n + kSinCosBlock - 1) / kSinCosBlock * kSinCosBlock, acc_t(0));
  for (int64_t j = 0; j < n; ++j) omega[j] = std::exp(neg_lb * static_cast<acc_t>(j) / static_cast<acc_t>(n));
  return omega;
}

// speed_b = alpha_b * s * (tau_b - tau0), s = exp(max(log_s, ln 1e-9)): the row's angle is speed_b * omega_j.
template <typename acc_t>
struct Speeds {
  const acc_t* tau;
  const acc_t* alpha;
  acc_t s, tau0;
  explicit Speeds(const IndexedInputs& in)
      : tau(in.tau.const_data_ptr<acc_t>()),
        alpha(in.alpha.const_data_ptr<acc_t>()),
        s(std::exp(static_cast<acc_t>(std::max(in.log_s.item<double>(), kLogSMin)))),
        tau0(static_cast<acc_t>(in.tau0)) {}
  acc_t operator()(int64_t b) const { return alpha[b] * s * (tau[b] - tau0); }
};

at::Tensor unrotated_query_indexed_cpu(const at::Tensor& entity, const at::Tensor& w_table,
                                       const std::optional<at::Tensor>& w_hat_table, const at::Tensor& ent_idx,
                                       const at::Tensor& rel_idx, const at::Tensor& tau, const at::Tensor& alpha,
                                       const at::Tensor& log_s, const at::Tensor& log_base, double tau0,
    bool /*sparse_grad: used by the autograd formula only*/) {
  const char* op = "rotmem::unrotated_query_indexed";
  const IndexedInputs in =
      check_indexed(op, entity, w_table, w_hat_table, ent_idx, rel_idx, tau, alpha, log_s, log_base, tau0);
  const int64_t n = in.n;
  at::Tensor q = at::empty({in.batch, 2 * n}, entity.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, entity.scalar_type(), "rotmem::unrotated_query_indexed", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const std::vector<acc_t> omega = spectrum<acc_t>(in.log_base.item<double>(), n);
    const Speeds<acc_t> speeds(in);
    const scalar_t* ep = in.entity.const_data_ptr<scalar_t>();
    const scalar_t* wp = in.w_table.const_data_ptr<scalar_t>();
    const scalar_t* vp = in.w_hat_table.defined() ? in.w_hat_table.const_data_ptr<scalar_t>() : nullptr;
    const int64_t* eidx = in.ent_idx.const_data_ptr<int64_t>();
    const int64_t* ridx = in.rel_idx.const_data_ptr<int64_t>();
    scalar_t* qp = q.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, in.batch, row_grain(n), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const scalar_t* h = ep + eidx[b] * 2 * n;
        const scalar_t* w = wp + ridx[b] * 2 * n;
        const scalar_t* v = vp ? vp + ridx[b] * 2 * n : nullptr;
        scalar_t* qr = qp + b * 2 * n;
        for_each_pair_scaled<acc_t>(speeds(b), omega.data(), n, [&](int64_t j, acc_t c, acc_t s) {
          acc_t q_re, q_im;
          const acc_t rho_re = v ? acc_t(w[j]) * acc_t(v[j]) : acc_t(w[j]);
          const acc_t rho_im = v ? acc_t(w[n + j]) * acc_t(v[n + j]) : acc_t(w[n + j]);
          query_pair<acc_t>(h[j], h[n + j], rho_re, rho_im, c, s, q_re, q_im);
          qr[j] = q_re;
          qr[n + j] = q_im;
        });
      }
    });
  });
  return q;
}

// table[idx[b]] += rows[b], serially: deterministic and race-free; B * 2n adds is cheap next to the step.
// Both in the accumulation dtype: a bfloat16 table's gradient is summed in float and rounded once.
template <typename acc_t>
void scatter_add_rows(at::Tensor& table, const int64_t* idx, const at::Tensor& rows) {
  const int64_t width = rows.size(1);
  acc_t* tp = table.mutable_data_ptr<acc_t>();
  const acc_t* rp = rows.const_data_ptr<acc_t>();
  for (int64_t b = 0; b < rows.size(0); ++b) {
    acc_t* dst = tp + idx[b] * width;
    const acc_t* src = rp + b * width;
    for (int64_t k = 0; k < width; ++k) dst[k] += src[k];
  }
}

// Gradients for (the gathered entity rows [B, 2n], w_table, w_hat_table, tau, alpha, log_s,
// log_base). Row gradients are computed in parallel into [B, 2n] float (double) buffers; the relation rows are
// scattered into zero tables of the relation tables' shape ([R, 2n], small), the entity rows are
// returned as they are (rotmem/ops/table_grad.py makes the table's gradient): no [N, 2n] tensor.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
unrotated_query_indexed_backward_cpu(const at::Tensor& grad_in, const at::Tensor& entity, const at::Tensor& w_table,
                                     const std::optional<at::Tensor>& w_hat_table, const at::Tensor& ent_idx,
                                     const at::Tensor& rel_idx, const at::Tensor& tau, const at::Tensor& alpha,
                                     const at::Tensor& log_s, const at::Tensor& log_base, double tau0) {
  const char* op = "rotmem::unrotated_query_indexed_backward";
  const IndexedInputs in =
      check_indexed(op, entity, w_table, w_hat_table, ent_idx, rel_idx, tau, alpha, log_s, log_base, tau0);
  const int64_t n = in.n, batch = in.batch;
  TORCH_CHECK(grad_in.dim() == 2 && grad_in.size(0) == batch && grad_in.size(1) == 2 * n, op, ": grad must be [",
              batch, ", ", 2 * n, "], got ", grad_in.sizes());
  const at::Tensor grad = grad_in.to(entity.scalar_type()).contiguous();
  const bool chronor = in.w_hat_table.defined();
  const auto acc = entity.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  // Every row gradient, and the relation tables' sums, in the accumulation dtype: a bfloat16
  // table's gradient is summed in float and rounded once (the entity rows by table_gradient).
  at::Tensor d_h = at::empty({batch, 2 * n}, entity.options().dtype(acc));
  at::Tensor d_w = at::empty_like(d_h);
  at::Tensor d_v = chronor ? at::empty_like(d_w) : at::Tensor();
  // Per row: S1 = sum_j dtheta_j omega_j (= dL/dspeed) and S2 = sum_j dtheta_j omega_j j.
  at::Tensor s1 = at::empty({batch}, entity.options().dtype(acc));
  at::Tensor s2 = at::empty({batch}, entity.options().dtype(acc));
  at::Tensor grad_w = at::zeros(in.w_table.sizes(), d_w.options());
  at::Tensor grad_v = chronor ? at::zeros(in.w_hat_table.sizes(), d_w.options()) : d_w.new_empty({0});
  at::Tensor grad_tau = at::empty({batch}, tau.options());
  at::Tensor grad_alpha = at::empty({batch}, alpha.options());
  double grad_log_s = 0.0, grad_log_base = 0.0;

  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, entity.scalar_type(), "rotmem::unrotated_query_indexed", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const std::vector<acc_t> omega = spectrum<acc_t>(in.log_base.item<double>(), n);
    const Speeds<acc_t> speeds(in);
    const scalar_t* gp = grad.const_data_ptr<scalar_t>();
    const scalar_t* ep = in.entity.const_data_ptr<scalar_t>();
    const scalar_t* wp = in.w_table.const_data_ptr<scalar_t>();
    const scalar_t* vp = chronor ? in.w_hat_table.const_data_ptr<scalar_t>() : nullptr;
    const int64_t* eidx = in.ent_idx.const_data_ptr<int64_t>();
    const int64_t* ridx = in.rel_idx.const_data_ptr<int64_t>();
    acc_t* dhp = d_h.mutable_data_ptr<acc_t>();
    acc_t* dwp = d_w.mutable_data_ptr<acc_t>();
    acc_t* dvp = chronor ? d_v.mutable_data_ptr<acc_t>() : nullptr;
    acc_t* s1p = s1.mutable_data_ptr<acc_t>();
    acc_t* s2p = s2.mutable_data_ptr<acc_t>();
    at::parallel_for(0, batch, row_grain(n), [&](int64_t b0, int64_t b1) {
      std::vector<acc_t> dtheta(n);  // the row's dL/dtheta_j, reduced into S1 and S2 below
      for (int64_t b = b0; b < b1; ++b) {
        const scalar_t* g = gp + b * 2 * n;
        const scalar_t* h = ep + eidx[b] * 2 * n;
        const scalar_t* w = wp + ridx[b] * 2 * n;
        const scalar_t* v = vp ? vp + ridx[b] * 2 * n : nullptr;
        acc_t* dh = dhp + b * 2 * n;
        acc_t* dw = dwp + b * 2 * n;
        acc_t* dv = dvp ? dvp + b * 2 * n : nullptr;
        acc_t* dt = dtheta.data();
        for_each_pair_scaled<acc_t>(speeds(b), omega.data(), n, [&](int64_t j, acc_t c, acc_t s) {
          const acc_t w_re = w[j], w_im = w[n + j];
          const acc_t v_re = v ? acc_t(v[j]) : acc_t(1), v_im = v ? acc_t(v[n + j]) : acc_t(1);
          const QueryPairGrad<acc_t> d =
              query_pair_backward<acc_t>(g[j], g[n + j], h[j], h[n + j], w_re * v_re, w_im * v_im, c, s);
          dh[j] = d.h_re;
          dh[n + j] = d.h_im;
          dw[j] = d.rho_re * v_re;
          dw[n + j] = d.rho_im * v_im;
          if (dv) {
            dv[j] = d.rho_re * w_re;
            dv[n + j] = d.rho_im * w_im;
          }
          dt[j] = d.theta * omega[j];
        });
        acc_t sum1 = 0, sum2 = 0;
        _Pragma("omp simd reduction(+ : sum1, sum2)") for (int64_t j = 0; j < n; ++j) {
          sum1 += dt[j];
          sum2 += dt[j] * static_cast<acc_t>(j);
        }
        s1p[b] = sum1;
        s2p[b] = sum2;
      }
    });
    scatter_add_rows<acc_t>(grad_w, ridx, d_w);
    if (chronor) scatter_add_rows<acc_t>(grad_v, ridx, d_v);

    const acc_t s = speeds.s;
    const acc_t* taup = in.tau.const_data_ptr<acc_t>();
    const acc_t* alphap = in.alpha.const_data_ptr<acc_t>();
    at::Tensor gt = at::empty({batch}, s1.options()), ga = at::empty({batch}, s1.options());
    acc_t* gtp = gt.mutable_data_ptr<acc_t>();
    acc_t* gap = ga.mutable_data_ptr<acc_t>();
    for (int64_t b = 0; b < batch; ++b) {
      const acc_t speed = speeds(b);
      gtp[b] = s1p[b] * alphap[b] * s;
      gap[b] = s1p[b] * s * (taup[b] - speeds.tau0);
      grad_log_s += static_cast<double>(s1p[b]) * static_cast<double>(speed);
      grad_log_base -= static_cast<double>(s2p[b]) * static_cast<double>(speed) / static_cast<double>(n);
    }
    grad_tau.copy_(gt);
    grad_alpha.copy_(ga);
  });
  if (in.log_s.item<double>() < kLogSMin) grad_log_s = 0.0;
  if (in.log_base.item<double>() < kLogBaseMin) grad_log_base = 0.0;
  return {d_h,
          grad_w.to(entity.scalar_type()),
          grad_v.to(entity.scalar_type()),
          grad_tau,
          grad_alpha,
          at::full_like(log_s, grad_log_s),
          at::full_like(log_base, grad_log_base)};
}

}  // namespace

TORCH_LIBRARY_IMPL(rotmem, CPU, m) {
  m.impl("unrotated_query_indexed", &unrotated_query_indexed_cpu);
  m.impl("unrotated_query_indexed_backward", &unrotated_query_indexed_backward_cpu);
}

}  // namespace rotmem
