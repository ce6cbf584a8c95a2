// Level 4: 1D blocktiling. Each thread computes TM results of C stacked in one column, and the block's tile
// grows to BM x BN with a thin BK slice of k staged per step.
//
// Why it helps: level 3 is bound by shared memory, not DRAM: every FMA needs two shared loads (one from the
// A tile, one from the B tile), and the shared-memory pipe delivers fewer loads per cycle than the FMA units
// retire FMAs. A thread that owns TM results in a column loads the B value once into a register and uses it
// TM times, so a k step costs TM + 1 shared loads for TM FMAs instead of 2 * TM. The larger BM x BN block
// tile also raises reuse of each global load (every A value feeds BN results, every B value BM results).
#include "common.cuh"
#include "launchers.hpp"
#include "parallax/core.hpp"

namespace parallax::detail {
namespace {

template <int BM, int BN, int BK, int TM>
constexpr int blocktile_1d_threads() {
  return (BM / TM) * BN;
}

template <int BM, int BN, int BK, int TM>
__global__ void __launch_bounds__(blocktile_1d_threads<BM, BN, BK, TM>())
    sgemm_blocktile_1d_kernel(int m, int n, int k, float alpha, const float* __restrict__ a, int lda,
                              const float* __restrict__ b, int ldb, float beta, float* __restrict__ c, int ldc,
                              bool m_on_x) {
  constexpr int kThreads = blocktile_1d_threads<BM, BN, BK, TM>();
  static_assert(BM % TM == 0, "each thread owns TM rows of one column: TM must divide BM");
  static_assert(kThreads <= 1024, "one thread per TM x 1 strip of the tile: at most 1024 threads");
  static_assert(BN % 32 == 0, "a warp must share one strip row so its A-tile reads broadcast");
  static_assert(kThreads % BK == 0 && (BM * BK) % kThreads == 0, "threads must evenly cover the A tile");
  static_assert(kThreads % BN == 0 && (BK * BN) % kThreads == 0, "threads must evenly cover the B tile");
  static_assert((BM * BK + BK * BN) * sizeof(float) <= 48 * 1024, "tiles must fit in 48 KiB of static shared memory");

  __shared__ float As[BM * BK];  // row-major BM x BK
  __shared__ float Bs[BK * BN];  // row-major BK x BN

  const int row0 = block_row0(m_on_x, BM);
  const int col0 = block_col0(m_on_x, BN);
  const int rows = min(BM, m - row0);
  const int cols = min(BN, n - col0);
  const int tid = static_cast<int>(threadIdx.x);

  // Staging: thread tid copies A tile elements (a_row + i * kARowStep, a_col) and B tile elements
  // (b_row + i * kBRowStep, b_col); consecutive threads take consecutive columns (coalesced).
  constexpr int kALoads = BM * BK / kThreads;
  constexpr int kARowStep = kThreads / BK;
  constexpr int kBLoads = BK * BN / kThreads;
  constexpr int kBRowStep = kThreads / BN;
  const int a_row = tid / BK;
  const int a_col = tid % BK;
  const int b_row = tid / BN;
  const int b_col = tid % BN;

  // Compute: thread (strip_row, strip_col) owns C tile rows strip_row * TM .. + TM - 1 of column strip_col.
  const int strip_col = tid % BN;
  const int strip_row = tid / BN;

  a += static_cast<int64_t>(row0) * lda;
  b += col0;
  c += static_cast<int64_t>(row0) * ldc + col0;

  float acc[TM] = {};
  for (int k_left = k; k_left > 0; k_left -= BK) {
#pragma unroll
    for (int i = 0; i < kALoads; ++i) {
      const int r = a_row + i * kARowStep;
      As[r * BK + a_col] = load_or_zero(a, static_cast<int64_t>(r) * lda + a_col, r < rows && a_col < k_left);
    }
#pragma unroll
    for (int i = 0; i < kBLoads; ++i) {
      const int r = b_row + i * kBRowStep;
      Bs[r * BN + b_col] = load_or_zero(b, static_cast<int64_t>(r) * ldb + b_col, r < k_left && b_col < cols);
    }
    __syncthreads();
#pragma unroll
    for (int p = 0; p < BK; ++p) {
      const float b_val = Bs[p * BN + strip_col];  // one shared load, reused TM times from a register
#pragma unroll
      for (int i = 0; i < TM; ++i) acc[i] += As[(strip_row * TM + i) * BK + p] * b_val;
    }
    __syncthreads();
    a += BK;
    b += static_cast<int64_t>(BK) * ldb;
  }

  if (strip_col < cols) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int r = strip_row * TM + i;
      if (r < rows) store_c(c + static_cast<int64_t>(r) * ldc + strip_col, acc[i], alpha, beta);
    }
  }
}

}  // namespace

void launch_sgemm_blocktile_1d(const SgemmArgs& p, cudaStream_t stream) {
  constexpr int kBM = 64, kBN = 64, kBK = 8, kTM = 8;
  constexpr int kThreads = blocktile_1d_threads<kBM, kBN, kBK, kTM>();
  const TileGrid tiles = make_tile_grid(p.m, p.n, kBM, kBN);
  sgemm_blocktile_1d_kernel<kBM, kBN, kBK, kTM><<<tiles.grid, kThreads, 0, stream>>>(
      p.m, p.n, p.k, p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, p.c, p.ldc, tiles.m_on_x);
  PX_CUDA_CHECK_LAUNCH();
}

}  // namespace parallax::detail
