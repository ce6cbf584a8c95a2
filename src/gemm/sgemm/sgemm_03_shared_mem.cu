// Level 3: shared-memory tiling. The block stages a TILE x TILE tile of A and one of B in shared memory,
// then every thread of the block computes its element of C from the staged tiles.
//
// Why it helps: in level 2 each operand is fetched from global memory once per *use*: element A[i][p] is
// loaded by all n threads of row i, and B[p][j] by all m threads of column j, so the kernel moves 2*m*n*k
// floats through L1/L2 for 2*m*n*k flops. Staged in shared memory, each loaded value is reused by TILE
// threads, cutting global traffic by a factor of TILE (32). Shared memory is on-chip and ~10x faster than
// L2, but the inner loop still does two shared loads per FMA: the next levels attack that ratio.
#include "common.cuh"
#include "launchers.hpp"
#include "parallax/core.hpp"

namespace parallax::detail {
namespace {

// TILE x TILE threads, one per element of a TILE x TILE block of C; the k dimension is walked TILE at a time.
template <int TILE>
__global__ void __launch_bounds__(TILE * TILE)
    sgemm_shared_mem_kernel(int m, int n, int k, float alpha, const float* __restrict__ a, int lda,
                            const float* __restrict__ b, int ldb, float beta, float* __restrict__ c, int ldc,
                            bool m_on_x) {
  static_assert(TILE * TILE <= 1024, "one thread per element of a TILE x TILE block of C: at most 1024 threads");
  static_assert(TILE % 32 == 0,
                "a warp must lie along one row of the tile: coalesced global loads, conflict-free shared reads");
  static_assert(2 * TILE * TILE * sizeof(float) <= 48 * 1024, "the two tiles must fit in 48 KiB of static shared memory");

  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];

  const int row0 = block_row0(m_on_x, TILE);
  const int col0 = block_col0(m_on_x, TILE);
  const int rows = min(TILE, m - row0);  // rows / columns of this block's C tile that exist
  const int cols = min(TILE, n - col0);
  const int ty = static_cast<int>(threadIdx.y);
  const int tx = static_cast<int>(threadIdx.x);
  const bool row_ok = ty < rows;
  const bool col_ok = tx < cols;

  a += static_cast<int64_t>(row0) * lda;  // block's row panel of A, first k tile
  b += col0;                              // block's column panel of B, first k tile
  c += static_cast<int64_t>(row0) * ldc + col0;
  const int64_t a_offset = static_cast<int64_t>(ty) * lda + tx;  // this thread stages A tile element (ty, tx)
  const int64_t b_offset = static_cast<int64_t>(ty) * ldb + tx;  // and B tile element (ty, tx)

  float acc = 0.f;
  // k_left counts down instead of k0 counting up: no k0 + TILE overflow for k near INT_MAX.
  for (int k_left = k; k_left > 0; k_left -= TILE) {
    As[ty][tx] = load_or_zero(a, a_offset, row_ok && tx < k_left);
    Bs[ty][tx] = load_or_zero(b, b_offset, ty < k_left && col_ok);
    __syncthreads();  // tiles complete before anyone reads them
#pragma unroll
    for (int i = 0; i < TILE; ++i) acc += As[ty][i] * Bs[i][tx];  // As broadcast, Bs consecutive banks
    __syncthreads();  // everyone done reading before the next tile overwrites them
    a += TILE;
    b += static_cast<int64_t>(TILE) * ldb;
  }
  if (row_ok && col_ok) store_c(c + static_cast<int64_t>(ty) * ldc + tx, acc, alpha, beta);
}

}  // namespace

void launch_sgemm_shared_mem(const SgemmArgs& p, cudaStream_t stream) {
  constexpr int kTile = 32;
  const TileGrid tiles = make_tile_grid(p.m, p.n, kTile, kTile);
  sgemm_shared_mem_kernel<kTile><<<tiles.grid, dim3(kTile, kTile), 0, stream>>>(
      p.m, p.n, p.k, p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, p.c, p.ldc, tiles.m_on_x);
  PX_CUDA_CHECK_LAUNCH();
}

}  // namespace parallax::detail
