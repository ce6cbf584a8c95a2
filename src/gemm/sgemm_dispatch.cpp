// Host side of the FP32 ladder: names, argument validation, dispatch to the level launchers, cuBLAS peer.
// No device code here; kernels live under sgemm/, one file per level.
#include <cublas_v2.h>

#include <array>
#include <cstdint>
#include <string>

#include "core/cublas_handle.hpp"
#include "gemm/sgemm/launchers.hpp"
#include "parallax/core.hpp"
#include "parallax/sgemm.hpp"

namespace parallax {
namespace {

struct LevelEntry {
  SgemmLevel level;
  std::string_view name;
  std::string_view key;  // short alias accepted by parse_sgemm_level
  std::string_view description;
  void (*launch)(const SgemmArgs&, cudaStream_t);
};

constexpr std::array<LevelEntry, kSgemmLevelCount> kLevels{{
    {SgemmLevel::kNaive, "sgemm1", "naive", "naive", detail::launch_sgemm_naive},
    {SgemmLevel::kCoalesced, "sgemm2", "coalesced", "global-memory coalescing", detail::launch_sgemm_coalesced},
    {SgemmLevel::kSharedMem, "sgemm3", "smem", "shared-memory tiling", detail::launch_sgemm_shared_mem},
    {SgemmLevel::kBlocktile1D, "sgemm4", "blocktile1d", "1D blocktiling", detail::launch_sgemm_blocktile_1d},
    {SgemmLevel::kBlocktile2D, "sgemm5", "blocktile2d", "2D blocktiling", detail::launch_sgemm_blocktile_2d},
    {SgemmLevel::kVectorized, "sgemm6", "vectorized", "vectorized float4 loads", detail::launch_sgemm_vectorized},
    {SgemmLevel::kWarptile, "sgemm7", "warptile", "warptiling", detail::launch_sgemm_warptile},
    {SgemmLevel::kPipelined, "sgemm8", "pipelined", "pipelined, autotuned", detail::launch_sgemm_pipelined},
}};

const LevelEntry& entry(SgemmLevel level) {
  const int index = static_cast<int>(level) - 1;
  PX_REQUIRE(index >= 0 && index < kSgemmLevelCount, "level",
             "must be a ladder level 1.." + std::to_string(kSgemmLevelCount) + " (got " +
                 std::to_string(static_cast<int>(level)) + ")");
  return kLevels[static_cast<std::size_t>(index)];
}

// Half-open byte range a row-major rows x cols matrix with leading dimension ld touches.
struct ByteRange {
  std::uintptr_t begin, end;
};
ByteRange matrix_range(const void* ptr, int rows, int cols, int ld) {
  const auto begin = reinterpret_cast<std::uintptr_t>(ptr);
  const auto elements = static_cast<std::uintptr_t>(rows - 1) * static_cast<std::uintptr_t>(ld) +
                        static_cast<std::uintptr_t>(cols);
  return {begin, begin + elements * sizeof(float)};
}
bool overlaps(ByteRange x, ByteRange y) { return x.begin < y.end && y.begin < x.end; }

}  // namespace

std::vector<SgemmLevel> all_sgemm_levels() {
  std::vector<SgemmLevel> levels;
  for (const auto& e : kLevels) levels.push_back(e.level);
  return levels;
}

std::string_view sgemm_level_name(SgemmLevel level) { return entry(level).name; }
std::string_view sgemm_level_description(SgemmLevel level) { return entry(level).description; }

SgemmLevel parse_sgemm_level(std::string_view text) {
  for (const auto& e : kLevels) {
    const std::string number = std::to_string(static_cast<int>(e.level));
    if (text == e.name || text == e.key || text == number) return e.level;
  }
  std::string valid;
  for (const auto& e : kLevels) valid += std::string(valid.empty() ? "" : ", ") + std::string(e.name);
  throw InvalidArgument("level", "unknown SGEMM level '" + std::string(text) + "'; valid: " + valid +
                                     " (or 1..8, or naive/coalesced/smem/blocktile1d/blocktile2d/"
                                     "vectorized/warptile/pipelined)");
}

void validate(const SgemmArgs& p) {
  auto got = [](const char* name, long long v) { return std::string(" (got ") + name + "=" + std::to_string(v) + ")"; };
  PX_REQUIRE(p.m >= 1, "m", "must be >= 1" + got("m", p.m));
  PX_REQUIRE(p.n >= 1, "n", "must be >= 1" + got("n", p.n));
  PX_REQUIRE(p.k >= 1, "k", "must be >= 1" + got("k", p.k));
  PX_REQUIRE(p.a != nullptr, "a", "must be a non-null device pointer");
  PX_REQUIRE(p.b != nullptr, "b", "must be a non-null device pointer");
  PX_REQUIRE(p.c != nullptr, "c", "must be a non-null device pointer");
  PX_REQUIRE(p.lda >= p.k, "lda",
             "must be >= k, the row length of row-major A" + got("lda", p.lda) + ", k=" + std::to_string(p.k));
  PX_REQUIRE(p.ldb >= p.n, "ldb",
             "must be >= n, the row length of row-major B" + got("ldb", p.ldb) + ", n=" + std::to_string(p.n));
  PX_REQUIRE(p.ldc >= p.n, "ldc",
             "must be >= n, the row length of row-major C" + got("ldc", p.ldc) + ", n=" + std::to_string(p.n));
  const ByteRange c = matrix_range(p.c, p.m, p.n, p.ldc);
  PX_REQUIRE(!overlaps(c, matrix_range(p.a, p.m, p.k, p.lda)), "c", "must not overlap a (C is written in place)");
  PX_REQUIRE(!overlaps(c, matrix_range(p.b, p.k, p.n, p.ldb)), "c", "must not overlap b (C is written in place)");
}

void sgemm(SgemmLevel level, const SgemmArgs& args, cudaStream_t stream) {
  const LevelEntry& e = entry(level);
  validate(args);
  e.launch(args, stream);
}

void sgemm_cublas(const SgemmArgs& p, cudaStream_t stream) {
  validate(p);
  cublasHandle_t handle = detail::cublas_handle(stream);
  // Strict FP32: CUBLAS_DEFAULT_MATH never uses TF32 for cublasSgemm (unless NVIDIA_TF32_OVERRIDE=1 is set
  // in the environment, which the benchmarks refuse to run under).
  PX_CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));
  // Row-major C = A*B is column-major C^T = B^T * A^T: swap the operands, no transposes.
  PX_CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, p.n, p.m, p.k, &p.alpha, p.b, p.ldb, p.a, p.lda,
                              &p.beta, p.c, p.ldc));
}

}  // namespace parallax
