// Level 1: the attention forward exactly as the formula reads, with the fp32 scores of one query row
// materialized in shared memory. It is the GPU reference of the tests and of `parallax attention`.
//
//   one block (128 threads) per query row (b, h, i):
//     1. q row -> shared fp32, pre-multiplied by the softmax scale
//     2. scores[j] = q . k[j] for the n visible keys: one warp per key, lanes split D, shuffle reduction
//     3. m = max_j scores[j]; p_j = exp(scores[j] - m); l = sum_j p_j  (block reductions; the classic
//        two-pass softmax, deliberately *not* the online rescaling that levels 2-4 use, so that a mistake in
//        the online algorithm cannot hide in the reference)
//     4. out[d] = sum_j p_j v[j, d] / l: thread t owns column d = t % D and the keys j = t / D (mod groups),
//        group partial sums combined in shared memory; lse = m + log(l)
//
// Shared memory holds Sk + D + small fp32 values: up to ~58k keys on sm_90 (227 KiB) and ~41k on sm_80
// (163 KiB); the launcher raises the dynamic limit and throws a clear Error beyond it. Every read is a
// scalar 2-byte load, so any layout the validation accepts works. expf / logf (not the fast intrinsics).
// Speed is not a goal: each block re-reads K and V of its head from L2 (Sk * D * 4 bytes per row).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <string>

#include "attention/attention_common.cuh"
#include "attention/launchers.hpp"
#include "parallax/core.hpp"

namespace parallax::detail {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
static_assert(kThreads % 128 == 0, "thread t owns column t % D for D in {64, 128}: kThreads must divide by 128");

// Block-wide reduction through `scratch` (kWarps floats). Every thread gets the result.
template <bool kMax>
__device__ float block_reduce(float x, float* scratch) {
  for (int off = 16; off > 0; off >>= 1) {
    const float y = __shfl_xor_sync(0xffffffffu, x, off);
    x = kMax ? fmaxf(x, y) : x + y;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  float r = scratch[0];
  for (int w = 1; w < kWarps; ++w) r = kMax ? fmaxf(r, scratch[w]) : r + scratch[w];
  return r;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) attention_reference_kernel(AttentionParams p) {
  extern __shared__ float smem[];
  const int D = p.head_dim;
  float* q_row = smem;                 // [D]
  float* partial = smem + D;           // [kThreads] column partial sums
  float* scratch = partial + kThreads; // [kWarps]
  float* scores = scratch + kWarps;    // [Sk]

  // blockIdx.x enumerates (b, h, i) with i fastest: neighbouring blocks share K/V of one head in L2.
  const long long row = blockIdx.x;
  const int i = static_cast<int>(row % p.seqlen_q);
  const int h = static_cast<int>((row / p.seqlen_q) % p.heads);
  const int b = static_cast<int>(row / (static_cast<long long>(p.seqlen_q) * p.heads));
  const int hk = h / (p.heads / p.heads_kv);
  const int n = visible_keys(i, p.seqlen_q, p.seqlen_k, p.causal);

  T* out = static_cast<T*>(p.out) + row_offset(p.os, b, i, h);
  float* lse = p.lse ? p.lse + (static_cast<long long>(b) * p.heads + h) * p.seqlen_q + i : nullptr;
  if (n == 0) {  // fully masked row (causal with Sq > Sk): defined as out 0, lse -inf
    for (int d = threadIdx.x; d < D; d += kThreads) out[d] = from_float<T>(0.f);
    if (lse && threadIdx.x == 0) *lse = -INFINITY;
    return;
  }

  const T* q = static_cast<const T*>(p.q) + row_offset(p.qs, b, i, h);
  for (int d = threadIdx.x; d < D; d += kThreads) q_row[d] = to_float(q[d]) * p.scale;
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const T* k = static_cast<const T*>(p.k);
  for (int j = warp; j < n; j += kWarps) {
    const T* k_row = k + row_offset(p.ks, b, j, hk);
    float dot = 0.f;
    for (int d = lane; d < D; d += 32) dot += q_row[d] * to_float(k_row[d]);
    for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
    if (lane == 0) scores[j] = dot;
  }
  __syncthreads();

  float m = -INFINITY;
  for (int j = threadIdx.x; j < n; j += kThreads) m = fmaxf(m, scores[j]);
  m = block_reduce<true>(m, scratch);
  float l = 0.f;
  for (int j = threadIdx.x; j < n; j += kThreads) {
    const float e = expf(scores[j] - m);
    scores[j] = e;
    l += e;
  }
  l = block_reduce<false>(l, scratch);  // its __syncthreads also publishes the exponentials

  const int groups = kThreads / D;  // 2 for D = 64, 1 for D = 128
  const int d = threadIdx.x % D, group = threadIdx.x / D;
  const T* v = static_cast<const T*>(p.v);
  float acc = 0.f;
  for (int j = group; j < n; j += groups) acc += scores[j] * to_float(v[row_offset(p.vs, b, j, hk) + d]);
  partial[threadIdx.x] = acc;
  __syncthreads();
  if (group == 0) {
    float sum = 0.f;
    for (int g = 0; g < groups; ++g) sum += partial[g * D + d];
    out[d] = from_float<T>(sum / l);
  }
  if (lse && threadIdx.x == 0) *lse = m + logf(l);
}

template <typename T>
void launch(const AttentionArgs& args, cudaStream_t stream) {
  PX_REQUIRE(kThreads % args.head_dim == 0, "head_dim",
             "level 1 needs head_dim to divide " + std::to_string(kThreads) + " (got " + std::to_string(args.head_dim) + ")");
  const std::size_t smem = (static_cast<std::size_t>(args.seqlen_k) + args.head_dim + kThreads + kWarps) * sizeof(float);
  int device = 0, optin = 0;
  PX_CUDA_CHECK(cudaGetDevice(&device));
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (smem > static_cast<std::size_t>(optin))
    throw Error("attention kernel 'reference' keeps one row of fp32 scores in shared memory: seqlen_k=" +
                std::to_string(args.seqlen_k) + " needs " + std::to_string(smem) + " bytes, this device allows " +
                std::to_string(optin));
  const auto kernel = attention_reference_kernel<T>;
  PX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const long long rows = static_cast<long long>(args.batch) * args.heads * args.seqlen_q;
  if (rows > 0x7fffffffLL)
    throw Error("attention kernel 'reference': batch*heads*seqlen_q=" + std::to_string(rows) + " exceeds the grid limit 2^31-1");
  kernel<<<static_cast<unsigned>(rows), kThreads, smem, stream>>>(make_params(args));
  PX_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_attention_reference(const AttentionArgs& args, cudaStream_t stream) {
  if (args.dtype == DType::kF16) return launch<__half>(args, stream);
  return launch<__nv_bfloat16>(args, stream);
}

}  // namespace parallax::detail
