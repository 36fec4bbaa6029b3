// Filtered rank counts, tile by tile, written once for every device.
//
// For each query b: among the candidates of this entity table (or shard) other than its target and
// the ids of its filter rows, how many score above / equal to the target's score. Scores
// s = q @ entity^T are never held whole: rows of q are taken in blocks of `block_rows` and entities
// in chunks of `block_cols`; each [block_rows, block_cols] tile comes from one matrix product (ATen:
// BLAS on the CPU, cuBLAS on the GPU) and a device kernel counts it, row by row, then subtracts what
// the row's target and filtered ids contributed (the ids are sorted, so a chunk's ids are found by
// binary search on the CPU).
//
// The target's score is read from the tile that holds it, so it is the very number its candidates
// are compared with (equal embeddings tie exactly). When a block's tiles hold every entity this is
// the tile being counted; otherwise a first sweep over the chunks that hold the block's targets
// picks the scores out of the same products, and a second counts (the Python wrapper sorts queries by
// target, so a block's targets fall in few chunks). A shard that does not hold every target is given
// the target scores instead (`target_score`), which target_scores_impl reads from the owners' tiles.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <tuple>

#include "checks.h"

namespace rotmem {

// Device kernels on one tile [rows, cols] (contiguous) of scores of batch rows [r0, r0 + rows)
// against entities [c0, c0 + cols) of the table. `target` and `filter_idx` hold table-local ids.
struct RankKernels {
  // score[r0 + i] <- tile[i, target[r0 + i] - c0] where that column lies in the tile.
  void (*pick_target)(const at::Tensor& tile, int64_t r0, int64_t c0, const at::Tensor& target, at::Tensor& score);
  // For each row and filter f: higher[f, r] += #(score > s_r), ties[f, r] += #(score == s_r) over the
  // tile's columns but the target and filter f's ids; nonfinite[r] |= any score or s_r is NaN or infinite.
  void (*count)(const at::Tensor& tile, int64_t r0, int64_t c0, const at::Tensor& score, const at::Tensor& target,
                const at::Tensor& filter_ptr, const at::Tensor& filter_idx, at::Tensor& higher, at::Tensor& ties,
                at::Tensor& nonfinite);
};

template <template <typename> class KernelsOf>
RankKernels rank_kernels_for(const at::Tensor& q) {
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
      TORCH_CHECK(false, "rotmem::filtered_rank_counts: unsupported dtype ", q.scalar_type(),
                  " (float32, float64, bfloat16 or float16)");
  }
}

inline void check_rank_inputs(const at::Tensor& q, const at::Tensor& entity, const at::Tensor& target,
                              const std::optional<at::Tensor>& target_score, const at::Tensor& filter_ptr,
                              const at::Tensor& filter_idx, int64_t block_rows, int64_t block_cols) {
  const char* op = "rotmem::filtered_rank_counts";
  TORCH_CHECK(q.dim() == 2 && entity.dim() == 2 && q.size(1) == entity.size(1), op,
              ": expected q [B, D] and entity [N, D], got q ", q.sizes(), " and entity ", entity.sizes());
  TORCH_CHECK(q.scalar_type() == entity.scalar_type(), op, ": q dtype ", q.scalar_type(), " differs from entity dtype ",
              entity.scalar_type());
  const int64_t batch = q.size(0);
  TORCH_CHECK(target.dim() == 1 && target.size(0) == batch && target.scalar_type() == at::kLong, op,
              ": target must be int64 [", batch, "], got ", target.sizes(), " ", target.scalar_type());
  TORCH_CHECK(filter_ptr.dim() == 2 && filter_ptr.size(0) >= 1 && filter_ptr.size(1) == batch + 1 &&
                  filter_ptr.scalar_type() == at::kLong,
              op, ": filter_ptr must be int64 [F, ", batch + 1, "], got ", filter_ptr.sizes(), " ",
              filter_ptr.scalar_type());
  TORCH_CHECK(filter_idx.dim() == 1 && filter_idx.scalar_type() == at::kLong, op,
              ": filter_idx must be a 1-D int64 tensor, got ", filter_idx.sizes(), " ", filter_idx.scalar_type());
  if (target_score) {
    TORCH_CHECK(target_score->dim() == 1 && target_score->size(0) == batch && target_score->is_floating_point(), op,
                ": target_score must be a float [", batch, "], got ", target_score->sizes(), " ",
                target_score->scalar_type());
    TORCH_CHECK(target_score->device() == q.device(), op, ": target_score must be on ", q.device());
  }
  for (const at::Tensor& t : {entity, target, filter_ptr, filter_idx}) {
    TORCH_CHECK(t.device() == q.device(), op, ": every input must be on ", q.device(), ", one is on ", t.device());
  }
  TORCH_CHECK(block_rows > 0 && block_cols > 0, op, ": block_rows and block_cols must be positive, got ", block_rows,
              " and ", block_cols);
  // the kernels read filter_idx[filter_ptr[f, b] .. filter_ptr[f, b + 1]): one readback of three numbers
  if (batch > 0 && id_checks_enabled(filter_ptr)) {
    const at::Tensor steps = filter_ptr.narrow(1, 1, batch) - filter_ptr.narrow(1, 0, batch);
    const at::Tensor summary = at::stack({filter_ptr.min(), filter_ptr.max(), steps.min()}).cpu();
    const int64_t* v = summary.const_data_ptr<int64_t>();
    TORCH_CHECK_VALUE(v[0] >= 0 && v[1] <= filter_idx.numel() && v[2] >= 0, op,
                      ": filter_ptr rows must be non-decreasing offsets into filter_idx [", filter_idx.numel(), "]");
  }
}

// The tiles of q @ entity^T, made one at a time in one buffer: the same row block and entity chunk
// always give the same tile, whichever op asks.
class ScoreTiles {
 public:
  ScoreTiles(const at::Tensor& q, const at::Tensor& entity, int64_t block_rows, int64_t block_cols,
             const RankKernels& kernels)
      : q_(q.contiguous()),
        entity_(entity.contiguous()),
        batch_(q.size(0)),
        num_entities_(entity.size(0)),
        rows_(std::min(block_rows, std::max<int64_t>(batch_, 1))),
        cols_(std::min(block_cols, std::max<int64_t>(num_entities_, 1))),
        kernels_(kernels) {
    buffer_ = at::empty({rows_ * cols_}, q_.options());
  }

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }

  // Scores of batch rows [r0, r0 + rb) against entities [c0, c0 + cc).
  at::Tensor tile(int64_t r0, int64_t rb, int64_t c0, int64_t cc) {
    at::Tensor out = buffer_.narrow(0, 0, rb * cc).view({rb, cc});
    at::mm_out(out, q_.narrow(0, r0, rb), entity_.narrow(0, c0, cc).t());
    return out;
  }

  // score[r] <- the tile value of each target of rows [r0, r0 + rb) that lies in this table, from
  // the chunks that hold them (`target_host`: the same local ids on the host).
  void pick_targets(int64_t r0, int64_t rb, const at::Tensor& target, const at::Tensor& target_host, at::Tensor& score) {
    const int64_t* t = target_host.const_data_ptr<int64_t>() + r0;
    int64_t lo = num_entities_, hi = -1;
    for (int64_t i = 0; i < rb; ++i) {
      if (t[i] >= 0 && t[i] < num_entities_) {
        lo = std::min(lo, t[i]);
        hi = std::max(hi, t[i]);
      }
    }
    for (int64_t c0 = lo / cols_ * cols_; c0 <= hi; c0 += cols_) {
      kernels_.pick_target(tile(r0, rb, c0, std::min(cols_, num_entities_ - c0)), r0, c0, target, score);
    }
  }

 private:
  at::Tensor q_, entity_;
  int64_t batch_, num_entities_, rows_, cols_;
  RankKernels kernels_;
  at::Tensor buffer_;
};

// Each target's score as filtered_rank_counts_impl reads it (same tiles), in the accumulation dtype;
// 0 for a target outside this table (so a sum over the shards of a table gives every score).
inline at::Tensor target_scores_impl(const at::Tensor& q, const at::Tensor& entity, const at::Tensor& target,
                                     int64_t entity_offset, int64_t block_rows, int64_t block_cols,
                                     const RankKernels& kernels) {
  const char* op = "rotmem::target_scores";
  TORCH_CHECK(q.dim() == 2 && entity.dim() == 2 && q.size(1) == entity.size(1) &&
                  q.scalar_type() == entity.scalar_type(),
              op, ": expected q [B, D] and entity [N, D] of one dtype, got ", q.sizes(), " ", q.scalar_type(), " and ",
              entity.sizes(), " ", entity.scalar_type());
  TORCH_CHECK(target.dim() == 1 && target.size(0) == q.size(0) && target.scalar_type() == at::kLong, op,
              ": target must be int64 [", q.size(0), "], got ", target.sizes(), " ", target.scalar_type());
  TORCH_CHECK(entity.device() == q.device() && target.device() == q.device(), op, ": inputs must share a device");
  TORCH_CHECK(block_rows > 0 && block_cols > 0, op, ": block_rows and block_cols must be positive");
  const at::ScalarType acc = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor score = at::zeros({q.size(0)}, q.options().dtype(acc));
  if (q.size(0) == 0 || entity.size(0) == 0) return score;
  const at::Tensor local_target = (target - entity_offset).contiguous();
  const at::Tensor target_host = local_target.cpu();
  ScoreTiles tiles(q, entity, block_rows, block_cols, kernels);
  for (int64_t r0 = 0; r0 < q.size(0); r0 += tiles.rows()) {
    tiles.pick_targets(r0, std::min(tiles.rows(), q.size(0) - r0), local_target, target_host, score);
  }
  return score;
}

// (higher, ties), int64 [F, B]; -1 in both for a query with a NaN or infinite score. Filter rows must be sorted
// (the Python wrapper checks).
inline std::tuple<at::Tensor, at::Tensor> filtered_rank_counts_impl(
    const at::Tensor& q, const at::Tensor& entity, const at::Tensor& target,
    const std::optional<at::Tensor>& target_score, const at::Tensor& filter_ptr_in, const at::Tensor& filter_idx,
    int64_t entity_offset, int64_t block_rows, int64_t block_cols, const RankKernels& kernels) {
  check_rank_inputs(q, entity, target, target_score, filter_ptr_in, filter_idx, block_rows, block_cols);
  const int64_t batch = q.size(0), num_entities = entity.size(0), filters = filter_ptr_in.size(0);
  const at::ScalarType acc = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::TensorOptions counts_options = q.options().dtype(at::kLong);
  at::Tensor higher = at::zeros({filters, batch}, counts_options);
  at::Tensor ties = at::zeros({filters, batch}, counts_options);
  at::Tensor nonfinite = at::zeros({batch}, q.options().dtype(at::kBool));
  if (batch == 0 || num_entities == 0) return {higher, ties};

  const at::Tensor local_target = (target - entity_offset).contiguous();
  const at::Tensor local_idx = (filter_idx - entity_offset).contiguous();
  const at::Tensor filter_ptr = filter_ptr_in.contiguous();
  ScoreTiles tiles(q, entity, block_rows, block_cols, kernels);
  const int64_t cols = tiles.cols();

  at::Tensor score;
  at::Tensor target_host;  // only when the scores are picked from the tiles
  if (target_score) {
    score = target_score->to(acc).contiguous();
  } else {
    score = at::empty({batch}, q.options().dtype(acc));
    target_host = local_target.cpu();
    const int64_t* t = target_host.const_data_ptr<int64_t>();
    // (the Python wrapper checks first, before it reorders the targets: b is the caller's position;
    // the message is rotmem/ops/id_checks.py's)
    const std::string span = entity_offset == 0 ? c10::str("of ", num_entities, " rows")
                                                : c10::str("of ids [", entity_offset, ", ",
                                                           entity_offset + num_entities, ")");
    for (int64_t b = 0; b < batch; ++b) {
      TORCH_CHECK_INDEX(t[b] >= 0 && t[b] < num_entities, "filtered_rank_counts: target[", b, "] = ",
                        t[b] + entity_offset, " is out of range for the entity table ", span);
    }
  }
  const bool pick_while_counting = !target_score && cols == num_entities;
  for (int64_t r0 = 0; r0 < batch; r0 += tiles.rows()) {
    const int64_t rb = std::min(tiles.rows(), batch - r0);
    if (!target_score && !pick_while_counting) tiles.pick_targets(r0, rb, local_target, target_host, score);
    for (int64_t c0 = 0; c0 < num_entities; c0 += cols) {
      const at::Tensor tile = tiles.tile(r0, rb, c0, std::min(cols, num_entities - c0));
      if (pick_while_counting) kernels.pick_target(tile, r0, c0, local_target, score);
      kernels.count(tile, r0, c0, score, local_target, filter_ptr, local_idx, higher, ties, nonfinite);
    }
  }
  const at::Tensor minus_one = at::full({}, -1, counts_options);
  return {at::where(nonfinite, minus_one, higher), at::where(nonfinite, minus_one, ties)};
}

}  // namespace rotmem
