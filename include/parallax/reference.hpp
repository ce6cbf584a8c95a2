// Float64 CPU reference for GEMM: what every GPU result is compared against.
//
// Inputs are the same FP32 values the kernels see; products and sums are formed in double, so the reference
// error (~1e-16 relative) is negligible next to FP32 kernel error (~1e-7 * sqrt(k)). It is single-pass,
// i-k-j ordered (rows of B streamed contiguously, one row of accumulators stays in L1) and splits rows
// across CPU threads for large problems: a 1024^3 reference takes well under a second.
#pragma once

#include <span>
#include <vector>

namespace parallax {

// Returns alpha * A * B + beta * C as a dense row-major m x n matrix (leading dimension n).
//   A: m x k, row-major, leading dimension lda >= k; a.size() >= (m - 1) * lda + k
//   B: k x n, row-major, leading dimension ldb >= n; b.size() >= (k - 1) * ldb + n
//   C: m x n, row-major, leading dimension ldc >= n; read only when beta != 0, the same rule as the kernels:
//      with beta == 0, c_in may be empty (or hold NaN) and it and ldc are ignored.
// Padding between rows (columns k..lda-1 of A, n..ldb-1 of B, n..ldc-1 of C) is never read.
// Throws parallax::InvalidArgument naming the argument ("m", "lda", "a", "c_in", ...) and the rule it broke.
std::vector<double> gemm_reference_f64(int m, int n, int k, double alpha, std::span<const float> a, int lda,
                                       std::span<const float> b, int ldb, double beta, std::span<const float> c_in,
                                       int ldc);

}  // namespace parallax
