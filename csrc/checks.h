// Input checks shared by the CPU and CUDA kernels: every failure names the op and the bad input.
#pragma once

#include <ATen/ATen.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace rotmem {

// Whether ids on idx's device are checked: always on the CPU; on CUDA unless ROTMEM_CHECK_IDS=0
// (the check reads two numbers back, which waits for the device).
inline bool id_checks_enabled(const at::Tensor& idx) {
  if (!idx.is_cuda()) return true;
  const char* flag = std::getenv("ROTMEM_CHECK_IDS");
  return flag == nullptr || std::string(flag) != "0";
}

// Every value of idx lies in [0, rows), except `ignore` when given; else an IndexError names the op
// (without "rotmem::"), the input and the first bad id, as rotmem/ops/id_checks.py does:
// "cross_entropy_all: target[3] = 10488 is out of range for the entity table of 10488 rows".
// One aminmax over the ids and one readback of its two numbers (16 bytes); the search for the first
// bad one runs only when they are out of range. With the check off, the CUDA kernels' own
// device-side asserts remain.
inline void check_index_range(const char* op, const at::Tensor& idx, int64_t rows, const char* name, const char* what,
                              std::optional<int64_t> ignore = std::nullopt) {
  if (idx.numel() == 0 || !id_checks_enabled(idx)) return;
  const at::Tensor ids = ignore ? idx.reshape(-1).masked_fill(idx.reshape(-1) == *ignore, 0) : idx.reshape(-1);
  const auto [low, high] = at::aminmax(ids);
  const at::Tensor both = at::stack({low, high}).cpu();
  const int64_t* range = both.const_data_ptr<int64_t>();
  if (range[0] >= 0 && range[1] < rows) return;
  const int64_t i = ((ids < 0) | (ids >= rows)).nonzero()[0][0].item<int64_t>();
  const std::string name_of_op(op);
  const std::string short_op = name_of_op.rfind("rotmem::", 0) == 0 ? name_of_op.substr(8) : name_of_op;
  TORCH_CHECK_INDEX(false, short_op, ": ", name, "[", i, "] = ", ids[i].item<int64_t>(), " is out of range for ", what,
                    " of ", rows, " rows");
}

inline void check_same(const char* op, const at::Tensor& a, const char* a_name, const at::Tensor& b,
                       const char* b_name) {
  TORCH_CHECK(a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() && a.device() == b.device(), op, ": ",
              b_name, " ", b.sizes(), " ", b.scalar_type(), " on ", b.device(), " must match ", a_name, " ", a.sizes(),
              " ", a.scalar_type(), " on ", a.device());
}

// x [M, 2n] and theta [M, n] of one dtype and device.
inline void check_rows(const char* op, const at::Tensor& x, const at::Tensor& theta, const char* x_name) {
  TORCH_CHECK(x.dim() == 2 && theta.dim() == 2 && x.size(0) == theta.size(0) && x.size(1) == 2 * theta.size(1), op,
              ": expected ", x_name, " [M, 2n] and theta [M, n], got ", x_name, " ", x.sizes(), " and theta ",
              theta.sizes());
  TORCH_CHECK(x.scalar_type() == theta.scalar_type() && x.device() == theta.device(), op, ": ", x_name,
              " and theta must have one dtype and device, got ", x.scalar_type(), " on ", x.device(), " and ",
              theta.scalar_type(), " on ", theta.device());
}

// The inputs of the fused indexed query, checked, contiguous, with tau, alpha, log_s and log_base
// in the accumulation dtype (float, or double for double tables).
struct IndexedInputs {
  at::Tensor entity, w_table, w_hat_table, ent_idx, rel_idx, tau, alpha, log_s, log_base;
  double tau0;
  int64_t batch, n;
};

inline IndexedInputs check_indexed(const char* op, const at::Tensor& entity, const at::Tensor& w_table,
                                   const std::optional<at::Tensor>& w_hat_table, const at::Tensor& ent_idx,
                                   const at::Tensor& rel_idx, const at::Tensor& tau, const at::Tensor& alpha,
                                   const at::Tensor& log_s, const at::Tensor& log_base, double tau0,
                                   bool check_ids = true) {  // false: a backward, its forward checked them
  TORCH_CHECK(entity.dim() == 2 && entity.size(1) % 2 == 0 && entity.size(1) > 0, op,
              ": entity must be [N, 2n] with n >= 1, got ", entity.sizes());
  TORCH_CHECK(w_table.dim() == 2 && w_table.size(1) == entity.size(1), op, ": w_table must be [R, ", entity.size(1),
              "], got ", w_table.sizes());
  TORCH_CHECK(w_table.scalar_type() == entity.scalar_type(), op, ": w_table dtype ", w_table.scalar_type(),
              " differs from entity dtype ", entity.scalar_type());
  if (w_hat_table) check_same(op, w_table, "w_table", *w_hat_table, "w_hat_table");
  const int64_t batch = ent_idx.numel();
  for (const auto& [t, name] : {std::pair{ent_idx, "ent_idx"}, std::pair{rel_idx, "rel_idx"}}) {
    TORCH_CHECK(t.dim() == 1 && t.scalar_type() == at::kLong, op, ": ", name, " must be a 1-D int64 tensor, got ",
                t.sizes(), " ", t.scalar_type());
  }
  for (const auto& [t, name] : {std::pair{rel_idx, "rel_idx"}, std::pair{tau, "tau"}, std::pair{alpha, "alpha"}}) {
    TORCH_CHECK(t.dim() == 1 && t.size(0) == batch, op, ": ", name, " must be [", batch, "] like ent_idx, got ",
                t.sizes());
  }
  TORCH_CHECK(log_s.numel() == 1 && log_base.numel() == 1, op, ": log_s and log_base must be scalars, got ",
              log_s.sizes(), " and ", log_base.sizes());
  for (const at::Tensor& t : {w_table, ent_idx, rel_idx, tau, alpha, log_s, log_base}) {
    TORCH_CHECK(t.device() == entity.device(), op, ": every input must be on ", entity.device(), ", one is on ",
                t.device());
  }
  if (check_ids) {
    check_index_range(op, ent_idx, entity.size(0), "ent_idx", "the entity table");
    check_index_range(op, rel_idx, w_table.size(0), "rel_idx", "the relation table");
  }
  const auto acc = entity.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  IndexedInputs in;
  in.entity = entity.contiguous();
  in.w_table = w_table.contiguous();
  in.w_hat_table = w_hat_table ? w_hat_table->contiguous() : at::Tensor();
  in.ent_idx = ent_idx.contiguous();
  in.rel_idx = rel_idx.contiguous();
  in.tau = tau.to(acc).contiguous();
  in.alpha = alpha.to(acc).contiguous();
  in.log_s = log_s.reshape({}).to(acc);
  in.log_base = log_base.reshape({}).to(acc);
  in.tau0 = tau0;
  in.batch = batch;
  in.n = entity.size(1) / 2;
  return in;
}

}  // namespace rotmem
