// Tile configurations of SGEMM levels 7/8, the shape heuristic, the tuning cache and `parallax tune` parsing.
// Everything here runs without a GPU (CI): the tuner itself needs one and is exercised by the GPU suites.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <unistd.h>

#include "cli.hpp"
#include "gemm/sgemm_tiles.hpp"
#include "parallax/core.hpp"
#include "parallax/tune.hpp"

namespace {

using parallax::SgemmLevel;
using parallax::SgemmSizeClass;
using parallax::SgemmTileConfig;
using parallax::TuneCache;

constexpr SgemmTileConfig kValid{128, 128, 8, 64, 32, 2, 4, 4, 2};

// A fresh directory under the system temp dir, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("parallax_tune_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path write(const std::string& name, const std::string& text) const {
    const auto p = path_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }

 private:
  std::filesystem::path path_;
};

// Sets (or unsets, with nullptr) an environment variable for the scope, restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_.c_str(), old_->c_str(), 1);
    else ::unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ---- The validity rules ------------------------------------------------------------------------------------

TEST(TileConfig, EveryCompiledCandidateIsValidAndUnique) {
  for (SgemmLevel level : {SgemmLevel::kWarptile, SgemmLevel::kPipelined}) {
    const auto candidates = parallax::sgemm_tile_candidates(level);
    ASSERT_GE(candidates.size(), 6u) << parallax::sgemm_level_name(level);
    std::set<std::string> names;
    for (const SgemmTileConfig& c : candidates) {
      EXPECT_EQ(parallax::sgemm_tile_config_error(c), "") << parallax::to_string(c);
      EXPECT_EQ(parallax::sgemm_tile_config_error_message(c), "") << parallax::to_string(c);
      EXPECT_TRUE(parallax::sgemm_config_compiled(level, c)) << parallax::to_string(c);
      EXPECT_TRUE(names.insert(parallax::to_string(c)).second) << "duplicate name " << parallax::to_string(c);
      EXPECT_LE(parallax::sgemm_register_need(c), parallax::sgemm_register_cap(c));
    }
  }
}

TEST(TileConfig, LevelsWithFixedTilesHaveNoCandidates) {
  for (int l = 1; l <= 6; ++l) EXPECT_TRUE(parallax::sgemm_tile_candidates(static_cast<SgemmLevel>(l)).empty());
}

TEST(TileConfig, DerivedQuantitiesOfTheClassicTile) {
  EXPECT_EQ(kValid.warps(), 8);
  EXPECT_EQ(kValid.threads(), 256);
  EXPECT_EQ(kValid.wm_iter(), 2);
  EXPECT_EQ(kValid.thread_m(), 8);
  EXPECT_EQ(kValid.thread_n(), 8);
  EXPECT_EQ(parallax::sgemm_smem_bytes(kValid), 2 * ((128 + 4) * 8 + 8 * 128) * 4);
  EXPECT_EQ(parallax::sgemm_register_cap(kValid), 128);
  EXPECT_EQ(parallax::to_string(kValid), "128x128x8_w64x32_i2x2_t4x4_b2");
}

TEST(TileConfig, DerivedQuantitiesOfGarbageAreZeroNotACrash) {
  const SgemmTileConfig zero{0, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(zero.threads(), 0);
  EXPECT_EQ(zero.wm_iter(), 0);
  EXPECT_EQ(parallax::sgemm_register_cap(zero), 0);
  EXPECT_EQ(parallax::sgemm_a_loads_per_thread(zero), 0);
  EXPECT_NE(parallax::sgemm_tile_config_error(zero), "");
}

struct BrokenCase {
  const char* what;
  SgemmTileConfig config;
  const char* message_part;
};

TEST(TileConfig, EachBrokenRuleIsNamed) {
  const BrokenCase cases[] = {
      {"zero field", {0, 128, 8, 64, 32, 2, 4, 4, 2}, "every field must be positive"},
      {"negative field", {128, 128, 8, 64, 32, 2, 4, -4, 2}, "every field must be positive"},
      {"warp does not divide block", {128, 128, 8, 48, 32, 2, 4, 4, 2}, "warp tile must divide the block tile"},
      {"too many threads", {256, 256, 8, 32, 32, 2, 4, 4, 1}, "more than 1024 threads"},
      {"tm not float4", {128, 128, 8, 64, 32, 2, 2, 4, 2}, "multiples of 4 (float4 fragment reads)"},
      {"wn_iter does not split wn", {128, 128, 8, 64, 32, 3, 4, 4, 2}, "wn must split into wn_iter"},
      {"sub-tile not integral", {128, 128, 8, 32, 32, 4, 4, 4, 2}, "32 lanes of a warp must exactly cover"},
      {"wm_iter does not split wm", {64, 96, 8, 32, 96, 2, 4, 4, 2}, "32 lanes of a warp must exactly cover"},
      {"one lane wide sub-tile", {128, 64, 8, 128, 16, 4, 4, 4, 4}, "2x2 lane quads"},
      {"one lane tall sub-tile", {64, 128, 8, 16, 128, 1, 4, 4, 4}, "2x2 lane quads"},
      {"bk not float4", {128, 128, 6, 64, 32, 2, 4, 4, 2}, "bk must be a multiple of 4"},
      {"A loads uneven", {128, 128, 4, 64, 32, 2, 4, 4, 2}, "evenly divide the A tile"},
      {"B loads uneven", {256, 64, 4, 64, 32, 2, 4, 4, 2}, "evenly divide the B tile"},
      {"shared memory", {128, 256, 32, 64, 64, 4, 4, 4, 1}, "shared memory exceeds 48 KiB"},
      {"threads per SM", {128, 128, 8, 64, 32, 2, 4, 4, 16}, "exceed 2048 threads per SM"},
      {"shared memory per SM", {128, 128, 16, 64, 32, 2, 4, 4, 5}, "exceed the shared memory of an SM"},
      {"register cap", {128, 128, 8, 64, 32, 2, 4, 4, 4}, "register cap"},
  };
  for (const auto& c : cases) {
    const std::string error(parallax::sgemm_tile_config_error(c.config));
    EXPECT_TRUE(contains(error, c.message_part)) << c.what << ": got '" << error << "'";
    EXPECT_FALSE(parallax::sgemm_config_compiled(SgemmLevel::kPipelined, c.config)) << c.what;
  }
}

TEST(TileConfig, PredicateIsUsableAtCompileTime) {
  static_assert(parallax::sgemm_tile_config_error(kValid).empty());
  static_assert(!parallax::sgemm_tile_config_error(SgemmTileConfig{128, 128, 6, 64, 32, 2, 4, 4, 2}).empty());
  SUCCEED();
}

// ---- sgemm_with_config argument checks (all before anything touches a GPU) ---------------------------------

parallax::SgemmArgs fake_args() {
  // Distinct non-null addresses that are never dereferenced: every check below fails before a launch.
  static float a[16], b[16], c[16];
  return {2, 2, 2, 1.f, a, 2, b, 2, 0.f, c, 2};
}

TEST(SgemmWithConfig, RejectsLevelsWithoutTileChoice) {
  EXPECT_THROW(parallax::sgemm_with_config(SgemmLevel::kVectorized, kValid, fake_args()), parallax::InvalidArgument);
}

TEST(SgemmWithConfig, RejectsInvalidConfigNamingTheRule) {
  try {
    parallax::sgemm_with_config(SgemmLevel::kPipelined, {128, 128, 6, 64, 32, 2, 4, 4, 2}, fake_args());
    FAIL() << "no exception";
  } catch (const parallax::InvalidArgument& e) {
    EXPECT_EQ(e.argument(), "config");
    EXPECT_TRUE(contains(e.what(), "bk must be a multiple of 4")) << e.what();
  }
}

TEST(SgemmWithConfig, RejectsValidButUncompiledConfigListingCandidates) {
  const SgemmTileConfig uncompiled{128, 128, 8, 64, 32, 2, 4, 4, 1};  // valid, but min_blocks 1 is not built
  ASSERT_EQ(parallax::sgemm_tile_config_error(uncompiled), "");
  try {
    parallax::sgemm_with_config(SgemmLevel::kWarptile, uncompiled, fake_args());
    FAIL() << "no exception";
  } catch (const parallax::InvalidArgument& e) {
    EXPECT_TRUE(contains(e.what(), "not compiled in for sgemm7")) << e.what();
    EXPECT_TRUE(contains(e.what(), parallax::to_string(kValid))) << e.what();
  }
}

// ---- Host helpers shared by the launchers -----------------------------------------------------------------

TEST(Launch, VectorPathNeedsEveryOperandAligned) {
  alignas(16) static float buf[64];
  parallax::SgemmArgs p{4, 4, 4, 1.f, buf, 4, buf + 16, 4, 0.f, buf + 32, 4};
  EXPECT_TRUE(parallax::detail::sgemm_vector_ok(p));
  auto q = p;
  q.a = buf + 1;
  EXPECT_FALSE(parallax::detail::sgemm_vector_ok(q));
  q = p;
  q.ldb = 5;
  EXPECT_FALSE(parallax::detail::sgemm_vector_ok(q));
  q = p;
  q.c = buf + 34;
  EXPECT_FALSE(parallax::detail::sgemm_vector_ok(q));
  q = p;
  q.lda = 6;
  EXPECT_FALSE(parallax::detail::sgemm_vector_ok(q));
}

TEST(Launch, GridChunksCoverHugeProblemsExactlyOnce) {
  // m needs more than 65535 tiles of 128 rows; n is past 2^30 columns: both are split into several launches.
  parallax::SgemmArgs p{};
  p.m = 65535 * 128 * 2 + 77;
  p.n = (1 << 30) + 1000;
  p.k = 3;
  p.lda = 5;
  p.ldb = p.n;
  p.ldc = p.n + 3;
  const auto base = std::uintptr_t{1} << 44;  // addresses only compared, never dereferenced
  p.a = reinterpret_cast<const float*>(base);
  p.b = reinterpret_cast<const float*>(base * 2);
  p.c = reinterpret_cast<float*>(base * 3);
  std::int64_t rows = 0, cells = 0;
  int launches = 0;
  parallax::detail::sgemm_for_each_grid_chunk(p, 128, 128, [&](const parallax::SgemmArgs& q, int tiles_n, int tiles_m) {
    ++launches;
    EXPECT_LE(tiles_m, 65535);
    EXPECT_EQ(tiles_m, (q.m + 127) / 128);
    EXPECT_EQ(tiles_n, (q.n + 127) / 128);
    EXPECT_EQ(q.k, p.k);
    const auto a_off = (reinterpret_cast<std::uintptr_t>(q.a) - base) / sizeof(float);
    const auto c_off = (reinterpret_cast<std::uintptr_t>(q.c) - 3 * base) / sizeof(float);
    const auto b_off = (reinterpret_cast<std::uintptr_t>(q.b) - 2 * base) / sizeof(float);
    const std::int64_t m0 = static_cast<std::int64_t>(a_off) / p.lda;
    EXPECT_EQ(a_off % p.lda, 0u);
    EXPECT_EQ(c_off, static_cast<std::uint64_t>(m0) * p.ldc + b_off);  // same row and column offsets in C
    EXPECT_EQ(b_off % 128, 0u);  // column chunks start on tile (and float4) boundaries
    if (b_off == 0) rows += q.m;
    cells += static_cast<std::int64_t>(q.m) * q.n;
  });
  EXPECT_EQ(launches, 3 * 2);
  EXPECT_EQ(rows, p.m);
  EXPECT_EQ(cells, static_cast<std::int64_t>(p.m) * p.n);
}

// ---- Size classes and the heuristic ------------------------------------------------------------------------

TEST(Heuristic, SizeClasses) {
  EXPECT_EQ(parallax::sgemm_size_class(1000, 1000, 1000, 132), SgemmSizeClass::kSmall);
  EXPECT_EQ(parallax::sgemm_size_class(1024, 1024, 1024, 132), SgemmSizeClass::kSmall);
  EXPECT_EQ(parallax::sgemm_size_class(4096, 4096, 4096, 132), SgemmSizeClass::kLarge);
  EXPECT_EQ(parallax::sgemm_size_class(8192, 8192, 8192, 132), SgemmSizeClass::kLarge);
  // Classed by output tiles, not FLOPs: one row by 2^20 columns is 8192 column tiles, "large".
  EXPECT_EQ(parallax::sgemm_size_class(1, 1 << 20, 64, 132), SgemmSizeClass::kLarge);
  EXPECT_EQ(parallax::sgemm_size_class(1024, 1024, 1024, 16), SgemmSizeClass::kLarge);  // a 16-SM GPU
  EXPECT_EQ(parallax::sgemm_size_class_name(SgemmSizeClass::kSmall), "small");
  EXPECT_EQ(parallax::sgemm_size_class_name(SgemmSizeClass::kLarge), "large");
}

TEST(Heuristic, SmallProblemsGetSmallerTilesThanLargeOnes) {
  for (SgemmLevel level : {SgemmLevel::kWarptile, SgemmLevel::kPipelined}) {
    const SgemmTileConfig small = parallax::choose_sgemm_config(level, 1000, 1000, 1000, 132);
    const SgemmTileConfig large = parallax::choose_sgemm_config(level, 8192, 8192, 8192, 132);
    EXPECT_LT(small.bm * small.bn, large.bm * large.bn)
        << "1000^3 -> " << parallax::to_string(small) << ", 8192^3 -> " << parallax::to_string(large);
    // 1000^3 with the large choice would leave most of 132 SMs idle: the small choice has at least one block
    // per SM.
    EXPECT_GE(((1000 + small.bm - 1) / small.bm) * ((1000 + small.bn - 1) / small.bn), 132);
    // 8192^3 gets the classic 128x128 family.
    EXPECT_GE(large.bm * large.bn, 128 * 128);
  }
}

TEST(Heuristic, WaveQuantizationIsCounted) {
  const SgemmTileConfig big = kValid;                                         // 128x128
  const SgemmTileConfig quarter{64, 64, 8, 32, 32, 2, 4, 4, 4};               // 64x64
  // 1000^3: 64 blocks of 128x128 on 132 SMs is one partial wave; the estimate of 128x128 must exceed the
  // estimate of 64x64 (256 blocks, 2 per SM).
  EXPECT_GT(parallax::sgemm_config_cost_estimate(big, 1000, 1000, 1000, 132),
            parallax::sgemm_config_cost_estimate(quarter, 1000, 1000, 1000, 132));
  // Going from 132 to 133 blocks' worth of tiles adds a whole wave.
  const double at_132 = parallax::sgemm_config_cost_estimate(big, 128 * 12, 128 * 11, 512, 132);
  const double at_133 = parallax::sgemm_config_cost_estimate(big, 128 * 12 + 1, 128 * 11, 512, 132);
  EXPECT_GT(at_133, 1.5 * at_132);
  EXPECT_TRUE(std::isinf(parallax::sgemm_config_cost_estimate({128, 128, 6, 64, 32, 2, 4, 4, 2}, 8, 8, 8, 132)));
}

TEST(Heuristic, DefaultIsAlwaysACompiledCandidate) {
  for (int size : {1, 7, 33, 129, 1000, 2048, 4096, 8192, 20000})
    for (int sms : {1, 46, 108, 132})
      for (SgemmLevel level : {SgemmLevel::kWarptile, SgemmLevel::kPipelined})
        EXPECT_TRUE(parallax::sgemm_config_compiled(level, parallax::choose_sgemm_config(level, size, size, size, sms)));
  EXPECT_THROW(parallax::choose_sgemm_config(SgemmLevel::kNaive, 8, 8, 8, 132), parallax::InvalidArgument);
}

TEST(Heuristic, CacheEntryWinsForItsGpuAndSizeClassOnly) {
  TuneCache cache;
  const SgemmTileConfig tuned{64, 128, 8, 32, 64, 2, 4, 4, 4};
  cache.set("GPU A", 132, SgemmLevel::kPipelined, SgemmSizeClass::kLarge, {tuned, {4096}, 1.0});
  EXPECT_EQ(parallax::choose_sgemm_config(SgemmLevel::kPipelined, 4096, 4096, 4096, 132, &cache, "GPU A"), tuned);
  const auto fallback = parallax::sgemm_default_config(SgemmLevel::kPipelined, 4096, 4096, 4096, 132);
  EXPECT_EQ(parallax::choose_sgemm_config(SgemmLevel::kPipelined, 4096, 4096, 4096, 132, &cache, "GPU B"), fallback);
  EXPECT_EQ(parallax::choose_sgemm_config(SgemmLevel::kWarptile, 4096, 4096, 4096, 132, &cache, "GPU A"),
            parallax::sgemm_default_config(SgemmLevel::kWarptile, 4096, 4096, 4096, 132));
  EXPECT_EQ(parallax::choose_sgemm_config(SgemmLevel::kPipelined, 512, 512, 512, 132, &cache, "GPU A"),
            parallax::sgemm_default_config(SgemmLevel::kPipelined, 512, 512, 512, 132));
  // A hand-built cache naming an uncompiled configuration is ignored too.
  cache.set("GPU A", 132, SgemmLevel::kPipelined, SgemmSizeClass::kLarge, {{128, 128, 8, 64, 32, 2, 4, 4, 1}, {}, 0});
  EXPECT_EQ(parallax::choose_sgemm_config(SgemmLevel::kPipelined, 4096, 4096, 4096, 132, &cache, "GPU A"), fallback);
}

// ---- The cache file ----------------------------------------------------------------------------------------

TEST(TuneCacheFile, RoundTrip) {
  TempDir dir;
  TuneCache cache;
  const auto candidates = parallax::sgemm_tile_candidates(SgemmLevel::kPipelined);
  cache.set("NVIDIA H100 80GB HBM3", 132, SgemmLevel::kPipelined, SgemmSizeClass::kLarge,
            {candidates[1], {4096, 8192}, 47123.5});
  cache.set("NVIDIA H100 80GB HBM3", 132, SgemmLevel::kPipelined, SgemmSizeClass::kSmall, {candidates[6], {1024}, 30000});
  cache.set("NVIDIA H100 80GB HBM3", 132, SgemmLevel::kWarptile, SgemmSizeClass::kLarge, {candidates[0], {4096}, 40000});
  cache.set("NVIDIA A100-SXM4-80GB", 108, SgemmLevel::kPipelined, SgemmSizeClass::kLarge, {candidates[2], {4096}, 18000});
  const auto path = dir.path() / "nested" / "dir" / "tune.json";  // save creates the directories
  cache.save(path);

  std::vector<std::string> warnings;
  const TuneCache loaded = TuneCache::load(path, warnings);
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  ASSERT_EQ(loaded.gpus().size(), 2u);
  const auto* e = loaded.find("NVIDIA H100 80GB HBM3", SgemmLevel::kPipelined, SgemmSizeClass::kLarge);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->config, candidates[1]);
  EXPECT_EQ(e->sizes, (std::vector<int>{4096, 8192}));
  EXPECT_DOUBLE_EQ(e->gflops, 47123.5);
  EXPECT_EQ(loaded.find("NVIDIA H100 80GB HBM3", SgemmLevel::kPipelined, SgemmSizeClass::kSmall)->config, candidates[6]);
  EXPECT_EQ(loaded.find("NVIDIA H100 80GB HBM3", SgemmLevel::kWarptile, SgemmSizeClass::kLarge)->config, candidates[0]);
  EXPECT_EQ(loaded.find("NVIDIA H100 80GB HBM3", SgemmLevel::kWarptile, SgemmSizeClass::kSmall), nullptr);
  EXPECT_EQ(loaded.find("NVIDIA A100-SXM4-80GB", SgemmLevel::kPipelined, SgemmSizeClass::kLarge)->config, candidates[2]);
  EXPECT_EQ(loaded.gpus().at("NVIDIA A100-SXM4-80GB").sm_count, 108);
  EXPECT_EQ(loaded.to_json_text(), cache.to_json_text());
  // No temporary file left behind.
  int files = 0;
  for ([[maybe_unused]] const auto& f : std::filesystem::directory_iterator(path.parent_path())) ++files;
  EXPECT_EQ(files, 1);
}

TEST(TuneCacheFile, MissingFileIsSilentlyEmpty) {
  TempDir dir;
  std::vector<std::string> warnings;
  EXPECT_TRUE(TuneCache::load(dir.path() / "nope.json", warnings).empty());
  EXPECT_TRUE(TuneCache::load({}, warnings).empty());
  EXPECT_TRUE(warnings.empty());
}

// A valid document with one good entry for "GPU A" and `extra` spliced into GPU A's sgemm8 object.
std::string cache_text(const std::string& version = "1", const std::string& extra = "") {
  return R"({"format": "parallax-tune", "version": )" + version + R"(, "gpus": {"GPU A": {"sm_count": 132,
      "sgemm8": {"large": {"config": {"bm":128,"bn":128,"bk":8,"wm":64,"wn":32,"wn_iter":2,"tm":4,"tn":4,
                                      "min_blocks":2}, "sizes": [4096], "gflops": 1.5})" +
         extra + "}}}}";
}

struct BadFile {
  const char* what;
  std::string text;
  const char* warning_part;
};

TEST(TuneCacheFile, BadFilesWarnAndGiveAnEmptyCache) {
  const std::string good = cache_text();
  const BadFile cases[] = {
      {"empty", "", "not valid JSON"},
      {"garbage", "\x01\x02 not json {{{", "not valid JSON"},
      {"truncated", good.substr(0, good.size() / 2), "not valid JSON"},
      {"array", "[1, 2, 3]", "not a JSON object"},
      {"other format", R"({"format": "something", "version": 1, "gpus": {}})", "not a parallax tuning cache"},
      {"no version", R"({"format": "parallax-tune", "gpus": {}})", "no integer \"version\""},
      {"wrong version", cache_text("2"), "version 2, this build reads version 1"},
      {"string version", cache_text("\"1\""), "no integer \"version\""},
      {"no gpus", R"({"format": "parallax-tune", "version": 1})", "\"gpus\" is missing"},
  };
  TempDir dir;
  for (const auto& c : cases) {
    std::vector<std::string> warnings;
    const auto path = dir.write("bad.json", c.text);
    TuneCache cache;
    EXPECT_NO_THROW(cache = TuneCache::load(path, warnings)) << c.what;
    EXPECT_TRUE(cache.empty()) << c.what;
    ASSERT_EQ(warnings.size(), 1u) << c.what;
    EXPECT_TRUE(contains(warnings[0], c.warning_part)) << c.what << ": " << warnings[0];
    EXPECT_TRUE(contains(warnings[0], path.string())) << c.what << ": " << warnings[0];
    // And sgemm's choice falls back to the heuristic.
    EXPECT_EQ(parallax::choose_sgemm_config(SgemmLevel::kPipelined, 4096, 4096, 4096, 132, &cache, "GPU A"),
              parallax::sgemm_default_config(SgemmLevel::kPipelined, 4096, 4096, 4096, 132));
  }
}

TEST(TuneCacheFile, UnreadablePathWarns) {
  TempDir dir;
  std::vector<std::string> warnings;
  const TuneCache cache = TuneCache::load(dir.path(), warnings);  // a directory, not a file
  EXPECT_TRUE(cache.empty());
  EXPECT_EQ(warnings.size(), 1u);
}

TEST(TuneCacheFile, BadEntriesAreSkippedGoodOnesKept) {
  const std::string bad_entries = R"(, "small": {"config": {"bm":100,"bn":128,"bk":8,"wm":64,"wn":32,"wn_iter":2,
                                                "tm":4,"tn":4,"min_blocks":2}})";
  const struct {
    const char* what;
    std::string extra;
    const char* warning_part;
  } cases[] = {
      {"invalid config", bad_entries, "invalid tile configuration"},
      {"uncompiled config",
       R"(, "small": {"config": {"bm":128,"bn":128,"bk":8,"wm":64,"wn":32,"wn_iter":2,"tm":4,"tn":4,"min_blocks":1}})",
       "not compiled into this build"},
      {"missing field", R"(, "small": {"config": {"bm":128,"bn":128,"bk":8}})", "config field 'wm' is missing"},
      {"non-integer field",
       R"(, "small": {"config": {"bm":128.5,"bn":128,"bk":8,"wm":64,"wn":32,"wn_iter":2,"tm":4,"tn":4,"min_blocks":2}})",
       "config field 'bm' is not an integer"},
      {"huge field",
       R"(, "small": {"config": {"bm":1e30,"bn":128,"bk":8,"wm":64,"wn":32,"wn_iter":2,"tm":4,"tn":4,"min_blocks":2}})",
       "config field 'bm' is not an integer"},
      {"overflowing field",
       R"(, "small": {"config": {"bm":99999999999,"bn":128,"bk":8,"wm":64,"wn":32,"wn_iter":2,"tm":4,"tn":4,"min_blocks":2}})",
       "config field 'bm' is out of range"},
      {"no config", R"(, "small": {"sizes": [1]})", "no \"config\" object"},
      {"bad size class", R"(, "medium": {"config": {}})", "size class must be"},
  };
  TempDir dir;
  for (const auto& c : cases) {
    std::vector<std::string> warnings;
    const auto path = dir.write("partial.json", cache_text("1", c.extra));
    const TuneCache cache = TuneCache::load(path, warnings);
    ASSERT_EQ(warnings.size(), 1u) << c.what;
    EXPECT_TRUE(contains(warnings[0], c.warning_part)) << c.what << ": " << warnings[0];
    ASSERT_NE(cache.find("GPU A", SgemmLevel::kPipelined, SgemmSizeClass::kLarge), nullptr) << c.what;
    EXPECT_EQ(cache.find("GPU A", SgemmLevel::kPipelined, SgemmSizeClass::kSmall), nullptr) << c.what;
  }
}

TEST(TuneCacheFile, BadGpuAndLevelObjectsAreSkipped) {
  const std::string text = R"({"format": "parallax-tune", "version": 1, "gpus": {
      "GPU A": 7,
      "GPU B": {"sgemm8": {}},
      "GPU C": {"sm_count": 132, "sgemm5": {}, "sgemm7": []}}})";
  TempDir dir;
  std::vector<std::string> warnings;
  const TuneCache cache = TuneCache::load(dir.write("t.json", text), warnings);
  ASSERT_EQ(warnings.size(), 4u);
  EXPECT_TRUE(contains(warnings[0], "'GPU A': not an object"));
  EXPECT_TRUE(contains(warnings[1], "'GPU B': \"sm_count\""));
  EXPECT_TRUE(contains(warnings[2], "'sgemm5' is not a tunable level"));
  EXPECT_TRUE(contains(warnings[3], "'sgemm7' is not a tunable level"));
}

TEST(TuneCacheFile, ForeignGpuWarnsAndFallsBack) {
  TempDir dir;
  const auto path = dir.write("t.json", cache_text());
  std::vector<std::string> warnings;
  const TuneCache cache = TuneCache::load_for_gpu(path, "NVIDIA H100 80GB HBM3", warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(contains(warnings[0], "no entry for this GPU 'NVIDIA H100 80GB HBM3'")) << warnings[0];
  EXPECT_TRUE(contains(warnings[0], "'GPU A'")) << warnings[0];
  EXPECT_EQ(parallax::choose_sgemm_config(SgemmLevel::kPipelined, 4096, 4096, 4096, 132, &cache, "NVIDIA H100 80GB HBM3"),
            parallax::sgemm_default_config(SgemmLevel::kPipelined, 4096, 4096, 4096, 132));
  warnings.clear();
  TuneCache::load_for_gpu(path, "GPU A", warnings);
  EXPECT_TRUE(warnings.empty());
}

// ---- Where the cache lives ---------------------------------------------------------------------------------

TEST(TuneCachePath, Precedence) {
  using parallax::tune_cache_path_from;
  EXPECT_EQ(tune_cache_path_from("/x/t.json", "/xdg", "/home/u"), "/x/t.json");
  EXPECT_EQ(tune_cache_path_from(nullptr, "/xdg", "/home/u"), "/xdg/parallax/tune.json");
  EXPECT_EQ(tune_cache_path_from("", "/xdg", "/home/u"), "/xdg/parallax/tune.json");
  EXPECT_EQ(tune_cache_path_from(nullptr, nullptr, "/home/u"), "/home/u/.cache/parallax/tune.json");
  EXPECT_EQ(tune_cache_path_from(nullptr, "", "/home/u"), "/home/u/.cache/parallax/tune.json");
  EXPECT_EQ(tune_cache_path_from(nullptr, nullptr, nullptr), "");
}

TEST(TuneCachePath, ReadsTheEnvironment) {
  {
    ScopedEnv p("PARALLAX_TUNE_CACHE", "/tmp/elsewhere.json");
    ScopedEnv x("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(parallax::default_tune_cache_path(), "/tmp/elsewhere.json");
  }
  {
    ScopedEnv p("PARALLAX_TUNE_CACHE", nullptr);
    ScopedEnv x("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(parallax::default_tune_cache_path(), "/xdg/parallax/tune.json");
  }
  {
    ScopedEnv p("PARALLAX_TUNE_CACHE", nullptr);
    ScopedEnv x("XDG_CACHE_HOME", nullptr);
    ScopedEnv h("HOME", "/home/someone");
    EXPECT_EQ(parallax::default_tune_cache_path(), "/home/someone/.cache/parallax/tune.json");
  }
}

// ---- The process's cache, as sgemm() uses it ----------------------------------------------------------------

TEST(ProcessCache, UsesTheTunedEntryForThisGpu) {
  TempDir dir;
  const auto path = dir.write("t.json", cache_text());
  ScopedEnv env("PARALLAX_TUNE_CACHE", path.c_str());
  parallax::reload_tune_cache();
  ::testing::internal::CaptureStderr();
  const SgemmTileConfig large = parallax::sgemm_active_config(SgemmLevel::kPipelined, 4096, 4096, 4096, "GPU A", 132);
  const SgemmTileConfig small = parallax::sgemm_active_config(SgemmLevel::kPipelined, 512, 512, 512, "GPU A", 132);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(large, kValid);
  EXPECT_EQ(small, parallax::sgemm_default_config(SgemmLevel::kPipelined, 512, 512, 512, 132));
  parallax::reload_tune_cache();
}

TEST(ProcessCache, CorruptFileWarnsOnceAndUsesDefaults) {
  TempDir dir;
  const auto path = dir.write("t.json", cache_text().substr(0, 40));
  ScopedEnv env("PARALLAX_TUNE_CACHE", path.c_str());
  parallax::reload_tune_cache();
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(parallax::sgemm_active_config(SgemmLevel::kWarptile, 8192, 8192, 8192, "GPU A", 132),
              parallax::sgemm_default_config(SgemmLevel::kWarptile, 8192, 8192, 8192, 132));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(err, "warning")) << err;
  EXPECT_TRUE(contains(err, "not valid JSON")) << err;
  EXPECT_EQ(err.find("warning"), err.rfind("warning")) << "warned more than once:\n" << err;
  parallax::reload_tune_cache();
}

TEST(ProcessCache, ForeignGpuWarnsOncePerGpu) {
  TempDir dir;
  const auto path = dir.write("t.json", cache_text());
  ScopedEnv env("PARALLAX_TUNE_CACHE", path.c_str());
  parallax::reload_tune_cache();
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 3; ++i) parallax::sgemm_active_config(SgemmLevel::kPipelined, 4096, 4096, 4096, "GPU Z", 132);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(err, "no entry for this GPU 'GPU Z'")) << err;
  EXPECT_EQ(err.find("warning"), err.rfind("warning")) << "warned more than once:\n" << err;
  parallax::reload_tune_cache();
}

// ---- `parallax tune gemm-fp32` parsing --------------------------------------------------------------------

CLI::App* tune_gemm(CLI::App& app) { return app.get_subcommand("tune")->get_subcommand("gemm-fp32"); }

TEST(TuneCli, ParsesSizesLevelsCacheAndJson) {
  parallax::cli::Action action;
  auto app = parallax::cli::make_app(action);
  app->parse("tune gemm-fp32 --sizes 1000,2048,4096 --levels 8,sgemm7 --cache /tmp/t.json --json", false);
  CLI::App* cmd = tune_gemm(*app);
  EXPECT_TRUE(cmd->parsed());
  EXPECT_EQ(cmd->get_option("--sizes")->as<std::vector<int>>(), (std::vector<int>{1000, 2048, 4096}));
  EXPECT_EQ(cmd->get_option("--levels")->as<std::vector<std::string>>(), (std::vector<std::string>{"8", "sgemm7"}));
  EXPECT_EQ(cmd->get_option("--cache")->as<std::string>(), "/tmp/t.json");
  EXPECT_EQ(cmd->get_option("--json")->count(), 1u);
  EXPECT_TRUE(static_cast<bool>(action)) << "parsing must leave the command to run";
}

TEST(TuneCli, DefaultsAreTheDocumentedOnes) {
  parallax::cli::Action action;
  auto app = parallax::cli::make_app(action);
  app->parse("tune gemm-fp32", false);
  CLI::App* cmd = tune_gemm(*app);
  EXPECT_EQ(cmd->get_option("--sizes")->as<std::vector<int>>(), (std::vector<int>{1024, 4096}));
  EXPECT_EQ(cmd->get_option("--cache")->count(), 0u);
  EXPECT_TRUE(static_cast<bool>(action));
}

TEST(TuneCli, RejectsBadArguments) {
  for (const char* line : {"tune gemm-fp32 --sizes 0", "tune gemm-fp32 --sizes 1024,abc", "tune gemm-fp32 --sizes -5",
                           "tune gemm-fp32 --levels 5", "tune gemm-fp32 --levels warp", "tune gemm-fp32 --frobnicate",
                           "tune", "tune gemm-fp64"}) {
    parallax::cli::Action action;
    auto app = parallax::cli::make_app(action);
    EXPECT_THROW(app->parse(line, false), CLI::ParseError) << line;
  }
}

}  // namespace
