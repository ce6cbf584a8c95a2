// Level 1: naive. One thread computes one element of C by walking a row of A and a column of B.
//
// Consecutive threads (threadIdx.x) map to consecutive *rows* of C here, so within a warp the 32 loads of A
// hit 32 different rows (32 separate memory transactions) and the B loads are all to the same address.
// This is the baseline every later level is measured against; level 2 fixes exactly this mapping.
#include "common.cuh"
#include "launchers.hpp"
#include "parallax/core.hpp"

namespace parallax::detail {
namespace {

__global__ void sgemm_naive_kernel(int m, int n, int k, float alpha, const float* __restrict__ a, int lda,
                                   const float* __restrict__ b, int ldb, float beta, float* __restrict__ c,
                                   int ldc, bool m_on_x) {
  // The block placement is shared with every level (make_tile_grid keeps grids inside CUDA's limits);
  // inside the block, threadIdx.x runs down a column of C: the uncoalesced mapping this level is about.
  const int row0 = block_row0(m_on_x, 32);
  const int col0 = block_col0(m_on_x, 32);
  if (static_cast<int>(threadIdx.x) >= m - row0 || static_cast<int>(threadIdx.y) >= n - col0) return;
  const int row = row0 + static_cast<int>(threadIdx.x);
  const int col = col0 + static_cast<int>(threadIdx.y);
  float acc = 0.f;
  for (int i = 0; i < k; ++i) acc += a[static_cast<int64_t>(row) * lda + i] * b[static_cast<int64_t>(i) * ldb + col];
  store_c(&c[static_cast<int64_t>(row) * ldc + col], acc, alpha, beta);
}

}  // namespace

void launch_sgemm_naive(const SgemmArgs& p, cudaStream_t stream) {
  const TileGrid tiles = make_tile_grid(p.m, p.n, 32, 32);
  sgemm_naive_kernel<<<tiles.grid, dim3(32, 32), 0, stream>>>(p.m, p.n, p.k, p.alpha, p.a, p.lda, p.b, p.ldb,
                                                              p.beta, p.c, p.ldc, tiles.m_on_x);
  PX_CUDA_CHECK_LAUNCH();
}

}  // namespace parallax::detail
