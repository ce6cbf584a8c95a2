// Host side of TMA: building the CUtensorMap that describes one GEMM operand. No device code here.
#pragma once

#include <cuda.h>  // CUtensorMap and the enums (header only: the driver entry point is looked up at run time)

#include <cstdint>

#include "parallax/gemm.hpp"

namespace parallax::detail {

// A row-major `rows x cols` matrix (bf16, f16 or f32) at `base` with leading dimension `ld` (elements), copied
// in boxes of `box_cols x box_rows` (box_cols * element size == 128 bytes, the swizzle width) between global
// memory and 128B-swizzled shared memory. Loads zero-fill the out-of-bounds parts of a box; stores skip them.
// Throws Error (with the CUresult) when the driver rejects the description, InvalidArgument when the
// arguments break TMA's rules (alignment, box sizes) before asking it.
CUtensorMap make_tma_map_2d(const void* base, DType type, int rows, int cols, std::int64_t ld, int box_rows,
                            int box_cols);

// Whether the Hopper GEMM may write C with TMA bulk stores (wgmma_common.cuh, store_tile_tma) when the epilogue
// allows it. On by default; PARALLAX_GEMM_EPILOGUE=direct selects the register -> st.global path everywhere
// (an ablation switch for the benchmark, read once per process).
bool tma_store_epilogue_enabled();

// A 4D tensor (bf16, f16 or f32), dimensions innermost first (dims[0] contiguous), byte strides of dimensions
// 1..3 (multiples of 16, < 2^40; any order, they need not grow), copied in boxes of box[0..3] elements with
// box[0] * element size == 128 bytes (the swizzle width) between global memory and 128B-swizzled shared
// memory; loads zero-fill the out-of-bounds parts of a box, stores and reductions skip them. Used by the
// Hopper attention kernels for [B, S, H, D] tensors as (D, S, H, B), and for the backward's fp32 dQ
// accumulator.
CUtensorMap make_tma_map_4d(const void* base, DType type, const std::uint64_t (&dims)[4],
                            const std::uint64_t (&strides_bytes)[3], const std::uint32_t (&box)[4]);

}  // namespace parallax::detail
