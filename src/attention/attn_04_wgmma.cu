// Level 4: FlashAttention-3-style forward for Hopper (sm_90a): TMA loads, wgmma products, a warp-specialized
// producer and two consumer warpgroups, softmax overlapped with the tensor cores.
//
// What changes against level 3 (mma.sync, cp.async, every warp loads and computes):
//
//   * Loads are TMA copies issued by ONE thread of a producer warpgroup. A 4D tensor map per operand describes
//     [B, S, H, D] with the caller's strides as dimensions (D, S, H, B); one copy moves a box of 64 d-values
//     (128 bytes: the 128B swizzle width) x 128 rows of one (head, batch) into 128B-swizzled shared memory,
//     zero-filling rows >= S. D = 128 tiles are two such boxes side by side (16 KiB apart).
//   * Products are wgmma: a consumer warpgroup owns 64 query rows and issues
//       S[64 x 128]  = Q[64 x D] K_j^T   m64n128k16, A = Q and B = K both from shared memory, "K-major"
//                                        (d contiguous in both), D/16 k-steps
//       O[64 x D]   += P[64 x 128] V_j   m64nDk16 with A = P FROM REGISTERS: the fp32 accumulator of S holds,
//                                        per thread, exactly the elements the A fragment of the next product
//                                        needs (see ptx/wgmma.cuh), so P is converted to 16 bits in place and
//                                        never touches shared memory. B = V is [key][d], i.e. "MN-major" (the
//                                        N index d is contiguous): the transpose bit, like the GEMM's op_b = N.
//   * Warp specialization: 3 warpgroups (384 threads). The producer keeps 40 registers (setmaxnreg.dec), the
//     consumers take 232 each (setmaxnreg.inc): S (64 fp32), O (64 fp32 for D = 128), P (32 x 32-bit) and the
//     softmax state fit without spilling.
//   * Overlap inside a consumer warpgroup (FA3's "intra-warpgroup pipelining"): iteration j issues S_j = Q K_j^T
//     and then O += P_{j-1} V_{j-1}, waits for S_j only (wgmma.wait_group 1) and runs the softmax of S_j while
//     the P V product is still on the tensor cores. The two consumer warpgroups run independently, so one's
//     softmax also overlaps the other's products (no explicit ping-pong schedule yet).
//
// Pipeline (kStages-deep ring of K and V tiles, separate barriers for K and V because they are consumed at
// different times: K_j by S_j early in iteration j, V_j by P_j V_j in iteration j + 1):
//   q_full        1 arrival (expect_tx) + the Q bytes
//   k_full[s]     1 arrival (expect_tx) + the K tile bytes;   v_full[s] likewise for V
//   k_empty[s]    8 arrivals (every consumer warp) once its S product reading stage s has completed
//   v_empty[s]    8 arrivals once the P V product reading stage s has completed
//   producer: Q; then for each key tile j: wait k_empty -> K_j; wait v_empty -> V_j
//   consumer iteration j >= 1:
//     wait k_full(j); issue S_j;  O *= alpha_{j-1} (the previous softmax's correction; O is not in flight)
//     wait v_full(j-1); issue O += P_{j-1} V_{j-1}
//     wait_group 1 (S_j done) -> release K stage; mask + online softmax of S_j (P_j fp32, alpha_j, l)
//     wait_group 0 (P V done) -> release V stage; convert P_j to 16 bits (the A registers are free again)
//   after the loop: O *= alpha_last; O += P_last V_last; epilogue.
//
// Masking and edges (same rules as levels 1-3): key j is visible to query i iff j < Sk and, when causal,
// j <= i + Sk - Sq (bottom-right). The CTA's loop stops at its last visible key (tiles above the diagonal are
// never loaded); only tiles crossing Sk or the diagonal of this warpgroup's 64 rows pay for the mask. Rows
// and keys past the tensor arrive as zeros from TMA; masked keys become -inf, rows >= Sq are never stored.
// A row that sees no key keeps m = -inf and l = 0 (the exponentials subtract 0 instead of -inf, so no NaN)
// and gets out 0, LSE -inf; a CTA whose rows all see nothing (causal, Sq > Sk) loads nothing at all.
//
// Epilogue: O / l is rounded to the output type and written into this warpgroup's 64 rows of the (now
// unused) Q tile in shared memory, in the same 128B-swizzled layout (conflict-free 4-byte writes), then read
// back as 16-byte chunks and stored row by row (coalesced; rows >= Sq skipped). LSE = m ln 2 + ln l.
//
// Scheduling: grid (ceil(Sq / 128), H, B); the query-block index runs backwards so that, with causal masking,
// the longest blocks of a head start first. Consecutive CTAs share (head, batch): K/V tiles are reused in L2.
//
// Requirements (checked on the host, attention_tma_compatible): q/k/v/out 16-byte aligned, every stride a
// multiple of 8 elements and, for q/k/v dimensions longer than 1, positive (TMA cannot express stride 0 /
// broadcasting); B, H <= 65535 (grid). Compiled only for sm_90a (__CUDA_ARCH_FEAT_SM90_ALL): the sm_80 pass
// builds a kernel that traps, and the host refuses to launch on anything but compute capability 9.0.
#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "attention/attention_tma.hpp"
#include "attention/launchers.hpp"
#include "attention/wgmma_attention.cuh"
#include "parallax/core.hpp"
#include "ptx/mbarrier.cuh"
#include "ptx/sm80.cuh"
#include "ptx/tma.cuh"
#include "ptx/wgmma.cuh"

namespace parallax::detail {
namespace {

using std::uint32_t;
using std::uint64_t;

template <int kHeadDim_, int kStages_>
struct WgmmaAttentionConfig {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = 128;  // query rows per CTA: 2 consumer warpgroups x 64
  static constexpr int kBlockN = 128;  // keys per tile (the N of S = Q K^T)
  static constexpr int kStages = kStages_;
  static constexpr int kConsumers = kBlockM / 64;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kConsumerWarps = 4 * kConsumers;
  static constexpr int kBoxes = kHeadDim / 64;          // 128-byte-wide column boxes per tile row
  static constexpr int kQBoxBytes = kBlockM * 128;
  static constexpr int kKVBoxBytes = kBlockN * 128;
  static constexpr int kQBytes = kBoxes * kQBoxBytes;
  static constexpr int kKVBytes = kBoxes * kKVBoxBytes;
  static constexpr int kBarriers = 1 + 4 * kStages;     // q_full, k_full, v_full, k_empty, v_empty
  // Q, kStages K tiles, kStages V tiles, the barriers, and 1024 bytes to align the base by hand (the 128B
  // swizzle needs 1024-byte aligned atoms; dynamic shared memory only guarantees 16).
  static constexpr int kSmemBytes = kQBytes + 2 * kStages * kKVBytes + kBarriers * 8 + 1024;
  static constexpr int kProducerRegs = 40;
  static constexpr int kConsumerRegs = 232;

  static_assert(kHeadDim == 64 || kHeadDim == 128, "the P V wgmma wrappers exist for N = D = 64 and 128");
  static_assert(kBlockN == 128, "S = Q K^T uses m64n128k16");
  static_assert(kStages >= 2, "at least double buffering");
  static_assert(kSmemBytes <= 227 * 1024, "more dynamic shared memory than an H100 SM has");
  static_assert(kProducerRegs * 128 + kConsumerRegs * 128 * kConsumers <= 65536, "register file");
};

struct WgmmaAttentionParams {
  void* out;
  float* lse;
  AttentionStrides os;
  int seqlen_q, seqlen_k, heads, heads_per_kv;
  float scale_log2;  // softmax scale * log2(e)
};

template <class Cfg>
struct AttnSmem {
  unsigned char* base;  // 1024-aligned
  __device__ __forceinline__ unsigned char* q() const { return base; }
  __device__ __forceinline__ unsigned char* k(int s) const { return base + Cfg::kQBytes + s * Cfg::kKVBytes; }
  __device__ __forceinline__ unsigned char* v(int s) const {
    return base + Cfg::kQBytes + (Cfg::kStages + s) * Cfg::kKVBytes;
  }
  __device__ __forceinline__ uint64_t* bar(int i) const {
    return reinterpret_cast<uint64_t*>(base + Cfg::kQBytes + 2 * Cfg::kStages * Cfg::kKVBytes) + i;
  }
  __device__ __forceinline__ uint64_t* q_full() const { return bar(0); }
  __device__ __forceinline__ uint64_t* k_full(int s) const { return bar(1 + s); }
  __device__ __forceinline__ uint64_t* v_full(int s) const { return bar(1 + Cfg::kStages + s); }
  __device__ __forceinline__ uint64_t* k_empty(int s) const { return bar(1 + 2 * Cfg::kStages + s); }
  __device__ __forceinline__ uint64_t* v_empty(int s) const { return bar(1 + 3 * Cfg::kStages + s); }
};

// S (+)= Q K^T for one k16 step, by element type.
template <typename T>
__device__ __forceinline__ void wgmma_qk(float (&s)[64], uint64_t da, uint64_t db, uint32_t scale_d) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) ptx::wgmma_m64n128k16_bf16<false, false>(s, da, db, scale_d);
  else ptx::wgmma_m64n128k16_f16<false, false>(s, da, db, scale_d);
}
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}


template <typename T, class Cfg, bool kCausal>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    attention_wgmma_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                           const __grid_constant__ CUtensorMap map_v, const WgmmaAttentionParams p) {
#if PX_SM90_PTX
  constexpr int D = Cfg::kHeadDim;
  constexpr int kBlockM = Cfg::kBlockM;
  constexpr int kBlockN = Cfg::kBlockN;
  constexpr int kStages = Cfg::kStages;
  constexpr float kNegInf = -INFINITY;
  constexpr float kLn2 = 0.69314718055994530942f;

  extern __shared__ unsigned char smem_raw[];
  const std::uintptr_t raw = reinterpret_cast<std::uintptr_t>(smem_raw);
  const AttnSmem<Cfg> sm{smem_raw + ((1024 - raw % 1024) % 1024)};

  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid / 128;
  const int m_block = static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x);  // longest first
  const int h = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int h_kv = h / p.heads_per_kv;
  const int m0 = m_block * kBlockM;

  // Keys visible to the CTA: [0, n_end). Causal bottom-right: the last row m0 + kBlockM - 1 sees keys up to
  // m0 + kBlockM - 1 + Sk - Sq.
  const int causal_shift = p.seqlen_k - p.seqlen_q;
  int n_end = p.seqlen_k;
  if constexpr (kCausal) n_end = max(0, min(p.seqlen_k, m0 + kBlockM + causal_shift));
  const int n_tiles = (n_end + kBlockN - 1) / kBlockN;

  if (tid == 0) {
    ptx::tma_prefetch_descriptor(&map_q);
    ptx::tma_prefetch_descriptor(&map_k);
    ptx::tma_prefetch_descriptor(&map_v);
    ptx::mbarrier_init(sm.q_full(), 1);
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier_init(sm.k_full(s), 1);
      ptx::mbarrier_init(sm.v_full(s), 1);
      ptx::mbarrier_init(sm.k_empty(s), Cfg::kConsumerWarps);
      ptx::mbarrier_init(sm.v_empty(s), Cfg::kConsumerWarps);
    }
    ptx::fence_proxy_async_shared();
  }
  __syncthreads();

  if (wg == Cfg::kConsumers) {
    // ---- producer warpgroup: one thread issues every TMA copy of the CTA ----
    ptx::setmaxnreg_dec<Cfg::kProducerRegs>();
    if (tid == Cfg::kConsumers * 128 && n_tiles > 0) {
      ptx::mbarrier_arrive_expect_tx(sm.q_full(), Cfg::kQBytes);
#pragma unroll
      for (int c = 0; c < Cfg::kBoxes; ++c)
        ptx::tma_load_4d(sm.q() + c * Cfg::kQBoxBytes, &map_q, sm.q_full(), 64 * c, m0, h, b);
      for (int j = 0; j < n_tiles; ++j) {
        const int s = j % kStages;
        const uint32_t empty_parity = ((j / kStages) & 1) ^ 1u;  // a fresh barrier passes parity 1 at once
        ptx::mbarrier_wait(sm.k_empty(s), empty_parity);
        ptx::mbarrier_arrive_expect_tx(sm.k_full(s), Cfg::kKVBytes);
#pragma unroll
        for (int c = 0; c < Cfg::kBoxes; ++c)
          ptx::tma_load_4d(sm.k(s) + c * Cfg::kKVBoxBytes, &map_k, sm.k_full(s), 64 * c, j * kBlockN, h_kv, b);
        ptx::mbarrier_wait(sm.v_empty(s), empty_parity);
        ptx::mbarrier_arrive_expect_tx(sm.v_full(s), Cfg::kKVBytes);
#pragma unroll
        for (int c = 0; c < Cfg::kBoxes; ++c)
          ptx::tma_load_4d(sm.v(s) + c * Cfg::kKVBoxBytes, &map_v, sm.v_full(s), 64 * c, j * kBlockN, h_kv, b);
      }
    }
    return;
  }
  ptx::setmaxnreg_inc<Cfg::kConsumerRegs>();

  // ---- consumer warpgroups ----
  const int t = tid % 128;
  const int warp = t / 32;
  const int lane = t % 32;
  const int q4 = lane % 4;
  const bool release_lane = lane == 0;
  // Accumulator rows of this thread inside the CTA tile: r = 0 -> tile_row, r = 1 -> tile_row + 8
  // (register i belongs to row r = (i / 2) % 2; its column is 8 (i / 4) + 2 q4 + (i % 2)).
  const int tile_row = wg * 64 + warp * 16 + lane / 4;
  const int row_lo = m0 + tile_row;
  const int wg_row0 = m0 + wg * 64;

  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  float m_run[2] = {kNegInf, kNegInf};
  float l_part[2] = {0.0f, 0.0f};  // this thread's share of the row sums (quad-reduced at the end)
  float alpha[2] = {1.0f, 1.0f};   // correction of O owed by the last softmax, applied before the next P V

  float s[64];                          // S = Q K^T of the current tile, then P in fp32
  uint32_t pf[kBlockN / 16][4];         // P in 16 bits, the A operand of O += P V

  const uint32_t q_base = ptx::smem_addr(sm.q()) + wg * 64 * 128;  // this warpgroup's 64 rows

  // Issues the D/16 k-steps of S = Q K^T from stage st (no commit).
  const auto issue_qk = [&](int st) {
    const uint32_t k_base = ptx::smem_addr(sm.k(st));
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int box = kk / 4, off = (kk % 4) * 32;  // k16 slice: 32 bytes into the 128-byte swizzled row
      const uint64_t da = ptx::make_smem_desc_sw128(q_base + box * Cfg::kQBoxBytes + off, 16, 1024);
      const uint64_t db = ptx::make_smem_desc_sw128(k_base + box * Cfg::kKVBoxBytes + off, 16, 1024);
      wgmma_qk<T>(s, da, db, kk == 0 ? 0u : 1u);
    }
  };
  // Issues the kBlockN/16 k-steps of O += P V from stage st (no commit). V tile: kBoxes boxes of
  // [128 keys][64 d]; MN-major descriptor: LBO = next 64 d-values (the next box), SBO = next 8 keys.
  const auto issue_pv = [&](int st) {
    const uint32_t v_base = ptx::smem_addr(sm.v(st));
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      const uint64_t db = ptx::make_smem_desc_sw128(v_base + kk * 16 * 128, Cfg::kKVBoxBytes, 1024);
      wgmma_rs<D, T>(o, pf[kk], db);
    }
  };
  // Mask (when tile j crosses Sk or this warpgroup's causal diagonal) and online softmax of s, in place.
  // Two straight-line copies (with and without the mask) rather than a masked branch followed by common code:
  // with a join point between the mask and the softmax, ptxas placed the following wgmma.wait_group 0 at the
  // join, i.e. before the softmax, which serialized the softmax behind the P V product (seen in the SASS).
  const auto softmax_impl = [&](int n0, auto masked_tag) {
    constexpr bool kMasked = decltype(masked_tag)::value;
    if constexpr (kMasked) {
#pragma unroll
      for (int i = 0; i < 64; ++i) {
        const int key = n0 + 8 * (i / 4) + 2 * q4 + (i % 2);
        const int row = row_lo + 8 * ((i / 2) % 2);
        bool masked = key >= p.seqlen_k;
        if constexpr (kCausal) masked = masked || (key > row + causal_shift);
        if (masked) s[i] = kNegInf;
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = kNegInf;
#pragma unroll
      for (int i = 0; i < 64; ++i)
        if ((i / 2) % 2 == r) mx = fmaxf(mx, s[i]);
      mx = quad_max(mx) * p.scale_log2;  // -inf stays -inf (scale > 0)
      const float m_new = fmaxf(m_run[r], mx);
      // No visible key so far: subtract 0 so every exp2 is exp2(-inf) = 0, never (-inf) - (-inf) = NaN.
      const float m_use = m_new == kNegInf ? 0.0f : m_new;
      alpha[r] = ptx::ex2_approx_ftz(m_run[r] - m_use);
      m_run[r] = m_new;
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < 64; ++i)
        if ((i / 2) % 2 == r) {
          s[i] = ptx::ex2_approx_ftz(fmaf(s[i], p.scale_log2, -m_use));
          sum += s[i];
        }
      l_part[r] = l_part[r] * alpha[r] + sum;
    }
    // Pin the results here (see the caller): the softmax must not sink below the next wgmma wait.
    fence_all(s);
    fence_all(l_part);
    fence_all(m_run);
    fence_all(alpha);
  };
  const auto softmax = [&](int j) {
    const int n0 = j * kBlockN;
    bool need_mask = n0 + kBlockN > p.seqlen_k;
    if constexpr (kCausal) need_mask = need_mask || (n0 + kBlockN - 1 > wg_row0 + causal_shift);
    if (need_mask) softmax_impl(n0, std::true_type{});
    else softmax_impl(n0, std::false_type{});
  };
  const auto convert_p = [&]() {
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk)
#pragma unroll
      for (int e = 0; e < 4; ++e) pf[kk][e] = ptx::pack2<T>(s[8 * kk + 2 * e], s[8 * kk + 2 * e + 1]);
  };
  const auto rescale_o = [&]() {
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] *= alpha[(i / 2) % 2];
  };

  if (n_tiles > 0) {
    ptx::mbarrier_wait(sm.q_full(), 0);
    // Tile 0: S_0, softmax, P_0.
    ptx::mbarrier_wait(sm.k_full(0), 0);
    fence_all(s);
    ptx::wgmma_fence();
    issue_qk(0);
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<0>();
    fence_all(s);
    if (release_lane) ptx::mbarrier_arrive(sm.k_empty(0));
    softmax(0);
    convert_p();

    for (int j = 1; j < n_tiles; ++j) {
      const int st = j % kStages;
      const uint32_t ph = (j / kStages) & 1;
      const int pst = (j - 1) % kStages;
      const uint32_t pph = ((j - 1) / kStages) & 1;
      ptx::mbarrier_wait(sm.k_full(st), ph);
      fence_all(s);
      ptx::wgmma_fence();
      issue_qk(st);
      ptx::wgmma_commit_group();
      rescale_o();  // O is not in flight here: the previous P V finished (wait_group 0) last iteration
      ptx::mbarrier_wait(sm.v_full(pst), pph);
      fence_all(o);
      fence_all(pf);
      ptx::wgmma_fence();
      issue_pv(pst);
      ptx::wgmma_commit_group();
      ptx::wgmma_wait_group<1>();  // S_j done (groups complete in order); P_{j-1} V_{j-1} may still run
      fence_all(s);
      if (release_lane) ptx::mbarrier_arrive(sm.k_empty(st));
      softmax(j);                  // overlaps the P V product on the tensor cores
      ptx::wgmma_wait_group<0>();
      fence_all(o);
      fence_all(pf);               // pf stays allocated until here: the product above read it asynchronously
      if (release_lane) ptx::mbarrier_arrive(sm.v_empty(pst));
      convert_p();
    }
    const int last = n_tiles - 1;
    rescale_o();
    ptx::mbarrier_wait(sm.v_full(last % kStages), (last / kStages) & 1);
    fence_all(o);
    fence_all(pf);
    ptx::wgmma_fence();
    issue_pv(last % kStages);
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<0>();
    fence_all(o);
    fence_all(pf);
    // No release: the producer issues nothing after the last tile.
  }

  // ---- epilogue ----
  float inv_l[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float l = quad_sum(l_part[r]);
    inv_l[r] = l > 0.0f ? 1.0f / l : 0.0f;  // no visible key: output 0
    const int row = row_lo + 8 * r;
    if (p.lse != nullptr && q4 == 0 && row < p.seqlen_q) {
      const float lse = l > 0.0f ? m_run[r] * kLn2 + logf(l) : kNegInf;
      p.lse[(static_cast<std::int64_t>(b) * p.heads + h) * p.seqlen_q + row] = lse;
    }
  }
  // Stage O / l in this warpgroup's rows of the Q tile (its last reader, this warpgroup's S product, has
  // completed: wait_group 0 above), in the TMA 128B-swizzle layout: 16-byte chunk c of row r of a box sits at
  // chunk c ^ (r % 8).
  unsigned char* const stage = sm.q();
#pragma unroll
  for (int i = 0; i < D / 2; i += 2) {
    const int col = 8 * (i / 4) + 2 * q4;
    const int row = tile_row + 8 * ((i / 2) % 2);
    const int box = col / 64, chunk = (col % 64) / 8;
    const int off = box * Cfg::kQBoxBytes + row * 128 + ((chunk ^ (row % 8)) * 16) + (col % 8) * 2;
    const float inv = inv_l[(i / 2) % 2];
    *reinterpret_cast<uint32_t*>(stage + off) = ptx::pack2<T>(o[i] * inv, o[i + 1] * inv);
  }
  ptx::named_barrier_sync(1 + wg, 128);
  T* const o_bh = static_cast<T*>(p.out) + b * p.os.batch + h * p.os.head;
  constexpr int kChunksPerRow = D / 8;
#pragma unroll 4
  for (int idx = t; idx < 64 * kChunksPerRow; idx += 128) {
    const int r = wg * 64 + idx / kChunksPerRow;
    const int ch = idx % kChunksPerRow;
    const int row = m0 + r;
    if (row < p.seqlen_q) {
      const int off = (ch / 8) * Cfg::kQBoxBytes + r * 128 + (((ch % 8) ^ (r % 8)) * 16);
      const uint4 v = *reinterpret_cast<const uint4*>(stage + off);
      *reinterpret_cast<uint4*>(o_bh + static_cast<std::int64_t>(row) * p.os.seq + ch * 8) = v;
    }
  }
#else
  (void)p;
  __trap();  // never launched: the host requires compute capability 9.0 and an sm_90a build
#endif
}

template <typename T, class Cfg, bool kCausal>
void launch_instance(const AttentionArgs& a, const WgmmaAttentionParams& params, cudaStream_t stream) {
  const CUtensorMap map_q =
      make_attention_operand_map(a.q, a.dtype, a.seqlen_q, a.heads, a.batch, a.head_dim, a.q_strides, Cfg::kBlockM);
  const CUtensorMap map_k =
      make_attention_operand_map(a.k, a.dtype, a.seqlen_k, a.heads_kv, a.batch, a.head_dim, a.k_strides, Cfg::kBlockN);
  const CUtensorMap map_v =
      make_attention_operand_map(a.v, a.dtype, a.seqlen_k, a.heads_kv, a.batch, a.head_dim, a.v_strides, Cfg::kBlockN);
  auto* kernel = &attention_wgmma_kernel<T, Cfg, kCausal>;
  PX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes));
  const dim3 grid(static_cast<unsigned>((a.seqlen_q + Cfg::kBlockM - 1) / Cfg::kBlockM),
                  static_cast<unsigned>(a.heads), static_cast<unsigned>(a.batch));
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(map_q, map_k, map_v, params);
  PX_CUDA_CHECK_LAUNCH();
}

// D = 128: Q 32 KiB + 2 x (K 32 + V 32) KiB = 160 KiB. D = 64: half the bytes per stage, so a third stage.
using Cfg128 = WgmmaAttentionConfig<128, 2>;
using Cfg64 = WgmmaAttentionConfig<64, 3>;

template <typename T>
void launch_typed(const AttentionArgs& a, const WgmmaAttentionParams& params, cudaStream_t stream) {
  if (a.head_dim == 128) {
    if (a.causal) launch_instance<T, Cfg128, true>(a, params, stream);
    else launch_instance<T, Cfg128, false>(a, params, stream);
  } else {
    if (a.causal) launch_instance<T, Cfg64, true>(a, params, stream);
    else launch_instance<T, Cfg64, false>(a, params, stream);
  }
}

}  // namespace

void launch_attention_wgmma(const AttentionArgs& a, cudaStream_t stream) {
  // The dispatcher has validated the arguments; these are this kernel's own preconditions, repeated so that a
  // direct call cannot reach the device with a layout TMA cannot describe.
  PX_REQUIRE(a.head_dim == 64 || a.head_dim == 128, "head_dim",
             "kernel 'wgmma' is compiled for 64 and 128 (got " + std::to_string(a.head_dim) + ")");
  PX_REQUIRE(a.dtype == DType::kBF16 || a.dtype == DType::kF16, "dtype", "kernel 'wgmma' needs bf16 or f16");
  PX_REQUIRE(a.heads_kv >= 1 && a.heads % a.heads_kv == 0, "heads_kv", "must divide heads");
  PX_REQUIRE(attention_tma_compatible(a), "q",
             "kernel 'wgmma' needs q, k, v, out 16-byte aligned, all strides multiples of 8 elements, q/k/v "
             "strides > 0 along every dimension longer than 1 (TMA), and batch, heads <= 65535");

  int device = 0, major = 0, minor = 0;
  PX_CUDA_CHECK(cudaGetDevice(&device));
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major != 9 || minor != 0)
    throw Error("attention kernel 'wgmma' needs an sm_90 (Hopper) GPU: it is built for sm_90a (wgmma, TMA, "
                "setmaxnreg); this device is sm_" + std::to_string(major) + std::to_string(minor) +
                " (use 'mma' or 'auto')");

  WgmmaAttentionParams params{};
  params.out = a.out;
  params.lse = a.lse;
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
