// Tile configurations of the top two SGEMM ladder levels (7 warptiling, 8 pipelined) and their autotuner.
//
// Levels 7 and 8 are templates over a tile configuration: how big a block tile is, how it is split among
// warps, and how many results each thread keeps in registers. No one configuration is best everywhere:
// big tiles reuse more data per load but leave SMs idle on small problems (1000^3 with 128x128 tiles is 64
// blocks for 132 SMs). So a handful of configurations is compiled in, and at run time sgemm() picks one:
//
//   1. the tuned winner for this GPU and this size class, from the tuning cache (`parallax tune gemm-fp32`),
//   2. else a shape-based default (choose_sgemm_config: a small throughput model with wave quantization).
//
// Tuning cache (JSON, one file for all GPUs of a machine; written by tune_sgemm):
//   location: $PARALLAX_TUNE_CACHE, else $XDG_CACHE_HOME/parallax/tune.json, else ~/.cache/parallax/tune.json
//   {
//     "format": "parallax-tune", "version": 1, "parallax": "0.1.0", "git_sha": "...",
//     "gpus": {
//       "NVIDIA H100 80GB HBM3": {                      <- cudaDeviceProp::name
//         "sm_count": 132,
//         "sgemm8": {                                   <- level name
//           "large": {"config": {"bm":128,"bn":128,"bk":8,"wm":64,"wn":32,"wn_iter":2,"tm":4,"tn":4,
//                                "min_blocks":2},
//                     "name": "128x128x8_w64x32_i2x2_t4x4_b2",   (informative; "config" is what is read)
//                     "sizes": [4096], "gflops": 47000.0},       (where it won, and its rate there)
//           "small": {...}                              <- size class, see sgemm_size_class()
//         }, "sgemm7": {...}
//       }
//     }
//   }
// A GPU is identified by its name: two boards of one model share tuning, and a cache copied from another
// machine applies when (and only when) the GPU model matches.
// A missing file means "not tuned" (silent). A corrupt, truncated or wrong-version file, a file without an
// entry for this GPU, or an entry naming a configuration that is invalid or not compiled into this build is
// reported once on stderr and ignored (defaults are used): a stale cache never breaks sgemm().
#pragma once

#include <cuda_runtime.h>

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "parallax/bench.hpp"
#include "parallax/sgemm.hpp"

namespace parallax {

// One tile configuration of levels 7/8 (all sizes in elements). A block of threads() threads computes a
// bm x bn tile of C, walking k in steps of bk. The block is split into (bm/wm) x (bn/wn) warps; a warp's
// wm x wn tile is covered wm_iter() x wn_iter times by a 32-lane sub-tile in which every lane owns tm x tn
// results. So each thread accumulates (wm_iter*tm) x (wn_iter*tn) results in registers.
// The rules a configuration must satisfy are stated once, in src/gemm/sgemm_tiles.hpp.
// A structural type: it is used directly as a template parameter of the kernels.
struct SgemmTileConfig {
  int bm = 128, bn = 128, bk = 8;  // block tile
  int wm = 64, wn = 32;            // warp tile
  int wn_iter = 2;                 // sub-tiles per warp along n (along m: wm_iter(), derived)
  int tm = 4, tn = 4;              // per-thread sub-tile, in registers
  int min_blocks = 2;              // __launch_bounds__ minimum blocks per SM: caps registers at 64K/(threads*min_blocks)

  // Derived quantities; 0 for configurations whose fields do not divide (never a division by zero, so a
  // garbage configuration read from a cache file can be inspected safely).
  constexpr int warps() const {
    return (wm > 0 && wn > 0 && bm % wm == 0 && bn % wn == 0) ? (bm / wm) * (bn / wn) : 0;
  }
  constexpr int threads() const { return 32 * warps(); }
  constexpr int wm_iter() const {
    const int per_iter = 32 * tm * tn * wn_iter;  // elements one sub-tile covers per warp
    return (per_iter > 0 && (wm * wn) % per_iter == 0) ? (wm * wn) / per_iter : 0;
  }
  constexpr int thread_m() const { return wm_iter() * tm; }  // results per thread along m
  constexpr int thread_n() const { return wn_iter * tn; }    // results per thread along n

  friend constexpr bool operator==(const SgemmTileConfig&, const SgemmTileConfig&) = default;
};

// "128x128x8 w64x32 t8x8 b2": block tile, warp tile, results per thread, min blocks per SM. Unique per
// compiled-in candidate (the full field list is in the JSON form).
std::string to_string(const SgemmTileConfig& config);
// "" when `config` satisfies every rule, else the first rule it breaks (same text as the kernels'
// static_assert; see src/gemm/sgemm_tiles.hpp).
std::string_view sgemm_tile_config_error_message(const SgemmTileConfig& config);

// The configurations compiled into this build for `level` (empty for levels 1..6, which have fixed tiles).
std::span<const SgemmTileConfig> sgemm_tile_candidates(SgemmLevel level);
bool sgemm_config_compiled(SgemmLevel level, const SgemmTileConfig& config);

// Runs level 7 or 8 with exactly `config`. Throws InvalidArgument when the level has no tile choice, or
// when `config` is invalid or not compiled in for the level (the message lists the candidates).
void sgemm_with_config(SgemmLevel level, const SgemmTileConfig& config, const SgemmArgs& args,
                       cudaStream_t stream = nullptr);

// Tuning results are kept per size class: a small problem wants small tiles (enough blocks to fill the
// GPU), a large one wants the biggest reuse. A problem is "small" when it has fewer 128x128 output tiles
// than 2 per SM (H100, 132 SMs: m = n <= ~2048 is small, 4096 is large).
enum class SgemmSizeClass { kSmall, kLarge };
std::string_view sgemm_size_class_name(SgemmSizeClass size_class);  // "small" / "large"
SgemmSizeClass sgemm_size_class(int m, int n, int k, int sm_count);

// The tuning cache: GPU name -> level -> size class -> winning configuration.
class TuneCache {
 public:
  static constexpr int kVersion = 1;

  struct Entry {
    SgemmTileConfig config;
    std::vector<int> sizes;  // square sizes the winner was measured at
    double gflops = 0;       // its rate at the largest of them
  };
  struct Gpu {
    int sm_count = 0;
    std::map<std::pair<SgemmLevel, SgemmSizeClass>, Entry> entries;
  };

  // Reads a cache file. Never throws: a missing file gives an empty cache and no warning; anything wrong
  // with the file or one of its entries appends a human-readable line to `warnings` and drops what is bad
  // (a bad entry is skipped, a bad file gives an empty cache).
  static TuneCache load(const std::filesystem::path& path, std::vector<std::string>& warnings);
  // load(), plus a warning when the file has entries but none for `gpu` (a cache copied from another
  // machine): what sgemm() does with the cache on first use.
  static TuneCache load_for_gpu(const std::filesystem::path& path, std::string_view gpu,
                                std::vector<std::string>& warnings);
  // The same from the file's text; `source` names it in warnings.
  static TuneCache parse(std::string_view text, std::string_view source, std::vector<std::string>& warnings);
  // Writes atomically (temporary file + rename), creating the directory. Throws parallax::Error on failure.
  void save(const std::filesystem::path& path) const;
  std::string to_json_text() const;

  const Entry* find(std::string_view gpu, SgemmLevel level, SgemmSizeClass size_class) const;
  void set(std::string_view gpu, int sm_count, SgemmLevel level, SgemmSizeClass size_class, Entry entry);
  bool has_gpu(std::string_view gpu) const { return gpus_.find(std::string(gpu)) != gpus_.end(); }
  bool empty() const { return gpus_.empty(); }
  const std::map<std::string, Gpu, std::less<>>& gpus() const { return gpus_; }

 private:
  std::map<std::string, Gpu, std::less<>> gpus_;
};

// Where the cache lives: $PARALLAX_TUNE_CACHE, else $XDG_CACHE_HOME/parallax/tune.json, else
// $HOME/.cache/parallax/tune.json; empty or unset variables are skipped. Empty path if none is set.
std::filesystem::path default_tune_cache_path();
// The same rule from explicit values (nullptr = unset), for tests.
std::filesystem::path tune_cache_path_from(const char* parallax_tune_cache, const char* xdg_cache_home,
                                           const char* home);

// The configuration level 7/8 uses for an m x n x k problem on a GPU with `sm_count` SMs: the cache's
// entry for (gpu_name, level, size class) when `cache` has a valid, compiled-in one, else the shape
// heuristic. Pure (no GPU needed). Throws InvalidArgument for levels other than 7 and 8.
SgemmTileConfig choose_sgemm_config(SgemmLevel level, int m, int n, int k, int sm_count,
                                    const TuneCache* cache = nullptr, std::string_view gpu_name = {});
// The heuristic alone: estimated time of every candidate from tile count, waves, occupancy and the
// FFMA share of its inner loop (see tune.cpp); the smallest estimate wins.
SgemmTileConfig sgemm_default_config(SgemmLevel level, int m, int n, int k, int sm_count);
// The heuristic's estimate, in arbitrary units (exposed for tests and `tune` output).
double sgemm_config_cost_estimate(const SgemmTileConfig& config, int m, int n, int k, int sm_count);

// What sgemm() uses for levels 7/8 on a GPU called `gpu_name` with `sm_count` SMs: choose_sgemm_config with
// this process's tuning cache. The cache is read from default_tune_cache_path() on first use (once per
// process, thread-safe); its warnings, and a warning when it has no entry for `gpu_name`, go to stderr once.
SgemmTileConfig sgemm_active_config(SgemmLevel level, int m, int n, int k, std::string_view gpu_name, int sm_count);
// Forgets the process's tuning cache: the next sgemm() reads the file again (e.g. after the environment
// changed). tune_sgemm() installs its results directly and needs no reload.
void reload_tune_cache();

// ---- The tuner ----------------------------------------------------------------------------------------

struct TuneProgress {
  int index = 0;  // 1-based number of this measurement
  int total = 0;
  SgemmLevel level = SgemmLevel::kPipelined;
  SgemmTileConfig config;
  int size = 0;
  bool is_cublas = false;  // the cuBLAS reference measurement of this size
};

struct TuneOptions {
  std::vector<int> sizes{1024, 4096};  // square problems m = n = k
  std::vector<SgemmLevel> levels{SgemmLevel::kWarptile, SgemmLevel::kPipelined};
  std::filesystem::path cache_path;  // empty: default_tune_cache_path()
  bool save = true;                  // write the winners into the cache file (merging with what is there)
  bench::Options bench{.warmup = 3, .repetitions = 20, .flush_l2 = false, .budget_ms = 400, .min_repetitions = 5};
  double tolerance = 1e-4;  // max relative Frobenius error against cuBLAS for a candidate to count
  std::function<void(const TuneProgress&)> progress;  // called before each measurement
};

struct TuneMeasurement {
  SgemmLevel level = SgemmLevel::kPipelined;
  SgemmTileConfig config;
  int size = 0;
  bool ok = false;              // ran and matched cuBLAS
  std::string error;            // why not, when !ok
  double relative_error = 0;    // vs cuBLAS
  bench::Timing timing;
  double gflops = 0;
  double fraction_of_cublas = 0;  // cuBLAS time / this time, same run
  bool fastest = false;           // fastest verified configuration of its level at this size
};

struct TuneWinner {
  SgemmLevel level = SgemmLevel::kPipelined;
  SgemmSizeClass size_class = SgemmSizeClass::kLarge;
  TuneCache::Entry entry;
};

struct TuneResult {
  std::string gpu_name;
  int sm_count = 0;
  std::vector<std::pair<int, bench::Timing>> cublas;  // per size
  std::vector<TuneMeasurement> measurements;
  std::vector<TuneWinner> winners;
  std::filesystem::path cache_path;  // where the winners were saved (empty when not saved)
  std::string save_error;            // why saving failed (the measurements are still returned)
};

// Times every compiled-in candidate of each level at each size (bench::time_gpu, inputs rotated beyond 2x
// L2), checks each candidate's output against cuBLAS (a wrong candidate is reported and never wins), and
// picks per (level, size class) the configuration with the lowest sum of time relative to the fastest at
// each size of that class. Saves the winners for this GPU into the cache (merging) and makes this process
// use them at once. Throws parallax::Error without a GPU; a failure to write the cache file is reported in
// TuneResult::save_error instead, so a long measurement is never lost to an unwritable path.
TuneResult tune_sgemm(const TuneOptions& options = {});

}  // namespace parallax
