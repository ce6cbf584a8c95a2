// Hopper Tensor Memory Accelerator (TMA) PTX, each instruction wrapped once.
//
// A CUtensorMap (built on the host, src/gemm/tc/tma_map.cpp) describes a 2D global tensor, the box one copy
// moves and the shared-memory swizzle. One thread issues the copy; the hardware computes every address,
// zero-fills the parts of the box outside the tensor, and reports the bytes on an mbarrier (complete_tx).
// The map must live in param / const / global memory: kernels take it as `const __grid_constant__`.
#pragma once

#include <cstdint>

#include "ptx/mbarrier.cuh"

namespace parallax::ptx {

// Pull the 128-byte descriptor into the TMA unit's cache before the first copy needs it.
__device__ __forceinline__ void tma_prefetch_descriptor(const void* tensor_map) {
#if PX_SM90_PTX
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<std::uint64_t>(tensor_map)) : "memory");
#else
  __trap();
#endif
}

// Copies the box at element coordinates (inner, outer) of the 2D tensor into shared memory at `dst`
// (1024-byte aligned for the 128B swizzle), and counts its bytes on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const void* tensor_map, std::uint64_t* bar, int inner,
                                            int outer) {
#if PX_SM90_PTX
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], "
      "[%2];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<std::uint64_t>(tensor_map)), "r"(smem_addr(bar)), "r"(inner), "r"(outer)
      : "memory");
#else
  __trap();
#endif
}

}  // namespace parallax::ptx
