// Device helpers shared by the ladder levels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace parallax::detail {

// The epilogue every level shares. beta == 0 must not read C: C may be uninitialised (or NaN-poisoned),
// and 0 * NaN would be NaN.
__device__ __forceinline__ void store_c(float* c, float acc, float alpha, float beta) {
  *c = (beta == 0.f) ? alpha * acc : alpha * acc + beta * *c;
}

}  // namespace parallax::detail

// ---- Added with levels 2-6: edge-tile loads, float4 epilogue, alignment checks, block-to-tile mapping. ----
#include <cstdint>

#include "parallax/core.hpp"

namespace parallax::detail {

// p[offset] when `in_bounds`, else 0. Edge tiles pad missing rows, columns and k-slices with zeros, so the
// inner product loops need no guards: a zero contributes nothing to a dot product. The load is predicated,
// never issued out of bounds.
__device__ __forceinline__ float load_or_zero(const float* __restrict__ p, int64_t offset, bool in_bounds) {
  return in_bounds ? p[offset] : 0.f;
}

// store_c for four consecutive elements with one 16-byte access. `c` must be 16-byte aligned. Same rule:
// beta == 0 never reads C.
__device__ __forceinline__ void store_c4(float* c, float4 acc, float alpha, float beta) {
  float4 out;
  if (beta == 0.f) {
    out = make_float4(alpha * acc.x, alpha * acc.y, alpha * acc.z, alpha * acc.w);
  } else {
    const float4 old = *reinterpret_cast<const float4*>(c);
    out = make_float4(alpha * acc.x + beta * old.x, alpha * acc.y + beta * old.y, alpha * acc.z + beta * old.z,
                      alpha * acc.w + beta * old.w);
  }
  *reinterpret_cast<float4*>(c) = out;
}

// Host: whether every row of a row-major matrix (base pointer, leading dimension in floats) starts on a
// 16-byte boundary, i.e. whether float4 accesses at column offsets that are multiples of 4 are legal.
inline bool rows_aligned_16(const void* base, int ld) {
  return reinterpret_cast<std::uintptr_t>(base) % 16 == 0 && ld % 4 == 0;
}

// Tiles needed to cover `extent` (no overflow near INT_MAX, unlike ceil_div).
constexpr int tile_count(int extent, int tile) { return extent / tile + (extent % tile != 0 ? 1 : 0); }

// Block-to-tile mapping. gridDim.x may reach 2^31-1 but gridDim.y only 65535, so the tiles along n go on x
// (consecutive blocks then share one row panel of A, which stays in L2) and the tiles along m on y, unless
// m needs more than 65535 tiles, in which case the two swap (m_on_x). The kernel reads the flag back through
// block_row0 / block_col0.
struct TileGrid {
  dim3 grid;
  bool m_on_x = false;
};
inline TileGrid make_tile_grid(int m, int n, int bm, int bn) {
  constexpr int kMaxGridY = 65535;
  const int tiles_m = tile_count(m, bm);
  const int tiles_n = tile_count(n, bn);
  if (tiles_m <= kMaxGridY) return {dim3(static_cast<unsigned>(tiles_n), static_cast<unsigned>(tiles_m)), false};
  if (tiles_n <= kMaxGridY) return {dim3(static_cast<unsigned>(tiles_m), static_cast<unsigned>(tiles_n)), true};
  throw Error("sgemm: " + std::to_string(tiles_m) + " x " + std::to_string(tiles_n) +
              " tiles do not fit a CUDA grid (one of the two counts must be <= 65535)");
}
// First row / column of C owned by this block (always < m / < n: the grid has no empty blocks).
__device__ __forceinline__ int block_row0(bool m_on_x, int bm) {
  return static_cast<int>(m_on_x ? blockIdx.x : blockIdx.y) * bm;
}
__device__ __forceinline__ int block_col0(bool m_on_x, int bn) {
  return static_cast<int>(m_on_x ? blockIdx.y : blockIdx.x) * bn;
}

// Multiprocessor count of the current device. An attribute query costs well under a microsecond, unlike
// cudaGetDeviceProperties, so it can sit on the launch path.
inline int current_sm_count() {
  int device = 0, sms = 0;
  PX_CUDA_CHECK(cudaGetDevice(&device));
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

// Wave quantization for the levels with one fixed big tile and one small fallback (5 and 6): when the big
// tiles would not give every SM a block (1000^3 with 128x128 tiles is 64 blocks for 132 SMs on an H100),
// half the chip idles however fast each block is; four times as many 64x64 blocks keep all SMs busy.
inline bool big_tiles_leave_sms_idle(int m, int n, int big_bm, int big_bn) {
  const long long blocks = static_cast<long long>(tile_count(m, big_bm)) * tile_count(n, big_bn);
  return blocks < current_sm_count();
}

}  // namespace parallax::detail
