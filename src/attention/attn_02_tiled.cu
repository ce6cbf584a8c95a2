// Level 2: tiled attention with the online softmax, on CUDA cores in fp32 (FlashAttention's algorithm
// without tensor cores): the Sq x Sk score matrix never exists, each block streams K and V through shared
// memory once per 32 query rows.
//
//   block = 4 warps, BM = 32 query rows of one (b, h); warp w owns rows 8w .. 8w+7 of the block
//   Q tile [BM][D] fp32 in shared memory, pre-scaled by scale * log2(e) (exp2 is one MUFU op; e^x = 2^(x log2 e))
//   for each key tile of BN = 32 keys (only up to the last key the block's last row may see):
//     K tile [BN][D+1] (padded: lane = key reads column d of its own row, (lane + d) % 32 -> no bank conflict)
//     V tile [BN][D]
//     scores: lane j computes s[r] = q_r . k_j for the warp's 8 rows (each K value read once, used 8 times)
//     mask: keys past Sk or past the causal limit of row r -> -inf
//     online softmax per row: m' = max(m, max_j s), p_j = 2^(s_j - m'), alpha = 2^(m - m'),
//                             l = alpha * l + sum_j p_j, acc = alpha * acc
//     P V: lane owns output columns lane + 32 t; p_j is broadcast from lane j with a shuffle
//   epilogue: out = acc / l (0 for a fully masked row), lse = (m + log2 l) * ln 2 (-inf when l = 0)
//
// A row that has seen no visible key keeps m = -inf: then p = 0 and alpha = 1 by construction (never
// 2^(-inf - -inf) = NaN). Scalar 2-byte global loads: any layout the validation accepts.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <string>

#include "attention/attention_common.cuh"
#include "attention/launchers.hpp"
#include "parallax/core.hpp"

namespace parallax::detail {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kBlockM = 32;                    // query rows per block
constexpr int kBlockN = 32;                    // keys per tile
constexpr int kRowsPerWarp = kBlockM / kWarps; // 8
static_assert(kBlockN == 32, "one key per lane in the score step");
static_assert(kBlockM % kWarps == 0, "rows split evenly over the warps");
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <int D>
constexpr std::size_t smem_bytes() {
  return (static_cast<std::size_t>(kBlockM) * D + kBlockN * (D + 1) + kBlockN * D) * sizeof(float);
}

__device__ __forceinline__ float warp_max(float x) {
  for (int off = 16; off > 0; off >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
  for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) attention_tiled_kernel(AttentionParams p) {
  static_assert(D % 32 == 0, "lane owns output columns lane + 32 t");
  constexpr int kCols = D / 32;
  extern __shared__ float smem[];
  float* q_tile = smem;                            // [kBlockM][D]
  float* k_tile = q_tile + kBlockM * D;            // [kBlockN][D + 1]
  float* v_tile = k_tile + kBlockN * (D + 1);      // [kBlockN][D]

  const int m0 = blockIdx.x * kBlockM, h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (p.heads / p.heads_kv);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float q_scale = p.scale * kLog2e;

  const T* q = static_cast<const T*>(p.q);
  for (int idx = threadIdx.x; idx < kBlockM * D; idx += kThreads) {
    const int r = idx / D, d = idx % D, i = m0 + r;
    q_tile[idx] = i < p.seqlen_q ? to_float(q[row_offset(p.qs, b, i, h) + d]) * q_scale : 0.f;
  }

  // Keys this block must visit: those visible to its last (real) row; earlier rows see a prefix of them.
  const int last_row = min(m0 + kBlockM, p.seqlen_q) - 1;
  const int block_keys = visible_keys(last_row, p.seqlen_q, p.seqlen_k, p.causal);
  const int warp_row0 = m0 + warp * kRowsPerWarp;

  float row_max[kRowsPerWarp], row_sum[kRowsPerWarp], acc[kRowsPerWarp][kCols];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    row_max[r] = -INFINITY;
    row_sum[r] = 0.f;
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[r][c] = 0.f;
  }

  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  for (int j0 = 0; j0 < block_keys; j0 += kBlockN) {
    __syncthreads();  // the previous tile is no longer read (and, the first time, q_tile is complete)
    for (int idx = threadIdx.x; idx < kBlockN * D; idx += kThreads) {
      const int jj = idx / D, d = idx % D, j = j0 + jj;
      const bool in = j < p.seqlen_k;
      k_tile[jj * (D + 1) + d] = in ? to_float(k[row_offset(p.ks, b, j, hk) + d]) : 0.f;
      v_tile[jj * D + d] = in ? to_float(v[row_offset(p.vs, b, j, hk) + d]) : 0.f;
    }
    __syncthreads();

    float s[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) s[r] = 0.f;
    const float* q_rows = q_tile + warp * kRowsPerWarp * D;
#pragma unroll 4
    for (int d = 0; d < D; ++d) {
      const float kd = k_tile[lane * (D + 1) + d];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) s[r] += q_rows[r * D + d] * kd;
    }

    const int j = j0 + lane;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      // Per-row limit (recomputed: cheaper than 8 live registers); padding rows past Sq see nothing and are
      // never stored. The limit is <= Sk, so this also masks the zero-filled keys past the end.
      const int i = warp_row0 + r;
      const int row_keys = i < p.seqlen_q ? visible_keys(i, p.seqlen_q, p.seqlen_k, p.causal) : 0;
      if (j >= row_keys) s[r] = -INFINITY;
      const float m_new = fmaxf(row_max[r], warp_max(s[r]));
      float alpha = 1.f, prob = 0.f;
      if (m_new != -INFINITY) {  // warp-uniform: every lane holds the same m_new
        prob = exp2f(s[r] - m_new);       // s = -inf -> 0
        alpha = exp2f(row_max[r] - m_new);  // first visible tile: 2^-inf = 0, acc and sum are 0 anyway
      }
      row_sum[r] = row_sum[r] * alpha + warp_sum(prob);
      row_max[r] = m_new;
#pragma unroll
      for (int c = 0; c < kCols; ++c) acc[r][c] *= alpha;
      s[r] = prob;
    }

#pragma unroll 4
    for (int jj = 0; jj < kBlockN; ++jj) {
      float vv[kCols];
#pragma unroll
      for (int c = 0; c < kCols; ++c) vv[c] = v_tile[jj * D + lane + 32 * c];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const float pj = __shfl_sync(0xffffffffu, s[r], jj);
#pragma unroll
        for (int c = 0; c < kCols; ++c) acc[r][c] += pj * vv[c];
      }
    }
  }

  T* out = static_cast<T*>(p.out);
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int i = m0 + warp * kRowsPerWarp + r;
    if (i >= p.seqlen_q) continue;
    const float inv = row_sum[r] > 0.f ? 1.f / row_sum[r] : 0.f;
    T* o = out + row_offset(p.os, b, i, h);
#pragma unroll
    for (int c = 0; c < kCols; ++c) o[lane + 32 * c] = from_float<T>(acc[r][c] * inv);
    if (p.lse && lane == 0)
      p.lse[(static_cast<long long>(b) * p.heads + h) * p.seqlen_q + i] =
          row_sum[r] > 0.f ? (row_max[r] + log2f(row_sum[r])) * kLn2 : -INFINITY;
  }
}

template <typename T, int D>
void launch(const AttentionArgs& args, cudaStream_t stream) {
  constexpr std::size_t smem = smem_bytes<D>();
  const auto kernel = attention_tiled_kernel<T, D>;
  PX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  if (args.heads > 65535 || args.batch > 65535)
    throw Error("attention kernel 'tiled': heads and batch must be <= 65535 (grid y/z limits; got heads=" +
                std::to_string(args.heads) + ", batch=" + std::to_string(args.batch) + ")");
  const dim3 grid((args.seqlen_q + kBlockM - 1) / kBlockM, args.heads, args.batch);
  kernel<<<grid, kThreads, smem, stream>>>(make_params(args));
  PX_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_dim(const AttentionArgs& args, cudaStream_t stream) {
  switch (args.head_dim) {
    case 64: return launch<T, 64>(args, stream);
    case 128: return launch<T, 128>(args, stream);
  }
  throw InvalidArgument("head_dim", "must be 64 or 128 for level 2 (got " + std::to_string(args.head_dim) + ")");
}

}  // namespace

void launch_attention_tiled(const AttentionArgs& args, cudaStream_t stream) {
  if (args.dtype == DType::kF16) return launch_dim<__half>(args, stream);
  return launch_dim<__nv_bfloat16>(args, stream);
}

}  // namespace parallax::detail
