// Host side: TMA tensor maps of the [B, S, H, D] attention operands, shared by the Hopper forward (level 4)
// and backward (backward level 4). No device code.
#pragma once

#include <cuda.h>  // CUtensorMap

#include <cstdint>

#include "gemm/tc/tma_map.hpp"
#include "parallax/attention.hpp"

namespace parallax::detail {

// Byte stride of one [B, S, H, D] dimension for the tensor map. A dimension of extent 1 is never stepped, so
// any legal value does (the caller's may be 0 or not a multiple of 16 there).
inline std::uint64_t attention_tma_stride_bytes(std::int64_t elems, long long extent) {
  const std::uint64_t bytes = static_cast<std::uint64_t>(elems) * 2;
  if (extent == 1 && (bytes == 0 || bytes % 16 != 0 || bytes >= (std::uint64_t{1} << 40))) return 16;
  return bytes;
}

// 4D map (D, S, H, B) over a 16-bit [B, S, H, D] tensor with the caller's strides; one box = 64 d-values (128
// bytes, the 128B swizzle row) x box_rows rows of one (head, batch). Rows past `seqlen` are zero-filled.
inline CUtensorMap make_attention_operand_map(const void* base, DType type, int seqlen, int heads, int batch,
                                              int head_dim, const AttentionStrides& st, int box_rows) {
  const std::uint64_t dims[4] = {static_cast<std::uint64_t>(head_dim), static_cast<std::uint64_t>(seqlen),
                                 static_cast<std::uint64_t>(heads), static_cast<std::uint64_t>(batch)};
  const std::uint64_t strides[3] = {attention_tma_stride_bytes(st.seq, seqlen),
                                    attention_tma_stride_bytes(st.head, heads),
                                    attention_tma_stride_bytes(st.batch, batch)};
  const std::uint32_t box[4] = {64, static_cast<std::uint32_t>(box_rows), 1, 1};
  return make_tma_map_4d(base, type, dims, strides, box);
}

}  // namespace parallax::detail
