// Backward level 3: FlashAttention-2's backward on the tensor cores with Ampere-era instructions (sm_80+):
// mma.sync.m16n8k16 on register fragments, ldmatrix (plain and .trans) from XOR-swizzled shared tiles,
// cp.async double buffering. Same tile conventions as the forward level 3 (src/attention/mma_tile.cuh).
//
// Three launches on the caller's stream:
//   1. preprocess: Delta_i = dO_i . out_i in fp32 (one warp per row), and, unless deterministic, zero the fp32
//      dq accumulator [B, H, Sq, D] (the same pass, so no separate memset).
//   2. dk/dv: grid (B * Hkv, ceil(Sk / 64)). A CTA (4 warps) owns 64 keys of one kv head; warp w owns keys
//      16w..16w+15 outright, so its dK, dV accumulators [16 x D] never need a reduction across warps. The CTA
//      walks every query head of the kv head's GQA group and, for each, every 64-row query block that sees any
//      of its keys (causal: from the block holding row n0 - (Sk - Sq) on), with Q and dO double-buffered by
//      cp.async. Per query block, with the roles of rows and columns swapped against the forward (keys are the
//      rows, so the P^T and dS^T accumulators are directly the A operands of the next products):
//        S^T  [16 x 64] = K_w Q^T           (A: K rows from shared, B: Q rows, plain ldmatrix)
//        dP^T [16 x 64] = V_w dO^T
//        P^T = 2^(S^T * scale*log2e - lse_i*log2e), masked to 0;  dS^T = P^T (dP^T - Delta_i)
//        dV_w += P^T dO                     (A: P^T repacked in registers, B: dO via ldmatrix.trans)
//        dK_w += dS^T Q                     (A: dS^T repacked, B: Q via ldmatrix.trans)
//      and, unless deterministic, dQ: dS^T goes to shared memory as 16-bit values, then warp w computes
//        dQ [16 x D] of query rows 16w.. = dS K (A: dS via ldmatrix.trans of the stored dS^T, B: K via
//        ldmatrix.trans) and adds it to the fp32 accumulator with atomicAdd (RED.ADD.F32): the one place
//        where several CTAs meet, and why the default mode's dq depends on scheduling in its last bits.
//      GQA: dK / dV accumulate over the whole group in registers, so dk / dv need no atomics and no fp32
//      workspace, and they are deterministic in both modes.
//   3. default: convert dq = scale * accumulator to the input type.
//      deterministic: a dQ pass instead, grid (B * H, ceil(Sq / 64)), the forward's structure: a CTA owns 64
//      query rows (warp w: 16) and loops over key tiles recomputing S = Q K^T and dP = dO V^T, then
//      dQ += dS K with dS repacked in registers. Every dq element is summed by one thread in a fixed order:
//      bitwise identical run to run. Cost: S and dP are computed twice (7 GEMM-equivalents instead of 5), but
//      no atomics and no accumulator traffic.
//
// Units. lse is natural log; P = exp(scale s - lse) = 2^(s * scale*log2e - lse*log2e): one FFMA + MUFU.EX2.
// dS is the gradient w.r.t. the scaled scores, so dQ = scale dS K and dK = scale dS^T Q (scale applied once at
// the end). Rows with lse = -inf (no visible key) get +inf in shared memory, so every P of theirs is 2^-inf = 0
// and nothing flows from them; rows >= Sq do the same. Keys >= Sk are zero-filled by cp.async and masked.
//
// Registers (-Xptxas -v): dk/dv kernel 248-253 (D 128; the query block is walked in sub-blocks of 16 columns
// so that S^T / dP^T tiles fit beside the 128 dK / dV accumulators) and 172-186 (D 64, sub-blocks of 32); dq
// kernel 213-246; no spills on sm_90a or sm_80. Shared memory: dk/dv 105 KiB (D 128) / 57 KiB, dq 96 / 48 KiB:
// two CTAs per SM on H100.
//
// Requirements (dispatcher: attention_vector_aligned; repeated by the launcher): all eight tensors 16-byte
// aligned with strides multiples of 8 elements; D 64 or 128.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "attention/attention_common.cuh"
#include "attention/launchers.hpp"
#include "attention/mma_tile.cuh"
#include "parallax/core.hpp"
#include "ptx/sm80.cuh"

namespace parallax::detail {
namespace {

using mma::load_tile_async;
using mma::swizzled;
using std::uint32_t;

constexpr float kLog2e = 1.4426950408889634f;

template <int kHeadDim_>
struct BwdTile {
  static constexpr int D = kHeadDim_;
  static constexpr int kBc = 64;  // keys per CTA (dk/dv kernel) / per tile (dq kernel)
  static constexpr int kBr = 64;  // query rows per step (dk/dv kernel) / per CTA (dq kernel)
  static constexpr int kWarps = 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kDSteps = D / 16;   // k-steps over D
  static constexpr int kDTiles8 = D / 8;   // n8 tiles over D
  static constexpr int kRowTiles8 = 64 / 8;  // n8 tiles over 64 queries / keys
  static constexpr int kRowSteps16 = 64 / 16;
  static constexpr int kTileElems = 64 * D;
  // dk/dv kernel: K, V (single), Q, dO (double), dS^T [kBc][kBr]; then fp32 lse2 / Delta, double-buffered.
  static constexpr int kDkdvElems = 2 * kTileElems + 4 * kTileElems + kBc * kBr;
  static constexpr int kDkdvSmemBytes = kDkdvElems * 2 + 4 * kBr * 4;
  // dq kernel: Q, dO (single), K, V (double).
  static constexpr int kDqSmemBytes = 6 * kTileElems * 2;
  static_assert(D % 64 == 0, "the swizzle needs D to be a multiple of 64");
  static_assert(kBc == kWarps * 16 && kBr == kWarps * 16, "each warp owns 16 rows of the 64-row block");
};

struct MmaBwdParams {
  const void* q;
  const void* k;
  const void* v;
  const void* out;
  const void* dout;
  const float* lse;
  float* delta;
  float* dq_accum;  // [B, H, Sq, D] fp32, default mode only
  void* dq;
  void* dk;
  void* dv;
  AttentionStrides qs, ks, vs, os, dos, dqs, dks, dvs;
  int batch, seqlen_q, seqlen_k, heads, heads_kv, heads_per_kv;
  float scale, scale_log2;
};

// ---- 1. preprocess ---------------------------------------------------------------------------------------
template <typename T>
__global__ void __launch_bounds__(128) attention_bwd_preprocess_kernel(const MmaBwdParams p, int head_dim) {
  const long long rows = static_cast<long long>(p.batch) * p.heads * p.seqlen_q;
  const long long row = static_cast<long long>(blockIdx.x) * 4 + threadIdx.x / 32;  // (b, h, i), i fastest
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (row >= rows) return;
  const int i = static_cast<int>(row % p.seqlen_q);
  const int h = static_cast<int>((row / p.seqlen_q) % p.heads);
  const int b = static_cast<int>(row / (static_cast<long long>(p.seqlen_q) * p.heads));
  const T* o = static_cast<const T*>(p.out) + row_offset(p.os, b, i, h);
  const T* g = static_cast<const T*>(p.dout) + row_offset(p.dos, b, i, h);
  float dot = 0.f;
  for (int d = lane; d < head_dim; d += 32) dot += to_float(o[d]) * to_float(g[d]);
  for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
  if (lane == 0) p.delta[row] = dot;
  if (p.dq_accum != nullptr)
    for (int d = lane; d < head_dim; d += 32) p.dq_accum[row * head_dim + d] = 0.f;
}

// ---- 3a. dq = scale * accumulator --------------------------------------------------------------------------
template <typename T>
__global__ void __launch_bounds__(128) attention_bwd_dq_convert_kernel(const MmaBwdParams p, int head_dim) {
  const long long rows = static_cast<long long>(p.batch) * p.heads * p.seqlen_q;
  const long long row = static_cast<long long>(blockIdx.x) * 4 + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (row >= rows) return;
  const int i = static_cast<int>(row % p.seqlen_q);
  const int h = static_cast<int>((row / p.seqlen_q) % p.heads);
  const int b = static_cast<int>(row / (static_cast<long long>(p.seqlen_q) * p.heads));
  T* dq = static_cast<T*>(p.dq) + row_offset(p.dqs, b, i, h);
  for (int d = lane; d < head_dim; d += 32) dq[d] = from_float<T>(p.dq_accum[row * head_dim + d] * p.scale);
}

// lse of a row in log2 units as the kernels subtract it: +inf for rows that see nothing (lse -inf) or lie
// beyond Sq, so that every probability of theirs is exactly 0.
__device__ __forceinline__ float lse_log2_for(const float* lse_bh, int row, int seqlen_q) {
  if (row >= seqlen_q) return INFINITY;
  const float l = lse_bh[row];
  return l == -INFINITY ? INFINITY : l * kLog2e;
}

// ---- 2. dk / dv (and the atomic dq) ----------------------------------------------------------------------
template <typename T, typename Tile, bool kCausal, bool kAccumulateDq>
__global__ void __launch_bounds__(Tile::kThreads, 2) attention_bwd_dkdv_kernel(const MmaBwdParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int D = Tile::D;
  constexpr int kBc = Tile::kBc;
  constexpr int kBr = Tile::kBr;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* const sK = reinterpret_cast<T*>(smem_raw);
  T* const sV = sK + Tile::kTileElems;
  T* const sQ = sV + Tile::kTileElems;       // 2 buffers
  T* const sdO = sQ + 2 * Tile::kTileElems;  // 2 buffers
  T* const sdS = sdO + 2 * Tile::kTileElems; // [kBc keys][kBr queries], dS^T
  float* const sLse = reinterpret_cast<float*>(sdS + kBc * kBr);  // 2 x kBr, log2 units
  float* const sDelta = sLse + 2 * kBr;                          // 2 x kBr

  const int b = static_cast<int>(blockIdx.x) / p.heads_kv;
  const int hk = static_cast<int>(blockIdx.x) % p.heads_kv;
  const int n0 = static_cast<int>(blockIdx.y) * kBc;  // causal: low key blocks see the most queries, run first
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane_in = static_cast<int>(threadIdx.x) % 32;
  const int g = lane_in / 4;
  const int q4 = lane_in % 4;
  const int shift = p.seqlen_k - p.seqlen_q;  // causal: key j visible to query i iff j <= i + shift

  // Query blocks that see at least one of keys [n0, n0 + kBc): causal needs i >= n0 - shift.
  const int m_blocks = (p.seqlen_q + kBr - 1) / kBr;
  const int m_first = kCausal ? max(0, n0 - shift) / kBr : 0;
  const int n_m = max(0, m_blocks - m_first);
  const int total = p.heads_per_kv * n_m;  // (query head of the group, query block) pairs

  const T* const k_bh = static_cast<const T*>(p.k) + b * p.ks.batch + hk * p.ks.head;
  const T* const v_bh = static_cast<const T*>(p.v) + b * p.vs.batch + hk * p.vs.head;

  // Issues the cp.asyncs of step `it` (Q, dO) into buffer `buf` and writes its lse / Delta with plain stores.
  const auto load_step = [&](int it, int buf) {
    const int h = hk * p.heads_per_kv + it / n_m;
    const int m0 = (m_first + it % n_m) * kBr;
    const T* q_bh = static_cast<const T*>(p.q) + b * p.qs.batch + h * p.qs.head;
    const T* do_bh = static_cast<const T*>(p.dout) + b * p.dos.batch + h * p.dos.head;
    // The strides are laundered so that ptxas cannot hoist the 16 per-thread 64-bit chunk offsets (row *
    // stride + col) out of the main loop: they would hold ~40 registers for its whole length.
    std::int64_t q_seq = p.qs.seq, do_seq = p.dos.seq;
    asm volatile("" : "+l"(q_seq), "+l"(do_seq));
    load_tile_async<T, D, kBr, Tile::kThreads>(sQ + buf * Tile::kTileElems, q_bh, q_seq, m0, p.seqlen_q);
    load_tile_async<T, D, kBr, Tile::kThreads>(sdO + buf * Tile::kTileElems, do_bh, do_seq, m0, p.seqlen_q);
    if (threadIdx.x < kBr) {
      const long long bh = static_cast<long long>(b) * p.heads + h;
      const int row = m0 + static_cast<int>(threadIdx.x);
      sLse[buf * kBr + threadIdx.x] = lse_log2_for(p.lse + bh * p.seqlen_q, row, p.seqlen_q);
      sDelta[buf * kBr + threadIdx.x] = row < p.seqlen_q ? p.delta[bh * p.seqlen_q + row] : 0.f;
    }
  };

  float dk_acc[Tile::kDTiles8][4], dv_acc[Tile::kDTiles8][4];
#pragma unroll
  for (int t = 0; t < Tile::kDTiles8; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk_acc[t][e] = dv_acc[t][e] = 0.f;

  load_tile_async<T, D, kBc, Tile::kThreads>(sK, k_bh, p.ks.seq, n0, p.seqlen_k);
  load_tile_async<T, D, kBc, Tile::kThreads>(sV, v_bh, p.vs.seq, n0, p.seqlen_k);
  if (total > 0) load_step(0, 0);
  ptx::cp_async_commit();

  const int key_lo = n0 + warp * 16 + g;  // this thread's accumulator rows: key_lo, key_lo + 8
  for (int it = 0; it < total; ++it) {
    const int buf = it & 1;
    if (it + 1 < total) {  // buffer buf^1 was last read in step it-1, which ended in a barrier
      load_step(it + 1, buf ^ 1);
      ptx::cp_async_commit();
      ptx::cp_async_wait<1>();
    } else {
      ptx::cp_async_wait<0>();
    }
    __syncthreads();

    const int h = hk * p.heads_per_kv + it / n_m;
    const int m0 = (m_first + it % n_m) * kBr;
    const T* const sQb = sQ + buf * Tile::kTileElems;
    const T* const sdOb = sdO + buf * Tile::kTileElems;
    const float* const lse2 = sLse + buf * kBr;
    const float* const delta = sDelta + buf * kBr;
    // Register pressure: every ldmatrix address below is a function of the lane and compile-time constants,
    // i.e. loop-invariant, and ptxas hoists all ~100 of them out of the loop, which with D = 128 pushes the
    // 128 dK / dV accumulators into local memory. Laundering the lane through an empty asm each step makes the
    // addresses step-local again: a few integer ops per ldmatrix instead of spills.
    int lane = lane_in;
    asm volatile("" : "+r"(lane));

    // Live state. With D = 128 the 128 dK / dV accumulators are always live; a 16 x 64 fp32 tile of S^T and one
    // of dP^T on top of them (64 more) plus fragments does not fit 255 registers. Every product below consumes
    // the query columns 16 at a time, so the 64-query block is processed in sub-blocks of kSub columns:
    // S^T -> P^T -> dV, then dP^T -> dS^T -> dK, 2 x kSub / 2 fp32 per thread at a time. The price is that the
    // K / V A-fragments are re-read from shared memory once per sub-block.
    const int arow = warp * 16 + (lane % 16);  // A operands: the warp's 16 key rows (lane: row l % 16, col 8 (l / 16))
    const int acol = (lane / 16) * 8;
    const int brow = (lane % 8) + (lane / 16) * 8;  // B (plain): query 8t + brow, d 16kk + bcol
    const int bcol = ((lane / 8) % 2) * 8;
    const int trow = (lane % 8) + ((lane / 8) % 2) * 8;  // B (.trans): query 16kk + trow, d 8tp + tcol
    const int tcol = (lane / 16) * 8;
    bool need_mask = n0 + kBc > p.seqlen_k;
    if constexpr (kCausal) need_mask = need_mask || (n0 + kBc - 1 > m0 + shift);
    constexpr int kSub = D == 128 ? 16 : 32;  // query columns per sub-block (D = 128: 32 still spilled a little)
    constexpr int kSubTiles8 = kSub / 8;
    constexpr int kSubSteps16 = kSub / 16;

    // Not unrolled: the register arrays below are indexed by the inner (unrolled) loops only, and a rolled
    // loop keeps ptxas from hoisting the second sub-block's loads into the first one's live range.
#pragma unroll 1
    for (int sub = 0; sub < kBr / kSub; ++sub) {
      const int qs0 = sub * kSub;  // first query column of the sub-block

      // ---- S^T = K_w Q^T [16 keys x kSub queries] -> P^T --------------------------------------------------
      float st[kSubTiles8][4];
#pragma unroll
      for (int t = 0; t < kSubTiles8; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) st[t][e] = 0.f;
#pragma unroll 2  // kk only moves addresses; a partial unroll keeps ptxas from hoisting every fragment
      for (int kk = 0; kk < Tile::kDSteps; ++kk) {
        uint32_t ka[4];
        ptx::ldmatrix_x4(ka, sK + swizzled<D>(arow, kk * 16 + acol));
#pragma unroll
        for (int tp = 0; tp < kSubTiles8; tp += 2) {
          uint32_t qb[4];  // b0, b1 of n-tile tp, then of n-tile tp+1
          ptx::ldmatrix_x4(qb, sQb + swizzled<D>(qs0 + tp * 8 + brow, kk * 16 + bcol));
          const uint32_t q_lo[2] = {qb[0], qb[1]}, q_hi[2] = {qb[2], qb[3]};
          ptx::mma_m16n8k16<T>(st[tp], ka, q_lo);
          ptx::mma_m16n8k16<T>(st[tp + 1], ka, q_hi);
        }
      }
#pragma unroll
      for (int t = 0; t < kSubTiles8; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int ql = qs0 + t * 8 + 2 * q4 + (e & 1);  // query within the block
          float pv = ptx::ex2_approx_ftz(fmaf(st[t][e], p.scale_log2, -lse2[ql]));
          if (need_mask) {
            const int key = key_lo + (e >= 2 ? 8 : 0);
            bool masked = key >= p.seqlen_k;
            if constexpr (kCausal) masked = masked || key > m0 + ql + shift;
            if (masked) pv = 0.f;
          }
          st[t][e] = pv;
        }
      }

      // ---- dV_w += P^T dO ------------------------------------------------------------------------------------
#pragma unroll
      for (int kk = 0; kk < kSubSteps16; ++kk) {
        // A fragment for queries 16kk..+15: the accumulators of n-tiles 2kk and 2kk+1 (C layout = A layout).
        const uint32_t pa[4] = {ptx::pack2<T>(st[2 * kk][0], st[2 * kk][1]),
                                ptx::pack2<T>(st[2 * kk][2], st[2 * kk][3]),
                                ptx::pack2<T>(st[2 * kk + 1][0], st[2 * kk + 1][1]),
                                ptx::pack2<T>(st[2 * kk + 1][2], st[2 * kk + 1][3])};
#pragma unroll
        for (int tp = 0; tp < Tile::kDTiles8; tp += 2) {
          uint32_t gb[4];  // [query][d] read transposed (k = query, n = d), as V in the forward's P V
          ptx::ldmatrix_x4_trans(gb, sdOb + swizzled<D>(qs0 + kk * 16 + trow, tp * 8 + tcol));
          const uint32_t g_lo[2] = {gb[0], gb[1]}, g_hi[2] = {gb[2], gb[3]};
          ptx::mma_m16n8k16<T>(dv_acc[tp], pa, g_lo);
          ptx::mma_m16n8k16<T>(dv_acc[tp + 1], pa, g_hi);
        }
      }

      // ---- dP^T = V_w dO^T -> dS^T = P^T (dP^T - Delta) ----------------------------------------------------
      float dpt[kSubTiles8][4];
#pragma unroll
      for (int t = 0; t < kSubTiles8; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) dpt[t][e] = 0.f;
#pragma unroll 2
      for (int kk = 0; kk < Tile::kDSteps; ++kk) {
        uint32_t va[4];
        ptx::ldmatrix_x4(va, sV + swizzled<D>(arow, kk * 16 + acol));
#pragma unroll
        for (int tp = 0; tp < kSubTiles8; tp += 2) {
          uint32_t gb[4];
          ptx::ldmatrix_x4(gb, sdOb + swizzled<D>(qs0 + tp * 8 + brow, kk * 16 + bcol));
          const uint32_t g_lo[2] = {gb[0], gb[1]}, g_hi[2] = {gb[2], gb[3]};
          ptx::mma_m16n8k16<T>(dpt[tp], va, g_lo);
          ptx::mma_m16n8k16<T>(dpt[tp + 1], va, g_hi);
        }
      }
#pragma unroll
      for (int t = 0; t < kSubTiles8; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) dpt[t][e] = st[t][e] * (dpt[t][e] - delta[qs0 + t * 8 + 2 * q4 + (e & 1)]);

      // ---- dK_w += dS^T Q ------------------------------------------------------------------------------------
#pragma unroll
      for (int kk = 0; kk < kSubSteps16; ++kk) {
        const uint32_t da[4] = {ptx::pack2<T>(dpt[2 * kk][0], dpt[2 * kk][1]),
                                ptx::pack2<T>(dpt[2 * kk][2], dpt[2 * kk][3]),
                                ptx::pack2<T>(dpt[2 * kk + 1][0], dpt[2 * kk + 1][1]),
                                ptx::pack2<T>(dpt[2 * kk + 1][2], dpt[2 * kk + 1][3])};
#pragma unroll
        for (int tp = 0; tp < Tile::kDTiles8; tp += 2) {
          uint32_t qb[4];
          ptx::ldmatrix_x4_trans(qb, sQb + swizzled<D>(qs0 + kk * 16 + trow, tp * 8 + tcol));
          const uint32_t q_lo[2] = {qb[0], qb[1]}, q_hi[2] = {qb[2], qb[3]};
          ptx::mma_m16n8k16<T>(dk_acc[tp], da, q_lo);
          ptx::mma_m16n8k16<T>(dk_acc[tp + 1], da, q_hi);
        }
      }

      if constexpr (kAccumulateDq) {
        // dS^T of this sub-block -> shared (16-bit) for the dQ product below.
#pragma unroll
        for (int t = 0; t < kSubTiles8; ++t) {
          const int krow = warp * 16 + g;
          const int col = qs0 + t * 8 + 2 * q4;
          *reinterpret_cast<uint32_t*>(sdS + swizzled<kBr>(krow, col)) = ptx::pack2<T>(dpt[t][0], dpt[t][1]);
          *reinterpret_cast<uint32_t*>(sdS + swizzled<kBr>(krow + 8, col)) = ptx::pack2<T>(dpt[t][2], dpt[t][3]);
        }
      }
    }

    if constexpr (kAccumulateDq) {
      // ---- dQ [16 queries of warp w x D] = dS K, added atomically to the fp32 accumulator --------------
      __syncthreads();  // every warp's dS^T rows are needed by every warp
      float* const dqa = p.dq_accum + (static_cast<std::int64_t>(b) * p.heads + h) * p.seqlen_q * D;
      const int row_lo = m0 + warp * 16 + g;
#pragma unroll
      for (int half = 0; half < D / 64; ++half) {  // 64 columns at a time: 32 accumulators live, not 64
        float acc[8][4];
#pragma unroll
        for (int t = 0; t < 8; ++t)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[t][e] = 0.f;
#pragma unroll
        for (int kk = 0; kk < kBc / 16; ++kk) {
          // A = dS [query][key] from the stored dS^T [key][query] with .trans: matrix i = lane / 8 is
          // (queries lo/hi = i % 2, keys lo/hi = i / 2), the order a0..a3 expects.
          const int mi = lane / 8;
          uint32_t a[4];
          ptx::ldmatrix_x4_trans(a, sdS + swizzled<kBr>(kk * 16 + (lane % 8) + (mi / 2) * 8, warp * 16 + (mi % 2) * 8));
#pragma unroll
          for (int tp = 0; tp < 8; tp += 2) {
            const int key = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
            const int d = half * 64 + tp * 8 + (lane / 16) * 8;
            uint32_t kb[4];
            ptx::ldmatrix_x4_trans(kb, sK + swizzled<D>(key, d));
            const uint32_t b_lo[2] = {kb[0], kb[1]}, b_hi[2] = {kb[2], kb[3]};
            ptx::mma_m16n8k16<T>(acc[tp], a, b_lo);
            ptx::mma_m16n8k16<T>(acc[tp + 1], a, b_hi);
          }
        }
#pragma unroll
        for (int t = 0; t < 8; ++t) {
          const int col = half * 64 + t * 8 + 2 * q4;
          if (row_lo < p.seqlen_q) {
            atomicAdd(dqa + static_cast<std::int64_t>(row_lo) * D + col, acc[t][0]);
            atomicAdd(dqa + static_cast<std::int64_t>(row_lo) * D + col + 1, acc[t][1]);
          }
          if (row_lo + 8 < p.seqlen_q) {
            atomicAdd(dqa + static_cast<std::int64_t>(row_lo + 8) * D + col, acc[t][2]);
            atomicAdd(dqa + static_cast<std::int64_t>(row_lo + 8) * D + col + 1, acc[t][3]);
          }
        }
      }
    }
    __syncthreads();  // buffers `buf` and sdS are rewritten in the next step
  }

  // ---- epilogue: dK (scaled), dV staged through the warp's own K / V rows for 16-byte stores ---------------
  ptx::cp_async_wait<0>();  // with total == 0 the K / V copies may still be landing
  __syncthreads();
  const int lane = lane_in;
  const int srow = warp * 16 + g;
#pragma unroll
  for (int t = 0; t < Tile::kDTiles8; ++t) {
    const int col = t * 8 + 2 * q4;
    *reinterpret_cast<uint32_t*>(sK + swizzled<D>(srow, col)) =
        ptx::pack2<T>(dk_acc[t][0] * p.scale, dk_acc[t][1] * p.scale);
    *reinterpret_cast<uint32_t*>(sK + swizzled<D>(srow + 8, col)) =
        ptx::pack2<T>(dk_acc[t][2] * p.scale, dk_acc[t][3] * p.scale);
    *reinterpret_cast<uint32_t*>(sV + swizzled<D>(srow, col)) = ptx::pack2<T>(dv_acc[t][0], dv_acc[t][1]);
    *reinterpret_cast<uint32_t*>(sV + swizzled<D>(srow + 8, col)) = ptx::pack2<T>(dv_acc[t][2], dv_acc[t][3]);
  }
  __syncwarp();
  T* const dk_bh = static_cast<T*>(p.dk) + b * p.dks.batch + hk * p.dks.head;
  T* const dv_bh = static_cast<T*>(p.dv) + b * p.dvs.batch + hk * p.dvs.head;
  constexpr int kChunks = D / 8;
#pragma unroll
  for (int idx = lane; idx < 16 * kChunks; idx += 32) {
    const int r = idx / kChunks;
    const int col = (idx % kChunks) * 8;
    const int key = n0 + warp * 16 + r;
    if (key < p.seqlen_k) {
      *reinterpret_cast<uint4*>(dk_bh + static_cast<std::int64_t>(key) * p.dks.seq + col) =
          *reinterpret_cast<const uint4*>(sK + swizzled<D>(warp * 16 + r, col));
      *reinterpret_cast<uint4*>(dv_bh + static_cast<std::int64_t>(key) * p.dvs.seq + col) =
          *reinterpret_cast<const uint4*>(sV + swizzled<D>(warp * 16 + r, col));
    }
  }
#endif
}

// ---- 3b. deterministic dq ------------------------------------------------------------------------------
template <typename T, typename Tile, bool kCausal>
__global__ void __launch_bounds__(Tile::kThreads, 2) attention_bwd_dq_kernel(const MmaBwdParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int D = Tile::D;
  constexpr int kBc = Tile::kBc;
  constexpr int kBr = Tile::kBr;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* const sQ = reinterpret_cast<T*>(smem_raw);
  T* const sdO = sQ + Tile::kTileElems;
  T* const sK = sdO + Tile::kTileElems;      // 2 buffers
  T* const sV = sK + 2 * Tile::kTileElems;   // 2 buffers

  const int bh = static_cast<int>(blockIdx.x);
  const int b = bh / p.heads;
  const int h = bh % p.heads;
  const int hk = h / p.heads_per_kv;
  const int m0 = (static_cast<int>(gridDim.y) - 1 - static_cast<int>(blockIdx.y)) * kBr;  // longest first
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane_in = static_cast<int>(threadIdx.x) % 32;
  const int g = lane_in / 4;
  const int q4 = lane_in % 4;
  const int shift = p.seqlen_k - p.seqlen_q;

  int n_end = p.seqlen_k;
  if constexpr (kCausal) n_end = max(0, min(p.seqlen_k, m0 + kBr + shift));
  const int n_tiles = (n_end + kBc - 1) / kBc;

  const T* const q_bh = static_cast<const T*>(p.q) + b * p.qs.batch + h * p.qs.head;
  const T* const do_bh = static_cast<const T*>(p.dout) + b * p.dos.batch + h * p.dos.head;
  const T* const k_bh = static_cast<const T*>(p.k) + b * p.ks.batch + hk * p.ks.head;
  const T* const v_bh = static_cast<const T*>(p.v) + b * p.vs.batch + hk * p.vs.head;

  const int row_lo = m0 + warp * 16 + g;
  const long long bhq = static_cast<long long>(b) * p.heads + h;
  float lse2[2], delta[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row_lo + 8 * r;
    lse2[r] = lse_log2_for(p.lse + bhq * p.seqlen_q, row, p.seqlen_q);
    delta[r] = row < p.seqlen_q ? p.delta[bhq * p.seqlen_q + row] : 0.f;
  }

  float acc[Tile::kDTiles8][4];
#pragma unroll
  for (int t = 0; t < Tile::kDTiles8; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[t][e] = 0.f;

  if (n_tiles > 0) {
    load_tile_async<T, D, kBr, Tile::kThreads>(sQ, q_bh, p.qs.seq, m0, p.seqlen_q);
    load_tile_async<T, D, kBr, Tile::kThreads>(sdO, do_bh, p.dos.seq, m0, p.seqlen_q);
    load_tile_async<T, D, kBc, Tile::kThreads>(sK, k_bh, p.ks.seq, 0, p.seqlen_k);
    load_tile_async<T, D, kBc, Tile::kThreads>(sV, v_bh, p.vs.seq, 0, p.seqlen_k);
    ptx::cp_async_commit();
  }
  for (int j = 0; j < n_tiles; ++j) {
    const int buf = j & 1;
    if (j + 1 < n_tiles) {
      load_tile_async<T, D, kBc, Tile::kThreads>(sK + (buf ^ 1) * Tile::kTileElems, k_bh, p.ks.seq, (j + 1) * kBc,
                                                 p.seqlen_k);
      load_tile_async<T, D, kBc, Tile::kThreads>(sV + (buf ^ 1) * Tile::kTileElems, v_bh, p.vs.seq, (j + 1) * kBc,
                                                 p.seqlen_k);
      ptx::cp_async_commit();
      ptx::cp_async_wait<1>();
    } else {
      ptx::cp_async_wait<0>();
    }
    __syncthreads();
    const T* const sKb = sK + buf * Tile::kTileElems;
    const T* const sVb = sV + buf * Tile::kTileElems;
    const int n0 = j * kBc;
    int lane = lane_in;  // laundered per step, see the dk/dv kernel
    asm volatile("" : "+r"(lane));

    // S = Q_w K^T, dP = dO_w V^T: [16 rows x 64 keys]; Q / dO fragments re-read from shared each tile.
    float s[Tile::kRowTiles8][4], dp[Tile::kRowTiles8][4];
#pragma unroll
    for (int t = 0; t < Tile::kRowTiles8; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[t][e] = dp[t][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < Tile::kDSteps; ++kk) {
      const int arow = warp * 16 + (lane % 16);
      const int acol = kk * 16 + (lane / 16) * 8;
      uint32_t qa[4], ga[4];
      ptx::ldmatrix_x4(qa, sQ + swizzled<D>(arow, acol));
      ptx::ldmatrix_x4(ga, sdO + swizzled<D>(arow, acol));
#pragma unroll
      for (int tp = 0; tp < Tile::kRowTiles8; tp += 2) {
        const int key = tp * 8 + (lane % 8) + (lane / 16) * 8;
        const int d = kk * 16 + ((lane / 8) % 2) * 8;
        uint32_t kb[4], vb[4];
        ptx::ldmatrix_x4(kb, sKb + swizzled<D>(key, d));
        ptx::ldmatrix_x4(vb, sVb + swizzled<D>(key, d));
        const uint32_t k_lo[2] = {kb[0], kb[1]}, k_hi[2] = {kb[2], kb[3]};
        const uint32_t v_lo[2] = {vb[0], vb[1]}, v_hi[2] = {vb[2], vb[3]};
        ptx::mma_m16n8k16<T>(s[tp], qa, k_lo);
        ptx::mma_m16n8k16<T>(s[tp + 1], qa, k_hi);
        ptx::mma_m16n8k16<T>(dp[tp], ga, v_lo);
        ptx::mma_m16n8k16<T>(dp[tp + 1], ga, v_hi);
      }
    }

    bool need_mask = n0 + kBc > p.seqlen_k;
    if constexpr (kCausal) need_mask = need_mask || (n0 + kBc - 1 > m0 + shift);
#pragma unroll
    for (int t = 0; t < Tile::kRowTiles8; ++t) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1;
        float pv = ptx::ex2_approx_ftz(fmaf(s[t][e], p.scale_log2, -lse2[r]));
        if (need_mask) {
          const int key = n0 + t * 8 + 2 * q4 + (e & 1);
          bool masked = key >= p.seqlen_k;
          if constexpr (kCausal) masked = masked || key > row_lo + 8 * r + shift;
          if (masked) pv = 0.f;
        }
        dp[t][e] = pv * (dp[t][e] - delta[r]);  // dS
      }
    }

    // dQ_w += dS K: A = dS repacked in registers, B = K [key][d] read transposed.
#pragma unroll
    for (int kk = 0; kk < Tile::kRowSteps16; ++kk) {
      const uint32_t a[4] = {ptx::pack2<T>(dp[2 * kk][0], dp[2 * kk][1]), ptx::pack2<T>(dp[2 * kk][2], dp[2 * kk][3]),
                             ptx::pack2<T>(dp[2 * kk + 1][0], dp[2 * kk + 1][1]),
                             ptx::pack2<T>(dp[2 * kk + 1][2], dp[2 * kk + 1][3])};
#pragma unroll
      for (int tp = 0; tp < Tile::kDTiles8; tp += 2) {
        const int key = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
        const int d = tp * 8 + (lane / 16) * 8;
        uint32_t kb[4];
        ptx::ldmatrix_x4_trans(kb, sKb + swizzled<D>(key, d));
        const uint32_t b_lo[2] = {kb[0], kb[1]}, b_hi[2] = {kb[2], kb[3]};
        ptx::mma_m16n8k16<T>(acc[tp], a, b_lo);
        ptx::mma_m16n8k16<T>(acc[tp + 1], a, b_hi);
      }
    }
    __syncthreads();  // buffer `buf` is refilled by the prefetch of step j+1
  }

  T* const dq_bh = static_cast<T*>(p.dq) + b * p.dqs.batch + h * p.dqs.head;
#pragma unroll
  for (int t = 0; t < Tile::kDTiles8; ++t) {
    const int col = t * 8 + 2 * q4;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row_lo + 8 * r;
      if (row < p.seqlen_q)
        *reinterpret_cast<uint32_t*>(dq_bh + static_cast<std::int64_t>(row) * p.dqs.seq + col) =
            ptx::pack2<T>(acc[t][2 * r] * p.scale, acc[t][2 * r + 1] * p.scale);
    }
  }
#endif
}

template <typename T, typename Tile, bool kCausal>
void launch_main(const AttentionBackwardArgs& a, const MmaBwdParams& params, cudaStream_t stream) {
  const unsigned key_blocks = static_cast<unsigned>((a.seqlen_k + Tile::kBc - 1) / Tile::kBc);
  if (a.deterministic) {
    auto* dkdv = &attention_bwd_dkdv_kernel<T, Tile, kCausal, false>;
    PX_CUDA_CHECK(cudaFuncSetAttribute(dkdv, cudaFuncAttributeMaxDynamicSharedMemorySize, Tile::kDkdvSmemBytes));
    dkdv<<<dim3(static_cast<unsigned>(a.batch * a.heads_kv), key_blocks), Tile::kThreads, Tile::kDkdvSmemBytes,
           stream>>>(params);
    PX_CUDA_CHECK_LAUNCH();
    auto* dq = &attention_bwd_dq_kernel<T, Tile, kCausal>;
    PX_CUDA_CHECK(cudaFuncSetAttribute(dq, cudaFuncAttributeMaxDynamicSharedMemorySize, Tile::kDqSmemBytes));
    const unsigned q_blocks = static_cast<unsigned>((a.seqlen_q + Tile::kBr - 1) / Tile::kBr);
    dq<<<dim3(static_cast<unsigned>(a.batch * a.heads), q_blocks), Tile::kThreads, Tile::kDqSmemBytes, stream>>>(
        params);
    PX_CUDA_CHECK_LAUNCH();
  } else {
    auto* dkdv = &attention_bwd_dkdv_kernel<T, Tile, kCausal, true>;
    PX_CUDA_CHECK(cudaFuncSetAttribute(dkdv, cudaFuncAttributeMaxDynamicSharedMemorySize, Tile::kDkdvSmemBytes));
    dkdv<<<dim3(static_cast<unsigned>(a.batch * a.heads_kv), key_blocks), Tile::kThreads, Tile::kDkdvSmemBytes,
           stream>>>(params);
    PX_CUDA_CHECK_LAUNCH();
  }
}

MmaBwdParams make_bwd_params(const AttentionBackwardArgs& a, const AttentionBackwardWorkspace& ws) {
  MmaBwdParams p{};
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  p.out = a.out;
  p.dout = a.dout;
  p.lse = a.lse;
  p.delta = ws.delta;
  p.dq_accum = a.deterministic ? nullptr : ws.dq_accum;
  p.dq = a.dq;
  p.dk = a.dk;
  p.dv = a.dv;
  p.qs = a.q_strides;
  p.ks = a.k_strides;
  p.vs = a.v_strides;
  p.os = a.out_strides;
  p.dos = a.dout_strides;
  p.dqs = a.dq_strides;
  p.dks = a.dk_strides;
  p.dvs = a.dv_strides;
  p.batch = a.batch;
  p.seqlen_q = a.seqlen_q;
  p.seqlen_k = a.seqlen_k;
  p.heads = a.heads;
  p.heads_kv = a.heads_kv;
  p.heads_per_kv = a.heads / a.heads_kv;
  p.scale = a.scale();
  p.scale_log2 = a.scale() * kLog2e;
  return p;
}

template <typename T>
void launch_typed(const AttentionBackwardArgs& a, const MmaBwdParams& params, cudaStream_t stream) {
  const long long rows = static_cast<long long>(a.batch) * a.heads * a.seqlen_q;
  const unsigned row_blocks = static_cast<unsigned>((rows + 3) / 4);
  attention_bwd_preprocess_kernel<T><<<row_blocks, 128, 0, stream>>>(params, a.head_dim);
  PX_CUDA_CHECK_LAUNCH();
  if (a.head_dim == 128) {
    if (a.causal) launch_main<T, BwdTile<128>, true>(a, params, stream);
    else launch_main<T, BwdTile<128>, false>(a, params, stream);
  } else {
    if (a.causal) launch_main<T, BwdTile<64>, true>(a, params, stream);
    else launch_main<T, BwdTile<64>, false>(a, params, stream);
  }
  if (!a.deterministic) {
    attention_bwd_dq_convert_kernel<T><<<row_blocks, 128, 0, stream>>>(params, a.head_dim);
    PX_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

void launch_attention_backward_mma(const AttentionBackwardArgs& a, const AttentionBackwardWorkspace& ws,
                                   cudaStream_t stream) {
  // The dispatcher has validated the arguments; these are this level's own preconditions, repeated so that a
  // direct call cannot reach the device with an unaligned cp.async or a missing workspace.
  PX_REQUIRE(a.head_dim == 64 || a.head_dim == 128, "head_dim",
             "backward kernel 'mma' is compiled for 64 and 128 (got " + std::to_string(a.head_dim) + ")");
  PX_REQUIRE(a.dtype == DType::kBF16 || a.dtype == DType::kF16, "dtype", "backward kernel 'mma' needs bf16 or f16");
  PX_REQUIRE(attention_vector_aligned(a), "q",
             "backward kernel 'mma' needs all eight tensors 16-byte aligned and strides multiples of 8 elements");
  PX_REQUIRE(a.heads_kv >= 1 && a.heads % a.heads_kv == 0, "heads_kv", "must divide heads");
  PX_REQUIRE(ws.delta != nullptr, "workspace", "backward kernel 'mma' needs the Delta buffer");
  PX_REQUIRE(a.deterministic || ws.dq_accum != nullptr, "workspace",
             "backward kernel 'mma' needs the fp32 dq accumulator unless deterministic");
  PX_REQUIRE((static_cast<long long>(a.seqlen_k) + 63) / 64 <= 65535, "seqlen_k",
             "backward kernel 'mma' supports at most 65535 * 64 keys");
  PX_REQUIRE((static_cast<long long>(a.seqlen_q) + 63) / 64 <= 65535, "seqlen_q",
             "backward kernel 'mma' supports at most 65535 * 64 query rows");
  const long long rows = static_cast<long long>(a.batch) * a.heads * a.seqlen_q;
  PX_REQUIRE((rows + 3) / 4 <= 0x7fffffffLL, "batch", "batch * heads * seqlen_q exceeds the grid limit");

  int device = 0, major = 0;
  PX_CUDA_CHECK(cudaGetDevice(&device));
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 8)
    throw Error("attention backward kernel 'mma' needs an sm_80+ GPU (mma.sync, cp.async); this device is sm_" +
                std::to_string(major) + "x");

  const MmaBwdParams p = make_bwd_params(a, ws);
  if (a.dtype == DType::kBF16) launch_typed<__nv_bfloat16>(a, p, stream);
  else launch_typed<__half>(a, p, stream);
}

// Level 3's first and last launches on their own, for level 4 (attn_bwd_04_wgmma.cu), which always uses the
// accumulator (ws.dq_accum), deterministic or not.
void launch_attention_backward_preprocess(const AttentionBackwardArgs& a, const AttentionBackwardWorkspace& ws,
                                          cudaStream_t stream) {
  PX_REQUIRE(ws.delta != nullptr, "workspace", "the backward preprocess needs the Delta buffer");
  MmaBwdParams p = make_bwd_params(a, ws);
  p.dq_accum = ws.dq_accum;
  const long long rows = static_cast<long long>(a.batch) * a.heads * a.seqlen_q;
  PX_REQUIRE((rows + 3) / 4 <= 0x7fffffffLL, "batch", "batch * heads * seqlen_q exceeds the grid limit");
  const unsigned row_blocks = static_cast<unsigned>((rows + 3) / 4);
  if (a.dtype == DType::kBF16)
    attention_bwd_preprocess_kernel<__nv_bfloat16><<<row_blocks, 128, 0, stream>>>(p, a.head_dim);
  else
    attention_bwd_preprocess_kernel<__half><<<row_blocks, 128, 0, stream>>>(p, a.head_dim);
  PX_CUDA_CHECK_LAUNCH();
}

void launch_attention_backward_dq_convert(const AttentionBackwardArgs& a, const AttentionBackwardWorkspace& ws,
                                          cudaStream_t stream) {
  PX_REQUIRE(ws.dq_accum != nullptr, "workspace", "the dq conversion needs the fp32 dq accumulator");
  MmaBwdParams p = make_bwd_params(a, ws);
  p.dq_accum = ws.dq_accum;
  const long long rows = static_cast<long long>(a.batch) * a.heads * a.seqlen_q;
  const unsigned row_blocks = static_cast<unsigned>((rows + 3) / 4);
  if (a.dtype == DType::kBF16)
    attention_bwd_dq_convert_kernel<__nv_bfloat16><<<row_blocks, 128, 0, stream>>>(p, a.head_dim);
  else
    attention_bwd_dq_convert_kernel<__half><<<row_blocks, 128, 0, stream>>>(p, a.head_dim);
  PX_CUDA_CHECK_LAUNCH();
}

}  // namespace parallax::detail
