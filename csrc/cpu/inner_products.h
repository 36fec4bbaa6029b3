// The scans of inner_products.cpp for other CPU kernels (top_inner_products.cpp rescores with them).
#pragma once

#include <cstdint>

namespace rotmem::cpu {

// scores[j * n + r] = <x row r, q row j> for x [n, d] and q [b, d], float32, on the active
// instruction set (isa.h). A score's bits depend only on its row and query, not on n, b or where
// the row sits: a row scanned alone (n = 1) gives what it gives in a scan of every row.
void scan_inner_products(const float* x, int64_t n, int64_t d, const float* q, int64_t b, float* scores);

// scores[i] = <x row rows[i], q> for one query q [d] and m rows of x: the bits scan_inner_products
// gives those rows, their reads overlapped (four rows at a time, the next four prefetched).
void scan_inner_products_at(const float* x, const int64_t* rows, int64_t m, int64_t d, const float* q,
                            float* scores);

}  // namespace rotmem::cpu
