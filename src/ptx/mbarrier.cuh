// Hopper (sm_90) synchronisation PTX, each instruction wrapped once:
//
//   mbarrier      a 64-bit barrier object in shared memory with an arrival count AND a transaction count
//                 (bytes). TMA copies "complete_tx" on it, so one wait covers "all bytes of this stage
//                 landed". Phases alternate 0/1; a waiter names the parity of the phase it waits to finish.
//   fence.proxy.async   orders generic-proxy shared-memory accesses (e.g. mbarrier.init) before async-proxy
//                 ones (TMA, wgmma reads).
//   setmaxnreg    warp-specialized kernels hand registers from the producer warpgroup to the consumers.
//
// Everything here needs sm_90; the bodies compile to a trap on older architectures so that the sm_80 pass of
// the library build still compiles (the host never launches these kernels there: require_sm90).
#pragma once

#include <cstdint>

#include "ptx/sm80.cuh"  // smem_addr

// wgmma and setmaxnreg exist only in the arch-specific sm_90a target (not plain sm_90), so everything Hopper
// keys on the feature macro nvcc defines for it.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define PX_SM90_PTX 1
#else
#define PX_SM90_PTX 0
#endif

namespace parallax::ptx {

// Initialise a barrier that completes a phase after `arrivals` arrive() calls (plus the expected bytes).
__device__ __forceinline__ void mbarrier_init(std::uint64_t* bar, std::uint32_t arrivals) {
#if PX_SM90_PTX
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(arrivals) : "memory");
#else
  __trap();
#endif
}

// Make barrier initialisation (generic proxy) visible to the async proxy (TMA complete_tx).
__device__ __forceinline__ void fence_proxy_async_shared() {
#if PX_SM90_PTX
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#else
  __trap();
#endif
}

// One arrival (release semantics: this thread's earlier shared-memory reads are ordered before it).
__device__ __forceinline__ void mbarrier_arrive(std::uint64_t* bar) {
#if PX_SM90_PTX
  asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(smem_addr(bar))
               : "memory");
#else
  __trap();
#endif
}

// One arrival that also announces `bytes` more transaction bytes the phase must see before completing
// (what the TMA copies issued right after will deliver).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
#if PX_SM90_PTX
  asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(
                   smem_addr(bar)),
               "r"(bytes)
               : "memory");
#else
  __trap();
#endif
}

// Blocks until the phase with parity `parity` has completed. try_wait suspends the thread for a
// hardware-chosen time instead of spinning hot; the loop covers its time-outs. A freshly initialised barrier
// counts as having completed the phase of parity 1, so waiting for parity 1 first returns at once (how
// producers find every stage "empty" at the start).
__device__ __forceinline__ void mbarrier_wait(std::uint64_t* bar, std::uint32_t parity) {
#if PX_SM90_PTX
  std::uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (!done);
#else
  __trap();
#endif
}

// Named barrier `id` (1..15; 0 is __syncthreads) over `threads` threads (a multiple of 32): lets one
// warpgroup synchronise its own 128 threads without stopping the other warpgroups of the block.
__device__ __forceinline__ void named_barrier_sync(std::uint32_t id, std::uint32_t threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- thread-block clusters (CTAs of one cluster run at the same time on one GPC and can reach each
// other's shared memory: "distributed shared memory") ----

// This CTA's rank in its cluster (0 .. cluster size - 1).
__device__ __forceinline__ std::uint32_t cluster_ctarank() {
#if PX_SM90_PTX
  std::uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
#else
  __trap();
  return 0;
#endif
}

// Makes this thread's mbarrier.init visible to the other CTAs of the cluster (their remote arrivals and
// multicast complete_tx). Must be followed by a cluster-wide barrier before anyone else touches the barriers.
__device__ __forceinline__ void fence_mbarrier_init_cluster() {
#if PX_SM90_PTX
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#else
  __trap();
#endif
}

// Every thread of every CTA in the cluster arrives (release) and waits (acquire). The non-.aligned forms:
// callers may reach it from divergent code (the producer warp's elected thread rejoins late).
__device__ __forceinline__ void cluster_sync() {
#if PX_SM90_PTX
  asm volatile("barrier.cluster.arrive.release;\n barrier.cluster.wait.acquire;\n" ::: "memory");
#else
  __trap();
#endif
}

// One arrival on the barrier at the same shared-memory offset as `bar`, but in the CTA of cluster rank
// `cta` (which may be this CTA): mapa translates the address into the cluster's shared window.
// Default semantics (release at CTA scope), as CUTLASS's ClusterBarrier does: the only accesses it must order
// are this warp's wgmma reads of the stage, which wgmma.wait_group already completed. Spelling it
// `.release.cluster` made ptxas put a MEMBAR.ALL.GPU before every arrival in the main loop.
__device__ __forceinline__ void mbarrier_arrive_cluster(std::uint64_t* bar, std::uint32_t cta) {
#if PX_SM90_PTX
  asm volatile(
      "{\n .reg .b32 remote;\n mapa.shared::cluster.u32 remote, %0, %1;\n"
      " mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(smem_addr(bar)),
      "r"(cta)
      : "memory");
#else
  (void)bar, (void)cta;
  __trap();
#endif
}

// Register reallocation across warpgroups (all warps of the warpgroup execute it). REGS: multiple of 8 in
// [24, 256].
template <int REGS>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(REGS % 8 == 0 && REGS >= 24 && REGS <= 256, "setmaxnreg: multiple of 8 in [24, 256]");
#if PX_SM90_PTX
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
#else
  __trap();
#endif
}
template <int REGS>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(REGS % 8 == 0 && REGS >= 24 && REGS <= 256, "setmaxnreg: multiple of 8 in [24, 256]");
#if PX_SM90_PTX
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
#else
  __trap();
#endif
}

}  // namespace parallax::ptx
