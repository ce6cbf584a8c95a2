// Ampere-era PTX (sm_80+), each instruction wrapped once with a name that says what it does. Used by the
// mma.sync GEMM (level 10) and the FA2-style attention kernels; Hopper's wgmma / TMA / mbarrier live in their
// own headers beside this one.
//
//   cp.async      global -> shared copies that bypass registers and complete asynchronously, in groups
//   ldmatrix      a warp loads 8x8 16-bit tiles from shared memory straight into the mma fragment layout
//   mma.sync      m16n8k16 tensor-core product, bf16 / fp16 in, fp32 accumulate
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace parallax::ptx {

// Shared-memory address as the 32-bit value PTX's .shared state space expects.
__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// ---- cp.async -------------------------------------------------------------------------------------------
// 16-byte copy global -> shared. `valid == false` copies nothing and writes 16 zero bytes (src-size 0), which
// is how tile edges become zeros without a branch around the instruction. .cg: cache in L2 only (the data
// is read once per block; L1 would only evict things that are reused).
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  const int src_size = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(src_size)
               : "memory");
}
// 4-byte and 8-byte variants (.ca: the only caching mode allowed below 16 bytes), for rows whose alignment
// does not allow 16-byte transfers. `bytes_valid` < size zero-fills the remainder.
__device__ __forceinline__ void cp_async_4(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(valid ? 4 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_8(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(valid ? 8 : 0)
               : "memory");
}
// 16-byte copy of which only the first `src_bytes` (0..16) are read from global memory; the rest of the 16
// shared bytes are zero-filled. For a row chunk that straddles the matrix edge (k = 17: the third chunk of
// a row holds one real element and seven zeros).
__device__ __forceinline__ void cp_async_16_partial(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(src_bytes)
               : "memory");
}
// Closes the group of cp.asyncs issued since the last commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N committed groups are still in flight (N = stages - 2 in a multi-stage pipeline).
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// ---- ldmatrix --------------------------------------------------------------------------------------------
// Four 8x8 matrices of 16-bit elements. Lanes 8i..8i+7 give the row addresses of matrix i (16 contiguous
// bytes each); lane l receives, for each matrix, the 2 elements of row l/4, columns 2(l%4), 2(l%4)+1.
// The .trans form delivers the transpose: the same registers as if the 8x8 tile had been stored
// column-major, which is how a K-contiguous fragment is built from an MN-contiguous tile.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem_row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem_row)));
}
__device__ __forceinline__ void ldmatrix_x2(std::uint32_t (&r)[2], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(smem_row)));
}
__device__ __forceinline__ void ldmatrix_x2_trans(std::uint32_t (&r)[2], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(smem_row)));
}

// ---- mma.sync m16n8k16 ---------------------------------------------------------------------------------
// d = a * b + c for a 16x16 (row) A fragment (4 registers of 2 halves), a 16x8 (col) B fragment (2
// registers) and a 16x8 fp32 accumulator (4 floats: rows lane/4 and lane/4+8, columns 2(lane%4)+{0,1}).
template <typename T> struct MmaType;
template <> struct MmaType<__nv_bfloat16> { static constexpr const char* name = "bf16"; };
template <> struct MmaType<__half> { static constexpr const char* name = "f16"; };

template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]);

template <>
__device__ __forceinline__ void mma_m16n8k16<__nv_bfloat16>(float (&d)[4], const std::uint32_t (&a)[4],
                                                            const std::uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <>
__device__ __forceinline__ void mma_m16n8k16<__half>(float (&d)[4], const std::uint32_t (&a)[4],
                                                     const std::uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Two fp32 values rounded to one register of two 16-bit values (low half = first), e.g. to feed softmax
// probabilities back into mma.sync as an A fragment.
template <typename T> __device__ __forceinline__ std::uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ std::uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}
template <> __device__ __forceinline__ std::uint32_t pack2<__half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

// ---- special functions -----------------------------------------------------------------------------------
// 2^x on the SFU (MUFU.EX2, ~2 ulp), flushing subnormal results to zero. exp2f() compiles to the non-.ftz
// form, which adds instructions to rescale subnormal outputs; softmax probabilities below 2^-126 contribute
// nothing to an fp32 sum, so attention uses this. 2^-inf = +0, which the online softmax relies on.
__device__ __forceinline__ float ex2_approx_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace parallax::ptx
