// CUDA kernels of the fused, indexed query unrotated_query_indexed and its backward. The forward
// runs one thread per complex pair (grid-stride) and computes theta = alpha * s * (tau - tau0) *
// omega_j in registers; the backward adds the relation rows' gradients straight into float
// (double) copies of the tables with atomics (no [B, 2n] buffer), rounded to the tables' dtype once.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/Atomic.cuh>
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

template <typename acc_t>
struct Angle {
  const acc_t* tau;
  const acc_t* alpha;
  const acc_t* log_s;
  const acc_t* log_base;
  acc_t tau0;
  int64_t n;
  int64_t entity_rows, relation_rows;  // for the device-side id checks

  // Row offsets (in elements) of fact b's entity and relation. The host checks the ids first
  // (check_index_range); these device-side asserts remain for ROTMEM_CHECK_IDS=0 and the backward.
  __device__ __forceinline__ void rows_of(const int64_t* ent_idx, const int64_t* rel_idx, int64_t b, int64_t& h0,
                                          int64_t& r0) const {
    const int64_t e = ent_idx[b], r = rel_idx[b];
    CUDA_KERNEL_ASSERT_MSG(e >= 0 && e < entity_rows,
                           "rotmem::unrotated_query_indexed: an ent_idx is out of range for the entity table");
    CUDA_KERNEL_ASSERT_MSG(r >= 0 && r < relation_rows,
                           "rotmem::unrotated_query_indexed: a rel_idx is out of range for the relation table");
    h0 = e * 2 * n;
    r0 = r * 2 * n;
  }

  __device__ __forceinline__ acc_t speed(int64_t b) const {
    const acc_t s = cuda::exp_(max(*log_s, static_cast<acc_t>(kLogSMin)));
    return alpha[b] * s * (tau[b] - tau0);
  }
  __device__ __forceinline__ acc_t omega(int64_t j) const {
    const acc_t neg_lb = -max(*log_base, static_cast<acc_t>(kLogBaseMin));
    return cuda::exp_(neg_lb * static_cast<acc_t>(j) / static_cast<acc_t>(n));
  }
};

template <typename scalar_t, typename acc_t>
__global__ void indexed_query_kernel(const scalar_t* __restrict__ entity, const scalar_t* __restrict__ w,
                                     const scalar_t* __restrict__ w_hat, const int64_t* __restrict__ ent_idx,
                                     const int64_t* __restrict__ rel_idx, Angle<acc_t> angle,
                                     scalar_t* __restrict__ q, int64_t batch) {
  const int64_t n = angle.n;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < batch * n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = i / n, j = i - b * n;
    int64_t h0, r0;
    angle.rows_of(ent_idx, rel_idx, b, h0, r0);
    acc_t s, c, q_re, q_im;
    sin_cos(angle.speed(b) * angle.omega(j), s, c);
    const acc_t rho_re = w_hat ? acc_t(w[r0 + j]) * acc_t(w_hat[r0 + j]) : acc_t(w[r0 + j]);
    const acc_t rho_im = w_hat ? acc_t(w[r0 + n + j]) * acc_t(w_hat[r0 + n + j]) : acc_t(w[r0 + n + j]);
    query_pair<acc_t>(entity[h0 + j], entity[h0 + n + j], rho_re, rho_im, c, s, q_re, q_im);
    q[b * 2 * n + j] = q_re;
    q[b * 2 * n + n + j] = q_im;
  }
}

// One block per row b: the entity row's gradient goes to row b of grad_entity_rows [B, 2n], the
// relation rows' into the (small) relation tables with atomics; the block also sums
// S1 = sum_j dtheta_j omega_j and S2 = sum_j dtheta_j omega_j j for the spectrum's gradients.
template <typename scalar_t, typename acc_t>
__global__ void indexed_query_backward_kernel(const scalar_t* __restrict__ grad, const scalar_t* __restrict__ entity,
                                              const scalar_t* __restrict__ w, const scalar_t* __restrict__ w_hat,
                                              const int64_t* __restrict__ ent_idx, const int64_t* __restrict__ rel_idx,
                                              Angle<acc_t> angle, acc_t* __restrict__ grad_entity_rows,
                                              acc_t* __restrict__ grad_w, acc_t* __restrict__ grad_w_hat,
                                              acc_t* __restrict__ s1, acc_t* __restrict__ s2) {
  __shared__ acc_t shared[32];
  const int64_t n = angle.n, b = blockIdx.x, g0 = b * 2 * n;
  int64_t h0, r0;
  angle.rows_of(ent_idx, rel_idx, b, h0, r0);
  const acc_t speed = angle.speed(b);
  acc_t sum1 = 0, sum2 = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const acc_t omega = angle.omega(j);
    acc_t s, c;
    sin_cos(speed * omega, s, c);
    const acc_t w_re = w[r0 + j], w_im = w[r0 + n + j];
    const acc_t v_re = w_hat ? acc_t(w_hat[r0 + j]) : acc_t(1), v_im = w_hat ? acc_t(w_hat[r0 + n + j]) : acc_t(1);
    const QueryPairGrad<acc_t> d = query_pair_backward<acc_t>(grad[g0 + j], grad[g0 + n + j], entity[h0 + j],
                                                              entity[h0 + n + j], w_re * v_re, w_im * v_im, c, s);
    grad_entity_rows[g0 + j] = d.h_re;
    grad_entity_rows[g0 + n + j] = d.h_im;
    gpuAtomicAdd(grad_w + r0 + j, d.rho_re * v_re);  // summed in acc_t, rounded to scalar_t once
    gpuAtomicAdd(grad_w + r0 + n + j, d.rho_im * v_im);
    if (grad_w_hat) {
      gpuAtomicAdd(grad_w_hat + r0 + j, d.rho_re * w_re);
      gpuAtomicAdd(grad_w_hat + r0 + n + j, d.rho_im * w_im);
    }
    const acc_t t = d.theta * omega;
    sum1 += t;
    sum2 += t * static_cast<acc_t>(j);
  }
  sum1 = cuda::block_sum(sum1, shared);
  sum2 = cuda::block_sum(sum2, shared);
  if (threadIdx.x == 0) {
    s1[b] = sum1;
    s2[b] = sum2;
  }
}

// The device of the indexed query's inputs (``grad`` too in the backward), every one checked.
c10::Device indexed_device(const char* op, const at::Tensor* grad, const at::Tensor& entity, const at::Tensor& w_table,
                           const std::optional<at::Tensor>& w_hat_table, const at::Tensor& ent_idx,
                           const at::Tensor& rel_idx, const at::Tensor& tau, const at::Tensor& alpha,
                           const at::Tensor& log_s, const at::Tensor& log_base) {
  return cuda::device_of(op, {{"grad", grad},
                              {"entity", &entity},
                              {"w_table", &w_table},
                              {"w_hat_table", w_hat_table ? &*w_hat_table : nullptr},
                              {"ent_idx", &ent_idx},
                              {"rel_idx", &rel_idx},
                              {"tau", &tau},
                              {"alpha", &alpha},
                              {"log_s", &log_s},
                              {"log_base", &log_base}});
}

template <typename acc_t>
Angle<acc_t> make_angle(const IndexedInputs& in) {
  return {in.tau.const_data_ptr<acc_t>(),   in.alpha.const_data_ptr<acc_t>(),
          in.log_s.const_data_ptr<acc_t>(), in.log_base.const_data_ptr<acc_t>(),
          static_cast<acc_t>(in.tau0),      in.n,
          in.entity.size(0),                in.w_table.size(0)};
}

at::Tensor unrotated_query_indexed_cuda(const at::Tensor& entity, const at::Tensor& w_table,
                                        const std::optional<at::Tensor>& w_hat_table, const at::Tensor& ent_idx,
                                        const at::Tensor& rel_idx, const at::Tensor& tau, const at::Tensor& alpha,
                                        const at::Tensor& log_s, const at::Tensor& log_base, double tau0,
    bool /*sparse_grad: used by the autograd formula only*/) {
  const c10::cuda::CUDAGuard guard(indexed_device("rotmem::unrotated_query_indexed", nullptr, entity, w_table,
                                                  w_hat_table, ent_idx, rel_idx, tau, alpha, log_s, log_base));
  const IndexedInputs in = check_indexed("rotmem::unrotated_query_indexed", entity, w_table, w_hat_table, ent_idx,
                                         rel_idx, tau, alpha, log_s, log_base, tau0);
  at::Tensor q = at::empty({in.batch, 2 * in.n}, entity.options());
  if (in.batch == 0) return q;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, entity.scalar_type(), "rotmem::unrotated_query_indexed",
                                  [&] {
                                    using acc_t = at::opmath_type<scalar_t>;
                                    indexed_query_kernel<scalar_t, acc_t>
                                        <<<grid_for(in.batch * in.n), kThreads, 0, cuda::stream()>>>(
                                            in.entity.const_data_ptr<scalar_t>(), in.w_table.const_data_ptr<scalar_t>(),
                                            maybe<scalar_t>(in.w_hat_table), in.ent_idx.const_data_ptr<int64_t>(),
                                            in.rel_idx.const_data_ptr<int64_t>(), make_angle<acc_t>(in),
                                            q.mutable_data_ptr<scalar_t>(), in.batch);
                                    C10_CUDA_KERNEL_LAUNCH_CHECK();
                                  });
  return q;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
unrotated_query_indexed_backward_cuda(const at::Tensor& grad_in, const at::Tensor& entity, const at::Tensor& w_table,
                                      const std::optional<at::Tensor>& w_hat_table, const at::Tensor& ent_idx,
                                      const at::Tensor& rel_idx, const at::Tensor& tau, const at::Tensor& alpha,
                                      const at::Tensor& log_s, const at::Tensor& log_base, double tau0) {
  const char* op = "rotmem::unrotated_query_indexed_backward";
  const c10::cuda::CUDAGuard guard(
      indexed_device(op, &grad_in, entity, w_table, w_hat_table, ent_idx, rel_idx, tau, alpha, log_s, log_base));
  const IndexedInputs in = check_indexed(op, entity, w_table, w_hat_table, ent_idx, rel_idx, tau, alpha, log_s,
                                         log_base, tau0, /*check_ids=*/false);  // the forward checked them
  const int64_t n = in.n, batch = in.batch;
  TORCH_CHECK(grad_in.dim() == 2 && grad_in.size(0) == batch && grad_in.size(1) == 2 * n, op, ": grad must be [",
              batch, ", ", 2 * n, "], got ", grad_in.sizes());
  const at::Tensor grad = grad_in.to(entity.scalar_type()).contiguous();
  const bool chronor = in.w_hat_table.defined();
  // (in acc_t: table_gradient sums repeated entity rows in float and rounds once; every element is written)
  at::Tensor grad_entity_rows = at::empty({batch, 2 * n}, in.tau.options());
  // The relation tables' gradients are summed in the accumulation dtype (float for bfloat16/half
  // tables: 16-bit atomics would round at every add, differently from run to run) and rounded once.
  at::Tensor grad_w = at::zeros(in.w_table.sizes(), in.tau.options());
  at::Tensor grad_v = chronor ? at::zeros(in.w_hat_table.sizes(), in.tau.options()) : in.tau.new_empty({0});
  at::Tensor s1 = at::zeros({batch}, in.tau.options()), s2 = at::zeros({batch}, in.tau.options());
  if (batch > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(
        at::kBFloat16, at::kHalf, entity.scalar_type(), "rotmem::unrotated_query_indexed_backward", [&] {
          using acc_t = at::opmath_type<scalar_t>;
          indexed_query_backward_kernel<scalar_t, acc_t>
              <<<static_cast<unsigned int>(batch), cuda::threads_for_row(n), 0, cuda::stream()>>>(
                  grad.const_data_ptr<scalar_t>(), in.entity.const_data_ptr<scalar_t>(),
                  in.w_table.const_data_ptr<scalar_t>(), maybe<scalar_t>(in.w_hat_table),
                  in.ent_idx.const_data_ptr<int64_t>(), in.rel_idx.const_data_ptr<int64_t>(), make_angle<acc_t>(in),
                  grad_entity_rows.mutable_data_ptr<acc_t>(), grad_w.mutable_data_ptr<acc_t>(),
                  maybe_mut<acc_t>(grad_v), s1.mutable_data_ptr<acc_t>(), s2.mutable_data_ptr<acc_t>());
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        });
  }
  // The chain rule through speed_b = alpha_b * s * (tau_b - tau0), as small tensor ops (no sync).
  const at::Tensor s = at::exp(at::clamp_min(in.log_s, kLogSMin));
  const at::Tensor dt = in.tau - in.tau0;
  const at::Tensor speed = in.alpha * s * dt;
  const at::Tensor grad_log_s = (s1 * speed).sum() * (in.log_s >= kLogSMin);
  const at::Tensor grad_log_base = (s2 * speed).sum() * (-1.0 / static_cast<double>(n)) * (in.log_base >= kLogBaseMin);
  return {grad_entity_rows,
          grad_w.to(entity.scalar_type()),
          grad_v.to(entity.scalar_type()),
          (s1 * in.alpha * s).to(tau.scalar_type()),
          (s1 * s * dt).to(alpha.scalar_type()),
          grad_log_s.to(log_s.scalar_type()).reshape(log_s.sizes()),
          grad_log_base.to(log_base.scalar_type()).reshape(log_base.sizes())};
}

}  // namespace

TORCH_LIBRARY_IMPL(rotmem, CUDA, m) {
  m.impl("unrotated_query_indexed", &unrotated_query_indexed_cuda);
  m.impl("unrotated_query_indexed_backward", &unrotated_query_indexed_backward_cuda);
}

}  // namespace rotmem
