// Host side of TMA: building the CUtensorMap that describes one GEMM operand. No device code here.
#pragma once

#include <cuda.h>  // CUtensorMap and the enums (header only: the driver entry point is looked up at run time)

#include <cstdint>

#include "parallax/gemm.hpp"

namespace parallax::detail {

// A row-major `rows x cols` matrix of 16-bit values (bf16 or f16) at `base` with leading dimension `ld`
// (elements), copied in boxes of `box_cols x box_rows` (box_cols * 2 == 128 bytes, the swizzle width) into
// 128B-swizzled shared memory. Out-of-bounds parts of a box are filled with zeros.
// Throws Error (with the CUresult) when the driver rejects the description, InvalidArgument when the
// arguments break TMA's rules (alignment, box sizes) before asking it.
CUtensorMap make_tma_map_2d(const void* base, DType type, int rows, int cols, std::int64_t ld, int box_rows,
                            int box_cols);

}  // namespace parallax::detail
