// Epilogue math shared by the tensor-core GEMM kernels and the cuBLAS peer's elementwise pass, so that both
// apply exactly the same function:  D = act(alpha * acc + beta * C + bias[col]), rounded once to the output
// type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "parallax/gemm.hpp"

namespace parallax::detail {

// GELU, tanh approximation (what most transformer code calls "gelu_new" / approximate="tanh").
// tanhf (not the tanh.approx instruction): the approximation error of the hardware tanh (~2^-11 relative)
// would be visible in fp32 outputs; the epilogue is nowhere near the bottleneck.
__device__ __forceinline__ float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.f + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

// SiLU / swish: x * sigmoid(x). For very negative x, expf(-x) overflows to inf and x / inf = -0: correct.
__device__ __forceinline__ float silu(float x) { return x / (1.f + expf(-x)); }

__device__ __forceinline__ float activate(float x, Epilogue e) {
  switch (e) {
    case Epilogue::kGelu: return gelu_tanh(x);
    case Epilogue::kSilu: return silu(x);
    default: return x;
  }
}

// Conversions between the storage types and fp32 (round to nearest even on the way out).
template <typename T> __device__ __forceinline__ float to_float(T v);
template <> __device__ __forceinline__ float to_float<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// Everything the epilogue needs besides the accumulator, passed by value to the kernels.
struct EpilogueParams {
  float alpha;
  float beta;
  const float* bias;  // nullptr: none
  Epilogue act;
};

// One output element. `c` points at D[row][col] (also the old C value when beta != 0). beta == 0 never
// reads C: it may be uninitialised or NaN, and 0 * NaN = NaN.
template <typename Out>
__device__ __forceinline__ void epilogue_store(Out* c, float acc, int col, const EpilogueParams& ep) {
  float v = ep.alpha * acc;
  if (ep.beta != 0.f) v += ep.beta * to_float<Out>(*c);
  if (ep.bias != nullptr) v += ep.bias[col];
  *c = from_float<Out>(activate(v, ep.act));
}

}  // namespace parallax::detail
