// Level 7: warptiling. The block tile is split among warps, and each warp's tile among its 32 lanes.
//
// Level 6 assigns each thread a TM x TN patch of the block tile directly. Level 7 adds a middle layer that
// matches the hardware: a block of (bm/wm) x (bn/wn) warps, each owning a wm x wn warp tile, which it covers
// wm_iter x wn_iter times with a 32-lane sub-tile where every lane computes tm x tn results. A thread thus
// owns (wm_iter*tm) x (wn_iter*tn) results spread over the warp tile (for the default 128x128 block, 64x32
// warp tile, 2x2 sub-tiles of 4x4: 8x8 results in four 4x4 pieces 32 rows / 16 columns apart).
//
// Why it helps:
//   * Shared-memory reads become warp-shaped. The fragments a warp reads per k step are wm + wn floats (as
//     LDS.128: A is stored transposed, As[k][m], so 4 consecutive m are one float4), and lanes that share a
//     row or a column of their sub-tile read the same address: a broadcast. With 4x4 per lane and a
//     sub-tile of 8 x 4 lanes, an A fragment read of the whole warp touches only 8 distinct float4s (128
//     contiguous bytes, no bank conflicts), a B read only 4.
//   * The thread's 8x8 results are 64 independent FMA chains per k step fed by 16 registers (4 LDS.128):
//     a 4:1 FFMA-to-load ratio, and plenty of instruction-level parallelism for the warp scheduler.
//   * Tile sizes are template parameters (SgemmTileConfig), so one kernel source serves large tiles for
//     large problems and small tiles when large ones would leave SMs idle; see sgemm_tiles.hpp and tune.hpp.
//
// What it does not do yet (level 8): the global loads of the next tile and the barrier waits are not
// overlapped with computation, the transposed A store has 2- to 4-way bank conflicts, and the epilogue stores
// scalars.
//
// Correctness for any shape: blocks entirely inside C with 16-byte-aligned operands (vector_ok, decided on
// the host) use unguarded float4 loads; edge blocks, the last k-tile when bk does not divide k, and
// misaligned operands use guarded scalar loads that zero-fill outside A and B (a zero adds nothing to a dot
// product), and stores outside C are skipped. The choice is uniform per block and k-tile.
#include <array>
#include <cstdint>
#include <utility>

#include "common.cuh"
#include "gemm/sgemm_tiles.hpp"
#include "launchers.hpp"
#include "parallax/core.hpp"

namespace parallax::detail {
namespace {

// The tile configuration arrives as its nine fields rather than as one SgemmTileConfig template argument:
// nvcc 13's host stub generator mis-spells class-type template arguments of namespaced types in kernel
// templates. The kernel rebuilds the struct first thing.
template <int BM_, int BN_, int BK_, int WM_, int WN_, int WN_ITER_, int TM_, int TN_, int MIN_BLOCKS_>
__global__ void __launch_bounds__(SgemmTileConfig{BM_, BN_, BK_, WM_, WN_, WN_ITER_, TM_, TN_, MIN_BLOCKS_}.threads(),
                                  MIN_BLOCKS_)
    sgemm_warptile_kernel(int m, int n, int k, float alpha, const float* __restrict__ a, int lda,
                          const float* __restrict__ b, int ldb, float beta, float* __restrict__ c, int ldc,
                          bool vector_ok) {
  constexpr SgemmTileConfig C{BM_, BN_, BK_, WM_, WN_, WN_ITER_, TM_, TN_, MIN_BLOCKS_};
  static_assert(sgemm_tile_config_error(C).empty(), "invalid SGEMM tile configuration (see sgemm_tiles.hpp)");
  constexpr int BM = C.bm, BN = C.bn, BK = C.bk;
  constexpr int WM = C.wm, WN = C.wn, TM = C.tm, TN = C.tn;
  constexpr int WM_ITER = C.wm_iter(), WN_ITER = C.wn_iter;
  constexpr int THREADS = C.threads();
  constexpr int SUB_M = WM / WM_ITER, SUB_N = WN / WN_ITER;  // one 32-lane sub-tile of the warp tile
  constexpr int LANES_N = SUB_N / TN;                        // lanes along n in a sub-tile
  constexpr int THREAD_M = WM_ITER * TM, THREAD_N = WN_ITER * TN;
  constexpr int A_LOADS = sgemm_a_loads_per_thread(C), B_LOADS = sgemm_b_loads_per_thread(C);
  constexpr int A_VEC_PER_ROW = BK / 4;  // float4s per row of the A tile
  constexpr int B_VEC_PER_ROW = BN / 4;

  __shared__ __align__(16) float As[BK][BM];  // transposed: As[kk][row of the block tile]
  __shared__ __align__(16) float Bs[BK][BN];

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, lane = tid % 32;
  const int warp_m = warp / (BN / WN), warp_n = warp % (BN / WN);
  const int lane_m = lane / LANES_N, lane_n = lane % LANES_N;
  // Offsets of this thread's fragments inside the block tile (sub-tile wi / wj adds wi*SUB_M / wj*SUB_N).
  const int frag_m = warp_m * WM + lane_m * TM;
  const int frag_n = warp_n * WN + lane_n * TN;

  // Rows / columns of C left from this block's corner (>= 1: the grid has no empty blocks).
  const int m_left = m - static_cast<int>(blockIdx.y) * BM;
  const int n_left = n - static_cast<int>(blockIdx.x) * BN;
  a += static_cast<int64_t>(blockIdx.y) * BM * lda;
  b += static_cast<int64_t>(blockIdx.x) * BN;
  c += static_cast<int64_t>(blockIdx.y) * BM * ldc + static_cast<int64_t>(blockIdx.x) * BN;
  const bool full_mn = vector_ok && m_left >= BM && n_left >= BN;

  // Consecutive threads load consecutive float4s of a row (coalesced): A (row a_row, k a_col..+3),
  // B (k b_row, col b_col..+3); pass i adds THREADS float4s.
  int a_row[A_LOADS], a_col[A_LOADS], b_row[B_LOADS], b_col[B_LOADS];
#pragma unroll
  for (int i = 0; i < A_LOADS; ++i) {
    const int idx = tid + i * THREADS;
    a_row[i] = idx / A_VEC_PER_ROW;
    a_col[i] = 4 * (idx % A_VEC_PER_ROW);
  }
#pragma unroll
  for (int i = 0; i < B_LOADS; ++i) {
    const int idx = tid + i * THREADS;
    b_row[i] = idx / B_VEC_PER_ROW;
    b_col[i] = 4 * (idx % B_VEC_PER_ROW);
  }

  float acc[THREAD_M][THREAD_N] = {};
  float a_frag[THREAD_M], b_frag[THREAD_N];

  for (int k0 = 0, k_left = k; k_left > 0; k0 += BK, k_left -= BK) {
    // Global -> shared. The A tile is transposed on the way (float4 load, 4 scalar stores).
    const float* a_tile = a + k0;
    const float* b_tile = b + static_cast<int64_t>(k0) * ldb;
    if (full_mn && k_left >= BK) {
#pragma unroll
      for (int i = 0; i < A_LOADS; ++i) {
        const float4 t = *reinterpret_cast<const float4*>(a_tile + static_cast<int64_t>(a_row[i]) * lda + a_col[i]);
        As[a_col[i] + 0][a_row[i]] = t.x;
        As[a_col[i] + 1][a_row[i]] = t.y;
        As[a_col[i] + 2][a_row[i]] = t.z;
        As[a_col[i] + 3][a_row[i]] = t.w;
      }
#pragma unroll
      for (int i = 0; i < B_LOADS; ++i)
        *reinterpret_cast<float4*>(&Bs[b_row[i]][b_col[i]]) =
            *reinterpret_cast<const float4*>(b_tile + static_cast<int64_t>(b_row[i]) * ldb + b_col[i]);
    } else {
#pragma unroll
      for (int i = 0; i < A_LOADS; ++i) {
        const float* src = a_tile + static_cast<int64_t>(a_row[i]) * lda + a_col[i];
        const bool row_ok = a_row[i] < m_left;
#pragma unroll
        for (int j = 0; j < 4; ++j) As[a_col[i] + j][a_row[i]] = row_ok && a_col[i] + j < k_left ? src[j] : 0.f;
      }
#pragma unroll
      for (int i = 0; i < B_LOADS; ++i) {
        const float* src = b_tile + static_cast<int64_t>(b_row[i]) * ldb + b_col[i];
        const bool row_ok = b_row[i] < k_left;
#pragma unroll
        for (int j = 0; j < 4; ++j) Bs[b_row[i]][b_col[i] + j] = row_ok && b_col[i] + j < n_left ? src[j] : 0.f;
      }
    }
    __syncthreads();

    // Outer products over the tile's k steps: fragments (float4 shared reads) then TM*TN FMAs per sub-tile.
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
#pragma unroll
      for (int wi = 0; wi < WM_ITER; ++wi) {
#pragma unroll
        for (int v = 0; v < TM / 4; ++v) {
          const float4 t = *reinterpret_cast<const float4*>(&As[kk][frag_m + wi * SUB_M + v * 4]);
          a_frag[wi * TM + v * 4 + 0] = t.x;
          a_frag[wi * TM + v * 4 + 1] = t.y;
          a_frag[wi * TM + v * 4 + 2] = t.z;
          a_frag[wi * TM + v * 4 + 3] = t.w;
        }
      }
#pragma unroll
      for (int wj = 0; wj < WN_ITER; ++wj) {
#pragma unroll
        for (int v = 0; v < TN / 4; ++v) {
          const float4 t = *reinterpret_cast<const float4*>(&Bs[kk][frag_n + wj * SUB_N + v * 4]);
          b_frag[wj * TN + v * 4 + 0] = t.x;
          b_frag[wj * TN + v * 4 + 1] = t.y;
          b_frag[wj * TN + v * 4 + 2] = t.z;
          b_frag[wj * TN + v * 4 + 3] = t.w;
        }
      }
#pragma unroll
      for (int i = 0; i < THREAD_M; ++i) {
#pragma unroll
        for (int j = 0; j < THREAD_N; ++j) acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);
      }
    }
    __syncthreads();  // everyone is done reading this tile before the next one overwrites it
  }

  // Epilogue: one guarded scalar store per result (level 8 vectorizes it).
#pragma unroll
  for (int wi = 0; wi < WM_ITER; ++wi) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int row = frag_m + wi * SUB_M + i;
      if (row >= m_left) continue;
      float* c_row = c + static_cast<int64_t>(row) * ldc;
#pragma unroll
      for (int wj = 0; wj < WN_ITER; ++wj) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          const int col = frag_n + wj * SUB_N + j;
          if (col < n_left) store_c(c_row + col, acc[wi * TM + i][wj * TN + j], alpha, beta);
        }
      }
    }
  }
}

// ---- Host side ---------------------------------------------------------------------------------------------

template <SgemmTileConfig C>
void launch_warptile_config(const SgemmArgs& p, cudaStream_t stream) {
  sgemm_for_each_grid_chunk(p, C.bm, C.bn, [&](const SgemmArgs& q, int tiles_n, int tiles_m) {
    const dim3 grid(static_cast<unsigned>(tiles_n), static_cast<unsigned>(tiles_m));
    constexpr auto kernel = &sgemm_warptile_kernel<C.bm, C.bn, C.bk, C.wm, C.wn, C.wn_iter, C.tm, C.tn, C.min_blocks>;
    kernel<<<grid, C.threads(), 0, stream>>>(q.m, q.n, q.k, q.alpha, q.a, q.lda, q.b, q.ldb, q.beta, q.c, q.ldc,
                                            sgemm_vector_ok(q));
    PX_CUDA_CHECK_LAUNCH();
  });
}

template <std::size_t... I>
constexpr std::array<SgemmConfigLauncher, sizeof...(I)> make_warptile_table(std::index_sequence<I...>) {
  return {{{kSgemmTileCandidates[I], &launch_warptile_config<kSgemmTileCandidates[I]>}...}};
}
constexpr auto kWarptileTable = make_warptile_table(std::make_index_sequence<kSgemmTileCandidateCount>{});

}  // namespace

std::span<const SgemmConfigLauncher> sgemm_warptile_launchers() { return kWarptileTable; }

void launch_sgemm_warptile(const SgemmArgs& p, cudaStream_t stream) {
  const SgemmTileConfig config = sgemm_runtime_config(SgemmLevel::kWarptile, p);
  for (const auto& entry : kWarptileTable) {
    if (entry.config == config) return entry.launch(p, stream);
  }
  throw Error("sgemm7: tile configuration " + to_string(config) + " is not compiled in");
}

}  // namespace parallax::detail
