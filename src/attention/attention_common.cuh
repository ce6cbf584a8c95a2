// Device helpers shared by the attention levels: element conversion, strided addressing, the causal limit.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "parallax/attention.hpp"

namespace parallax::detail {

template <typename T>
__device__ __forceinline__ float to_float(T x);
template <>
__device__ __forceinline__ float to_float<__half>(__half x) { return __half2float(x); }
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// Element offset of row (b, s, h) of a [B, S, H, D] tensor; 64-bit because B*S*H*D passes 2^31 quickly.
__host__ __device__ __forceinline__ std::int64_t row_offset(const AttentionStrides& st, int b, int s, int h) {
  return b * st.batch + s * st.seq + h * st.head;
}

// Keys visible to query row i: all of them, or with causal masking aligned bottom-right (FlashAttention
// >= 2.1) keys j <= i + (Sk - Sq). 0 means the row is fully masked (output 0, LSE -inf).
__host__ __device__ __forceinline__ int visible_keys(int i, int seqlen_q, int seqlen_k, bool causal) {
  if (!causal) return seqlen_k;
  const long long n = static_cast<long long>(i) + seqlen_k - seqlen_q + 1;
  return n < 0 ? 0 : (n > seqlen_k ? seqlen_k : static_cast<int>(n));
}

// A trivially-copyable view of AttentionArgs for kernel parameters (std::optional is not device-friendly).
struct AttentionParams {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  float* lse;
  AttentionStrides qs, ks, vs, os;
  int batch, seqlen_q, seqlen_k, heads, heads_kv, head_dim;
  float scale;
  bool causal;
};

inline AttentionParams make_params(const AttentionArgs& a) {
  return {a.q,        a.k,          a.v,        a.out,   a.lse,      a.q_strides, a.k_strides,
          a.v_strides, a.out_strides, a.batch,  a.seqlen_q, a.seqlen_k, a.heads,   a.heads_kv,
          a.head_dim, a.scale(),     a.causal};
}

}  // namespace parallax::detail
