// Backward level 4: FlashAttention-3-style backward for Hopper (sm_90a): TMA loads, wgmma products with the
// probabilities from registers, a warp-specialized producer and two consumer warpgroups.
//
// Same three launches as level 3 (attn_bwd_03_mma.cu, whose preprocess and convert kernels are reused):
//   1. preprocess: Delta_i = dO_i . out_i (fp32) and zero the fp32 dq accumulator [B, H, Sq, D].
//   2. the main kernel below: dK, dV written directly, dQ added to the accumulator.
//   3. convert: dq = scale * accumulator in the input type.
//
// Main kernel. CTA = 128 keys of one kv head (grid: ceil(Sk / 128) x Hkv x B; key block 0 first, which with
// causal masking is also the block that sees the most queries), 384 threads = 3 warpgroups:
//   * producer (warpgroup 2, setmaxnreg.dec 24), two working warps. Loader (warp 0): lane 0 loads K and V of the CTA once (TMA, 4D maps
//     as the forward's, boxes of 64 d x 128 keys) and then, per step, Q_i and dO_i (boxes of 64 d x 64 rows)
//     into a ring of kStages; all 32 lanes write the step's lse (log2 units, +inf for rows that see nothing or
//     lie past Sq, as level 3) and Delta into shared memory beside the stage. A step is one (query head of the
//     GQA group, 64-row query block) pair; the CTA walks the group's heads and, for each, the query blocks
//     that see any of its keys (causal: from the block holding row n0 - (Sk - Sq) on).
//     dQ writer (warp 1, lane 0): per step, waits until the consumers have staged their dQ contribution in
//     shared memory (dq_full), adds it to the fp32 accumulator with TMA bulk reductions
//     (cp.reduce.async.bulk.tensor .add, 64 rows x 32 floats per box), and hands the buffer back (dq_empty)
//     once the TMA has read it. The consumers never touch global memory for dQ.
//   * 2 consumers (setmaxnreg.inc 240), each owning 64 of the CTA's keys, so the dK and dV accumulators
//     (64 x D each, fp32, in registers for the whole CTA: GQA sums the group in registers, no fp32 dk / dv
//     workspace, deterministic in both modes) never need a reduction across warpgroups. Per step:
//       S^T  [64 keys x 64 q] = K_wg Q_i^T     m64n64k16, A = K and B = Q both K-major in shared memory
//       dP^T [64 keys x 64 q] = V_wg dO_i^T    same shape (issued right behind S^T; P^T overlaps it)
//       P^T  = 2^(S^T scale log2e - lse_i log2e), masked to 0;  dS^T = P^T (dP^T - Delta_i)
//       dV  += P^T dO_i    m64nDk16 with A = P^T FROM REGISTERS: the S^T accumulator holds exactly the
//       dK  += dS^T Q_i    A fragments of these products (see ptx/wgmma.cuh), B MN-major (transpose bit)
//     and dQ_i [64 q x D] = dS_i K: dS^T goes to shared memory as 16-bit values (128B-swizzled, [key][q]),
//     both consumers meet at a named barrier, then
//       D 128: consumer c computes dQ_i[:, 64c .. 64c + 63] over all 128 keys  (m64n64k16, A = dS MN-major
//              from the stored dS^T, B = K box c MN-major), i.e. the N dimension is split;
//       D 64:  consumer (step % 2) computes the whole dQ_i over all 128 keys, alternating (no split of N
//              below the 64-wide swizzle row; each dq element is still added once per CTA and step),
//     and stages it (fp32, 128B-swizzled like the TMA box) in one of its two dQ buffers for the writer. D 128
//     issues dK after dQ, so dK still runs on the tensor cores while the warpgroup stages.
//   Measured on an H100 (issue 6 notes): this writer replaced 16 red.global.add.v2.f32 per thread and step
//   and took the D 128 backward from 346-399 to 461-524 TFLOP/s.
//
// Deterministic mode. The same kernel with the dQ additions ordered, by the writer alone (the consumers never
// wait for it beyond its two buffers): per (batch, head, query block) an int semaphore in the workspace counts
// the adders that have finished; before adding, the writer of key block n spins (ld.acquire.gpu) until all
// adders of key blocks 0 .. n-1 are done, then issues the step's reductions as one bulk group, waits for them
// to complete in global memory, and publishes them (fence.proxy.async.global, red.release.gpu.add of the
// step's adder count): ONE link of the chain per CTA and step. Every dq element is then summed
// in the fixed order key block 0, 1, 2, ... (causal: N-1, N-2, ..., 0): bitwise identical run to run.
// Deadlock-free because every CTA walks (head, query block) in the same order and waits only for key blocks of
// its own (b, kv head) that have lower linear block indices and so were dispatched earlier (FlashAttention-3
// relies on the same property); causal maps blockIdx.x to key block N-1-x for that. Why descending for causal:
// key block n starts at query block m_first(n) = (n 128 - shift) / 64, two blocks later than n - 1. In
// ascending order block n reaches query block m two steps EARLIER than block n - 1 does and must wait for it
// at every step, a chain that serialized the causal backward (measured on an H100: 0.48x of the atomic
// mode); descending, the block it waits for (n + 1) reached m two steps earlier, so nobody waits in the
// steady state. Only the reductions serialize; the products never wait. The price left is the chain's fill:
// the key blocks of one (b, h) start together, so block n's first additions wait n link latencies; with one
// link per step the deterministic mode measured 1.02-1.12x the default's time (H100, D 128, S >= 2048).
//
// Barriers: kv_full (1 arrival + K/V bytes); q_full[s] (1 arrival with the Q/dO bytes + 32 arrivals of the
// producer lanes that wrote lse / Delta); q_empty[s] (256 arrivals: every consumer thread, after its last read of
// the stage); dq_full[wg][buf] (128 arrivals: every thread of the consumer after its staging stores and
// fence.proxy.async); dq_empty[wg][buf] (1 arrival: the writer, once the TMA has read the buffer); named barrier
// 1 (256 consumer threads: dS^T complete), 2 + wg (128 threads of one consumer, epilogue).
// dS^T is double-buffered: a consumer rewrites buffer s at step it + 2 only after passing the step it + 1
// barrier, which the other consumer reaches only after its step-it dQ product (the last reader) completed.
//
// Registers per consumer thread (D 128): dK 64 + dV 64 + S^T 32 + dP^T 32, then dQ 32 while P^T / dS^T live on
// as 16 + 16 packed registers; setmaxnreg 240 (2 x 240 + 24 = 504 per 128 lanes <= 512). ptxas (CUDA 13.0):
// no spills in any of the 16 instances; shared memory 231,528 bytes (D 128: K, V 64 KiB, 2 stages of Q / dO
// 64 KiB, dS^T 32 KiB, dQ staging 2 consumers x 2 buffers x 16 KiB, lse / Delta, barriers, alignment slack; the
// H100's limit is 232,448) / 182,904 (D 64).
//
// Requirements (host, attention_tma_compatible): q/k/v/dout 16-byte aligned, strides multiples of 8 elements
// and positive along dimensions longer than 1, B and Hkv <= 65535 (grid), plus the 16-byte rule for all eight
// tensors. Compiled only for sm_90a (__CUDA_ARCH_FEAT_SM90_ALL): the sm_80 pass builds a kernel that traps,
// and the host refuses to launch on anything but compute capability 9.0.
#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "attention/attention_common.cuh"
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

constexpr float kLog2e = 1.4426950408889634f;

template <int kHeadDim_, int kStages_>
struct WgmmaBwdConfig {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockN = 128;  // keys per CTA: 2 consumer warpgroups x 64
  static constexpr int kBlockM = 64;   // query rows per step
  static constexpr int kStages = kStages_;
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kConsumerWarps = 4 * kConsumers;
  static constexpr int kBoxes = kHeadDim / 64;  // 128-byte column boxes per row
  static constexpr int kKVBoxBytes = kBlockN * 128;
  static constexpr int kQBoxBytes = kBlockM * 128;
  static constexpr int kKVBytes = kBoxes * kKVBoxBytes;
  static constexpr int kQBytes = kBoxes * kQBoxBytes;
  static constexpr int kDSBytes = kBlockN * kBlockM * 2;  // dS^T [128 keys][64 q], 16-bit
  // dQ adders per CTA and step: D 128 splits dQ's columns over both consumers, D 64 alternates them.
  static constexpr int kDqAdders = kHeadDim == 128 ? 2 : 1;
  // One consumer's dQ contribution per step: 64 query rows x 64 fp32 columns, staged for the TMA reduction as
  // two 128B-swizzled boxes of 64 rows x 32 floats; kDqBufs of them per consumer.
  static constexpr int kDqBoxBytes = kBlockM * 128;
  static constexpr int kDqBufBytes = 2 * kDqBoxBytes;
  static constexpr int kDqBufs = 2;
  // kv_full, q_full[s], q_empty[s], dq_full[consumer][buf], dq_empty[consumer][buf]
  static constexpr int kBarriers = 1 + 2 * kStages + 2 * kConsumers * kDqBufs;
  // K, V, kStages x (Q, dO), 2 x dS^T, the dQ staging buffers, kStages x (lse, Delta) fp32, barriers, 1024
  // bytes to align the base by hand (the 128B swizzle needs 1024-byte aligned atoms; dynamic shared memory only
  // guarantees 16).
  static constexpr int kSmemBytes = 2 * kKVBytes + 2 * kStages * kQBytes + 2 * kDSBytes +
                                    kConsumers * kDqBufs * kDqBufBytes + 2 * kStages * kBlockM * 4 + kBarriers * 8 +
                                    1024;
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;

  static_assert(kHeadDim == 64 || kHeadDim == 128, "the dK / dV wgmma wrappers exist for N = D = 64 and 128");
  static_assert(kStages >= 2, "at least double buffering");
  static_assert(kSmemBytes <= 227 * 1024, "more dynamic shared memory than an H100 SM has");
  static_assert(kProducerRegs * 128 + kConsumerRegs * 128 * kConsumers <= 65536, "register file");
};

struct WgmmaBwdParams {
  const float* lse;
  const float* delta;
  float* dq_accum;     // [B, H, Sq, D] fp32
  int* dq_semaphore;   // [B, H, ceil(Sq / 64)], deterministic mode only (else nullptr)
  void* dk;
  void* dv;
  AttentionStrides dks, dvs;
  int seqlen_q, seqlen_k, heads, heads_per_kv;
  float scale, scale_log2;
};

template <class Cfg>
struct BwdSmem {
  unsigned char* base;  // 1024-aligned
  __device__ __forceinline__ unsigned char* k() const { return base; }
  __device__ __forceinline__ unsigned char* v() const { return base + Cfg::kKVBytes; }
  __device__ __forceinline__ unsigned char* q(int s) const { return base + 2 * Cfg::kKVBytes + s * Cfg::kQBytes; }
  __device__ __forceinline__ unsigned char* dout(int s) const {
    return base + 2 * Cfg::kKVBytes + (Cfg::kStages + s) * Cfg::kQBytes;
  }
  __device__ __forceinline__ unsigned char* ds(int buf) const {
    return base + 2 * Cfg::kKVBytes + 2 * Cfg::kStages * Cfg::kQBytes + buf * Cfg::kDSBytes;
  }
  __device__ __forceinline__ unsigned char* dq(int wg, int buf) const {
    return ds(2) + (wg * Cfg::kDqBufs + buf) * Cfg::kDqBufBytes;
  }
  __device__ __forceinline__ unsigned char* tail() const { return dq(Cfg::kConsumers, 0); }
  __device__ __forceinline__ float* lse2(int s) const { return reinterpret_cast<float*>(tail()) + s * Cfg::kBlockM; }
  __device__ __forceinline__ float* delta(int s) const {
    return reinterpret_cast<float*>(tail()) + (Cfg::kStages + s) * Cfg::kBlockM;
  }
  __device__ __forceinline__ uint64_t* bar(int i) const {
    return reinterpret_cast<uint64_t*>(tail() + 2 * Cfg::kStages * Cfg::kBlockM * 4) + i;
  }
  __device__ __forceinline__ uint64_t* kv_full() const { return bar(0); }
  __device__ __forceinline__ uint64_t* q_full(int s) const { return bar(1 + s); }
  __device__ __forceinline__ uint64_t* q_empty(int s) const { return bar(1 + Cfg::kStages + s); }
  __device__ __forceinline__ uint64_t* dq_full(int wg, int buf) const {
    return bar(1 + 2 * Cfg::kStages + wg * Cfg::kDqBufs + buf);
  }
  __device__ __forceinline__ uint64_t* dq_empty(int wg, int buf) const {
    return bar(1 + 2 * Cfg::kStages + (Cfg::kConsumers + wg) * Cfg::kDqBufs + buf);
  }
};

// [64 x 64] (+)= A B for one k16 step, both from shared memory, by element type and major-ness.
template <typename T, bool kTransA, bool kTransB>
__device__ __forceinline__ void wgmma_ss64(float (&d)[32], uint64_t da, uint64_t db, uint32_t scale_d) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) ptx::wgmma_m64n64k16_bf16<kTransA, kTransB>(d, da, db, scale_d);
  else ptx::wgmma_m64n64k16_f16<kTransA, kTransB>(d, da, db, scale_d);
}


// atomicAdd with release semantics at GPU scope in one instruction: the writes this thread made (or waited
// for) before it are visible to whoever acquires the new value.
__device__ __forceinline__ void red_release_add_gpu(int* addr, int v) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" ::"l"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ int load_acquire_gpu(const int* addr) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(addr) : "memory");
  return v;
}

template <typename T, class Cfg, bool kCausal, bool kDeterministic>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    attention_bwd_wgmma_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                               const __grid_constant__ CUtensorMap map_v, const __grid_constant__ CUtensorMap map_do,
                               const __grid_constant__ CUtensorMap map_dq, const WgmmaBwdParams p) {
#if PX_SM90_PTX
  constexpr int D = Cfg::kHeadDim;
  constexpr int kBlockM = Cfg::kBlockM;
  constexpr int kBlockN = Cfg::kBlockN;
  constexpr int kStages = Cfg::kStages;

  extern __shared__ unsigned char smem_raw[];
  const std::uintptr_t raw = reinterpret_cast<std::uintptr_t>(smem_raw);
  const BwdSmem<Cfg> sm{smem_raw + ((1024 - raw % 1024) % 1024)};

  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid / 128;
  // Deterministic + causal: key blocks run (and add dQ) in DESCENDING order, see the header; the block that
  // must add first is then dispatched first.
  const int n_block = kCausal && kDeterministic ? static_cast<int>(gridDim.x - 1 - blockIdx.x)
                                                : static_cast<int>(blockIdx.x);
  const int hk = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int n0 = n_block * kBlockN;
  const int shift = p.seqlen_k - p.seqlen_q;  // causal: key j visible to query i iff j <= i + shift

  // Query blocks that see at least one of keys [n0, n0 + 128): causal needs i >= n0 - shift. Never empty: the
  // last query row sees every key < Sk.
  const int m_blocks = (p.seqlen_q + kBlockM - 1) / kBlockM;
  const int m_first = kCausal ? max(0, n0 - shift) / kBlockM : 0;
  const int n_m = m_blocks - m_first;
  const int total = p.heads_per_kv * n_m;  // steps: (query head of the group, query block)

  if (tid == 0) {
    ptx::tma_prefetch_descriptor(&map_q);
    ptx::tma_prefetch_descriptor(&map_k);
    ptx::tma_prefetch_descriptor(&map_v);
    ptx::tma_prefetch_descriptor(&map_do);
    ptx::tma_prefetch_descriptor(&map_dq);
    ptx::mbarrier_init(sm.kv_full(), 1);
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier_init(sm.q_full(s), 1 + 32);
      ptx::mbarrier_init(sm.q_empty(s), Cfg::kConsumerWarps * 32);
    }
    for (int c = 0; c < Cfg::kConsumers; ++c)
      for (int buf = 0; buf < Cfg::kDqBufs; ++buf) {
        ptx::mbarrier_init(sm.dq_full(c, buf), 128);
        ptx::mbarrier_init(sm.dq_empty(c, buf), 1);
      }
    ptx::fence_proxy_async_shared();
  }
  __syncthreads();

  if (wg == Cfg::kConsumers) {
    // ---- producer: warp 0 of warpgroup 2 (lane 0 issues the copies, all lanes write lse / Delta) ----
    ptx::setmaxnreg_dec<Cfg::kProducerRegs>();
    if (tid / 32 == Cfg::kConsumers * 4) {
      const int lane = tid % 32;
      if (lane == 0) {
        ptx::mbarrier_arrive_expect_tx(sm.kv_full(), 2 * Cfg::kKVBytes);
#pragma unroll
        for (int c = 0; c < Cfg::kBoxes; ++c) {
          ptx::tma_load_4d(sm.k() + c * Cfg::kKVBoxBytes, &map_k, sm.kv_full(), 64 * c, n0, hk, b);
          ptx::tma_load_4d(sm.v() + c * Cfg::kKVBoxBytes, &map_v, sm.kv_full(), 64 * c, n0, hk, b);
        }
      }
      for (int it = 0; it < total; ++it) {
        const int s = it % kStages;
        const int h = hk * p.heads_per_kv + it / n_m;
        const int m0 = (m_first + it % n_m) * kBlockM;
        ptx::mbarrier_wait(sm.q_empty(s), ((it / kStages) & 1) ^ 1u);  // a fresh barrier passes parity 1
        if (lane == 0) {
          ptx::mbarrier_arrive_expect_tx(sm.q_full(s), 2 * Cfg::kQBytes);
#pragma unroll
          for (int c = 0; c < Cfg::kBoxes; ++c) {
            ptx::tma_load_4d(sm.q(s) + c * Cfg::kQBoxBytes, &map_q, sm.q_full(s), 64 * c, m0, h, b);
            ptx::tma_load_4d(sm.dout(s) + c * Cfg::kQBoxBytes, &map_do, sm.q_full(s), 64 * c, m0, h, b);
          }
        }
        const std::int64_t bh = static_cast<std::int64_t>(b) * p.heads + h;
#pragma unroll
        for (int r = lane; r < kBlockM; r += 32) {
          const int row = m0 + r;
          float l2 = INFINITY, dl = 0.0f;  // rows past Sq: P = 2^-inf = 0
          if (row < p.seqlen_q) {
            const float l = p.lse[bh * p.seqlen_q + row];
            l2 = l == -INFINITY ? INFINITY : l * kLog2e;  // a row that sees nothing: P = 0, never NaN
            dl = p.delta[bh * p.seqlen_q + row];
          }
          sm.lse2(s)[r] = l2;
          sm.delta(s)[r] = dl;
        }
        ptx::mbarrier_arrive(sm.q_full(s));  // release: this lane's lse / Delta stores
      }
    } else if (tid / 32 == Cfg::kConsumers * 4 + 1 && tid % 32 == 0) {
      // ---- dQ writer: lane 0 of warp 1 adds each staged dQ contribution to the fp32 accumulator with two TMA
      // bulk reductions (one per 32-column box) and hands the buffer back once the TMA has read it. In
      // deterministic mode it also keeps the order of the additions, so the consumers never wait for it. ----
      for (int it = 0; it < total; ++it) {
        const int h = hk * p.heads_per_kv + it / n_m;
        const int m_blk = m_first + it % n_m;
        const int j = Cfg::kDqAdders == 2 ? it : it / 2;  // the adding consumer's count of earlier additions
        const int buf = j % Cfg::kDqBufs;
        const uint32_t parity = (j / Cfg::kDqBufs) & 1;
        int* sem = nullptr;
        int before = 0;
        if constexpr (kDeterministic) {
          // The key blocks that add before this one must have finished this query block: 0 .. n_block - 1
          // (non-causal), or n_block + 1 .. n_last(m_blk), the last key block that sees query block m_blk
          // (causal, descending: m_first(n') <= m_blk <=> n' * kBlockN - shift < kBlockM (m_blk + 1)).
          before = n_block;
          if constexpr (kCausal) {
            const int n_last =
                min(static_cast<int>(gridDim.x) - 1, (kBlockM * (m_blk + 1) + shift - 1) / kBlockN);  // num. >= 1
            before = n_last - n_block;
          }
          sem = p.dq_semaphore + (static_cast<std::int64_t>(b) * p.heads + h) * m_blocks + m_blk;
        }
        // This step's adders: both consumers (D 128, one 64-column half each) or consumer it % 2 (D 64). One
        // commit group and, in deterministic mode, ONE link of the ordering chain for all of them: the chain's
        // latency (reduction complete -> flag -> the next key block sees it) is paid once per step.
        const int c_first = Cfg::kDqAdders == 2 ? 0 : it % 2;
        const int c_last = Cfg::kDqAdders == 2 ? Cfg::kConsumers - 1 : it % 2;
        for (int c = c_first; c <= c_last; ++c) ptx::mbarrier_wait(sm.dq_full(c, buf), parity);
        if constexpr (kDeterministic) {
          while (load_acquire_gpu(sem) < before * Cfg::kDqAdders) {
          }
          ptx::fence_proxy_async_global();  // the acquire above before the reductions below (async proxy)
        }
        for (int c = c_first; c <= c_last; ++c) {
          const int col0 = Cfg::kDqAdders == 2 ? 64 * c : 0;
          ptx::tma_reduce_add_4d(&map_dq, sm.dq(c, buf), col0, m_blk * kBlockM, h, b);
          ptx::tma_reduce_add_4d(&map_dq, sm.dq(c, buf) + Cfg::kDqBoxBytes, col0 + 32, m_blk * kBlockM, h, b);
        }
        ptx::bulk_commit_group();
        if constexpr (kDeterministic) {
          ptx::bulk_wait_group<0>();  // the additions are done in global memory, then published
          ptx::fence_proxy_async_global();
          red_release_add_gpu(sem, Cfg::kDqAdders);
        } else {
          ptx::bulk_wait_group_read<0>();
        }
        for (int c = c_first; c <= c_last; ++c) ptx::mbarrier_arrive(sm.dq_empty(c, buf));
      }
      ptx::bulk_wait_group<0>();
    }
    return;
  }
  ptx::setmaxnreg_inc<Cfg::kConsumerRegs>();

  // ---- consumers ----
  const int t = tid % 128;
  const int warp = t / 32;
  const int lane = t % 32;
  const int q4 = lane % 4;
  // Accumulator rows of this thread (keys for S^T / dK / dV, queries for dQ): r = 0 -> acc_row, r = 1 ->
  // acc_row + 8; register i belongs to row r = (i / 2) % 2 and column 8 (i / 4) + 2 q4 + (i % 2).
  const int acc_row = warp * 16 + lane / 4;
  const int key_lo = n0 + wg * 64 + acc_row;  // this thread's keys: key_lo, key_lo + 8
  const int wg_key0 = n0 + wg * 64;

  float dk[D / 2], dv[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = 0.0f;
  float st[32], dpt[32];  // S^T -> P^T, dP^T -> dS^T: [64 keys x 64 queries]
  uint32_t pa[4][4], dsa[4][4];  // P^T, dS^T in 16 bits: A operands of dV += P^T dO, dK += dS^T Q
  float dq[32];

  const uint32_t k_wg = ptx::smem_addr(sm.k()) + wg * 64 * 128;  // this consumer's 64 key rows
  const uint32_t v_wg = ptx::smem_addr(sm.v()) + wg * 64 * 128;

  ptx::mbarrier_wait(sm.kv_full(), 0);
  for (int it = 0; it < total; ++it) {
    const int s = it % kStages;
    const int h = hk * p.heads_per_kv + it / n_m;
    const int m_blk = m_first + it % n_m;
    const int m0 = m_blk * kBlockM;
    const uint32_t q_s = ptx::smem_addr(sm.q(s));
    const uint32_t do_s = ptx::smem_addr(sm.dout(s));
    ptx::mbarrier_wait(sm.q_full(s), (it / kStages) & 1);

    // S^T = K_wg Q^T and dP^T = V_wg dO^T: D/16 k-steps each, K-major operands (the k16 slice is 32 bytes into
    // the 128-byte swizzled row; the next 64 d-values are the next box). Two groups, so P^T can start when
    // S^T is done while dP^T still runs.
    fence_all(st);
    fence_all(dpt);
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int box = kk / 4, off = (kk % 4) * 32;
      wgmma_ss64<T, false, false>(st, ptx::make_smem_desc_sw128(k_wg + box * Cfg::kKVBoxBytes + off, 16, 1024),
                                  ptx::make_smem_desc_sw128(q_s + box * Cfg::kQBoxBytes + off, 16, 1024),
                                  kk == 0 ? 0u : 1u);
    }
    ptx::wgmma_commit_group();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int box = kk / 4, off = (kk % 4) * 32;
      wgmma_ss64<T, false, false>(dpt, ptx::make_smem_desc_sw128(v_wg + box * Cfg::kKVBoxBytes + off, 16, 1024),
                                  ptx::make_smem_desc_sw128(do_s + box * Cfg::kQBoxBytes + off, 16, 1024),
                                  kk == 0 ? 0u : 1u);
    }
    ptx::wgmma_commit_group();

    // P^T (columns are queries: lse of column 8 c + 2 q4 (+1), c = i / 4).
    ptx::wgmma_wait_group<1>();
    fence_all(st);
    const float* const lse2 = sm.lse2(s);
    const float* const delta = sm.delta(s);
    bool need_mask = wg_key0 + 64 > p.seqlen_k;
    if constexpr (kCausal) need_mask = need_mask || (wg_key0 + 63 > m0 + shift);
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const float2 l2 = *reinterpret_cast<const float2*>(lse2 + 8 * c + 2 * q4);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 4 * c + e;
        st[i] = ptx::ex2_approx_ftz(fmaf(st[i], p.scale_log2, -((e % 2) == 0 ? l2.x : l2.y)));
      }
    }
    if (need_mask) {
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        const int key = key_lo + 8 * ((i / 2) % 2);
        const int query = m0 + 8 * (i / 4) + 2 * q4 + (i % 2);
        bool masked = key >= p.seqlen_k;
        if constexpr (kCausal) masked = masked || key > query + shift;
        if (masked) st[i] = 0.0f;
      }
    }
    ptx::wgmma_wait_group<0>();
    fence_all(dpt);
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const float2 dl = *reinterpret_cast<const float2*>(delta + 8 * c + 2 * q4);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 4 * c + e;
        dpt[i] = st[i] * (dpt[i] - ((e % 2) == 0 ? dl.x : dl.y));
      }
    }
    // 16-bit A fragments: k-step kk (queries 16 kk .. 16 kk + 15) = accumulator registers 8 kk .. 8 kk + 7.
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        pa[kk][e] = ptx::pack2<T>(st[8 * kk + 2 * e], st[8 * kk + 2 * e + 1]);
        dsa[kk][e] = ptx::pack2<T>(dpt[8 * kk + 2 * e], dpt[8 * kk + 2 * e + 1]);
      }

    // dS^T into shared memory, [key][query] with the 128B swizzle (16-byte chunk c of row r at c ^ (r % 8)):
    // register pair (8 kk + 2 e, +1) is key row acc_row + 8 (e % 2), queries 16 kk + 8 (e / 2) + 2 q4, +1.
    unsigned char* const ds_buf = sm.ds(it & 1);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = wg * 64 + acc_row + 8 * (e % 2);
        const int chunk = 2 * kk + e / 2;
        *reinterpret_cast<uint32_t*>(ds_buf + row * 128 + ((chunk ^ (row % 8)) * 16) + q4 * 4) = dsa[kk][e];
      }
    ptx::fence_proxy_async_shared();  // the generic stores above are read by wgmma (async proxy) below

    // dV += P^T dO, then (once both halves of dS^T are stored) dQ_i = dS K, then dK += dS^T Q. dV and dK: 4
    // k-steps over the 64 queries, B = dO / Q [query][d] MN-major (LBO = one box = the next 64 d-values, SBO =
    // 1024 = the next 8 queries, k16 slice = 16 rows). dQ: 8 k-steps of 16 keys, A = dS [q][key] is the stored
    // dS^T read MN-major (the 64 queries of a key row are contiguous), B = K [key][d] MN-major. D 128: dK goes
    // last so that it still runs on the tensor cores while this warpgroup stages dQ for the writer. D 64 issues
    // dK before the barrier: there only every other step adds dQ, and reading the dQ accumulator behind a
    // conditional wait_group<1> makes ptxas serialize the kernel's wgmmas (C7514).
    constexpr bool kDkBeforeDq = Cfg::kDqAdders == 1;
    const auto issue_dk = [&] {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        wgmma_rs<D, T>(dk, dsa[kk], ptx::make_smem_desc_sw128(q_s + kk * 16 * 128, Cfg::kQBoxBytes, 1024));
    };
    fence_all(dk);
    fence_all(dv);
    fence_all(pa);
    fence_all(dsa);
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      wgmma_rs<D, T>(dv, pa[kk], ptx::make_smem_desc_sw128(do_s + kk * 16 * 128, Cfg::kQBoxBytes, 1024));
    if constexpr (kDkBeforeDq) issue_dk();
    ptx::wgmma_commit_group();

    ptx::named_barrier_sync(1, 256);
    // D 64: one consumer per step. The condition is warpgroup-uniform, but ptxas cannot prove it from the
    // thread index and then serializes every wgmma of the kernel around the branch (C7520); a value broadcast
    // by __shfl_sync is provably warp-uniform, which is what its analysis needs.
    const bool adds_dq = Cfg::kDqAdders == 2 || __shfl_sync(0xffffffffu, (it % 2) == wg ? 1 : 0, 0) != 0;
    const int dq_box = Cfg::kDqAdders == 2 ? wg : 0;
    if (adds_dq) {
      const uint32_t ds_s = ptx::smem_addr(ds_buf);
      const uint32_t k_box = ptx::smem_addr(sm.k()) + dq_box * Cfg::kKVBoxBytes;
      fence_all(dq);
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk)
        wgmma_ss64<T, true, true>(dq, ptx::make_smem_desc_sw128(ds_s + kk * 16 * 128, Cfg::kDSBytes, 1024),
                                  ptx::make_smem_desc_sw128(k_box + kk * 16 * 128, Cfg::kKVBoxBytes, 1024),
                                  kk == 0 ? 0u : 1u);
      ptx::wgmma_commit_group();
    }
    if constexpr (!kDkBeforeDq) {
      issue_dk();
      ptx::wgmma_commit_group();
    }

    if (adds_dq) {
      // dV and dQ are done (D 128: dK may still run). Stage dQ as the TMA reduction's two boxes of 64 rows x 32 fp32
      // (128B swizzle: 16-byte chunk c of row r at c ^ (r % 8)); register pair (i, i + 1) is row acc_row +
      // 8 ((i / 2) % 2), columns 8 (i / 4) + 2 q4, +1, i.e. box i / 16, chunk 2 ((i / 4) % 4) + q4 / 2.
      ptx::wgmma_wait_group<kDkBeforeDq ? 0 : 1>();
      fence_all(dq);
      const int j = Cfg::kDqAdders == 2 ? it : it / 2;  // this consumer's count of earlier additions
      const int buf = j % Cfg::kDqBufs;
      ptx::mbarrier_wait(sm.dq_empty(wg, buf), ((j / Cfg::kDqBufs) & 1) ^ 1u);  // a fresh barrier passes parity 1
      unsigned char* const dq_stage = sm.dq(wg, buf);
      // Bank conflicts: a 64-bit store is served per half-warp, 4 rows x 2 chunks here; with every lane on the
      // same register group the swizzle maps those 8 chunks onto 4 bank groups (2 wavefronts where 1 does).
      // Lanes of odd rows store group j ^ 2 while the others store group j: 8 distinct bank groups.
      const bool odd_row = ((lane / 4) & 1) != 0;
#pragma unroll
      for (int box = 0; box < 2; ++box)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int i_even = 16 * box + 4 * j + 2 * half, i_odd = 16 * box + 4 * (j ^ 2) + 2 * half;
            const float2 v = odd_row ? make_float2(dq[i_odd], dq[i_odd + 1]) : make_float2(dq[i_even], dq[i_even + 1]);
            const int row = acc_row + 8 * half;
            const int chunk = 2 * (odd_row ? j ^ 2 : j) + q4 / 2;
            *reinterpret_cast<float2*>(dq_stage + box * Cfg::kDqBoxBytes + row * 128 + ((chunk ^ (row % 8)) * 16) +
                                       (q4 % 2) * 8) = v;
          }
      ptx::fence_proxy_async_shared();  // generic stores above, read by the TMA (async proxy) after the barrier
      ptx::mbarrier_arrive(sm.dq_full(wg, buf));
    }
    ptx::wgmma_wait_group<0>();
    fence_all(dk);
    fence_all(dv);
    fence_all(pa);
    fence_all(dsa);
    // Q, dO, lse, Delta of stage s fully read: EVERY consumer thread arrives, because an arrival releases only
    // its own thread's earlier accesses and each lane read lse / Delta with ordinary loads (one arrival per
    // warp, even after a __syncwarp, left racecheck reporting the producer's rewrite of the stage).
    ptx::mbarrier_arrive(sm.q_empty(s));
  }

  // ---- epilogue: dK (scaled) and dV staged in the CTA's K / V tiles (same swizzle), then 16-byte stores ----
  ptx::named_barrier_sync(1, 256);  // both consumers' last dQ products (which read all of K) have completed
#pragma unroll
  for (int i = 0; i < D / 2; i += 2) {
    const int col = 8 * (i / 4) + 2 * q4;
    const int row = wg * 64 + acc_row + 8 * ((i / 2) % 2);
    const int box = col / 64, chunk = (col % 64) / 8;
    const int off = box * Cfg::kKVBoxBytes + row * 128 + ((chunk ^ (row % 8)) * 16) + (col % 8) * 2;
    *reinterpret_cast<uint32_t*>(sm.k() + off) = ptx::pack2<T>(dk[i] * p.scale, dk[i + 1] * p.scale);
    *reinterpret_cast<uint32_t*>(sm.v() + off) = ptx::pack2<T>(dv[i], dv[i + 1]);
  }
  ptx::named_barrier_sync(2 + wg, 128);
  T* const dk_bh = static_cast<T*>(p.dk) + b * p.dks.batch + hk * p.dks.head;
  T* const dv_bh = static_cast<T*>(p.dv) + b * p.dvs.batch + hk * p.dvs.head;
  constexpr int kChunksPerRow = D / 8;
#pragma unroll 4
  for (int idx = t; idx < 64 * kChunksPerRow; idx += 128) {
    const int r = wg * 64 + idx / kChunksPerRow;
    const int ch = idx % kChunksPerRow;
    const int key = n0 + r;
    if (key < p.seqlen_k) {
      const int off = (ch / 8) * Cfg::kKVBoxBytes + r * 128 + (((ch % 8) ^ (r % 8)) * 16);
      *reinterpret_cast<uint4*>(dk_bh + static_cast<std::int64_t>(key) * p.dks.seq + ch * 8) =
          *reinterpret_cast<const uint4*>(sm.k() + off);
      *reinterpret_cast<uint4*>(dv_bh + static_cast<std::int64_t>(key) * p.dvs.seq + ch * 8) =
          *reinterpret_cast<const uint4*>(sm.v() + off);
    }
  }
#else
  (void)p;
  __trap();  // never launched: the host requires compute capability 9.0 and an sm_90a build
#endif
}

template <typename T, class Cfg, bool kCausal, bool kDeterministic>
void launch_instance(const AttentionBackwardArgs& a, const WgmmaBwdParams& params, cudaStream_t stream) {
  const CUtensorMap map_q = make_attention_operand_map(a.q, a.dtype, a.seqlen_q, a.heads, a.batch, a.head_dim,
                                                       a.q_strides, Cfg::kBlockM);
  const CUtensorMap map_do = make_attention_operand_map(a.dout, a.dtype, a.seqlen_q, a.heads, a.batch, a.head_dim,
                                                        a.dout_strides, Cfg::kBlockM);
  const CUtensorMap map_k = make_attention_operand_map(a.k, a.dtype, a.seqlen_k, a.heads_kv, a.batch, a.head_dim,
                                                       a.k_strides, Cfg::kBlockN);
  const CUtensorMap map_v = make_attention_operand_map(a.v, a.dtype, a.seqlen_k, a.heads_kv, a.batch, a.head_dim,
                                                       a.v_strides, Cfg::kBlockN);
  // The fp32 dq accumulator [B, H, Sq, D] (contiguous) as (D, Sq, H, B), boxes of 32 columns x 64 rows: the
  // writer's bulk reductions. Rows past Sq are skipped by the TMA.
  const std::uint64_t dq_dims[4] = {static_cast<std::uint64_t>(a.head_dim), static_cast<std::uint64_t>(a.seqlen_q),
                                    static_cast<std::uint64_t>(a.heads), static_cast<std::uint64_t>(a.batch)};
  const std::uint64_t dq_row_bytes = static_cast<std::uint64_t>(a.head_dim) * sizeof(float);
  const std::uint64_t dq_strides[3] = {dq_row_bytes, dq_row_bytes * a.seqlen_q,
                                       dq_row_bytes * a.seqlen_q * static_cast<std::uint64_t>(a.heads)};
  const std::uint32_t dq_box[4] = {32, static_cast<std::uint32_t>(Cfg::kBlockM), 1, 1};
  const CUtensorMap map_dq = make_tma_map_4d(params.dq_accum, DType::kF32, dq_dims, dq_strides, dq_box);
  auto* kernel = &attention_bwd_wgmma_kernel<T, Cfg, kCausal, kDeterministic>;
  PX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes));
  const dim3 grid(static_cast<unsigned>((a.seqlen_k + Cfg::kBlockN - 1) / Cfg::kBlockN),
                  static_cast<unsigned>(a.heads_kv), static_cast<unsigned>(a.batch));
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(map_q, map_k, map_v, map_do, map_dq, params);
  PX_CUDA_CHECK_LAUNCH();
}

// D 128: K + V 64 KiB, 2 stages of Q + dO (64 KiB), dS^T 32 KiB: 162 KiB. D 64: half per stage, 3 stages: 115 KiB.
using Cfg128 = WgmmaBwdConfig<128, 2>;
using Cfg64 = WgmmaBwdConfig<64, 3>;

template <typename T, class Cfg>
void launch_modes(const AttentionBackwardArgs& a, const WgmmaBwdParams& params, cudaStream_t stream) {
  if (a.causal) {
    if (a.deterministic) launch_instance<T, Cfg, true, true>(a, params, stream);
    else launch_instance<T, Cfg, true, false>(a, params, stream);
  } else {
    if (a.deterministic) launch_instance<T, Cfg, false, true>(a, params, stream);
    else launch_instance<T, Cfg, false, false>(a, params, stream);
  }
}

template <typename T>
void launch_typed(const AttentionBackwardArgs& a, const WgmmaBwdParams& params, cudaStream_t stream) {
  if (a.head_dim == 128) launch_modes<T, Cfg128>(a, params, stream);
  else launch_modes<T, Cfg64>(a, params, stream);
}

}  // namespace

std::size_t attention_backward_wgmma_semaphores(const AttentionBackwardArgs& a) {
  return a.deterministic ? static_cast<std::size_t>(a.batch) * a.heads * ((a.seqlen_q + 63) / 64) : 0;
}

void launch_attention_backward_wgmma(const AttentionBackwardArgs& a, const AttentionBackwardWorkspace& ws,
                                     cudaStream_t stream) {
  // The dispatcher has validated the arguments; these are this level's own preconditions, repeated so that a
  // direct call cannot reach the device with a layout TMA cannot describe or a missing workspace.
  PX_REQUIRE(a.head_dim == 64 || a.head_dim == 128, "head_dim",
             "backward kernel 'wgmma' is compiled for 64 and 128 (got " + std::to_string(a.head_dim) + ")");
  PX_REQUIRE(a.dtype == DType::kBF16 || a.dtype == DType::kF16, "dtype", "backward kernel 'wgmma' needs bf16 or f16");
  PX_REQUIRE(a.heads_kv >= 1 && a.heads % a.heads_kv == 0, "heads_kv", "must divide heads");
  PX_REQUIRE(attention_backward_tma_compatible(a), "q",
             "backward kernel 'wgmma' needs all eight tensors 16-byte aligned with strides multiples of 8 "
             "elements, q/k/v/dout strides > 0 along every dimension longer than 1 (TMA), and batch, heads <= "
             "65535");
  PX_REQUIRE(ws.delta != nullptr && ws.dq_accum != nullptr, "workspace",
             "backward kernel 'wgmma' needs the Delta buffer and the fp32 dq accumulator");
  PX_REQUIRE(!a.deterministic || ws.dq_semaphore != nullptr, "workspace",
             "backward kernel 'wgmma' needs the dq semaphores in deterministic mode");
  PX_REQUIRE((static_cast<long long>(a.seqlen_k) + 127) / 128 <= 0x7fffffffLL, "seqlen_k", "too many key blocks");

  int device = 0, major = 0, minor = 0;
  PX_CUDA_CHECK(cudaGetDevice(&device));
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major != 9 || minor != 0)
    throw Error("attention backward kernel 'wgmma' needs an sm_90 (Hopper) GPU: it is built for sm_90a (wgmma, "
                "TMA, setmaxnreg); this device is sm_" + std::to_string(major) + std::to_string(minor) +
                " (use 'mma' or 'auto')");

  if (a.deterministic)
    PX_CUDA_CHECK(cudaMemsetAsync(ws.dq_semaphore, 0, attention_backward_wgmma_semaphores(a) * sizeof(int), stream));
  // Delta and the zeroed accumulator: level 3's preprocess.
  launch_attention_backward_preprocess(a, ws, stream);

  WgmmaBwdParams p{};
  p.lse = a.lse;
  p.delta = ws.delta;
  p.dq_accum = ws.dq_accum;
  p.dq_semaphore = a.deterministic ? ws.dq_semaphore : nullptr;
  p.dk = a.dk;
  p.dv = a.dv;
  p.dks = a.dk_strides;
  p.dvs = a.dv_strides;
  p.seqlen_q = a.seqlen_q;
  p.seqlen_k = a.seqlen_k;
  p.heads = a.heads;
  p.heads_per_kv = a.heads / a.heads_kv;
  p.scale = a.scale();
  p.scale_log2 = a.scale() * kLog2e;
  if (a.dtype == DType::kBF16) launch_typed<__nv_bfloat16>(a, p, stream);
  else launch_typed<__half>(a, p, stream);

  launch_attention_backward_dq_convert(a, ws, stream);
}

}  // namespace parallax::detail
