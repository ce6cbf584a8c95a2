// Level 5: 2D blocktiling. Each thread computes a TM x TN tile of C as a sum of outer products: per k step
// it loads TM values of the A tile and TN values of the B tile into registers and does TM * TN FMAs.
//
// Why it helps: level 4 still needs TM + 1 shared loads for TM FMAs (about one load per FMA), so shared
// memory bandwidth still caps it. An outer product from registers needs TM + TN loads for TM * TN FMAs:
// with 8 x 8 that is 16 loads for 64 FMAs, 4x less shared traffic per FMA, and the 64 accumulators live in
// registers. The price is register pressure (64 accumulators + 16 operands per thread), which limits
// occupancy; with this much work per thread instruction-level parallelism takes over from occupancy.
#include "common.cuh"
#include "launchers.hpp"
#include "parallax/core.hpp"

namespace parallax::detail {
namespace {

template <int BM, int BN, int BK, int TM, int TN>
constexpr int blocktile_2d_threads() {
  return (BM / TM) * (BN / TN);
}

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__(blocktile_2d_threads<BM, BN, BK, TM, TN>())
    sgemm_blocktile_2d_kernel(int m, int n, int k, float alpha, const float* __restrict__ a, int lda,
                              const float* __restrict__ b, int ldb, float beta, float* __restrict__ c, int ldc,
                              bool m_on_x) {
  constexpr int kThreads = blocktile_2d_threads<BM, BN, BK, TM, TN>();
  static_assert(BM % TM == 0 && BN % TN == 0, "the thread tiles TM x TN must tile the block tile BM x BN");
  static_assert(kThreads <= 1024, "one thread per TM x TN thread tile: at most 1024 threads");
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

  // Staging: thread tid copies A tile elements (a_row + i * kARowStep, a_col), B tile elements
  // (b_row + i * kBRowStep, b_col); consecutive threads take consecutive columns (coalesced).
  constexpr int kALoads = BM * BK / kThreads;
  constexpr int kARowStep = kThreads / BK;
  constexpr int kBLoads = BK * BN / kThreads;
  constexpr int kBRowStep = kThreads / BN;
  const int a_row = tid / BK;
  const int a_col = tid % BK;
  const int b_row = tid / BN;
  const int b_col = tid % BN;

  // Compute: thread (tile_row, tile_col) owns C tile rows tile_row*TM.. and columns tile_col*TN.. .
  const int tile_row = tid / (BN / TN);
  const int tile_col = tid % (BN / TN);

  a += static_cast<int64_t>(row0) * lda;
  b += col0;
  c += static_cast<int64_t>(row0) * ldc + col0;

  float acc[TM][TN] = {};
  float reg_m[TM];
  float reg_n[TN];
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
#pragma unroll
      for (int i = 0; i < TM; ++i) reg_m[i] = As[(tile_row * TM + i) * BK + p];
#pragma unroll
      for (int j = 0; j < TN; ++j) reg_n[j] = Bs[p * BN + tile_col * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += reg_m[i] * reg_n[j];
      }
    }
    __syncthreads();
    a += BK;
    b += static_cast<int64_t>(BK) * ldb;
  }

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = tile_row * TM + i;
    if (r >= rows) break;
    float* c_row = c + static_cast<int64_t>(r) * ldc;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int col = tile_col * TN + j;
      if (col < cols) store_c(c_row + col, acc[i][j], alpha, beta);
    }
  }
}

template <int BM, int BN, int BK, int TM, int TN>
void launch_blocktile_2d(const SgemmArgs& p, cudaStream_t stream) {
  constexpr int kThreads = blocktile_2d_threads<BM, BN, BK, TM, TN>();
  const TileGrid tiles = make_tile_grid(p.m, p.n, BM, BN);
  sgemm_blocktile_2d_kernel<BM, BN, BK, TM, TN><<<tiles.grid, kThreads, 0, stream>>>(
      p.m, p.n, p.k, p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, p.c, p.ldc, tiles.m_on_x);
  PX_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_sgemm_blocktile_2d(const SgemmArgs& p, cudaStream_t stream) {
  // 128x128 tiles with 8x8 per thread for large problems; 64x64 when 128x128 would idle SMs. The small tile
  // keeps 8x4 per thread (128 threads): 32 FMAs per 12 shared loads, where 4x4 gave 16 per 8 and measured
  // 49.7% of cuBLAS at 1000^3 on an H100.
  if (big_tiles_leave_sms_idle(p.m, p.n, 128, 128))
    launch_blocktile_2d<64, 64, 8, 8, 4>(p, stream);
  else
    launch_blocktile_2d<128, 128, 8, 8, 8>(p, stream);
}

}  // namespace parallax::detail
