// Level 2: global-memory coalescing. Still one thread per element of C, but threadIdx.x now walks along a
// *row* of C instead of down a column.
//
// Why it helps: a warp's 32 loads are served together, in 32-byte sectors. In level 1 the 32 threads of a
// warp own 32 different rows, so each step of the k loop reads A at 32 addresses lda*4 bytes apart: 32
// sectors fetched to use 4 bytes of each. Here the 32 threads own 32 consecutive columns of one row: their
// B loads are 32 consecutive floats (128 bytes, 4 sectors, every byte used) and their A loads are one
// address broadcast to the warp. Same arithmetic, 5 sectors per k step instead of 33: the kernel stops
// wasting L2/DRAM bandwidth, although every operand is still fetched from global memory once per use.
#include "common.cuh"
#include "launchers.hpp"
#include "parallax/core.hpp"

namespace parallax::detail {
namespace {

// BS x BS threads per block, one per element of a BS x BS block of C.
template <int BS>
__global__ void __launch_bounds__(BS * BS)
    sgemm_coalesced_kernel(int m, int n, int k, float alpha, const float* __restrict__ a, int lda,
                           const float* __restrict__ b, int ldb, float beta, float* __restrict__ c, int ldc,
                           bool m_on_x) {
  static_assert(BS * BS <= 1024, "one thread per element of a BS x BS block of C: at most 1024 threads");
  static_assert(BS % 32 == 0, "a warp must lie along one row of C so its B loads coalesce and A broadcasts");

  const int row0 = block_row0(m_on_x, BS);
  const int col0 = block_col0(m_on_x, BS);
  const int ty = static_cast<int>(threadIdx.y);
  const int tx = static_cast<int>(threadIdx.x);  // consecutive threads -> consecutive columns
  // Compare against what is left of C (no row0 + ty overflow for m near INT_MAX).
  if (ty >= m - row0 || tx >= n - col0) return;
  const int row = row0 + ty;
  const int col = col0 + tx;

  const float* a_row = a + static_cast<int64_t>(row) * lda;
  const float* b_col = b + col;
  float acc = 0.f;
  for (int i = 0; i < k; ++i) acc += a_row[i] * b_col[static_cast<int64_t>(i) * ldb];
  store_c(c + static_cast<int64_t>(row) * ldc + col, acc, alpha, beta);
}

}  // namespace

void launch_sgemm_coalesced(const SgemmArgs& p, cudaStream_t stream) {
  constexpr int kBS = 32;
  const TileGrid tiles = make_tile_grid(p.m, p.n, kBS, kBS);
  sgemm_coalesced_kernel<kBS><<<tiles.grid, dim3(kBS, kBS), 0, stream>>>(
      p.m, p.n, p.k, p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, p.c, p.ldc, tiles.m_on_x);
  PX_CUDA_CHECK_LAUNCH();
}

}  // namespace parallax::detail
