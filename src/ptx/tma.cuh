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

// Copies the box at element coordinates (c0 innermost, ..., c3) of a 4D tensor map into shared memory at `dst`
// (1024-byte aligned for the 128B swizzle) and counts its bytes on `bar`. Used for [B, S, H, D] attention
// tensors with arbitrary strides: dimensions (D, S, H, B), so one map serves every (batch, head).
__device__ __forceinline__ void tma_load_4d(void* dst, const void* tensor_map, std::uint64_t* bar, int c0, int c1,
                                            int c2, int c3) {
#if PX_SM90_PTX
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, "
      "%6}], [%2];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<std::uint64_t>(tensor_map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
#else
  (void)dst, (void)tensor_map, (void)bar, (void)c0, (void)c1, (void)c2, (void)c3;
  __trap();
#endif
}

// The multicast form (thread-block clusters): one copy from global memory lands at the SAME shared-memory
// offset `dst` in every CTA of the cluster whose bit is set in `cta_mask` (bit i = %cluster_ctarank i), and
// counts its bytes on the mbarrier at offset `bar` in each of those CTAs. Every destination CTA's barrier must
// therefore expect these bytes too, and none of them may still be reading the old contents of `dst`: the
// issuing CTA waits for "empty" arrivals from every destination (see wgmma_common.cuh). sm_90a only.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const void* tensor_map, std::uint64_t* bar, int inner,
                                                      int outer, std::uint16_t cta_mask) {
#if PX_SM90_PTX
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], "
      "[%1, {%3, %4}], [%2], %5;\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<std::uint64_t>(tensor_map)), "r"(smem_addr(bar)), "r"(inner), "r"(outer), "h"(cta_mask)
      : "memory");
#else
  (void)dst, (void)tensor_map, (void)bar, (void)inner, (void)outer, (void)cta_mask;
  __trap();
#endif
}

// ---- stores: shared -> global (the epilogue's direction) ----
//
// A bulk tensor store copies the box at (inner, outer) from shared memory at `src` (1024-byte aligned, laid out
// with the map's swizzle) to global memory, skipping every element outside the tensor (so partial tiles need
// no masking). It is asynchronous and tracked per thread in "bulk groups", not on an mbarrier: the issuing
// thread commits the stores issued so far as one group and later waits until at most N groups are still
// READING shared memory (wait_group_read: the buffer may be rewritten) or still in flight at all
// (wait_group: the global writes are done). Writes made to `src` by other threads through ordinary st.shared
// must be fenced into the async proxy (fence_proxy_async_shared) and barrier-ordered before the store.
__device__ __forceinline__ void tma_store_2d(const void* tensor_map, const void* src, int inner, int outer) {
#if PX_SM90_PTX
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
                   reinterpret_cast<std::uint64_t>(tensor_map)),
               "r"(smem_addr(src)), "r"(inner), "r"(outer)
               : "memory");
#else
  (void)tensor_map, (void)src, (void)inner, (void)outer;
  __trap();
#endif
}

// Adds the shared-memory box at `src` (laid out as the map's box, 128B-swizzled) element by element into the
// global tensor at coordinates (c0 innermost, ..., c3): a bulk reduction through the TMA unit, issued by one
// thread, committed and waited on like a bulk store (bulk_commit_group / bulk_wait_group*). Each element's
// addition is atomic with respect to other reductions; parts of the box outside the tensor are skipped. The
// same proxy rule as tma_store_2d applies to `src`. Used for the attention backward's fp32 dQ accumulator.
__device__ __forceinline__ void tma_reduce_add_4d(const void* tensor_map, const void* src, int c0, int c1, int c2,
                                                  int c3) {
#if PX_SM90_PTX
  asm volatile(
      "cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
          reinterpret_cast<std::uint64_t>(tensor_map)),
      "r"(smem_addr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
#else
  (void)tensor_map, (void)src, (void)c0, (void)c1, (void)c2, (void)c3;
  __trap();
#endif
}

// Orders this thread's generic-proxy global accesses with its async-proxy (TMA) ones, both ways: between a
// completed bulk reduction and the flag that publishes it, and between acquiring that flag and the next one.
__device__ __forceinline__ void fence_proxy_async_global() {
#if PX_SM90_PTX
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
#else
  __trap();
#endif
}

// Closes the bulk group of every bulk store this thread issued since the last commit.
__device__ __forceinline__ void bulk_commit_group() {
#if PX_SM90_PTX
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#else
  __trap();
#endif
}

// Waits until at most N of this thread's committed bulk groups still read their shared-memory source.
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
#if PX_SM90_PTX
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#else
  __trap();
#endif
}

// Waits until at most N of this thread's committed bulk groups are incomplete (global writes done).
template <int N>
__device__ __forceinline__ void bulk_wait_group() {
#if PX_SM90_PTX
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
#else
  __trap();
#endif
}

}  // namespace parallax::ptx
