// Level 8: pipelined warptiling. Level 7's tiling, with the waits taken out of the main loop.
//
// Level 7 does, per k-tile: global loads -> shared stores -> barrier -> compute -> barrier. While a warp
// waits for its global loads (~500+ cycles from DRAM/L2) or for the slowest warp at a barrier, its FMA units
// idle, and only other resident blocks can fill the gap. Here every wait overlaps with useful work:
//
//   1. Register prefetch of the next global tile. At the top of k-tile t the loads of tile t+1 are issued
//      into registers (a_stage/b_stage); they land while the whole of tile t is computed, and are written to
//      shared memory only at its end. LDG latency is hidden by a full tile of FFMAs.
//   2. Double-buffered shared memory (As[2], Bs[2]). Tile t+1 goes to the other buffer than the one tile t
//      is read from, so one __syncthreads per k-tile suffices (level 7 needs two). The barrier after storing
//      tile t+1 publishes it to all warps. And the buffer being overwritten is the one tile t-1 was read
//      from: every read of it came before the barrier at the end of tile t-1, which every thread passed
//      before it could get here, so no warp can still be reading it.
//   3. Double-buffered register fragments. The shared->register fragment loads (LDS.128) for inner step
//      kk+1 are issued before the FMAs of step kk, so their ~30 cycle latency hides behind 64 FFMAs. At the
//      last step of a tile the fragments for step 0 of the next tile come from the other buffer right after
//      the barrier.
//   4. Conflict-free transposed store of A. Storing A transposed (As[k][m], so fragment reads are float4
//      along m) writes one column per thread; lanes holding the same rows of A at different k would all hit
//      one bank because a k-row is bm*4 bytes (a multiple of 128). Each k-row is padded by kSgemmAPad = 4
//      floats, moving consecutive k to banks 4 apart, and the load mapping gives each warp 16 rows x 2
//      float4s of k, so the 32 lanes of a store hit 32 distinct banks.
//   5. Vectorized epilogue: each thread's tm x tn results are written as float4 (STG.128), reading C as
//      float4 only when beta != 0.
//   6. Lanes arranged for shared-memory return bandwidth. An SM's shared memory returns 128 bytes per clock,
//      one 32-bit register for each of 32 lanes, so a warp's LDS.128 takes 4 passes, unless neighbouring
//      lanes load the same address: when lane pairs (n, n^1) or (n, n^2) agree the hardware packs two
//      lanes' data per pass and the load takes 2 (NVIDIA's stated rule for sm_70/75, and the reason CUTLASS's
//      SIMT GEMMs use "interleaved" lane layouts). Level 7 numbers lanes row by row (lane_n = lane % 4), so
//      its A reads pair up but its B reads do not: 12 passes per k step for 64 FFMAs per lane. Here lanes
//      form 2x2 quads (bit 0 of the lane id walks n, bit 1 walks m), so A and B reads both pair up: 8 passes,
//      half the shared-memory bandwidth of the FFMA time instead of three quarters.
//
// Correctness for any shape: blocks entirely inside C with 16-byte-aligned operands (vector_ok, decided on
// the host) take the fast path with unguarded float4 accesses; edge blocks, the last k-tile when bk does not
// divide k, and misaligned operands take the guarded scalar path, which zero-fills out-of-range elements of
// A and B (a zero adds nothing to the dot products) and skips out-of-range stores. The branch is uniform
// per block (per k-tile for the k edge), so interior blocks never pay for it.
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
    sgemm_pipelined_kernel(int m, int n, int k, float alpha, const float* __restrict__ a, int lda,
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
  constexpr int AS_LD = BM + kSgemmAPad;
  constexpr int A_LOADS = sgemm_a_loads_per_thread(C), B_LOADS = sgemm_b_loads_per_thread(C);
  // A tile load mapping: a warp's 32 float4 loads cover 16 rows x A_CHUNK (2) float4s of k. 32 bytes per row
  // is one full DRAM sector, and 2 k-groups x 16 rows is what makes the padded transposed store conflict-free.
  constexpr int A_CHUNK = (BK / 4) % 2 == 0 ? 2 : 1;
  constexpr int B_VEC_PER_ROW = BN / 4;
  static_assert(BK % 2 == 0, "fragment double-buffering alternates buffers per inner step: bk must be even");

  __shared__ __align__(16) float As[2][BK][AS_LD];  // transposed: As[s][kk][row of the block tile]
  __shared__ __align__(16) float Bs[2][BK][BN];

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, lane = tid % 32;
  const int warp_m = warp / (BN / WN), warp_n = warp % (BN / WN);
  // Interleaved lane layout (point 6): bit 0 of the lane id moves along n, bit 1 along m, the remaining bits
  // fill the rest of the LANES_M x LANES_N grid. Lanes 2i and 2i+1 then read the same A fragment and lanes
  // differing in bit 1 the same B fragment, which is what lets LDS.128 return in 2 passes instead of 4.
  const int lane_n = (lane & 1) + 2 * ((lane >> 2) % (LANES_N / 2));
  const int lane_m = ((lane >> 1) & 1) + 2 * ((lane >> 2) / (LANES_N / 2));
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

  // This thread's elements of each global tile: A (row a_row, k a_col..+3), B (k b_row, col b_col..+3).
  int a_row[A_LOADS], a_col[A_LOADS], b_row[B_LOADS], b_col[B_LOADS];
#pragma unroll
  for (int i = 0; i < A_LOADS; ++i) {
    const int idx = tid + i * THREADS;
    a_row[i] = (idx / A_CHUNK) % BM;
    a_col[i] = 4 * (idx % A_CHUNK + A_CHUNK * (idx / (A_CHUNK * BM)));
  }
#pragma unroll
  for (int i = 0; i < B_LOADS; ++i) {
    const int idx = tid + i * THREADS;
    b_row[i] = idx / B_VEC_PER_ROW;
    b_col[i] = 4 * (idx % B_VEC_PER_ROW);
  }

  float4 a_stage[A_LOADS], b_stage[B_LOADS];
  // Global -> registers for the k-tile starting at k0. `fast`: the tile lies inside A and B and rows are
  // 16-byte aligned, so plain float4 loads; otherwise scalar loads, zero outside the matrices.
  auto load_global = [&](int k0, bool fast) {
    const float* a_tile = a + k0;
    const float* b_tile = b + static_cast<int64_t>(k0) * ldb;
    if (fast) {
#pragma unroll
      for (int i = 0; i < A_LOADS; ++i)
        a_stage[i] = *reinterpret_cast<const float4*>(a_tile + static_cast<int64_t>(a_row[i]) * lda + a_col[i]);
#pragma unroll
      for (int i = 0; i < B_LOADS; ++i)
        b_stage[i] = *reinterpret_cast<const float4*>(b_tile + static_cast<int64_t>(b_row[i]) * ldb + b_col[i]);
    } else {
      const int k_left = k - k0;
#pragma unroll
      for (int i = 0; i < A_LOADS; ++i) {
        const float* src = a_tile + static_cast<int64_t>(a_row[i]) * lda + a_col[i];
        const bool row_ok = a_row[i] < m_left;
        const int cols = k_left - a_col[i];  // elements of this float4 inside A along k
        a_stage[i] = make_float4(row_ok && cols > 0 ? src[0] : 0.f, row_ok && cols > 1 ? src[1] : 0.f,
                                 row_ok && cols > 2 ? src[2] : 0.f, row_ok && cols > 3 ? src[3] : 0.f);
      }
#pragma unroll
      for (int i = 0; i < B_LOADS; ++i) {
        const float* src = b_tile + static_cast<int64_t>(b_row[i]) * ldb + b_col[i];
        const bool row_ok = b_row[i] < k_left;
        const int cols = n_left - b_col[i];
        b_stage[i] = make_float4(row_ok && cols > 0 ? src[0] : 0.f, row_ok && cols > 1 ? src[1] : 0.f,
                                 row_ok && cols > 2 ? src[2] : 0.f, row_ok && cols > 3 ? src[3] : 0.f);
      }
    }
  };
  // Registers -> shared buffer s: A transposed (4 scalar stores), B as one float4.
  auto store_shared = [&](int s) {
#pragma unroll
    for (int i = 0; i < A_LOADS; ++i) {
      As[s][a_col[i] + 0][a_row[i]] = a_stage[i].x;
      As[s][a_col[i] + 1][a_row[i]] = a_stage[i].y;
      As[s][a_col[i] + 2][a_row[i]] = a_stage[i].z;
      As[s][a_col[i] + 3][a_row[i]] = a_stage[i].w;
    }
#pragma unroll
    for (int i = 0; i < B_LOADS; ++i) *reinterpret_cast<float4*>(&Bs[s][b_row[i]][b_col[i]]) = b_stage[i];
  };

  float a_frag[2][THREAD_M], b_frag[2][THREAD_N];
  // Shared -> registers for inner step kk of buffer s, into fragment set f: float4 reads (LDS.128).
  auto load_fragments = [&](int f, int s, int kk) {
#pragma unroll
    for (int wi = 0; wi < WM_ITER; ++wi) {
#pragma unroll
      for (int v = 0; v < TM / 4; ++v) {
        const float4 t = *reinterpret_cast<const float4*>(&As[s][kk][frag_m + wi * SUB_M + v * 4]);
        a_frag[f][wi * TM + v * 4 + 0] = t.x;
        a_frag[f][wi * TM + v * 4 + 1] = t.y;
        a_frag[f][wi * TM + v * 4 + 2] = t.z;
        a_frag[f][wi * TM + v * 4 + 3] = t.w;
      }
    }
#pragma unroll
    for (int wj = 0; wj < WN_ITER; ++wj) {
#pragma unroll
      for (int v = 0; v < TN / 4; ++v) {
        const float4 t = *reinterpret_cast<const float4*>(&Bs[s][kk][frag_n + wj * SUB_N + v * 4]);
        b_frag[f][wj * TN + v * 4 + 0] = t.x;
        b_frag[f][wj * TN + v * 4 + 1] = t.y;
        b_frag[f][wj * TN + v * 4 + 2] = t.z;
        b_frag[f][wj * TN + v * 4 + 3] = t.w;
      }
    }
  };

  float acc[THREAD_M][THREAD_N] = {};

  // Prologue: tile 0 into buffer 0, fragments of its step 0.
  const int tiles = (k - 1) / BK + 1;  // k >= 1; no overflow near INT_MAX
  load_global(0, full_mn && k >= BK);
  store_shared(0);
  __syncthreads();
  load_fragments(0, 0, 0);

  int s = 0;  // buffer holding tile t
  for (int t = 0; t < tiles; ++t) {
    const bool has_next = t + 1 < tiles;
    if (has_next) {
      const int k0 = (t + 1) * BK;  // <= k - 1
      load_global(k0, full_mn && k - k0 >= BK);  // in flight during the whole tile below
    }
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      if (kk < BK - 1) {
        load_fragments((kk + 1) % 2, s, kk + 1);
      } else if (has_next) {
        // Last step: publish tile t+1 into the other buffer, then start on its first fragments.
        store_shared(s ^ 1);
        __syncthreads();
        load_fragments(0, s ^ 1, 0);
      }
#pragma unroll
      for (int i = 0; i < THREAD_M; ++i) {
#pragma unroll
        for (int j = 0; j < THREAD_N; ++j) acc[i][j] = fmaf(a_frag[kk % 2][i], b_frag[kk % 2][j], acc[i][j]);
      }
    }
    s ^= 1;
  }

  // Epilogue. Row frag_m + wi*SUB_M + i, columns frag_n + wj*SUB_N + v*4 .. +3 of the block tile.
#pragma unroll
  for (int wi = 0; wi < WM_ITER; ++wi) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int row = frag_m + wi * SUB_M + i;
      float* c_row = c + static_cast<int64_t>(row) * ldc;
#pragma unroll
      for (int wj = 0; wj < WN_ITER; ++wj) {
#pragma unroll
        for (int v = 0; v < TN / 4; ++v) {
          const int col = frag_n + wj * SUB_N + v * 4;
          const float* r = &acc[wi * TM + i][wj * TN + v * 4];
          if (full_mn) {
            float4 out = make_float4(alpha * r[0], alpha * r[1], alpha * r[2], alpha * r[3]);
            if (beta != 0.f) {  // beta == 0 never reads C (it may be uninitialised or NaN)
              const float4 old = *reinterpret_cast<const float4*>(c_row + col);
              out.x = fmaf(beta, old.x, out.x);
              out.y = fmaf(beta, old.y, out.y);
              out.z = fmaf(beta, old.z, out.z);
              out.w = fmaf(beta, old.w, out.w);
            }
            *reinterpret_cast<float4*>(c_row + col) = out;
          } else if (row < m_left) {
#pragma unroll
            for (int j = 0; j < 4; ++j)
              if (col + j < n_left) store_c(c_row + col + j, r[j], alpha, beta);
          }
        }
      }
    }
  }
}

// ---- Host side ---------------------------------------------------------------------------------------------

template <SgemmTileConfig C>
void launch_pipelined_config(const SgemmArgs& p, cudaStream_t stream) {
  sgemm_for_each_grid_chunk(p, C.bm, C.bn, [&](const SgemmArgs& q, int tiles_n, int tiles_m) {
    const dim3 grid(static_cast<unsigned>(tiles_n), static_cast<unsigned>(tiles_m));
    constexpr auto kernel = &sgemm_pipelined_kernel<C.bm, C.bn, C.bk, C.wm, C.wn, C.wn_iter, C.tm, C.tn, C.min_blocks>;
    kernel<<<grid, C.threads(), 0, stream>>>(q.m, q.n, q.k, q.alpha, q.a, q.lda, q.b, q.ldb, q.beta, q.c, q.ldc,
                                            sgemm_vector_ok(q));
    PX_CUDA_CHECK_LAUNCH();
  });
}

template <std::size_t... I>
constexpr std::array<SgemmConfigLauncher, sizeof...(I)> make_pipelined_table(std::index_sequence<I...>) {
  return {{{kSgemmTileCandidates[I], &launch_pipelined_config<kSgemmTileCandidates[I]>}...}};
}
constexpr auto kPipelinedTable = make_pipelined_table(std::make_index_sequence<kSgemmTileCandidateCount>{});

}  // namespace

std::span<const SgemmConfigLauncher> sgemm_pipelined_launchers() { return kPipelinedTable; }

void launch_sgemm_pipelined(const SgemmArgs& p, cudaStream_t stream) {
  const SgemmTileConfig config = sgemm_runtime_config(SgemmLevel::kPipelined, p);
  for (const auto& entry : kPipelinedTable) {
    if (entry.config == config) return entry.launch(p, stream);
  }
  throw Error("sgemm8: tile configuration " + to_string(config) + " is not compiled in");
}

}  // namespace parallax::detail
