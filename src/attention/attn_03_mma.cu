// Level 3: FlashAttention-2 forward on the tensor cores with Ampere-era instructions (sm_80+).
//
// What changes against level 2: both products of the inner loop, S = Q K^T and O += P V, run as
// mma.sync.m16n8k16 (bf16 / fp16 in, fp32 accumulate) on register fragments, and the tiles reach shared
// memory through cp.async without passing through registers. The structure is FA2's:
//
//   CTA = kBr query rows of one (batch, head); kWarps warps, each owns 16 query rows outright, so the
//   softmax statistics of a row never leave the 4 lanes (one "quad") that hold it: no shared-memory
//   reductions, no __syncthreads inside the math.
//
//   prologue: cp.async Q tile [kBr x D], K_0, V_0 (one group)
//   for each key tile j (kBc keys):
//     cp.async K_{j+1}, V_{j+1} into the other buffer            (overlaps the math below)
//     wait for tile j; at j == 0 each warp ldmatrix-es its 16 Q rows into A fragments it keeps for the
//       whole loop (D/16 fragments of 4 registers: Q is read from shared memory exactly once)
//     S[16 x kBc] = Q K_j^T: ldmatrix (non-transposed: K is [key][d], i.e. already "column-major" for the
//       B operand of a row.col mma), D/16 x kBc/8 mma
//     mask (only the tiles that need it), online softmax in fp32 registers with ex2.approx.ftz: the softmax scale is
//       folded into log2(e) so p = 2^(s * scale*log2e - m) is one FFMA + one MUFU.EX2 per score
//     P is rounded to 16 bits and repacked in registers as the A fragment of the next mma: the C layout of
//       m16n8 (rows g, g+8; columns 2q, 2q+1) is exactly the A layout of m16k16 for two adjacent n-tiles,
//       so P never touches shared memory
//     O[16 x D] += P V_j: V is [key][d], row-major in the reduction index, so ldmatrix.trans builds its
//       B fragments
//   epilogue: O / l, staged through the warp's own (now dead) Q rows in shared memory for 16-byte coalesced
//     stores; LSE = m * ln2 + ln(l) (natural log, in the units of the unscaled scores times scale).
//
// Shared memory layout. A tile row is D 16-bit elements = D/8 chunks of 16 bytes. ldmatrix reads 8 rows at
// the same column chunk in one phase; with a plain row-major layout and a 128- or 256-byte row pitch, all 8
// addresses fall into the same 4 banks (8-way conflict). The chunk index is therefore XOR-swizzled with the
// row: physical chunk = chunk ^ (row % 8). The 8 rows of an ldmatrix phase then hit 8 different chunks =
// all 32 banks, and a cp.async (one chunk per thread, consecutive threads along a row) stays conflict-free
// too. No padding, so the tiles stay dense.
//
// Edges. Any Sq, Sk >= 1: rows / keys beyond the tensor are zero-filled by cp.async's src-size 0, keys
// >= Sk are masked to -inf in the last tile, rows >= Sq are computed but never stored. Causal is aligned
// bottom-right: key j is visible to query i iff j <= i + Sk - Sq. Tiles entirely above the diagonal are
// never loaded (the loop stops at the CTA's last visible key), and only tiles crossing the diagonal or Sk
// pay for the mask. A row that sees no key (Sq > Sk, causal) keeps m = -inf and l = 0; the exponentials
// are guarded so that (-inf) - (-inf) never produces a NaN, and the epilogue writes 0 and LSE -inf.
//
// Requirements (checked by the dispatcher, attention_vector_aligned, and again by the launcher below):
// q/k/v/out base addresses 16-byte aligned and every stride a multiple of 8 elements, so that each 8-element
// chunk of a row is one aligned 16-byte cp.async / store. D is 64 or 128.
//
// Scheduling. The grid is (B*H, ceil(Sq/kBr)) and the query block index runs backwards: with causal masking
// the last query blocks see the most keys, and launching them first lets the short blocks fill the tail.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "attention/launchers.hpp"
#include "parallax/core.hpp"
#include "attention/mma_tile.cuh"
#include "ptx/sm80.cuh"

namespace parallax::detail {
namespace {

using std::uint32_t;

// Compile-time shape of one kernel instance.
template <int kHeadDim_, int kBr_, int kBc_>
struct MmaAttentionTile {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBr = kBr_;  // query rows per CTA
  static constexpr int kBc = kBc_;  // keys per inner-loop tile
  static constexpr int kRowsPerWarp = 16;  // one m16 mma row block per warp
  static constexpr int kWarps = kBr / kRowsPerWarp;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kChunksPerRow = kHeadDim / 8;  // 16-byte chunks of 8 elements
  static constexpr int kDSteps = kHeadDim / 16;       // k-steps of S = Q K^T, n-pairs of O
  static constexpr int kKeyTiles8 = kBc / 8;          // n8 tiles of S
  static constexpr int kKeySteps16 = kBc / 16;        // k-steps of O += P V
  static constexpr int kDTiles8 = kHeadDim / 8;       // n8 tiles of O
  // Elements of each shared tile; Q [kBr][D], then 2 x K [kBc][D], then 2 x V [kBc][D].
  static constexpr int kQElems = kBr * kHeadDim;
  static constexpr int kKVElems = kBc * kHeadDim;
  static constexpr int kSmemBytes = (kQElems + 4 * kKVElems) * 2;

  static_assert(kHeadDim % 64 == 0, "the swizzle needs >= 8 chunks (128 bytes) per row: D must be a multiple of 64");
  static_assert(kBr % kRowsPerWarp == 0 && kWarps >= 1 && kWarps <= 8, "kBr must be 16 x (1..8) warps");
  static_assert(kBc % 16 == 0, "kBc must be a multiple of 16 (k-step of P V; pairs of n8 tiles in Q K^T)");
  static_assert(kBc % 8 == 0 && kBr % 8 == 0, "the swizzle period is 8 rows");
  static_assert((kBr * kChunksPerRow) % kThreads == 0, "Q tile chunks must divide evenly among threads");
  static_assert((kBc * kChunksPerRow) % kThreads == 0, "K/V tile chunks must divide evenly among threads");
};

// swizzled, load_tile_async, quad_max, quad_sum: src/attention/mma_tile.cuh (shared with the backward).
using mma::load_tile_async;
using mma::quad_max;
using mma::quad_sum;
using mma::swizzled;

struct MmaAttentionParams {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  float* lse;
  AttentionStrides qs, ks, vs, os;
  int seqlen_q, seqlen_k, heads, heads_per_kv;
  float scale_log2;  // softmax scale * log2(e)
};

template <typename T, typename Tile, bool kCausal>
__global__ void __launch_bounds__(Tile::kThreads, 1) attention_mma_kernel(const MmaAttentionParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int D = Tile::kHeadDim;
  constexpr int kBr = Tile::kBr;
  constexpr int kBc = Tile::kBc;
  constexpr float kNegInf = -INFINITY;
  constexpr float kLn2 = 0.69314718055994530942f;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* const sQ = reinterpret_cast<T*>(smem_raw);
  T* const sK = sQ + Tile::kQElems;        // 2 buffers of kBc x D
  T* const sV = sK + 2 * Tile::kKVElems;   // 2 buffers of kBc x D

  const int bh = static_cast<int>(blockIdx.x);
  const int b = bh / p.heads;
  const int h = bh % p.heads;
  const int h_kv = h / p.heads_per_kv;
  const int m_block = static_cast<int>(gridDim.y) - 1 - static_cast<int>(blockIdx.y);  // longest first
  const int m0 = m_block * kBr;

  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4;  // accumulator row within the 8-row half
  const int q4 = lane % 4; // accumulator column pair

  const T* const q_bh = static_cast<const T*>(p.q) + b * p.qs.batch + h * p.qs.head;
  const T* const k_bh = static_cast<const T*>(p.k) + b * p.ks.batch + h_kv * p.ks.head;
  const T* const v_bh = static_cast<const T*>(p.v) + b * p.vs.batch + h_kv * p.vs.head;
  T* const o_bh = static_cast<T*>(p.out) + b * p.os.batch + h * p.os.head;

  // Keys visible to this CTA: [0, n_end). Causal bottom-right: row i sees j <= i + Sk - Sq, so the CTA's
  // last row m0 + kBr - 1 sees up to m0 + kBr - 1 + Sk - Sq.
  const int causal_shift = p.seqlen_k - p.seqlen_q;
  int n_end = p.seqlen_k;
  if constexpr (kCausal) n_end = max(0, min(p.seqlen_k, m0 + kBr + causal_shift));
  const int n_tiles = (n_end + kBc - 1) / kBc;

  // Per thread: rows r0 = m0 + 16*warp + g and r0 + 8.
  const int row_lo = m0 + warp * Tile::kRowsPerWarp + g;
  const int row_hi = row_lo + 8;

  float o_acc[Tile::kDTiles8][4];
#pragma unroll
  for (int t = 0; t < Tile::kDTiles8; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) o_acc[t][e] = 0.0f;
  // Running max (in scaled log2 units) and this thread's partial row sums (reduced over the quad at the end).
  float m_run[2] = {kNegInf, kNegInf};
  float l_part[2] = {0.0f, 0.0f};

  uint32_t q_frag[Tile::kDSteps][4];

  if (n_tiles > 0) {
    load_tile_async<T, D, kBr, Tile::kThreads>(sQ, q_bh, p.qs.seq, m0, p.seqlen_q);
    load_tile_async<T, D, kBc, Tile::kThreads>(sK, k_bh, p.ks.seq, 0, p.seqlen_k);
    load_tile_async<T, D, kBc, Tile::kThreads>(sV, v_bh, p.vs.seq, 0, p.seqlen_k);
    ptx::cp_async_commit();
  }

  for (int j = 0; j < n_tiles; ++j) {
    const int buf = j & 1;
    // Prefetch tile j+1 into the other buffer; it was last read in iteration j-1, which ended in a barrier.
    if (j + 1 < n_tiles) {
      const int nb = buf ^ 1;
      load_tile_async<T, D, kBc, Tile::kThreads>(sK + nb * Tile::kKVElems, k_bh, p.ks.seq, (j + 1) * kBc,
                                                 p.seqlen_k);
      load_tile_async<T, D, kBc, Tile::kThreads>(sV + nb * Tile::kKVElems, v_bh, p.vs.seq, (j + 1) * kBc,
                                                 p.seqlen_k);
      ptx::cp_async_commit();
      ptx::cp_async_wait<1>();  // everything but the prefetch just issued has landed
    } else {
      ptx::cp_async_wait<0>();
    }
    __syncthreads();  // other threads' chunks of tile j are visible

    if (j == 0) {
      // The warp's 16 Q rows as A fragments, kept for the whole loop. ldmatrix x4 matrices: rows 0-7 / 8-15
      // x cols 0-7 / 8-15 in the order a0..a3 expects; lane l addresses row l % 16, column 8 * (l / 16).
      const int qrow = warp * Tile::kRowsPerWarp + (lane % 16);
#pragma unroll
      for (int kk = 0; kk < Tile::kDSteps; ++kk)
        ptx::ldmatrix_x4(q_frag[kk], sQ + swizzled<D>(qrow, kk * 16 + (lane / 16) * 8));
    }

    const T* const sKb = sK + buf * Tile::kKVElems;
    const T* const sVb = sV + buf * Tile::kKVElems;
    const int n0 = j * kBc;

    // ---- S = Q K^T ---------------------------------------------------------------------------------------
    float s[Tile::kKeyTiles8][4];
#pragma unroll
    for (int t = 0; t < Tile::kKeyTiles8; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[t][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < Tile::kDSteps; ++kk) {
#pragma unroll
      for (int tp = 0; tp < Tile::kKeyTiles8; tp += 2) {
        // Matrices: keys 8tp..+7 x d 16kk..+7 | same keys x d +8..+15 | keys +8..+15 x d lo | ... x d hi,
        // i.e. b0, b1 of n-tile tp then b0, b1 of n-tile tp+1.
        const int key = tp * 8 + (lane % 8) + (lane / 16) * 8;
        const int d = kk * 16 + ((lane / 8) % 2) * 8;
        uint32_t kb[4];
        ptx::ldmatrix_x4(kb, sKb + swizzled<D>(key, d));
        const uint32_t b_lo[2] = {kb[0], kb[1]};
        const uint32_t b_hi[2] = {kb[2], kb[3]};
        ptx::mma_m16n8k16<T>(s[tp], q_frag[kk], b_lo);
        ptx::mma_m16n8k16<T>(s[tp + 1], q_frag[kk], b_hi);
      }
    }

    // ---- mask: keys >= Sk (last tile), keys above the causal diagonal (diagonal tiles) ------------------
    bool need_mask = n0 + kBc > p.seqlen_k;
    if constexpr (kCausal) need_mask = need_mask || (n0 + kBc - 1 > m0 + causal_shift);
    if (need_mask) {
#pragma unroll
      for (int t = 0; t < Tile::kKeyTiles8; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = n0 + t * 8 + 2 * q4 + (e & 1);
          const int row = (e < 2) ? row_lo : row_hi;
          bool masked = key >= p.seqlen_k;
          if constexpr (kCausal) masked = masked || (key > row + causal_shift);
          if (masked) s[t][e] = kNegInf;
        }
      }
    }

    // ---- online softmax ----------------------------------------------------------------------------------
    // Row r of this thread: elements e = 0,1 (r = 0, row_lo) and e = 2,3 (r = 1, row_hi) of every n-tile.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = kNegInf;
#pragma unroll
      for (int t = 0; t < Tile::kKeyTiles8; ++t)
        tile_max = fmaxf(tile_max, fmaxf(s[t][2 * r], s[t][2 * r + 1]));
      tile_max = quad_max(tile_max) * p.scale_log2;  // -inf stays -inf (validate() requires scale > 0)
      const float m_new = fmaxf(m_run[r], tile_max);
      // A row with no visible key so far has m_new = -inf: subtract 0 instead so every exp2 is exp2(-inf) = 0
      // and no (-inf) - (-inf) = NaN appears; its correction factor is irrelevant (o and l are still 0).
      const float m_use = (m_new == kNegInf) ? 0.0f : m_new;
      const float alpha = ptx::ex2_approx_ftz(m_run[r] - m_use);  // exp2(-inf) = 0 on the first visible tile
      m_run[r] = m_new;
      l_part[r] *= alpha;
#pragma unroll
      for (int t = 0; t < Tile::kDTiles8; ++t) {
        o_acc[t][2 * r] *= alpha;
        o_acc[t][2 * r + 1] *= alpha;
      }
#pragma unroll
      for (int t = 0; t < Tile::kKeyTiles8; ++t) {
        const float p0 = ptx::ex2_approx_ftz(fmaf(s[t][2 * r], p.scale_log2, -m_use));
        const float p1 = ptx::ex2_approx_ftz(fmaf(s[t][2 * r + 1], p.scale_log2, -m_use));
        s[t][2 * r] = p0;
        s[t][2 * r + 1] = p1;
        l_part[r] += p0 + p1;
      }
    }

    // ---- O += P V ----------------------------------------------------------------------------------------
#pragma unroll
    for (int kk = 0; kk < Tile::kKeySteps16; ++kk) {
      // A fragment of P for keys 16kk..16kk+15: the accumulators of n-tiles 2kk and 2kk+1.
      const uint32_t p_frag[4] = {ptx::pack2<T>(s[2 * kk][0], s[2 * kk][1]),
                                  ptx::pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                                  ptx::pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                  ptx::pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int tp = 0; tp < Tile::kDTiles8; tp += 2) {
        // .trans matrices: keys 16kk..+7 x d 8tp..+7 | keys +8..+15 x same d | keys lo x d +8.. | keys hi x
        // d +8..: b0, b1 of d-tile tp, then b0, b1 of d-tile tp+1.
        const int key = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
        const int d = tp * 8 + (lane / 16) * 8;
        uint32_t vb[4];
        ptx::ldmatrix_x4_trans(vb, sVb + swizzled<D>(key, d));
        const uint32_t b_lo[2] = {vb[0], vb[1]};
        const uint32_t b_hi[2] = {vb[2], vb[3]};
        ptx::mma_m16n8k16<T>(o_acc[tp], p_frag, b_lo);
        ptx::mma_m16n8k16<T>(o_acc[tp + 1], p_frag, b_hi);
      }
    }
    __syncthreads();  // buffer `buf` is refilled by the prefetch of iteration j+1
  }

  // ---- epilogue ------------------------------------------------------------------------------------------
  float inv_l[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float l = quad_sum(l_part[r]);
    inv_l[r] = l > 0.0f ? 1.0f / l : 0.0f;  // no visible key: output 0
    if (p.lse != nullptr && q4 == 0) {
      const int row = r == 0 ? row_lo : row_hi;
      if (row < p.seqlen_q) {
        const float lse = l > 0.0f ? m_run[r] * kLn2 + logf(l) : kNegInf;
        p.lse[(static_cast<std::int64_t>(b) * p.heads + h) * p.seqlen_q + row] = lse;
      }
    }
  }
  // Stage the warp's 16 x D output in its own Q rows (read into registers at j == 0 by this warp only;
  // __syncwarp orders this warp's ldmatrix reads before the overwrite when n_tiles > 0).
  __syncwarp();
  const int srow_lo = warp * Tile::kRowsPerWarp + g;
#pragma unroll
  for (int t = 0; t < Tile::kDTiles8; ++t) {
    const int col = t * 8 + 2 * q4;
    *reinterpret_cast<uint32_t*>(sQ + swizzled<D>(srow_lo, col)) =
        ptx::pack2<T>(o_acc[t][0] * inv_l[0], o_acc[t][1] * inv_l[0]);
    *reinterpret_cast<uint32_t*>(sQ + swizzled<D>(srow_lo + 8, col)) =
        ptx::pack2<T>(o_acc[t][2] * inv_l[1], o_acc[t][3] * inv_l[1]);
  }
  __syncwarp();
  // 16 rows x kChunksPerRow 16-byte chunks, lanes consecutive along a row.
#pragma unroll
  for (int idx = lane; idx < Tile::kRowsPerWarp * Tile::kChunksPerRow; idx += 32) {
    const int r = idx / Tile::kChunksPerRow;
    const int col = (idx % Tile::kChunksPerRow) * 8;
    const int row = m0 + warp * Tile::kRowsPerWarp + r;
    if (row < p.seqlen_q) {
      const uint4 chunk = *reinterpret_cast<const uint4*>(sQ + swizzled<D>(warp * Tile::kRowsPerWarp + r, col));
      *reinterpret_cast<uint4*>(o_bh + static_cast<std::int64_t>(row) * p.os.seq + col) = chunk;
    }
  }
#endif
}

template <typename T, typename Tile, bool kCausal>
void launch_instance(const MmaAttentionParams& params, int batch_heads, int seqlen_q, cudaStream_t stream) {
  auto* kernel = &attention_mma_kernel<T, Tile, kCausal>;
  // More than 48 KiB of dynamic shared memory needs an explicit opt-in per kernel (cheap; done every call so
  // there is no per-device cache to keep coherent).
  PX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tile::kSmemBytes));
  const dim3 grid(static_cast<unsigned>(batch_heads), static_cast<unsigned>((seqlen_q + Tile::kBr - 1) / Tile::kBr));
  kernel<<<grid, Tile::kThreads, Tile::kSmemBytes, stream>>>(params);
  PX_CUDA_CHECK_LAUNCH();
}

// Tile choices: 8 warps x 16 rows = 128 query rows per CTA, 64 keys per tile. For D = 128 that is 96 KiB of
// shared memory (Q 32 KiB + double-buffered K and V 64 KiB) and per thread 32 Q registers, 32 S and 64 O
// accumulators; for D = 64 half of each, so the key tile doubles to 128 to give the loop more work per
// barrier.
using Tile128 = MmaAttentionTile<128, 128, 64>;
using Tile64 = MmaAttentionTile<64, 128, 128>;

template <typename T>
void launch_typed(const AttentionArgs& a, const MmaAttentionParams& params, cudaStream_t stream) {
  const int bh = a.batch * a.heads;
  if (a.head_dim == 128) {
    if (a.causal) launch_instance<T, Tile128, true>(params, bh, a.seqlen_q, stream);
    else launch_instance<T, Tile128, false>(params, bh, a.seqlen_q, stream);
  } else {
    if (a.causal) launch_instance<T, Tile64, true>(params, bh, a.seqlen_q, stream);
    else launch_instance<T, Tile64, false>(params, bh, a.seqlen_q, stream);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }
bool strides_multiple_of_8(const AttentionStrides& s) { return s.batch % 8 == 0 && s.seq % 8 == 0 && s.head % 8 == 0; }

}  // namespace

void launch_attention_mma(const AttentionArgs& a, cudaStream_t stream) {
  // The dispatcher has validated the arguments; these are this kernel's own preconditions, repeated here so
  // a direct call cannot reach the device with an unaligned cp.async.
  PX_REQUIRE(a.head_dim == 64 || a.head_dim == 128, "head_dim",
             "kernel 'mma' is compiled for 64 and 128 (got " + std::to_string(a.head_dim) + ")");
  PX_REQUIRE(a.dtype == DType::kBF16 || a.dtype == DType::kF16, "dtype", "kernel 'mma' needs bf16 or f16");
  PX_REQUIRE(aligned16(a.q) && aligned16(a.k) && aligned16(a.v) && aligned16(a.out), "q/k/v/out",
             "kernel 'mma' needs 16-byte aligned base addresses");
  PX_REQUIRE(strides_multiple_of_8(a.q_strides) && strides_multiple_of_8(a.k_strides) &&
                 strides_multiple_of_8(a.v_strides) && strides_multiple_of_8(a.out_strides),
             "strides", "kernel 'mma' needs every batch/seq/head stride to be a multiple of 8 elements");
  PX_REQUIRE(a.heads_kv >= 1 && a.heads % a.heads_kv == 0, "heads_kv", "must divide heads");
  const long long ctas_y = (static_cast<long long>(a.seqlen_q) + 127) / 128;
  PX_REQUIRE(ctas_y <= 65535, "seqlen_q", "kernel 'mma' supports at most 65535 * 128 query rows");

  int device = 0, major = 0;
  PX_CUDA_CHECK(cudaGetDevice(&device));
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 8)
    throw Error("attention kernel 'mma' needs an sm_80+ GPU (mma.sync bf16, cp.async); this device is sm_" +
                std::to_string(major) + "x");

  MmaAttentionParams params{};
  params.q = a.q;
  params.k = a.k;
  params.v = a.v;
  params.out = a.out;
  params.lse = a.lse;
  params.qs = a.q_strides;
  params.ks = a.k_strides;
  params.vs = a.v_strides;
  params.os = a.out_strides;
  params.seqlen_q = a.seqlen_q;
  params.seqlen_k = a.seqlen_k;
  params.heads = a.heads;
  params.heads_per_kv = a.heads / a.heads_kv;
  params.scale_log2 = a.scale() * 1.4426950408889634f;

  if (a.dtype == DType::kBF16) launch_typed<__nv_bfloat16>(a, params, stream);
  else launch_typed<__half>(a, params, stream);
}

}  // namespace parallax::detail
