// Shared-memory tile helpers of the mma.sync attention kernels (forward level 3 and the backward "mma"
// level): the XOR swizzle, the cp.async tile loader and the quad reductions over an m16n8 accumulator row.
//
// Swizzle. A tile row is kHeadDim 16-bit elements = kHeadDim/8 chunks of 16 bytes. ldmatrix reads 8 rows at
// the same column chunk in one phase; with a plain row-major layout and a 128- or 256-byte row pitch all 8
// addresses fall into the same 4 banks (8-way conflict). The chunk index is therefore XOR-ed with the row:
// physical chunk = chunk ^ (row % 8). The 8 rows of an ldmatrix phase then hit 8 different chunks (all 32
// banks), in both the plain and the .trans form, and a cp.async (one chunk per thread, consecutive threads
// along a row) stays conflict-free too. Needs >= 8 chunks per row, i.e. a row width that is a multiple of 64.
#pragma once

#include <cstdint>

#include "ptx/sm80.cuh"

namespace parallax::detail::mma {

// Offset in elements of (row, col) in a swizzled [rows][kRowElems] tile; col is a chunk start (multiple of 8)
// or lies inside the chunk of one.
template <int kRowElems>
__device__ __forceinline__ int swizzled(int row, int col) {
  static_assert(kRowElems % 64 == 0, "the swizzle needs >= 8 chunks (128 bytes) per row");
  const int chunk = (col >> 3) ^ (row & 7);
  return row * kRowElems + chunk * 8 + (col & 7);
}

// Copies rows [row0, row0 + kRows) of a [S, kRowElems] slice (row stride `row_stride` elements) into a
// swizzled tile; rows >= seqlen are zero-filled (cp.async src-size 0). One 16-byte cp.async per chunk,
// consecutive threads along a row. The caller commits the group.
template <typename T, int kRowElems, int kRows, int kThreads>
__device__ __forceinline__ void load_tile_async(T* smem, const T* gmem, std::int64_t row_stride, int row0,
                                                int seqlen) {
  constexpr int kChunks = kRowElems / 8;
  static_assert((kRows * kChunks) % kThreads == 0, "tile chunks must divide evenly among threads");
  constexpr int kIters = kRows * kChunks / kThreads;
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int idx = it * kThreads + static_cast<int>(threadIdx.x);
    const int row = idx / kChunks;
    const int col = (idx % kChunks) * 8;
    const bool valid = row0 + row < seqlen;
    // An invalid chunk still needs a legal address for the instruction; the slice base is one.
    const T* src = valid ? gmem + static_cast<std::int64_t>(row0 + row) * row_stride + col : gmem;
    ptx::cp_async_16(smem + swizzled<kRowElems>(row, col), src, valid);
  }
}

// Reductions over the 4 lanes of a quad (lanes 4g..4g+3 hold one row's values of an m16n8 accumulator).
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

}  // namespace parallax::detail::mma
