// Every compiled-in tile configuration of SGEMM levels 7 and 8 against cuBLAS, on the shapes that break tiled
// kernels: sizes that are not multiples of any tile (1, 7, 129, 1000), thin and wide matrices, k smaller
// than one k-tile, padded leading dimensions and pointers that are only 4-byte aligned (the scalar path),
// beta == 0 on a NaN-poisoned C (must never be read) and beta != 0, and m beyond one CUDA grid (chunked
// launches). Every element outside the m x n result (ldc padding, the tail of the buffer) must still hold
// its poison afterwards: no out-of-bounds stores.
#include <cctype>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "common/gpu_test.hpp"
#include "parallax/random.hpp"
#include "parallax/sgemm.hpp"
#include "parallax/tune.hpp"

namespace {

using parallax::SgemmLevel;
using parallax::SgemmTileConfig;

struct Shape {
  int m, n, k;
};

struct Layout {
  const char* name;
  int pad_a, pad_b, pad_c;  // leading dimension = row length + pad
  int offset;               // elements added to every base pointer (1: only 4-byte aligned)
};

constexpr Shape kShapes[] = {{1, 1, 1},      {7, 7, 7},      {129, 129, 129}, {1000, 1000, 1000}, {1000, 37, 129},
                             {37, 1000, 8},  {129, 2048, 3}, {2048, 65, 257}, {64, 64, 16},       {256, 256, 256}};
constexpr Layout kLayouts[] = {{"packed", 0, 0, 0, 0}, {"padded", 4, 8, 12, 0}, {"misaligned", 1, 3, 1, 1}};

bool is_poison(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits == 0xFFFFFFFFu;
}

class TunedConfigTest : public parallax::testing::GpuTestWithParam<std::tuple<SgemmLevel, int>> {
 protected:
  SgemmLevel level() const { return std::get<0>(GetParam()); }
  SgemmTileConfig config() const {
    return parallax::sgemm_tile_candidates(level())[static_cast<std::size_t>(std::get<1>(GetParam()))];
  }

  // Runs the configuration and cuBLAS on the same inputs and compares; `what` names the case on failure.
  void check(const Shape& s, const Layout& l, float alpha, float beta, std::uint64_t seed) {
    const int lda = s.k + l.pad_a, ldb = s.n + l.pad_b, ldc = s.n + l.pad_c;
    const std::size_t a_count = static_cast<std::size_t>(s.m - 1) * lda + s.k;
    const std::size_t b_count = static_cast<std::size_t>(s.k - 1) * ldb + s.n;
    const std::size_t c_count = static_cast<std::size_t>(s.m - 1) * ldc + s.n;
    constexpr std::size_t kTail = 64;  // poisoned elements after C that must stay poisoned
    parallax::DeviceBuffer<float> a(a_count + l.offset), b(b_count + l.offset);
    parallax::DeviceBuffer<float> c(c_count + l.offset + kTail), c_ref(c_count + l.offset + kTail);
    parallax::fill_uniform(a.data(), a.size(), seed, -1.f, 1.f);
    parallax::fill_uniform(b.data(), b.size(), seed + 1, -1.f, 1.f);
    if (beta == 0.f) {
      c.fill_bytes(0xFF);  // NaN everywhere: beta == 0 must not read it
      c_ref.fill_bytes(0xFF);
    } else {
      parallax::fill_uniform(c.data(), c.size(), seed + 2, -1.f, 1.f);
      parallax::fill_uniform(c_ref.data(), c_ref.size(), seed + 2, -1.f, 1.f);
      // Poison only what lies outside the result, so stray stores still show.
      std::vector<float> host = c.download();
      for (std::size_t i = 0; i < host.size(); ++i) {
        const std::size_t e = i >= static_cast<std::size_t>(l.offset) ? i - l.offset : std::size_t(-1);
        const bool inside = e < c_count && static_cast<int>(e % ldc) < s.n;
        if (!inside) std::memset(&host[i], 0xFF, sizeof(float));
      }
      c.upload(host);
    }
    const std::vector<float> c_before = c.download();

    parallax::SgemmArgs args{s.m, s.n, s.k, alpha, a.data() + l.offset, lda, b.data() + l.offset, ldb, beta,
                             c.data() + l.offset, ldc};
    parallax::sgemm_with_config(level(), config(), args);
    args.c = c_ref.data() + l.offset;
    parallax::sgemm_cublas(args);
    PX_CUDA_CHECK(cudaDeviceSynchronize());

    const std::vector<float> out = c.download(), ref = c_ref.download();
    const std::string what = std::string(parallax::sgemm_level_name(level())) + " " + parallax::to_string(config()) +
                             " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) +
                             " layout=" + l.name + " alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta) +
                             " seed=" + std::to_string(seed);
    std::vector<float> got;
    std::vector<double> want;
    std::size_t stray = 0, first_stray = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      const std::size_t e = i >= static_cast<std::size_t>(l.offset) ? i - l.offset : std::size_t(-1);
      const bool inside = e < c_count && static_cast<int>(e % ldc) < s.n;
      if (inside) {
        got.push_back(out[i]);
        want.push_back(ref[i]);
      } else if (std::memcmp(&out[i], &c_before[i], sizeof(float)) != 0 && stray++ == 0) {
        first_stray = i;
      }
    }
    EXPECT_EQ(stray, 0u) << what << ": wrote outside the result, first at buffer index " << first_stray;
    const auto cmp = parallax::testing::compare<float>(got, want);
    EXPECT_EQ(cmp.non_finite, 0u) << what << ": first non-finite result at " << cmp.first_bad;
    EXPECT_LT(cmp.relative_error, 1e-5) << what;
  }
};

TEST_P(TunedConfigTest, MatchesCublasOnOddShapesAndLayouts) {
  const std::uint64_t seed = parallax::fresh_seed();
  for (const Shape& s : kShapes)
    for (const Layout& l : kLayouts) {
      check(s, l, 1.f, 0.f, seed);
      if (HasFailure()) return;  // one failing case says enough; keep the log readable
    }
  check({129, 130, 131}, kLayouts[0], -1.5f, 0.5f, seed);
  check({1000, 1000, 1000}, kLayouts[2], 0.75f, -2.f, seed);
  check({7, 1000, 33}, kLayouts[1], 2.f, 1.f, seed);
}

TEST_P(TunedConfigTest, MoreRowTilesThanOneGridHolds) {
  // gridDim.y is at most 65535: m = 65535 * bm + 5 needs two launches over row ranges.
  const SgemmTileConfig c = config();
  check({65535 * c.bm + 5, 5, 3}, kLayouts[0], 1.f, 0.f, parallax::fresh_seed());
}

std::vector<std::tuple<SgemmLevel, int>> all_configs() {
  std::vector<std::tuple<SgemmLevel, int>> out;
  for (SgemmLevel level : {SgemmLevel::kWarptile, SgemmLevel::kPipelined})
    for (std::size_t i = 0; i < parallax::sgemm_tile_candidates(level).size(); ++i)
      out.emplace_back(level, static_cast<int>(i));
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllCompiledConfigs, TunedConfigTest, ::testing::ValuesIn(all_configs()),
                         [](const ::testing::TestParamInfo<std::tuple<SgemmLevel, int>>& param_info) {
                           const auto level = std::get<0>(param_info.param);
                           const auto& c = parallax::sgemm_tile_candidates(level)[std::get<1>(param_info.param)];
                           std::string name = std::string(parallax::sgemm_level_name(level)) + "_" + parallax::to_string(c);
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

// sgemm() itself (levels 7/8 through the dispatcher) picks a configuration for the current GPU and gets the
// sizes of the performance bar right.
class TunedDispatchTest : public parallax::testing::GpuTest {};

TEST_F(TunedDispatchTest, DispatcherPicksAWorkingConfig) {
  for (SgemmLevel level : {SgemmLevel::kWarptile, SgemmLevel::kPipelined}) {
    for (int size : {1000, 2048}) {
      const std::size_t count = static_cast<std::size_t>(size) * size;
      parallax::DeviceBuffer<float> a(count), b(count), c(count), ref(count);
      const std::uint64_t seed = parallax::fresh_seed();
      parallax::fill_uniform(a.data(), count, seed);
      parallax::fill_uniform(b.data(), count, seed + 1);
      c.fill_bytes(0xFF);
      parallax::SgemmArgs args{size, size, size, 1.f, a.data(), size, b.data(), size, 0.f, c.data(), size};
      parallax::sgemm(level, args);
      args.c = ref.data();
      parallax::sgemm_cublas(args);
      const auto out = c.download();
      const auto r = ref.download();
      const std::vector<double> want(r.begin(), r.end());
      const auto cmp = parallax::testing::compare<float>(out, want);
      EXPECT_EQ(cmp.non_finite, 0u) << parallax::sgemm_level_name(level) << " " << size;
      EXPECT_LT(cmp.relative_error, 1e-5) << parallax::sgemm_level_name(level) << " " << size;
    }
  }
}

}  // namespace
