// The FP32 SGEMM ladder: C = alpha * A * B + beta * C, row-major, one optimization step per level.
//
//   level  name    what it adds (each in its own file under src/gemm/sgemm/)
//   1      sgemm1  naive: one thread per C element
//   2      sgemm2  global-memory coalescing: a warp walks along a row of C
//   3      sgemm3  shared-memory tiling of A and B
//   4      sgemm4  1D blocktiling: each thread computes a column of TM results
//   5      sgemm5  2D blocktiling: each thread computes a TM x TN tile
//   6      sgemm6  vectorized float4 loads, A tile stored transposed
//   7      sgemm7  warptiling: a warp owns a sub-tile, threads iterate over it
//   8      sgemm8  pipelined: double-buffered shared memory with register prefetch, autotuned tiles
//
// Every level is correct for ANY m, n, k >= 1 (edge tiles are guarded), any alpha/beta (beta == 0 never
// reads C, so C may hold garbage or NaN), and any leading dimensions >= the row length.
#pragma once

#include <cuda_runtime.h>

#include <string_view>
#include <vector>

namespace parallax {

enum class SgemmLevel : int {
  kNaive = 1,
  kCoalesced = 2,
  kSharedMem = 3,
  kBlocktile1D = 4,
  kBlocktile2D = 5,
  kVectorized = 6,
  kWarptile = 7,
  kPipelined = 8,
};
inline constexpr int kSgemmLevelCount = 8;

// All levels in ladder order.
std::vector<SgemmLevel> all_sgemm_levels();
// "sgemm1" ... "sgemm8".
std::string_view sgemm_level_name(SgemmLevel level);
// One-line description ("2D blocktiling").
std::string_view sgemm_level_description(SgemmLevel level);
// Accepts "sgemm3", "3" or the short description key ("smem"); throws InvalidArgument listing valid names.
SgemmLevel parse_sgemm_level(std::string_view text);

// C (m x n) = alpha * A (m x k) * B (k x n) + beta * C, all row-major with leading dimensions (in elements).
struct SgemmArgs {
  int m = 0;
  int n = 0;
  int k = 0;
  float alpha = 1.f;
  const float* a = nullptr;
  int lda = 0;  // >= k
  const float* b = nullptr;
  int ldb = 0;  // >= n
  float beta = 0.f;
  float* c = nullptr;
  int ldc = 0;  // >= n
};

// Host-side argument checks (throws InvalidArgument naming the argument and the rule). Called by every
// entry point below before anything touches the device.
void validate(const SgemmArgs& args);

// Runs one ladder level on `stream` (asynchronous). Levels 7 and 8 use the tuned tile configuration for this
// GPU when the tuning cache has one (see parallax/tune.hpp), else a shape-based default.
void sgemm(SgemmLevel level, const SgemmArgs& args, cudaStream_t stream = nullptr);

// The reference and the peer: cublasSgemm in strict FP32 (CUBLAS_DEFAULT_MATH: TF32 off).
void sgemm_cublas(const SgemmArgs& args, cudaStream_t stream = nullptr);

}  // namespace parallax
