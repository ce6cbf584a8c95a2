// Backward level 1: the attention gradients exactly as the formulas read, fp32 throughout, with one row of
// probabilities materialized in shared memory. The GPU reference of the backward tests and of
// `parallax attention --backward`. Slow by design; every load is a scalar 2-byte load, so any layout the
// validation accepts works.
//
// Two kernels, each owning its outputs outright (no atomics, deterministic by construction):
//
//   dq pass: one block (128 threads) per query row (b, h, i), like the forward's reference:
//     1. q_i, dO_i -> shared fp32; Delta_i = dO_i . out_i (block reduction), stored to the workspace
//     2. for the n visible keys, one warp per key: s = scale q_i . k_j, P = exp(s - lse_i),
//        dP = dO_i . v_j, dS_j = P (dP - Delta_i) -> shared [Sk]
//     3. dq_i[d] = scale sum_j dS_j k_j[d] (thread t owns column t % D, groups of keys summed in shared memory
//        in a fixed order)
//   dk/dv pass: one block (128 threads) per key row (b, hk, j), after the dq pass (it reads Delta):
//     for every query head h of kv head hk's group and every query i that sees key j (causal: i >= j - Sk + Sq),
//     one warp per (h, i): recompute s, P, dP, dS for the pair with shuffle-reduced dot products; lane l
//     accumulates dv[d] += P dO_i[d] and dk[d] += dS q_i[d] for its columns d = l, l + 32, ...; the 4 warps'
//     partial sums are added in shared memory in warp order; dk *= scale.
//
// A row that sees no key (causal, Sq > Sk: lse = -inf) has no pair (i, j) at all: dq_i = 0 and it adds nothing to
// dk / dv, so exp(s - (-inf)) is never evaluated. expf (not the fast intrinsics).
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
constexpr int kMaxD = 128;  // per-lane column arrays: D / 32 <= 4

struct BackwardParams {
  const void *q, *k, *v, *out, *dout;
  const float* lse;
  void *dq, *dk, *dv;
  float* delta;
  AttentionStrides qs, ks, vs, os, dos, dqs, dks, dvs;
  int batch, seqlen_q, seqlen_k, heads, heads_kv, head_dim;
  float scale;
  bool causal;
};

__device__ float warp_sum(float x) {
  for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

// Block-wide sum through `scratch` (kWarps floats), warps added in order. Every thread gets the result.
__device__ float block_sum(float x, float* scratch) {
  x = warp_sum(x);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  float r = 0.f;
  for (int w = 0; w < kWarps; ++w) r += scratch[w];
  return r;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) attention_bwd_reference_dq_kernel(BackwardParams p) {
  extern __shared__ float smem[];
  const int D = p.head_dim;
  float* q_row = smem;                  // [D], scaled
  float* do_row = q_row + D;            // [D]
  float* partial = do_row + D;          // [kThreads]
  float* scratch = partial + kThreads;  // [kWarps]
  float* ds = scratch + kWarps;         // [Sk]

  const long long row = blockIdx.x;  // (b, h, i), i fastest
  const int i = static_cast<int>(row % p.seqlen_q);
  const int h = static_cast<int>((row / p.seqlen_q) % p.heads);
  const int b = static_cast<int>(row / (static_cast<long long>(p.seqlen_q) * p.heads));
  const int hk = h / (p.heads / p.heads_kv);
  const int n = visible_keys(i, p.seqlen_q, p.seqlen_k, p.causal);

  const T* q = static_cast<const T*>(p.q) + row_offset(p.qs, b, i, h);
  const T* o = static_cast<const T*>(p.out) + row_offset(p.os, b, i, h);
  const T* dout = static_cast<const T*>(p.dout) + row_offset(p.dos, b, i, h);
  T* dq = static_cast<T*>(p.dq) + row_offset(p.dqs, b, i, h);

  float dot = 0.f;
  for (int d = threadIdx.x; d < D; d += kThreads) {
    const float g = to_float(dout[d]);
    do_row[d] = g;
    q_row[d] = to_float(q[d]) * p.scale;
    dot += g * to_float(o[d]);
  }
  const float delta = block_sum(dot, scratch);  // its barriers also publish q_row / do_row
  if (threadIdx.x == 0) p.delta[row] = delta;
  if (n == 0) {  // no visible key: no gradient reaches q
    for (int d = threadIdx.x; d < D; d += kThreads) dq[d] = from_float<T>(0.f);
    return;
  }
  const float lse = p.lse[row];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  for (int j = warp; j < n; j += kWarps) {
    const T* k_row = k + row_offset(p.ks, b, j, hk);
    const T* v_row = v + row_offset(p.vs, b, j, hk);
    float s = 0.f, dp = 0.f;
    for (int d = lane; d < D; d += 32) {
      s += q_row[d] * to_float(k_row[d]);
      dp += do_row[d] * to_float(v_row[d]);
    }
    s = warp_sum(s);
    dp = warp_sum(dp);
    if (lane == 0) ds[j] = expf(s - lse) * (dp - delta);
  }
  __syncthreads();

  const int groups = kThreads / D;  // 2 for D = 64, 1 for D = 128
  const int d = threadIdx.x % D, group = threadIdx.x / D;
  float acc = 0.f;
  for (int j = group; j < n; j += groups) acc += ds[j] * to_float(k[row_offset(p.ks, b, j, hk) + d]);
  partial[threadIdx.x] = acc;
  __syncthreads();
  if (group == 0) {
    float sum = 0.f;
    for (int g = 0; g < groups; ++g) sum += partial[g * D + d];
    dq[d] = from_float<T>(sum * p.scale);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) attention_bwd_reference_dkdv_kernel(BackwardParams p) {
  __shared__ float k_row[kMaxD], v_row[kMaxD];
  __shared__ float part_dk[kWarps][kMaxD], part_dv[kWarps][kMaxD];
  const int D = p.head_dim;
  constexpr int kCols = kMaxD / 32;

  const long long row = blockIdx.x;  // (b, hk, j), j fastest
  const int j = static_cast<int>(row % p.seqlen_k);
  const int hk = static_cast<int>((row / p.seqlen_k) % p.heads_kv);
  const int b = static_cast<int>(row / (static_cast<long long>(p.seqlen_k) * p.heads_kv));
  const int group = p.heads / p.heads_kv;

  const T* kj = static_cast<const T*>(p.k) + row_offset(p.ks, b, j, hk);
  const T* vj = static_cast<const T*>(p.v) + row_offset(p.vs, b, j, hk);
  for (int d = threadIdx.x; d < D; d += kThreads) {
    k_row[d] = to_float(kj[d]);
    v_row[d] = to_float(vj[d]);
  }
  __syncthreads();

  // Queries that see key j: all, or with causal masking i >= j - (Sk - Sq).
  int i_begin = 0;
  if (p.causal) i_begin = max(0, j - (p.seqlen_k - p.seqlen_q));
  const int n_i = p.seqlen_q - i_begin;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float dk[kCols] = {}, dv[kCols] = {};
  const T* q = static_cast<const T*>(p.q);
  const T* dout = static_cast<const T*>(p.dout);
  for (long long t = warp; t < static_cast<long long>(group) * n_i; t += kWarps) {
    const int h = hk * group + static_cast<int>(t / n_i);
    const int i = i_begin + static_cast<int>(t % n_i);
    const T* qi = q + row_offset(p.qs, b, i, h);
    const T* gi = dout + row_offset(p.dos, b, i, h);
    float qv[kCols], gv[kCols];
    float s = 0.f, dp = 0.f;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const int d = lane + 32 * c;
      qv[c] = d < D ? to_float(qi[d]) : 0.f;
      gv[c] = d < D ? to_float(gi[d]) : 0.f;
      if (d < D) {
        s += qv[c] * k_row[d];
        dp += gv[c] * v_row[d];
      }
    }
    s = warp_sum(s) * p.scale;
    dp = warp_sum(dp);
    const long long r = (static_cast<long long>(b) * p.heads + h) * p.seqlen_q + i;
    const float P = expf(s - p.lse[r]);
    const float dS = P * (dp - p.delta[r]);
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      dv[c] += P * gv[c];
      dk[c] += dS * qv[c];
    }
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    part_dk[warp][lane + 32 * c] = dk[c];
    part_dv[warp][lane + 32 * c] = dv[c];
  }
  __syncthreads();
  T* dk_out = static_cast<T*>(p.dk) + row_offset(p.dks, b, j, hk);
  T* dv_out = static_cast<T*>(p.dv) + row_offset(p.dvs, b, j, hk);
  for (int d = threadIdx.x; d < D; d += kThreads) {
    float sk = 0.f, sv = 0.f;
    for (int w = 0; w < kWarps; ++w) {
      sk += part_dk[w][d];
      sv += part_dv[w][d];
    }
    dk_out[d] = from_float<T>(sk * p.scale);
    dv_out[d] = from_float<T>(sv);
  }
}

template <typename T>
void launch(const AttentionBackwardArgs& a, const AttentionBackwardWorkspace& ws, cudaStream_t stream) {
  PX_REQUIRE(a.head_dim <= kMaxD && kThreads % a.head_dim == 0, "head_dim",
             "backward level 1 needs head_dim to divide " + std::to_string(kThreads) + " (got " +
                 std::to_string(a.head_dim) + ")");
  PX_REQUIRE(ws.delta != nullptr, "workspace", "backward level 1 needs the Delta buffer");
  const std::size_t smem =
      (static_cast<std::size_t>(a.seqlen_k) + 2 * a.head_dim + kThreads + kWarps) * sizeof(float);
  int device = 0, optin = 0;
  PX_CUDA_CHECK(cudaGetDevice(&device));
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (smem > static_cast<std::size_t>(optin))
    throw Error("attention backward kernel 'reference' keeps one row of fp32 dS in shared memory: seqlen_k=" +
                std::to_string(a.seqlen_k) + " needs " + std::to_string(smem) + " bytes, this device allows " +
                std::to_string(optin));
  const long long q_rows = static_cast<long long>(a.batch) * a.heads * a.seqlen_q;
  const long long k_rows = static_cast<long long>(a.batch) * a.heads_kv * a.seqlen_k;
  if (q_rows > 0x7fffffffLL || k_rows > 0x7fffffffLL)
    throw Error("attention backward kernel 'reference': batch*heads*seqlen exceeds the grid limit 2^31-1");

  BackwardParams p{};
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  p.out = a.out;
  p.dout = a.dout;
  p.lse = a.lse;
  p.dq = a.dq;
  p.dk = a.dk;
  p.dv = a.dv;
  p.delta = ws.delta;
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
  p.head_dim = a.head_dim;
  p.scale = a.scale();
  p.causal = a.causal;

  const auto dq_kernel = attention_bwd_reference_dq_kernel<T>;
  PX_CUDA_CHECK(cudaFuncSetAttribute(dq_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  dq_kernel<<<static_cast<unsigned>(q_rows), kThreads, smem, stream>>>(p);
  PX_CUDA_CHECK_LAUNCH();
  attention_bwd_reference_dkdv_kernel<T><<<static_cast<unsigned>(k_rows), kThreads, 0, stream>>>(p);
  PX_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_attention_backward_reference(const AttentionBackwardArgs& args, const AttentionBackwardWorkspace& ws,
                                         cudaStream_t stream) {
  if (args.dtype == DType::kF16) return launch<__half>(args, ws, stream);
  return launch<__nv_bfloat16>(args, ws, stream);
}

}  // namespace parallax::detail
