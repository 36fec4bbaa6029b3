// The chunked 1-vs-all cross-entropy, written once for every device.
//
// Logits l = q @ entity^T are never held whole: rows of q are taken in blocks of `block_rows`
// and entities in chunks of `block_cols`, and only one [block_rows, block_cols] tile of logits
// exists at a time, so working memory is set by the tile, not by N. Matrix products go through
// ATen (BLAS on the CPU, cuBLAS on the GPU); the per-row work on a tile (online log-sum-exp,
// softmax gradient) is a device kernel passed in `TileKernels`.
//
// Per row block:
//   * one chunk covers all entities: a single pass computes the tile, its log-sum-exp and, when
//     gradients are wanted, turns the tile into dL/dl and multiplies it out (three products in all,
//     as many as the unfused op, with the tile still hot in cache);
//   * several chunks: pass 1 keeps a running max and sum over the chunks (online log-sum-exp);
//     pass 2 recomputes each tile and multiplies out its gradient.
// dL/dl_bk = coef_b * (softmax_bk - [k == target_b]); dq = dL/dl @ entity, dentity = dL/dl^T @ q.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <string>
#include <tuple>

#include "checks.h"

namespace rotmem {

constexpr int64_t kIgnoreIndex = -100;  // as torch.nn.functional.cross_entropy

// Device kernels on one tile of logits [rows, cols] (contiguous) holding entities [c0, c0 + cols).
// Row state (m, s, lse, tgt, coef) is [rows] in the accumulation dtype (float, or double for double).
struct TileKernels {
  // m, s <- running max and sum of exp(l - m); tgt_b <- l_b,target_b when the target is in the tile.
  // (num_entities: the table's rows, for the CUDA kernel's device-side check of the targets.)
  void (*lse_update)(const at::Tensor& tile, int64_t c0, int64_t num_entities, const at::Tensor& target, at::Tensor& m,
                     at::Tensor& s, at::Tensor& tgt);
  // tile <- coef * (exp(tile - lse) - onehot(target - c0)).
  void (*grad)(at::Tensor& tile, int64_t c0, const at::Tensor& target, const at::Tensor& lse,
               const at::Tensor& coef);
  // For a tile with every entity: lse and tgt of each row, then tile <- the gradient as above.
  void (*lse_and_grad)(at::Tensor& tile, const at::Tensor& target, const at::Tensor& coef, at::Tensor& lse,
                       at::Tensor& tgt);
};

// The TileKernels of q's dtype: KernelsOf<scalar_t>::kernels, one device's tile kernels instantiated
// for scalar_t.
template <template <typename> class KernelsOf>
TileKernels tile_kernels_for(const at::Tensor& q) {
  switch (q.scalar_type()) {
    case at::kFloat:
      return KernelsOf<float>::kernels;
    case at::kDouble:
      return KernelsOf<double>::kernels;
    case at::kBFloat16:
      return KernelsOf<at::BFloat16>::kernels;
    case at::kHalf:
      return KernelsOf<at::Half>::kernels;
    default:
      TORCH_CHECK(false, "rotmem::cross_entropy_all: unsupported dtype ", q.scalar_type(),
                  " (float32, float64, bfloat16 or float16)");
  }
}

enum class Reduction { kNone, kMean, kSum };

inline Reduction parse_reduction(const std::string& reduction) {
  if (reduction == "mean") return Reduction::kMean;
  if (reduction == "sum") return Reduction::kSum;
  TORCH_CHECK(reduction == "none", "rotmem::cross_entropy_all: unknown reduction '", reduction,
              "'; expected 'mean', 'sum' or 'none'");
  return Reduction::kNone;
}

inline at::ScalarType accumulation_dtype(const at::Tensor& q) {
  return q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

// check_ids: false in the CUDA backward, whose targets the forward checked (no second readback).
inline void check_cross_entropy_inputs(const at::Tensor& q, const at::Tensor& entity, const at::Tensor& target,
                                       int64_t block_rows, int64_t block_cols, bool check_ids = true) {
  const char* op = "rotmem::cross_entropy_all";
  TORCH_CHECK(q.dim() == 2 && entity.dim() == 2 && q.size(1) == entity.size(1), op,
              ": expected q [B, D] and entity [N, D], got q ", q.sizes(), " and entity ", entity.sizes());
  TORCH_CHECK(q.scalar_type() == entity.scalar_type(), op, ": q dtype ", q.scalar_type(),
              " differs from entity dtype ", entity.scalar_type());
  TORCH_CHECK(q.device() == entity.device() && q.device() == target.device(), op,
              ": q, entity and target must be on one device");
  TORCH_CHECK(target.dim() == 1 && target.size(0) == q.size(0) && target.scalar_type() == at::kLong, op,
              ": target must be int64 [", q.size(0), "], got ", target.sizes(), " ", target.scalar_type());
  TORCH_CHECK(entity.size(0) > 0, op, ": the entity table is empty");
  TORCH_CHECK(block_rows > 0 && block_cols > 0, op, ": block_rows and block_cols must be positive, got ",
              block_rows, " and ", block_cols);
  if (check_ids) check_index_range(op, target, entity.size(0), "target", "the entity table", kIgnoreIndex);
}

// coef_b = grad_b * valid_b (/ #valid for "mean"), the weight of row b in the loss; grad may be
// undefined (unit output gradient), a scalar, or [B] for reduction "none".
inline at::Tensor row_coefficients(const at::Tensor& target, Reduction reduction, const at::Tensor& grad,
                                   at::ScalarType acc) {
  at::Tensor coef = (target != kIgnoreIndex).to(acc);
  if (reduction == Reduction::kMean) coef = coef / coef.sum().clamp_min(1);  // no row: 0, as torch
  if (grad.defined()) coef = coef * grad.to(acc);
  return coef.contiguous();
}

inline at::Tensor reduce_loss(const at::Tensor& lse, const at::Tensor& tgt, const at::Tensor& target,
                              Reduction reduction) {
  const at::Tensor valid = target != kIgnoreIndex;
  const at::Tensor rows = at::where(valid, lse - tgt, at::zeros({}, lse.options()));
  if (reduction == Reduction::kNone) return rows;
  const at::Tensor total = rows.sum();
  return reduction == Reduction::kSum ? total : total / valid.sum().to(lse.scalar_type());
}

// out (+)= a @ b; `out` may be in a wider dtype than a and b (reduced-precision inputs
// accumulate in float, so repeated accumulation does not round at every block).
inline void accumulate_mm(at::Tensor out, const at::Tensor& a, const at::Tensor& b, bool first) {
  if (out.scalar_type() == a.scalar_type()) {
    if (first) {
      at::mm_out(out, a, b);
    } else {
      out.addmm_(a, b);
    }
  } else if (first) {
    out.copy_(at::mm(a, b));
  } else {
    out.add_(at::mm(a, b));
  }
}

// Inputs must have passed check_cross_entropy_inputs.
class ChunkedCrossEntropy {
 public:
  ChunkedCrossEntropy(const at::Tensor& q, const at::Tensor& entity, const at::Tensor& target, int64_t block_rows,
                      int64_t block_cols, const TileKernels& kernels)
      : q_(q.contiguous()),
        entity_(entity.contiguous()),
        target_(target.contiguous()),
        batch_(q.size(0)),
        num_entities_(entity.size(0)),
        rows_(std::min(block_rows, std::max<int64_t>(batch_, 1))),
        cols_(std::min(block_cols, num_entities_)),
        acc_(accumulation_dtype(q)),
        kernels_(kernels) {
    tile_ = at::empty({rows_ * cols_}, q_.options());
  }

  // lse and target logit of every row: [B] each, in the accumulation dtype.
  std::tuple<at::Tensor, at::Tensor> log_sum_exp() {
    at::Tensor lse = at::empty({batch_}, q_.options().dtype(acc_));
    at::Tensor tgt = at::zeros({batch_}, q_.options().dtype(acc_));
    for (int64_t r0 = 0; r0 < batch_; r0 += rows_) {
      const int64_t rb = std::min(rows_, batch_ - r0);
      at::Tensor lse_b = lse.narrow(0, r0, rb), tgt_b = tgt.narrow(0, r0, rb);
      block_log_sum_exp(r0, rb, lse_b, tgt_b);
    }
    return {lse, tgt};
  }

  // Gradients for q and entity given each row's lse and weight coef ([B]); either may be skipped.
  std::tuple<at::Tensor, at::Tensor> gradients(const at::Tensor& lse, const at::Tensor& coef, bool need_q,
                                               bool need_entity) {
    Outputs out = make_outputs(need_q, need_entity);
    for (int64_t r0 = 0; r0 < batch_; r0 += rows_) {
      const int64_t rb = std::min(rows_, batch_ - r0);
      block_gradients(r0, rb, lse.narrow(0, r0, rb), coef.narrow(0, r0, rb), out, r0 == 0);
    }
    return finish(out);
  }

  // Loss rows (lse, tgt) and the gradients at the given row weights, in one sweep where a row
  // block's tile holds every entity, else in two (log-sum-exp, then gradients).
  std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> forward_and_gradients(const at::Tensor& coef,
                                                                                   bool need_q, bool need_entity) {
    at::Tensor lse = at::empty({batch_}, q_.options().dtype(acc_));
    at::Tensor tgt = at::zeros({batch_}, q_.options().dtype(acc_));
    Outputs out = make_outputs(need_q, need_entity);
    for (int64_t r0 = 0; r0 < batch_; r0 += rows_) {
      const int64_t rb = std::min(rows_, batch_ - r0);
      at::Tensor lse_b = lse.narrow(0, r0, rb), tgt_b = tgt.narrow(0, r0, rb);
      const at::Tensor coef_b = coef.narrow(0, r0, rb);
      if (cols_ == num_entities_) {
        const at::Tensor q_b = q_.narrow(0, r0, rb);
        at::Tensor tile = logits(q_b, 0, num_entities_);
        kernels_.lse_and_grad(tile, target_.narrow(0, r0, rb), coef_b, lse_b, tgt_b);
        multiply_out(tile, q_b, 0, num_entities_, r0, out, true, r0 == 0);
      } else {
        block_log_sum_exp(r0, rb, lse_b, tgt_b);
        block_gradients(r0, rb, lse_b, coef_b, out, r0 == 0);
      }
    }
    auto [grad_q, grad_entity] = finish(out);
    return {lse, tgt, grad_q, grad_entity};
  }

  const at::Tensor& target() const { return target_; }
  at::ScalarType acc() const { return acc_; }

 private:
  struct Outputs {
    at::Tensor grad_q, grad_entity;          // in the inputs' dtype (undefined when not wanted)
    at::Tensor grad_q_acc, grad_entity_acc;  // where products accumulate
  };

  Outputs make_outputs(bool need_q, bool need_entity) const {
    Outputs out;
    const bool wide = q_.scalar_type() == acc_;  // float and double accumulate in place
    if (need_q) {
      out.grad_q = at::empty_like(q_);
      out.grad_q_acc = wide || cols_ == num_entities_ ? out.grad_q : at::empty(q_.sizes(), q_.options().dtype(acc_));
    }
    if (need_entity) {
      out.grad_entity = at::empty_like(entity_);
      out.grad_entity_acc =
          wide || rows_ >= batch_ ? out.grad_entity : at::empty(entity_.sizes(), entity_.options().dtype(acc_));
    }
    if (batch_ == 0 && need_entity) out.grad_entity_acc.zero_();
    return out;
  }

  std::tuple<at::Tensor, at::Tensor> finish(Outputs& out) const {
    if (out.grad_q.defined() && !out.grad_q_acc.is_same(out.grad_q)) out.grad_q.copy_(out.grad_q_acc);
    if (out.grad_entity.defined() && !out.grad_entity_acc.is_same(out.grad_entity)) {
      out.grad_entity.copy_(out.grad_entity_acc);
    }
    const at::Tensor none = q_.new_empty({0});
    return {out.grad_q.defined() ? out.grad_q : none, out.grad_entity.defined() ? out.grad_entity : none};
  }

  at::Tensor logits(const at::Tensor& q_b, int64_t c0, int64_t cc) {
    at::Tensor tile = tile_.narrow(0, 0, q_b.size(0) * cc).view({q_b.size(0), cc});
    at::mm_out(tile, q_b, entity_.narrow(0, c0, cc).t());
    return tile;
  }

  void block_log_sum_exp(int64_t r0, int64_t rb, at::Tensor& lse_b, at::Tensor& tgt_b) {
    const at::Tensor q_b = q_.narrow(0, r0, rb), target_b = target_.narrow(0, r0, rb);
    at::Tensor m = at::full({rb}, -std::numeric_limits<double>::infinity(), lse_b.options());
    at::Tensor s = at::zeros({rb}, lse_b.options());
    for (int64_t c0 = 0; c0 < num_entities_; c0 += cols_) {
      const int64_t cc = std::min(cols_, num_entities_ - c0);
      const at::Tensor tile = logits(q_b, c0, cc);
      kernels_.lse_update(tile, c0, num_entities_, target_b, m, s, tgt_b);
    }
    lse_b.copy_(m + s.log());
  }

  void block_gradients(int64_t r0, int64_t rb, const at::Tensor& lse_b, const at::Tensor& coef_b, Outputs& out,
                       bool first_block) {
    const at::Tensor q_b = q_.narrow(0, r0, rb), target_b = target_.narrow(0, r0, rb);
    for (int64_t c0 = 0; c0 < num_entities_; c0 += cols_) {
      const int64_t cc = std::min(cols_, num_entities_ - c0);
      at::Tensor tile = logits(q_b, c0, cc);
      kernels_.grad(tile, c0, target_b, lse_b, coef_b);
      multiply_out(tile, q_b, c0, cc, r0, out, c0 == 0, first_block);
    }
  }

  // dq[rows] (+)= tile @ entity[c0:c0+cc]; dentity[c0:c0+cc] (+)= tile^T @ q_b.
  void multiply_out(const at::Tensor& tile, const at::Tensor& q_b, int64_t c0, int64_t cc, int64_t r0, Outputs& out,
                    bool first_chunk, bool first_block) {
    if (out.grad_q_acc.defined()) {
      accumulate_mm(out.grad_q_acc.narrow(0, r0, q_b.size(0)), tile, entity_.narrow(0, c0, cc), first_chunk);
    }
    if (out.grad_entity_acc.defined()) {
      accumulate_mm(out.grad_entity_acc.narrow(0, c0, cc), tile.t(), q_b, first_block);
    }
  }

  at::Tensor q_, entity_, target_;
  int64_t batch_, num_entities_, rows_, cols_;
  at::ScalarType acc_;
  TileKernels kernels_;
  at::Tensor tile_;
};

// ---- the three ops, on top of the driver ------------------------------------------------------

// (loss, lse): loss is a scalar ("mean"/"sum") or [B] ("none"); lse [B] is kept for backward.
inline std::tuple<at::Tensor, at::Tensor> cross_entropy_all_impl(const at::Tensor& q, const at::Tensor& entity,
                                                                 const at::Tensor& target, const std::string& reduction,
                                                                 int64_t block_rows, int64_t block_cols,
                                                                 const TileKernels& kernels) {
  const Reduction red = parse_reduction(reduction);
  check_cross_entropy_inputs(q, entity, target, block_rows, block_cols);
  ChunkedCrossEntropy ce(q, entity, target, block_rows, block_cols, kernels);
  auto [lse, tgt] = ce.log_sum_exp();
  return {reduce_loss(lse, tgt, ce.target(), red), lse};
}

inline std::tuple<at::Tensor, at::Tensor> cross_entropy_all_backward_impl(
    const at::Tensor& grad, const at::Tensor& q, const at::Tensor& entity, const at::Tensor& target,
    const at::Tensor& lse, const std::string& reduction, int64_t block_rows, int64_t block_cols, bool need_q,
    bool need_entity, const TileKernels& kernels) {
  const Reduction red = parse_reduction(reduction);
  check_cross_entropy_inputs(q, entity, target, block_rows, block_cols, /*check_ids=*/!target.is_cuda());
  TORCH_CHECK(lse.dim() == 1 && lse.size(0) == q.size(0), "rotmem::cross_entropy_all_backward: lse must be [",
              q.size(0), "], got ", lse.sizes());
  TORCH_CHECK(red == Reduction::kNone ? grad.dim() == 1 && grad.size(0) == q.size(0) : grad.numel() == 1,
              "rotmem::cross_entropy_all_backward: grad must be [", q.size(0), "] for reduction 'none' and a ",
              "scalar otherwise, got ", grad.sizes());
  ChunkedCrossEntropy ce(q, entity, target, block_rows, block_cols, kernels);
  const at::Tensor coef = row_coefficients(ce.target(), red, grad.reshape({-1}).squeeze(0), ce.acc());
  return ce.gradients(lse.to(ce.acc()).contiguous(), coef, need_q, need_entity);
}

// (loss, dloss/dq, dloss/dentity) in one sweep; the gradients are at unit output gradient, so
// autograd's backward only scales them. Only for "mean" and "sum".
inline std::tuple<at::Tensor, at::Tensor, at::Tensor> cross_entropy_all_train_impl(
    const at::Tensor& q, const at::Tensor& entity, const at::Tensor& target, const std::string& reduction,
    int64_t block_rows, int64_t block_cols, bool need_q, bool need_entity, const TileKernels& kernels) {
  const Reduction red = parse_reduction(reduction);
  TORCH_CHECK(red != Reduction::kNone,
              "rotmem::cross_entropy_all_train: reduction 'none' needs the per-row output gradient; "
              "use cross_entropy_all and its backward");
  check_cross_entropy_inputs(q, entity, target, block_rows, block_cols);
  ChunkedCrossEntropy ce(q, entity, target, block_rows, block_cols, kernels);
  const at::Tensor coef = row_coefficients(ce.target(), red, at::Tensor(), ce.acc());
  auto [lse, tgt, grad_q, grad_entity] = ce.forward_and_gradients(coef, need_q, need_entity);
  return {reduce_loss(lse, tgt, ce.target(), red), grad_q, grad_entity};
}

}  // namespace rotmem
