// cuTensorMapEncodeTiled is a driver API function. The library links only the runtime (libcudart), so the
// entry point is fetched through cudaGetDriverEntryPointByVersion once, instead of linking libcuda.
#include "gemm/tc/tma_map.hpp"

#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled_v12000
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "parallax/core.hpp"

namespace parallax::detail {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_tiled_fn() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult query{};
    PX_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &query));
    if (query != cudaDriverEntryPointSuccess || ptr == nullptr)
      throw Error("TMA: the driver has no cuTensorMapEncodeTiled (needs a CUDA 12+ driver); query result " +
                  std::to_string(static_cast<int>(query)));
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(ptr);
  }();
  return fn;
}

}  // namespace

namespace {
CUtensorMapDataType tma_data_type(DType type) {
  switch (type) {
    case DType::kBF16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case DType::kF16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case DType::kF32: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  }
  throw InvalidArgument("type", "not a DType enumerator");
}
}  // namespace

CUtensorMap make_tma_map_2d(const void* base, DType type, int rows, int cols, std::int64_t ld, int box_rows,
                            int box_cols) {
  const int t = static_cast<int>(type);
  PX_REQUIRE(t >= 0 && t <= 2, "type", "not a DType enumerator (" + std::to_string(t) + ")");
  const int elem = static_cast<int>(dtype_size(type));
  PX_REQUIRE(reinterpret_cast<std::uintptr_t>(base) % 16 == 0, "base", "must be 16-byte aligned for TMA");
  PX_REQUIRE(rows >= 1, "rows", "must be >= 1 (got rows=" + std::to_string(rows) + ")");
  PX_REQUIRE(cols >= 1, "cols", "must be >= 1 (got cols=" + std::to_string(cols) + ")");
  PX_REQUIRE(ld >= cols && (ld * elem) % 16 == 0, "ld",
             "must be >= cols and a multiple of 16 bytes (" + std::to_string(16 / elem) +
                 " elements) for TMA (got ld=" + std::to_string(ld) + ")");
  PX_REQUIRE(box_cols * elem == 128, "box_cols",
             "must span the 128-byte swizzle row (" + std::to_string(128 / elem) + " elements of this type)");
  PX_REQUIRE(box_rows >= 1 && box_rows <= 256, "box_rows", "must be in [1, 256] (TMA box limit)");

  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * elem};  // bytes, for dimension 1 (rows)
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode_tiled_fn()(
      &map, tma_data_type(type), 2, const_cast<void*>(base), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error("cuTensorMapEncodeTiled failed with CUresult " + std::to_string(static_cast<int>(r)) + " (rows=" +
                std::to_string(rows) + " cols=" + std::to_string(cols) + " ld=" + std::to_string(ld) +
                " box=" + std::to_string(box_rows) + "x" + std::to_string(box_cols) + ")");
  return map;
}

bool tma_store_epilogue_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("PARALLAX_GEMM_EPILOGUE");
    if (v == nullptr || *v == '\0' || std::string(v) == "tma") return true;
    if (std::string(v) == "direct") return false;
    throw InvalidArgument("PARALLAX_GEMM_EPILOGUE", std::string("must be 'tma' or 'direct' (got '") + v + "')");
  }();
  return enabled;
}

CUtensorMap make_tma_map_4d(const void* base, DType type, const std::uint64_t (&dims)[4],
                            const std::uint64_t (&strides_bytes)[3], const std::uint32_t (&box)[4]) {
  const int t = static_cast<int>(type);
  PX_REQUIRE(t >= 0 && t <= 2, "type", "not a DType enumerator (" + std::to_string(t) + ")");
  const std::uint32_t elem = static_cast<std::uint32_t>(dtype_size(type));
  PX_REQUIRE(reinterpret_cast<std::uintptr_t>(base) % 16 == 0, "base", "must be 16-byte aligned for TMA");
  for (int i = 0; i < 4; ++i)
    PX_REQUIRE(dims[i] >= 1 && dims[i] <= (std::uint64_t{1} << 32), "dims",
               "every extent must be in [1, 2^32] (got dims[" + std::to_string(i) + "]=" + std::to_string(dims[i]) +
                   ")");
  for (int i = 0; i < 3; ++i)
    PX_REQUIRE(strides_bytes[i] % 16 == 0 && strides_bytes[i] > 0 && strides_bytes[i] < (std::uint64_t{1} << 40),
               "strides_bytes",
               "TMA strides must be positive multiples of 16 bytes below 2^40 (got strides_bytes[" +
                   std::to_string(i) + "]=" + std::to_string(strides_bytes[i]) + ")");
  PX_REQUIRE(box[0] * elem == 128, "box",
             "box[0] must span the 128-byte swizzle row (" + std::to_string(128 / elem) + " elements of this type)");
  for (int i = 1; i < 4; ++i)
    PX_REQUIRE(box[i] >= 1 && box[i] <= 256, "box", "box extents must be in [1, 256] (TMA box limit)");

  CUtensorMap map{};
  const cuuint64_t gdims[4] = {dims[0], dims[1], dims[2], dims[3]};
  const cuuint64_t gstrides[3] = {strides_bytes[0], strides_bytes[1], strides_bytes[2]};
  const cuuint32_t gbox[4] = {box[0], box[1], box[2], box[3]};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const CUresult r = encode_tiled_fn()(
      &map, tma_data_type(type), 4,
      const_cast<void*>(base), gdims, gstrides, gbox, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error("cuTensorMapEncodeTiled (4D) failed with CUresult " + std::to_string(static_cast<int>(r)) +
                " (dims=" + std::to_string(dims[0]) + "x" + std::to_string(dims[1]) + "x" + std::to_string(dims[2]) +
                "x" + std::to_string(dims[3]) + " strides=" + std::to_string(strides_bytes[0]) + "," +
                std::to_string(strides_bytes[1]) + "," + std::to_string(strides_bytes[2]) + " bytes)");
  return map;
}

}  // namespace parallax::detail
