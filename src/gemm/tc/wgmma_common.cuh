// The Hopper GEMM kernel shared by levels 11-13: TMA loads into a ring of shared-memory stages guarded by
// mbarriers, wgmma products from shared memory, the fused epilogue straight from the accumulator registers.
// The levels are instantiations of one template (WgmmaConfig), differing in:
//
//   level 11  kWarpSpecialized = false: every warpgroup computes; thread 0 additionally issues the TMA loads
//             (the first kStages up front, then stage s again as soon as all warps released it). 128 x 128
//             block tile, two warpgroups of m64n128.
//   level 12  kWarpSpecialized = true: one extra producer warpgroup whose single elected thread only issues
//             TMA; it gives its registers to the two consumer warpgroups (setmaxnreg 40 / 232), which can
//             then hold a 64 x 256 fp32 accumulator each (128 registers/thread): block tile 128 x 256.
//   level 13  + kPersistent: grid = number of SMs; each block walks tiles blockIdx.x, +gridDim.x, ... in a
//             grouped ("supertile") order, so the producer already streams the next tile while the
//             consumers run the epilogue of the current one, and blocks running at the same time share
//             A row panels and B column panels in L2.
//   experimental (gemm_experimental_kernel_names(), see gemm_14_wgmma_cluster.cu):
//             + kClusterM = 2: thread-block clusters of two CTAs stacked along M (tiles tm = 2u, 2u + 1 of the
//             same column tn). Both need the same 256 x 64 B slice per k-tile: each CTA loads HALF of it and
//             multicasts that half into both CTAs' shared memory (tma_load_2d_multicast), so every B byte
//             leaves L2 once per pair instead of twice (L2 -> SM traffic per k-tile: 48 KB -> 32 KB per CTA).
//             The price is cross-CTA flow control: a stage may only be refilled when the consumers of BOTH
//             CTAs released it (empty[s] counts arrivals from both, made with remote mbarrier arrivals), and
//             neither CTA may exit or start before the other (cluster_sync after the barrier init and at the
//             end). The work unit becomes a pair of tiles; the grouped order walks pairs.
//
// Pipeline (per stage s of kStages; phase bits flip each time the ring wraps):
//   full[s]   1 arrival (the producer's arrive_expect_tx) + the stage's bytes from TMA
//   empty[s]  one arrival per consumer warp (of every CTA of the cluster), after its wgmma reading stage s
//             has completed
//   producer: wait empty[s] (parity ^ 1) -> arrive_expect_tx(full[s], bytes) -> TMA A, TMA B (its share of
//             B multicast to the cluster; the full[s] of each CTA expects the whole stage, whoever sends it)
//   consumer: wait full[s] -> 4 x wgmma k16 -> commit -> wait_group<1> (the previous stage's products are
//             done) -> release the previous stage. One group stays in flight so the tensor cores never
//             idle between k-tiles.
//
// Shared-memory layouts (all 128B-swizzled by TMA, see ptx/wgmma.cuh for the descriptor fields). BK = 64
// 16-bit values = 128 bytes, exactly one swizzle row:
//   K-major operand (A with op_a = N, B with op_b = T): one box {64 (k), rows}; row r at r * 128 bytes;
//       descriptor SBO = 1024; the k16 slice kk starts at + kk * 32 bytes.
//   MN-major operand (A with op_a = T stored k x m, B with op_b = N stored k x n): the swizzle limits the
//       inner box to 128 bytes = 64 values, so rows/64 boxes {64 (m|n), 64 (k)}, box c at c * 8192 bytes;
//       descriptor LBO = 8192 (next 64 M/N values), SBO = 1024 (next 8 k-rows); slice kk at + kk * 2048.
//   Consumer warpgroup w reads A rows [64 w, 64 w + 64): + w * 8192 bytes in both layouts.
//
// Edges: TMA zero-fills everything outside the tensor, so partial M / N / K tiles need no special loads (a
// zero contributes nothing to the dot products); the epilogue guards row < m and col < n.
#pragma once

#include <cuda.h>  // CUtensorMap (a header-only type; the library does not link libcuda)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "gemm/tc/epilogue.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/tma.cuh"
#include "ptx/wgmma.cuh"

namespace parallax::detail {

template <int BM_, int BN_, int kStages_, bool kWarpSpecialized_, bool kPersistent_, int kClusterM_ = 1>
struct WgmmaConfig {
  static constexpr int BM = BM_, BN = BN_, BK = 64;
  static constexpr int kStages = kStages_;
  static constexpr bool kWarpSpecialized = kWarpSpecialized_;
  static constexpr bool kPersistent = kPersistent_;
  // CTAs per cluster along M; each loads BN / kClusterM rows (K-major) or boxes (MN-major) of B and multicasts.
  static constexpr int kClusterM = kClusterM_;
  static constexpr int kBShareN = BN / kClusterM;
  static constexpr int kConsumers = BM / 64;  // one m64 row slab per consumer warpgroup
  static constexpr int kThreads = 128 * (kConsumers + (kWarpSpecialized ? 1 : 0));
  static constexpr int kABytes = BM * BK * 2;
  static constexpr int kBBytes = BN * BK * 2;
  static constexpr int kStageBytes = kABytes + kBBytes;
  // Epilogue staging (see store_tile): each consumer warpgroup owns a 64 x kChunkN fp32 scratch with a
  // padded pitch, through which its accumulator leaves in column chunks.
  static constexpr int kChunkN = 32;
  static constexpr int kScratchPitch = kChunkN + 8;  // floats; +8 spreads the 8 rows of a float2 store
  static constexpr int kScratchBytes = 64 * kScratchPitch * 4;
  // The TMA-store epilogue (store_tile_tma) instead double-buffers 64 x 128-byte sub-tiles per consumer
  // warpgroup: two 8 KiB swizzle-atom-aligned buffers. The two epilogues share one region per warpgroup.
  static constexpr int kStoreBufBytes = 64 * 128;
  static constexpr int kEpilogueBytes = kScratchBytes > 2 * kStoreBufBytes ? kScratchBytes : 2 * kStoreBufBytes;
  // Dynamic shared memory: stages, epilogue regions, then the barriers, plus 1024 bytes to align the base by
  // hand (the 128B swizzle needs 1024-byte aligned atoms; dynamic shared memory only guarantees 16).
  static constexpr int kSmemBytes = kStages * kStageBytes + kConsumers * kEpilogueBytes + 2 * kStages * 8 + 1024;
  // L2 grouping of the tile order: kGroupM tile rows are walked column by column (in units of cluster
  // tile-pairs when clustered, so the rows in flight stay the same).
  static constexpr int kGroupM = 8;
  static constexpr int kGroupUnits = kGroupM / kClusterM;

  static_assert(BM % 64 == 0 && BM >= 64 && BM <= 256, "BM: whole m64 slabs, at most 256 (TMA box limit)");
  static_assert(BN == 128 || BN == 256, "BN: the wgmma wrappers exist for N = 128 and 256");
  static_assert(kStages >= 2, "at least double buffering");
  static_assert(kABytes % 1024 == 0 && kBBytes % 1024 == 0, "every operand tile starts on a swizzle atom");
  static_assert(kEpilogueBytes % 1024 == 0, "the TMA-store buffers start on swizzle atoms");
  static_assert(BN % kChunkN == 0 && kChunkN % 8 == 0, "epilogue chunks: whole 8-column accumulator groups");
  static_assert((64 * kChunkN / 4) % 128 == 0, "epilogue: a chunk splits into 4-column pieces over 128 threads");
  static_assert(kSmemBytes <= 227 * 1024, "more dynamic shared memory than an H100 SM has");
  static_assert(!kPersistent || kWarpSpecialized, "the persistent level builds on the warp-specialized one");
  static_assert(kClusterM == 1 || kClusterM == 2, "clusters of 1 or 2 CTAs along M");
  static_assert(kClusterM == 1 || kWarpSpecialized, "clusters build on the warp-specialized pipeline");
  static_assert(kBShareN % 64 == 0, "each CTA's share of B: whole 64-wide boxes / swizzle atoms");
};

// The mapping tile index -> (tile_m, tile_n) in grouped order: consecutive indices fill a column of kGroupM
// tile rows before moving right, so the blocks in flight reuse a few A row panels and B column panels.
struct TileSchedule {
  int tiles_m, tiles_n;
  __device__ __forceinline__ int count() const { return tiles_m * tiles_n; }
  template <int kGroupM>
  __device__ __forceinline__ void coords(int tile, int& tm, int& tn) const {
    const int per_group = kGroupM * tiles_n;
    const int group = tile / per_group;
    const int first_m = group * kGroupM;
    const int group_rows = min(tiles_m - first_m, kGroupM);
    const int in_group = tile - group * per_group;
    tm = first_m + in_group % group_rows;
    tn = in_group / group_rows;
  }
};

// Ring position: stage index and the parity of its current phase.
struct PipelineState {
  int stage = 0;
  std::uint32_t phase = 0;
  template <int kStages>
  __device__ __forceinline__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1u;
    }
  }
};

template <class Cfg>
struct WgmmaSmem {
  unsigned char* base;  // 1024-aligned
  __device__ __forceinline__ unsigned char* a(int s) const { return base + s * Cfg::kStageBytes; }
  __device__ __forceinline__ unsigned char* b(int s) const { return base + s * Cfg::kStageBytes + Cfg::kABytes; }
  __device__ __forceinline__ unsigned char* epilogue(int wg) const {
    return base + Cfg::kStages * Cfg::kStageBytes + wg * Cfg::kEpilogueBytes;
  }
  __device__ __forceinline__ float* scratch(int wg) const { return reinterpret_cast<float*>(epilogue(wg)); }
  __device__ __forceinline__ std::uint64_t* full(int s) const {
    return reinterpret_cast<std::uint64_t*>(base + Cfg::kStages * Cfg::kStageBytes +
                                            Cfg::kConsumers * Cfg::kEpilogueBytes) + s;
  }
  __device__ __forceinline__ std::uint64_t* empty(int s) const { return full(Cfg::kStages) + s; }
};

// Issues the TMA copies of k-tile `kt` of block tile (m0, n0) into stage s. Called by one thread. Clustered
// (kClusterM = 2), the CTA of rank `rank` loads only B columns [n0 + rank * kBShareN, + kBShareN) and
// multicasts them to both CTAs; A (different rows per CTA) stays a plain copy.
template <class Cfg, bool kAMnMajor, bool kBMnMajor>
__device__ __forceinline__ void load_stage(const WgmmaSmem<Cfg>& sm, int s, const CUtensorMap* map_a,
                                           const CUtensorMap* map_b, int m0, int n0, int kt, int rank = 0) {
  const int k0 = kt * Cfg::BK;
  ptx::mbarrier_arrive_expect_tx(sm.full(s), Cfg::kStageBytes);
  if constexpr (kAMnMajor) {
#pragma unroll
    for (int c = 0; c < Cfg::BM / 64; ++c) ptx::tma_load_2d(sm.a(s) + c * 8192, map_a, sm.full(s), m0 + 64 * c, k0);
  } else {
    ptx::tma_load_2d(sm.a(s), map_a, sm.full(s), k0, m0);
  }
  if constexpr (Cfg::kClusterM == 1) {
    if constexpr (kBMnMajor) {
#pragma unroll
      for (int c = 0; c < Cfg::BN / 64; ++c) ptx::tma_load_2d(sm.b(s) + c * 8192, map_b, sm.full(s), n0 + 64 * c, k0);
    } else {
      ptx::tma_load_2d(sm.b(s), map_b, sm.full(s), k0, n0);
    }
  } else {
    constexpr std::uint16_t kAll = (1u << Cfg::kClusterM) - 1u;
    if constexpr (kBMnMajor) {
      // 64 x 64 boxes at c * 8192 bytes: this CTA's boxes are c = rank * (kBShareN / 64) + i.
#pragma unroll
      for (int i = 0; i < Cfg::kBShareN / 64; ++i) {
        const int c = rank * (Cfg::kBShareN / 64) + i;
        ptx::tma_load_2d_multicast(sm.b(s) + c * 8192, map_b, sm.full(s), n0 + 64 * c, k0, kAll);
      }
    } else {
      // One box of kBShareN rows x 128 bytes; row r of the tile sits at r * 128 bytes.
      ptx::tma_load_2d_multicast(sm.b(s) + rank * Cfg::kBShareN * 128, map_b, sm.full(s), k0,
                                 n0 + rank * Cfg::kBShareN, kAll);
    }
  }
}

// A consumer warp's release of stage s: one arrival on empty[s] of every CTA that writes into this CTA's
// stage s (this one, and with clusters the peer that multicasts its share of B here).
template <class Cfg>
__device__ __forceinline__ void release_stage(const WgmmaSmem<Cfg>& sm, int s) {
  if constexpr (Cfg::kClusterM == 1) {
    ptx::mbarrier_arrive(sm.empty(s));
  } else {
#pragma unroll
    for (int cta = 0; cta < Cfg::kClusterM; ++cta) ptx::mbarrier_arrive_cluster(sm.empty(s), cta);
  }
}

// The wgmma of one (N, input type) pair.
template <int N, typename In, bool kTA, bool kTB>
__device__ __forceinline__ void wgmma_k16(float (&d)[N / 2], std::uint64_t da, std::uint64_t db, std::uint32_t scale_d) {
  if constexpr (N == 256 && std::is_same_v<In, __nv_bfloat16>) ptx::wgmma_m64n256k16_bf16<kTA, kTB>(d, da, db, scale_d);
  else if constexpr (N == 256) ptx::wgmma_m64n256k16_f16<kTA, kTB>(d, da, db, scale_d);
  else if constexpr (std::is_same_v<In, __nv_bfloat16>) ptx::wgmma_m64n128k16_bf16<kTA, kTB>(d, da, db, scale_d);
  else ptx::wgmma_m64n128k16_f16<kTA, kTB>(d, da, db, scale_d);
}

// The four k16 products of stage s for consumer warpgroup `wg`; scale_d = 0 on the first k-tile of a tile.
template <class Cfg, typename In, bool kAMnMajor, bool kBMnMajor>
__device__ __forceinline__ void mma_stage(const WgmmaSmem<Cfg>& sm, int s, int wg, float (&acc)[Cfg::BN / 2],
                                          bool first_ktile) {
  const std::uint32_t a_base = ptx::smem_addr(sm.a(s)) + wg * 8192;
  const std::uint32_t b_base = ptx::smem_addr(sm.b(s));
#pragma unroll
  for (int kk = 0; kk < Cfg::BK / 16; ++kk) {
    const std::uint64_t da = kAMnMajor ? ptx::make_smem_desc_sw128(a_base + kk * 2048, 8192, 1024)
                                       : ptx::make_smem_desc_sw128(a_base + kk * 32, 16, 1024);
    const std::uint64_t db = kBMnMajor ? ptx::make_smem_desc_sw128(b_base + kk * 2048, 8192, 1024)
                                       : ptx::make_smem_desc_sw128(b_base + kk * 32, 16, 1024);
    wgmma_k16<Cfg::BN, In, kAMnMajor, kBMnMajor>(acc, da, db, (first_ktile && kk == 0) ? 0u : 1u);
  }
}

// Up to four consecutive outputs of one row, columns col..col+count-1 (count <= 4). `vec`: all four inside
// and the address aligned for one 4-element access. Same math as epilogue_store, element by element.
template <typename Out>
__device__ __forceinline__ void store_four(Out* c, const float4& acc, int col, int count, bool vec,
                                           const EpilogueParams& ep) {
  float v[4] = {acc.x, acc.y, acc.z, acc.w};
  if (!vec) {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (e < count) epilogue_store(c + e, v[e], col + e, ep);
    return;
  }
  using Pack = std::conditional_t<sizeof(Out) == 4, float4, uint2>;  // 4 outputs: 16 or 8 bytes
  Out out[4];
  if (ep.beta != 0.f) *reinterpret_cast<Pack*>(out) = *reinterpret_cast<const Pack*>(c);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    float x = ep.alpha * v[e];
    if (ep.beta != 0.f) x += ep.beta * to_float<Out>(out[e]);
    if (ep.bias != nullptr) x += ep.bias[col + e];
    out[e] = from_float<Out>(activate(x, ep.act));
  }
  *reinterpret_cast<Pack*>(c) = *reinterpret_cast<const Pack*>(out);
}

// The global side of one staged chunk of one warp: 16 rows x kChunk columns from the warp's scratch, in
// 4-column pieces (kChunk / 4 lanes per row, 32 / (kChunk / 4) rows a pass). Not inlined: one copy of the
// epilogue math (activations included) serves every chunk and every tile.
template <int kChunk, int kPitch, typename Out>
__device__ __noinline__ void store_chunk(const float* scratch, int lane, int row0, int col0, int m, int n,
                                         Out* __restrict__ c, std::int64_t ldc, bool vec_ok, EpilogueParams ep) {
  constexpr int kPerRow = kChunk / 4, kRowsPerPass = 32 / kPerRow;
  const int piece_col = 4 * (lane % kPerRow);
  const int col = col0 + piece_col;
  if (col >= n) return;
  const int count = min(4, n - col);
#pragma unroll 1
  for (int r = lane / kPerRow; r < 16 && row0 + r < m; r += kRowsPerPass) {
    const float4 v = *reinterpret_cast<const float4*>(scratch + r * kPitch + piece_col);
    store_four(c + static_cast<std::int64_t>(row0 + r) * ldc + col, v, col, count, vec_ok && count == 4, ep);
  }
}

// Writes consumer warpgroup `wg`'s 64 x BN accumulator of block tile (m0, n0); `t` = thread in warpgroup.
//
// Why through shared memory: the accumulator layout gives each thread 2 adjacent columns in 8-row-apart
// rows, so a direct store is 4-byte scattered writes, and the fused epilogue (beta, bias, GELU/SiLU, three
// output types) unrolled over all BN/2 accumulator registers is tens of thousands of instructions. Executed
// once per tile, that code streams through the instruction cache from L2 (measured with ncu on an H100: warps
// stalled on instruction fetch, 305 TFLOP/s for the 128x256 tile). Instead, per 32-column chunk: each warp
// moves its own 16 accumulator rows to a private padded fp32 scratch (a short unrolled sequence of 8-byte
// shared stores), then a loop of coalesced 4-column pieces applies the epilogue with 8/16-byte global
// accesses. The scratch is per warp, so a __syncwarp orders it (a warpgroup barrier per chunk was the top
// stall reason in ncu).
template <class Cfg, typename Out>
__device__ __forceinline__ void store_tile(const float (&acc)[Cfg::BN / 2], float* scratch, int wg, int t, int m0,
                                           int n0, int m, int n, Out* __restrict__ c, std::int64_t ldc, bool vec_ok,
                                           const EpilogueParams& ep) {
  constexpr int kPitch = Cfg::kScratchPitch, kChunk = Cfg::kChunkN;
  const int warp = t / 32, lane = t % 32;
  float* mine = scratch + warp * 16 * kPitch;
  const int frag_row = lane / 4, frag_col = 2 * (lane % 4);
  const int row0 = m0 + wg * 64 + warp * 16;
  if (row0 >= m) return;  // uniform across the warp
#pragma unroll
  for (int chunk = 0; chunk < Cfg::BN / kChunk; ++chunk) {
    const int col0 = n0 + chunk * kChunk;
    if (col0 >= n) break;  // uniform across the warp
    __syncwarp();          // the previous chunk's reads of the scratch are done
#pragma unroll
    for (int jj = 0; jj < kChunk / 8; ++jj) {
      const int j = chunk * (kChunk / 8) + jj;  // 8-column accumulator group
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = 4 * j + 2 * half;
        *reinterpret_cast<float2*>(mine + (frag_row + 8 * half) * kPitch + 8 * jj + frag_col) =
            make_float2(acc[i], acc[i + 1]);
      }
    }
    __syncwarp();
    store_chunk<kChunk, kPitch>(mine, lane, row0, col0, m, n, c, ldc, vec_ok, ep);
  }
}

// The asynchronous epilogue, used when the epilogue is alpha only and C suits TMA (the host decides:
// `tma_store`). Why: with the direct path above, both consumer warpgroups spend the end of every tile pushing
// 64 KiB through st.global while the tensor cores idle, and in the persistent kernel every SM does so at about
// the same time, so the stores queue on DRAM. Here the accumulator only goes as far as shared memory (the
// output type, 128B-swizzled like the operand tiles, so the 4-byte writes of the accumulator layout hit 32
// distinct banks per warp), and one thread hands each 64-row x 128-byte sub-tile to a TMA bulk store; the
// warpgroup goes straight on to the next tile's wgmma while the copies drain. Two buffers alternate, so a
// sub-tile waits only for the store issued two sub-tiles earlier to have READ its buffer. Rows / columns
// outside C are skipped by TMA itself, so partial tiles need no masking. Bias, beta and the activations stay
// on the direct path: fully unrolled over the 128 accumulator registers they would double this code (the
// I-cache lesson in docs/notes/tensor-core-gemm.md), and the plain form is what the large GEMMs use.
template <class Cfg, typename Out>
__device__ __forceinline__ void store_tile_tma(const float (&acc)[Cfg::BN / 2], unsigned char* buffers, int wg, int t,
                                               int m0, int n0, const CUtensorMap* map_c, float alpha) {
  constexpr int kSubCols = 128 / static_cast<int>(sizeof(Out));  // one swizzle row: 64 16-bit or 32 fp32 values
  constexpr int kGroups = kSubCols / 8;                           // 8-column accumulator groups per sub-tile
  static_assert(Cfg::BN % (2 * kSubCols) == 0, "an even number of sub-tiles, so buffer 0 is free at each tile");
  const int warp = t / 32, lane = t % 32;
  const int pair = 2 * (lane % 4);  // the accumulator layout: 2 adjacent columns per 8-column group
#pragma unroll
  for (int sub = 0; sub < Cfg::BN / kSubCols; ++sub) {
    unsigned char* buf = buffers + (sub % 2) * Cfg::kStoreBufBytes;
    if (t == 0) ptx::bulk_wait_group_read<1>();  // the store from this buffer (two sub-tiles ago) has read it
    ptx::named_barrier_sync(1 + wg, 128);
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      const int j = sub * kGroups + g;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = warp * 16 + lane / 4 + 8 * half;  // within this warpgroup's 64 rows
        const int byte = (8 * g + pair) * static_cast<int>(sizeof(Out));
        unsigned char* dst = buf + row * 128 + (((byte / 16) ^ (row % 8)) * 16) + byte % 16;
        const float v0 = alpha * acc[4 * j + 2 * half], v1 = alpha * acc[4 * j + 2 * half + 1];
        if constexpr (sizeof(Out) == 4) {
          *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);
        } else {
          Out two[2] = {from_float<Out>(v0), from_float<Out>(v1)};
          *reinterpret_cast<std::uint32_t*>(dst) = *reinterpret_cast<const std::uint32_t*>(two);
        }
      }
    }
    ptx::fence_proxy_async_shared();  // this thread's st.shared -> visible to the TMA unit (async proxy)
    ptx::named_barrier_sync(1 + wg, 128);
    if (t == 0) {
      ptx::tma_store_2d(map_c, buf, n0 + sub * kSubCols, m0 + wg * 64);
      ptx::bulk_commit_group();
    }
  }
}

template <class Cfg, typename In, typename Out, bool kAMnMajor, bool kBMnMajor>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    gemm_wgmma_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                      const __grid_constant__ CUtensorMap map_c, bool tma_store, int m, int n, int k,
                      Out* __restrict__ c, std::int64_t ldc, bool vec_ok, EpilogueParams ep) {
#if PX_SM90_PTX
  extern __shared__ unsigned char smem_raw[];
  const std::uintptr_t raw = reinterpret_cast<std::uintptr_t>(smem_raw);
  const WgmmaSmem<Cfg> sm{smem_raw + ((1024 - raw % 1024) % 1024)};

  const int tid = static_cast<int>(threadIdx.x);
  // Work units: single tiles, or with clusters pairs of vertically adjacent tiles (unit row u covers tile
  // rows kClusterM u ... kClusterM u + kClusterM - 1; a trailing half-empty pair still runs both CTAs, the
  // out-of-range one loading zeros and storing nothing, because its peer needs its share of B).
  const int tiles_m = (m + Cfg::BM - 1) / Cfg::BM;
  const TileSchedule sched{(tiles_m + Cfg::kClusterM - 1) / Cfg::kClusterM, (n + Cfg::BN - 1) / Cfg::BN};
  const int k_tiles = (k + Cfg::BK - 1) / Cfg::BK;
  constexpr int kConsumerWarps = 4 * Cfg::kConsumers;
  const int rank = Cfg::kClusterM > 1 ? static_cast<int>(ptx::cluster_ctarank()) : 0;

  if (tid == 0) {
    ptx::tma_prefetch_descriptor(&map_a);
    ptx::tma_prefetch_descriptor(&map_b);
    if (tma_store) ptx::tma_prefetch_descriptor(&map_c);
    for (int s = 0; s < Cfg::kStages; ++s) {
      ptx::mbarrier_init(sm.full(s), 1);
      ptx::mbarrier_init(sm.empty(s), kConsumerWarps * Cfg::kClusterM);
    }
    ptx::fence_proxy_async_shared();
    if constexpr (Cfg::kClusterM > 1) ptx::fence_mbarrier_init_cluster();
  }
  // With clusters, the peer's multicast and remote arrivals may only start once OUR barriers exist.
  if constexpr (Cfg::kClusterM > 1) ptx::cluster_sync();
  else __syncthreads();

  // The cluster's CTAs are consecutive blockIdx.x (1-D grid, cluster dims (kClusterM, 1, 1)).
  const int first_tile = static_cast<int>(blockIdx.x) / Cfg::kClusterM;
  const int tile_step = Cfg::kPersistent ? static_cast<int>(gridDim.x) / Cfg::kClusterM : sched.count();
  const int wg = tid / 128;

  if constexpr (Cfg::kWarpSpecialized) {
    if (wg == Cfg::kConsumers) {
      // ---- producer warpgroup: one thread streams the stages of every tile of this block ----
      ptx::setmaxnreg_dec<40>();
      if (tid == Cfg::kConsumers * 128) {
        PipelineState ps;
        for (int tile = first_tile; tile < sched.count(); tile += tile_step) {
          int tm, tn;
          sched.coords<Cfg::kGroupUnits>(tile, tm, tn);
          tm = tm * Cfg::kClusterM + rank;
          for (int kt = 0; kt < k_tiles; ++kt) {
            ptx::mbarrier_wait(sm.empty(ps.stage), ps.phase ^ 1u);
            load_stage<Cfg, kAMnMajor, kBMnMajor>(sm, ps.stage, &map_a, &map_b, tm * Cfg::BM, tn * Cfg::BN, kt,
                                                  rank);
            ps.advance<Cfg::kStages>();
          }
        }
      }
      if constexpr (Cfg::kClusterM > 1) {
        __syncwarp();
        ptx::cluster_sync();  // see the end of the consumer path
      }
      return;
    }
    ptx::setmaxnreg_inc<232>();
  } else {
    // ---- level 11: thread 0 fills the first stages; the consumer loop below refills them ----
    if (tid == 0) {
      int tm, tn;
      sched.coords<Cfg::kGroupUnits>(first_tile, tm, tn);
      for (int kt = 0; kt < min(k_tiles, Cfg::kStages); ++kt)
        load_stage<Cfg, kAMnMajor, kBMnMajor>(sm, kt, &map_a, &map_b, tm * Cfg::BM, tn * Cfg::BN, kt);
    }
    __syncwarp();
  }

  // ---- consumer warpgroups ----
  const int t = tid % 128;
  const bool release_lane = (tid % 32) == 0;
  PipelineState ps;
  float acc[Cfg::BN / 2];
  for (int tile = first_tile; tile < sched.count(); tile += tile_step) {
    int tm, tn;
    sched.coords<Cfg::kGroupUnits>(tile, tm, tn);
    tm = tm * Cfg::kClusterM + rank;
    int prev_stage = -1;
    for (int kt = 0; kt < k_tiles; ++kt) {
      ptx::mbarrier_wait(sm.full(ps.stage), ps.phase);
#pragma unroll
      for (int i = 0; i < Cfg::BN / 2; ++i) ptx::register_fence(acc[i]);
      ptx::wgmma_fence();
      mma_stage<Cfg, In, kAMnMajor, kBMnMajor>(sm, ps.stage, wg, acc, kt == 0);
      ptx::wgmma_commit_group();
#pragma unroll
      for (int i = 0; i < Cfg::BN / 2; ++i) ptx::register_fence(acc[i]);
      ptx::wgmma_wait_group<1>();  // the previous k-tile's products (and their smem reads) are done
      if (prev_stage >= 0) {
        if (release_lane) release_stage<Cfg>(sm, prev_stage);
        if constexpr (!Cfg::kWarpSpecialized) {
          // Level 11: thread 0 refills the released stage with k-tile kt - 1 + kStages once every warp is done.
          const int next = kt - 1 + Cfg::kStages;
          if (tid == 0 && next < k_tiles) {
            ptx::mbarrier_wait(sm.empty(prev_stage), (static_cast<std::uint32_t>((kt - 1) / Cfg::kStages)) & 1u);
            load_stage<Cfg, kAMnMajor, kBMnMajor>(sm, prev_stage, &map_a, &map_b, tm * Cfg::BM, tn * Cfg::BN, next);
          }
          __syncwarp();  // warp 0 reconverges before the next warpgroup-aligned wgmma
        }
      }
      prev_stage = ps.stage;
      ps.advance<Cfg::kStages>();
    }
    ptx::wgmma_wait_group<0>();
#pragma unroll
    for (int i = 0; i < Cfg::BN / 2; ++i) ptx::register_fence(acc[i]);
    if (release_lane) release_stage<Cfg>(sm, prev_stage);
    if (tma_store)
      store_tile_tma<Cfg, Out>(acc, sm.epilogue(wg), wg, t, tm * Cfg::BM, tn * Cfg::BN, &map_c, ep.alpha);
    else
      store_tile<Cfg, Out>(acc, sm.scratch(wg), wg, t, tm * Cfg::BM, tn * Cfg::BN, m, n, c, ldc, vec_ok, ep);
  }
  // The last bulk stores must have read their buffers before the block's shared memory goes away.
  if (tma_store && t == 0) ptx::bulk_wait_group<0>();
  // Clusters: no CTA may exit while its peer can still multicast into its shared memory or arrive on its
  // barriers; after this barrier both have consumed (and so received) every stage and made every arrival.
  if constexpr (Cfg::kClusterM > 1) ptx::cluster_sync();
#else
  (void)tma_store, (void)m, (void)n, (void)k, (void)c, (void)ldc, (void)vec_ok, (void)ep;
  __trap();  // never launched: the host requires sm_90 (require_sm90)
#endif
}

}  // namespace parallax::detail
