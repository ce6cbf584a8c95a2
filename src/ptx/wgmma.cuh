// Hopper warpgroup MMA (wgmma) PTX, each instruction wrapped once.
//
// A warpgroup (4 consecutive warps, 128 threads) issues one asynchronous m64 x N x k16 product. A and B are
// read straight from shared memory through 64-bit "matrix descriptors"; the fp32 accumulator (64 x N) lives
// in registers, N/2 floats per thread. The issue is asynchronous:
//
//   wgmma_fence()          before the first wgmma that touches accumulator registers written by ordinary code
//   wgmma_m64nNk16_*(...)  any number of products (they chain on the same accumulator in order)
//   wgmma_commit_group()   closes a group
//   wgmma_wait_group<G>()  waits until at most G groups are still in flight (their smem reads done too)
//
// Accumulator layout (PTX ISA "wgmma .m64nNk16 register fragment", f32 D): thread t of the warpgroup,
// warp w = t / 32, lane l = t % 32, register i in [0, N/2):
//     row = 16 w + l / 4 + 8 ((i / 2) % 2),     col = 8 (i / 4) + 2 (l % 4) + (i % 2)
//
// Shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format"), for the 128-byte swizzle used here:
//   bits  0-13  start address >> 4
//   bits 16-29  leading-dimension byte offset (LBO) >> 4
//   bits 32-45  stride-dimension byte offset (SBO) >> 4
//   bits 49-51  base offset (0: every swizzle atom is 1024-byte aligned)
//   bits 62-63  swizzle mode: 1 = 128B
// The 128B-swizzle atom is 8 rows of 128 bytes (1024 bytes). Its rows run along K for a K-major operand and
// along M/N for an MN-major one (CUTLASS's canonical GMMA layouts, in units of 16-bit elements):
//   K-major  : Swizzle<3,4,3> o ((8, m), (64, k)) : ((64 elem, SBO), (1, -)): 8 rows of 64 K-values per atom,
//              SBO = byte distance between 8-row groups along M/N; LBO unused (K of one wgmma, 16, is inside
//              the 64-wide row); the k16 slices of a 64-wide tile start 32 bytes apart.
//   MN-major : Swizzle<3,4,3> o ((64, m), (8, k)) : ((1, LBO), (64 elem, SBO)): 8 K-rows of 64 M/N-values per
//              atom, LBO = byte distance between 64-wide M/N blocks, SBO = between 8-row groups along K.
// The wgmma transpose immediates (imm-trans-a/b) select MN-major for A / B.
//
// The m64nNk16 wrappers live in wgmma_generated.inc: their operand lists (64 or 128 accumulators) were
// produced by a small script rather than typed; each is one asm statement of the same form:
//   setp.ne.b32 p, scale_d, 0;   // scale_d == 0: D = A*B (first k-step of a tile), else D += A*B
//   wgmma.mma_async.sync.aligned.m64nNk16.f32.T.T {d...}, desc_a, desc_b, p, 1, 1, transA, transB;
#pragma once

#include <cstdint>

#include "ptx/mbarrier.cuh"  // PX_SM90_PTX, smem_addr

namespace parallax::ptx {

// Descriptor of a 128B-swizzled operand tile starting at shared address `smem_byte_addr`.
__device__ __forceinline__ std::uint64_t make_smem_desc_sw128(std::uint32_t smem_byte_addr, std::uint32_t lbo_bytes,
                                                             std::uint32_t sbo_bytes) {
  std::uint64_t desc = 0;
  desc |= static_cast<std::uint64_t>((smem_byte_addr & 0x3FFFFu) >> 4);
  desc |= static_cast<std::uint64_t>((lbo_bytes & 0x3FFFFu) >> 4) << 16;
  desc |= static_cast<std::uint64_t>((sbo_bytes & 0x3FFFFu) >> 4) << 32;
  desc |= static_cast<std::uint64_t>(1) << 62;  // 128-byte swizzle
  return desc;
}

__device__ __forceinline__ void wgmma_fence() {
#if PX_SM90_PTX
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void wgmma_commit_group() {
#if PX_SM90_PTX
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}
template <int kMaxPending>
__device__ __forceinline__ void wgmma_wait_group() {
  static_assert(kMaxPending >= 0 && kMaxPending <= 7, "wgmma.wait_group takes 0..7");
#if PX_SM90_PTX
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kMaxPending) : "memory");
#else
  __trap();
#endif
}

// Tells the compiler a register is read and written here, so it neither moves accumulator accesses across
// the asynchronous wgmma boundaries nor assumes values it cannot see change (emits no instruction).
__device__ __forceinline__ void register_fence(float& r) { asm volatile("" : "+f"(r)::"memory"); }
// The same for a 32-bit register holding packed 16-bit A values of a register-A wgmma: fencing it after the
// wgmma.wait_group keeps the compiler from reusing the register while the asynchronous product still reads it.
__device__ __forceinline__ void register_fence(std::uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }

#include "ptx/wgmma_generated.inc"
#include "ptx/wgmma_n64_generated.inc"

// A from registers ("RS" form, used by attention's O += P V where P never leaves the registers):
//   wgmma.mma_async.sync.aligned.m64nNk16.f32.T.T {d...}, {a0, a1, a2, a3}, desc_b, p, 1, 1, transB;
// Thread t (warp w = t / 32, lane l) supplies rows 16 w + l / 4 (+8) and columns 2 (l % 4) (+1, +8, +9) of
// the m64 x k16 A tile: a0 = (row, k 2q..2q+1), a1 = (row + 8, same k), a2 = (row, k + 8), a3 = (row + 8, k + 8),
// two 16-bit values per register, lower k in the low half. Those are exactly the positions of accumulator
// registers 8 kk + 0..7 of an m64nNk16 f32 accumulator for columns 16 kk .. 16 kk + 15 (layout above), so a
// product's result becomes the next product's A operand by converting pairs: a[i] = pack(acc[8 kk + 2 i],
// acc[8 kk + 2 i + 1]). There is no transpose immediate for A (registers are always "K-major").
#include "ptx/wgmma_rs_generated.inc"

}  // namespace parallax::ptx
