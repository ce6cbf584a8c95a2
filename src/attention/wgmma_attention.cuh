// Device helpers shared by the Hopper attention kernels (forward level 4, attn_04_wgmma.cu, and backward
// level 4, attn_bwd_04_wgmma.cu): the register-A wgmma of a 16-bit tile by head dimension and element type,
// and register fences over whole accumulator / fragment arrays.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "ptx/wgmma.cuh"

namespace parallax::detail {

// [64 x D] += A B for one k16 step: A (16-bit pairs, the m64 accumulator layout) from registers, B MN-major
// from shared memory (transpose bit), by head dimension D (64 or 128) and element type. The forward's O += P V
// and the backward's dV += P^T dO, dK += dS^T Q.
template <int D, typename T>
__device__ __forceinline__ void wgmma_rs(float (&d)[D / 2], const std::uint32_t (&a)[4], std::uint64_t db) {
  static_assert(D == 64 || D == 128, "head dimension 64 or 128");
  if constexpr (D == 128 && std::is_same_v<T, __nv_bfloat16>) ptx::wgmma_m64n128k16_rs_bf16<true>(d, a, db, 1u);
  else if constexpr (D == 128) ptx::wgmma_m64n128k16_rs_f16<true>(d, a, db, 1u);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) ptx::wgmma_m64n64k16_rs_bf16<true>(d, a, db, 1u);
  else ptx::wgmma_m64n64k16_rs_f16<true>(d, a, db, 1u);
}

// Register fences over a whole array: the compiler may not move reads / writes of these registers across
// the wgmma that is reading or writing them asynchronously.
template <int N>
__device__ __forceinline__ void fence_all(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) ptx::register_fence(r[i]);
}
template <int N>
__device__ __forceinline__ void fence_all(std::uint32_t (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) ptx::register_fence(r[i][e]);
}

}  // namespace parallax::detail
