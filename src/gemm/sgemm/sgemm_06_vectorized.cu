// Level 6: vectorized memory access. Global loads of A and B are 16-byte float4 loads, the A tile is stored
// transposed in shared memory (As[k][m]) so a thread's TM values of A for one k are contiguous, and both
// operand reads from shared memory are float4 as well.
//
// Why it helps: level 5 issues one load instruction per float. A 16-byte access moves four floats with one
// instruction, so the load/store pipe (LSU) and the instruction issue slots, which level 5 spends a large
// share of on staging and operand fetches, handle 4x fewer instructions for the same bytes. Shared reads of
// A in level 5 were strided (TM rows of a row-major tile, BK floats apart); transposing the tile as it is
// staged makes them contiguous, and so vectorizable. float4 is only legal on 16-byte aligned addresses:
// the launcher checks the base pointers and leading dimensions on the host and picks the vector path per
// operand (template flags); edge tiles and misaligned operands fall back to guarded scalar loads.
#include "common.cuh"
#include "launchers.hpp"
#include "parallax/core.hpp"

namespace parallax::detail {
namespace {

template <int BM, int BN, int BK, int TM, int TN>
constexpr int vectorized_threads() {
  return (BM / TM) * (BN / TN);
}

// VEC_A / VEC_B: every row of A / B starts 16-byte aligned (base % 16 == 0 and ld % 4 == 0), so a float4
// at a column that is a multiple of 4 is legal. vec_c is the same fact for C; it is a plain argument because
// the epilogue runs once per thread, not once per k step, and a branch there costs nothing measurable.
template <int BM, int BN, int BK, int TM, int TN, bool VEC_A, bool VEC_B>
__global__ void __launch_bounds__(vectorized_threads<BM, BN, BK, TM, TN>())
    sgemm_vectorized_kernel(int m, int n, int k, float alpha, const float* __restrict__ a, int lda,
                            const float* __restrict__ b, int ldb, float beta, float* __restrict__ c, int ldc,
                            bool m_on_x, bool vec_c) {
  constexpr int kThreads = vectorized_threads<BM, BN, BK, TM, TN>();
  static_assert(BM % TM == 0 && BN % TN == 0, "the thread tiles TM x TN must tile the block tile BM x BN");
  static_assert(kThreads <= 1024, "one thread per TM x TN thread tile: at most 1024 threads");
  static_assert(BK % 4 == 0 && BN % 4 == 0, "A rows (along k) and B rows (along n) are staged as float4");
  static_assert(TM % 4 == 0 && TN % 4 == 0, "a thread reads its TM values of A and TN values of B as float4");
  static_assert(kThreads % (BK / 4) == 0 && (BM * BK / 4) % kThreads == 0,
                "threads must evenly cover the A tile with float4 loads");
  static_assert(kThreads % (BN / 4) == 0 && (BK * BN / 4) % kThreads == 0,
                "threads must evenly cover the B tile with float4 loads");
  static_assert((BM * BK + BK * BN) * sizeof(float) <= 48 * 1024, "tiles must fit in 48 KiB of static shared memory");

  __shared__ alignas(16) float As[BK * BM];  // TRANSPOSED: As[p * BM + r] holds A tile element (r, p)
  __shared__ alignas(16) float Bs[BK * BN];  // row-major BK x BN

  const int row0 = block_row0(m_on_x, BM);
  const int col0 = block_col0(m_on_x, BN);
  const int rows = min(BM, m - row0);
  const int cols = min(BN, n - col0);
  const int tid = static_cast<int>(threadIdx.x);

  // Staging: thread tid copies the float4 of A at tile (a_row + i * kARowStep, a_col .. a_col + 3) and the
  // float4 of B at tile (b_row + i * kBRowStep, b_col .. b_col + 3).
  constexpr int kALoads = BM * BK / 4 / kThreads;
  constexpr int kARowStep = kThreads / (BK / 4);
  constexpr int kBLoads = BK * BN / 4 / kThreads;
  constexpr int kBRowStep = kThreads / (BN / 4);
  const int a_row = tid / (BK / 4);
  const int a_col = tid % (BK / 4) * 4;
  const int b_row = tid / (BN / 4);
  const int b_col = tid % (BN / 4) * 4;

  const int tile_row = tid / (BN / TN);
  const int tile_col = tid % (BN / TN);

  // Offsets stay multiples of 4 floats: row0 * lda (lda % 4 == 0 on the vector path), col0 (BN % 4 == 0),
  // and the per-step advances BK and BK * ldb.
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
      const int64_t offset = static_cast<int64_t>(r) * lda + a_col;
      const bool row_ok = r < rows;
      float4 v;
      if (VEC_A && row_ok && a_col + 4 <= k_left) {
        v = *reinterpret_cast<const float4*>(a + offset);
      } else {
        v.x = load_or_zero(a, offset + 0, row_ok && a_col + 0 < k_left);
        v.y = load_or_zero(a, offset + 1, row_ok && a_col + 1 < k_left);
        v.z = load_or_zero(a, offset + 2, row_ok && a_col + 2 < k_left);
        v.w = load_or_zero(a, offset + 3, row_ok && a_col + 3 < k_left);
      }
      As[(a_col + 0) * BM + r] = v.x;
      As[(a_col + 1) * BM + r] = v.y;
      As[(a_col + 2) * BM + r] = v.z;
      As[(a_col + 3) * BM + r] = v.w;
    }
#pragma unroll
    for (int i = 0; i < kBLoads; ++i) {
      const int r = b_row + i * kBRowStep;
      const int64_t offset = static_cast<int64_t>(r) * ldb + b_col;
      const bool row_ok = r < k_left;
      float4 v;
      if (VEC_B && row_ok && b_col + 4 <= cols) {
        v = *reinterpret_cast<const float4*>(b + offset);
      } else {
        v.x = load_or_zero(b, offset + 0, row_ok && b_col + 0 < cols);
        v.y = load_or_zero(b, offset + 1, row_ok && b_col + 1 < cols);
        v.z = load_or_zero(b, offset + 2, row_ok && b_col + 2 < cols);
        v.w = load_or_zero(b, offset + 3, row_ok && b_col + 3 < cols);
      }
      *reinterpret_cast<float4*>(&Bs[r * BN + b_col]) = v;
    }
    __syncthreads();
#pragma unroll
    for (int p = 0; p < BK; ++p) {
#pragma unroll
      for (int i = 0; i < TM; i += 4) {
        const float4 v = *reinterpret_cast<const float4*>(&As[p * BM + tile_row * TM + i]);
        reg_m[i + 0] = v.x;
        reg_m[i + 1] = v.y;
        reg_m[i + 2] = v.z;
        reg_m[i + 3] = v.w;
      }
#pragma unroll
      for (int j = 0; j < TN; j += 4) {
        const float4 v = *reinterpret_cast<const float4*>(&Bs[p * BN + tile_col * TN + j]);
        reg_n[j + 0] = v.x;
        reg_n[j + 1] = v.y;
        reg_n[j + 2] = v.z;
        reg_n[j + 3] = v.w;
      }
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
    for (int j = 0; j < TN; j += 4) {
      const int col = tile_col * TN + j;
      if (vec_c && col + 4 <= cols) {
        store_c4(c_row + col, make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]), alpha, beta);
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          if (col + q < cols) store_c(c_row + col + q, acc[i][j + q], alpha, beta);
        }
      }
    }
  }
}

template <int BM, int BN, int BK, int TM, int TN>
void launch_vectorized(const SgemmArgs& p, cudaStream_t stream) {
  constexpr int kThreads = vectorized_threads<BM, BN, BK, TM, TN>();
  const bool vec_a = rows_aligned_16(p.a, p.lda);
  const bool vec_b = rows_aligned_16(p.b, p.ldb);
  const bool vec_c = rows_aligned_16(p.c, p.ldc);
  const auto kernel = vec_a ? (vec_b ? sgemm_vectorized_kernel<BM, BN, BK, TM, TN, true, true>
                                     : sgemm_vectorized_kernel<BM, BN, BK, TM, TN, true, false>)
                            : (vec_b ? sgemm_vectorized_kernel<BM, BN, BK, TM, TN, false, true>
                                     : sgemm_vectorized_kernel<BM, BN, BK, TM, TN, false, false>);
  const TileGrid tiles = make_tile_grid(p.m, p.n, BM, BN);
  kernel<<<tiles.grid, kThreads, 0, stream>>>(p.m, p.n, p.k, p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, p.c, p.ldc,
                                              tiles.m_on_x, vec_c);
  PX_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_sgemm_vectorized(const SgemmArgs& p, cudaStream_t stream) {
  // As level 5, with bk 16 for the small tile so its float4 A loads still give every thread one load.
  if (big_tiles_leave_sms_idle(p.m, p.n, 128, 128))
    launch_vectorized<64, 64, 16, 4, 4>(p, stream);
  else
    launch_vectorized<128, 128, 8, 8, 8>(p, stream);
}

}  // namespace parallax::detail
