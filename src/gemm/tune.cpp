// Tile configurations of levels 7/8 at run time: candidate tables, the shape heuristic, the tuning cache
// (JSON) and the tuner. Host code only; the kernels live in sgemm/sgemm_07_warptile.cu and
// sgemm/sgemm_08_pipelined.cu and export one launcher per compiled-in configuration.
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "gemm/sgemm/launchers.hpp"
#include "gemm/sgemm_tiles.hpp"
#include "parallax/core.hpp"
#include "parallax/random.hpp"
#include "parallax/tune.hpp"

namespace parallax {
namespace {

using nlohmann::json;

bool has_tile_choice(SgemmLevel level) { return level == SgemmLevel::kWarptile || level == SgemmLevel::kPipelined; }

std::span<const detail::SgemmConfigLauncher> launchers(SgemmLevel level) {
  if (level == SgemmLevel::kWarptile) return detail::sgemm_warptile_launchers();
  if (level == SgemmLevel::kPipelined) return detail::sgemm_pipelined_launchers();
  return {};
}

void require_tile_level(SgemmLevel level) {
  PX_REQUIRE(has_tile_choice(level), "level",
             "only levels 7 (sgemm7) and 8 (sgemm8) have tile configurations (got level " +
                 std::to_string(static_cast<int>(level)) + ")");
}

std::string candidate_list(SgemmLevel level) {
  std::string out;
  for (const auto& c : sgemm_tile_candidates(level)) out += (out.empty() ? "" : ", ") + to_string(c);
  return out;
}

}  // namespace

// ---- Configurations -----------------------------------------------------------------------------------------

std::string to_string(const SgemmTileConfig& c) {
  // Block tile, warp tile, sub-tile iterations per warp (m x n), per-lane sub-tile, min blocks per SM.
  return fmt::format("{}x{}x{}_w{}x{}_i{}x{}_t{}x{}_b{}", c.bm, c.bn, c.bk, c.wm, c.wn, c.wm_iter(), c.wn_iter, c.tm,
                     c.tn, c.min_blocks);
}

std::string_view sgemm_tile_config_error_message(const SgemmTileConfig& config) {
  return sgemm_tile_config_error(config);
}

std::span<const SgemmTileConfig> sgemm_tile_candidates(SgemmLevel level) {
  // Both levels compile the same list (their launch tables are built from it, in order).
  if (has_tile_choice(level)) return kSgemmTileCandidates;
  return {};
}

bool sgemm_config_compiled(SgemmLevel level, const SgemmTileConfig& config) {
  for (const auto& entry : launchers(level))
    if (entry.config == config) return true;
  return false;
}

void sgemm_with_config(SgemmLevel level, const SgemmTileConfig& config, const SgemmArgs& args, cudaStream_t stream) {
  require_tile_level(level);
  const std::string_view rule = sgemm_tile_config_error(config);
  PX_REQUIRE(rule.empty(), "config", "tile configuration " + to_string(config) + " is invalid: " + std::string(rule));
  validate(args);
  for (const auto& entry : launchers(level)) {
    if (entry.config == config) return entry.launch(args, stream);
  }
  throw InvalidArgument("config", "tile configuration " + to_string(config) + " is not compiled in for " +
                                      std::string(sgemm_level_name(level)) + "; compiled: " + candidate_list(level));
}

// ---- Size classes and the shape heuristic --------------------------------------------------------------------

std::string_view sgemm_size_class_name(SgemmSizeClass size_class) {
  return size_class == SgemmSizeClass::kSmall ? "small" : "large";
}

SgemmSizeClass sgemm_size_class(int m, int n, int /*k*/, int sm_count) {
  const double tiles = std::ceil(m / 128.0) * std::ceil(n / 128.0);
  return tiles < 2.0 * std::max(sm_count, 1) ? SgemmSizeClass::kSmall : SgemmSizeClass::kLarge;
}

// The estimate is throughput-based: time = (blocks the busiest SM runs) x (work per block) / (the rate an SM
// sustains with this configuration).
//   * Blocks per SM: ceil(tiles / SMs). This is where wave quantization shows: 64 blocks on 132 SMs cost as
//     much as 132, and 1024 blocks on 132 SMs cost as much as 1056.
//   * Work per block: bm * bn * k rounded up to bk (edge tiles do full work on zero padding).
//   * Rate: the FFMA share of the inner loop (per k step: thread_m*thread_n FFMAs, (thread_m+thread_n)/4
//     LDS.128, plus per-tile loads, stores, barrier and loop overhead spread over bk steps), times a latency
//     factor: with fewer than ~2 warps per scheduler (8 per SM) the barrier and shared-load latencies are
//     exposed; 0.55 + 0.05 per resident warp, capped at 1 (so 4 warps: 0.75, 8 warps: 0.95, 9+: 1).
// The numbers are rough by design: the heuristic only has to rank tile sizes sensibly for shapes nobody has
// tuned; `parallax tune` measures.
double sgemm_config_cost_estimate(const SgemmTileConfig& c, int m, int n, int k, int sm_count) {
  if (!sgemm_tile_config_error(c).empty() || m <= 0 || n <= 0 || k <= 0) return std::numeric_limits<double>::infinity();
  const double fma = static_cast<double>(c.thread_m()) * c.thread_n();
  const double lds = (c.thread_m() + c.thread_n()) / 4.0;
  const double per_tile = 24.0 + 6.0 * (sgemm_a_loads_per_thread(c) + sgemm_b_loads_per_thread(c));
  const double ffma_share = fma / (fma + lds + per_tile / c.bk);

  const double tiles = std::ceil(static_cast<double>(m) / c.bm) * std::ceil(static_cast<double>(n) / c.bn);
  const double per_sm = std::ceil(tiles / std::max(sm_count, 1));
  const double resident = std::min(per_sm, static_cast<double>(c.min_blocks));
  const double warps = resident * c.warps();
  const double latency = std::min(1.0, 0.55 + 0.05 * warps);

  const double k_padded = std::ceil(static_cast<double>(k) / c.bk) * c.bk;
  return per_sm * c.bm * c.bn * k_padded / (ffma_share * latency);
}

SgemmTileConfig sgemm_default_config(SgemmLevel level, int m, int n, int k, int sm_count) {
  require_tile_level(level);
  const auto candidates = sgemm_tile_candidates(level);
  const SgemmTileConfig* best = &candidates.front();
  double best_cost = std::numeric_limits<double>::infinity();
  for (const auto& c : candidates) {
    const double cost = sgemm_config_cost_estimate(c, m, n, k, sm_count);
    if (cost < best_cost) {  // strict: ties go to the earlier (list order = preference order)
      best_cost = cost;
      best = &c;
    }
  }
  return *best;
}

SgemmTileConfig choose_sgemm_config(SgemmLevel level, int m, int n, int k, int sm_count, const TuneCache* cache,
                                    std::string_view gpu_name) {
  require_tile_level(level);
  if (cache != nullptr) {
    const TuneCache::Entry* entry = cache->find(gpu_name, level, sgemm_size_class(m, n, k, sm_count));
    // Entries were checked when the cache was loaded; check again so a hand-built TuneCache cannot launch
    // something that is not there.
    if (entry != nullptr && sgemm_tile_config_error(entry->config).empty() &&
        sgemm_config_compiled(level, entry->config))
      return entry->config;
  }
  return sgemm_default_config(level, m, n, k, sm_count);
}

// ---- The tuning cache -------------------------------------------------------------------------------------

namespace {

constexpr std::string_view kFormat = "parallax-tune";

json config_to_json(const SgemmTileConfig& c) {
  return json{{"bm", c.bm}, {"bn", c.bn}, {"bk", c.bk}, {"wm", c.wm}, {"wn", c.wn}, {"wn_iter", c.wn_iter},
              {"tm", c.tm}, {"tn", c.tn}, {"min_blocks", c.min_blocks}};
}

// Every field must be present and an integer in int range; "" on success, else what is wrong.
std::string config_from_json(const json& j, SgemmTileConfig& c) {
  if (!j.is_object()) return "'config' is not an object";
  const std::pair<const char*, int*> fields[] = {{"bm", &c.bm}, {"bn", &c.bn}, {"bk", &c.bk},
                                                 {"wm", &c.wm}, {"wn", &c.wn}, {"wn_iter", &c.wn_iter},
                                                 {"tm", &c.tm}, {"tn", &c.tn}, {"min_blocks", &c.min_blocks}};
  for (const auto& [name, field] : fields) {
    const auto it = j.find(name);
    if (it == j.end()) return std::string("config field '") + name + "' is missing";
    if (!it->is_number_integer()) return std::string("config field '") + name + "' is not an integer";
    const auto v = it->get<long long>();
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
      return std::string("config field '") + name + "' is out of range";
    *field = static_cast<int>(v);
  }
  return "";
}

std::optional<SgemmLevel> level_from_key(std::string_view key) {
  for (SgemmLevel level : {SgemmLevel::kWarptile, SgemmLevel::kPipelined})
    if (sgemm_level_name(level) == key) return level;
  return std::nullopt;
}

std::optional<SgemmSizeClass> size_class_from_key(std::string_view key) {
  for (SgemmSizeClass s : {SgemmSizeClass::kSmall, SgemmSizeClass::kLarge})
    if (sgemm_size_class_name(s) == key) return s;
  return std::nullopt;
}

}  // namespace

TuneCache TuneCache::parse(std::string_view text, std::string_view source, std::vector<std::string>& warnings) {
  const std::string where = "tune cache " + std::string(source);
  auto file_warning = [&](const std::string& what) {
    warnings.push_back(where + ": " + what + "; ignoring the cache (using default tile configurations)");
    return TuneCache{};
  };
  const json root = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return file_warning("not valid JSON (corrupt or truncated)");
  if (!root.is_object()) return file_warning("top level is not a JSON object");
  const auto format = root.find("format");
  if (format == root.end() || !format->is_string() || format->get<std::string>() != kFormat)
    return file_warning("not a parallax tuning cache (\"format\" is not \"parallax-tune\")");
  const auto version = root.find("version");
  if (version == root.end() || !version->is_number_integer())
    return file_warning("no integer \"version\"");
  if (version->get<long long>() != kVersion)
    return file_warning("version " + version->dump() + ", this build reads version " + std::to_string(kVersion));
  const auto gpus = root.find("gpus");
  if (gpus == root.end() || !gpus->is_object()) return file_warning("\"gpus\" is missing or not an object");

  // From here on a bad part is skipped, the rest kept.
  TuneCache cache;
  for (const auto& [gpu_name, gpu] : gpus->items()) {
    const std::string at = where + ": GPU '" + gpu_name + "'";
    if (!gpu.is_object()) {
      warnings.push_back(at + ": not an object; skipped");
      continue;
    }
    const auto sm = gpu.find("sm_count");
    if (sm == gpu.end() || !sm->is_number_integer() || sm->get<long long>() <= 0 ||
        sm->get<long long>() > std::numeric_limits<int>::max()) {
      warnings.push_back(at + ": \"sm_count\" is missing or not a positive integer; skipped");
      continue;
    }
    const int sm_count = static_cast<int>(sm->get<long long>());
    for (const auto& [level_key, level_entries] : gpu.items()) {
      if (level_key == "sm_count") continue;
      const auto level = level_from_key(level_key);
      if (!level || !level_entries.is_object()) {
        warnings.push_back(at + ": '" + level_key + "' is not a tunable level (sgemm7, sgemm8) with an object; skipped");
        continue;
      }
      for (const auto& [class_key, e] : level_entries.items()) {
        const std::string entry_at = at + " " + level_key + "/" + class_key;
        const auto size_class = size_class_from_key(class_key);
        if (!size_class) {
          warnings.push_back(entry_at + ": size class must be \"small\" or \"large\"; skipped");
          continue;
        }
        if (!e.is_object() || e.find("config") == e.end()) {
          warnings.push_back(entry_at + ": no \"config\" object; skipped");
          continue;
        }
        Entry entry;
        if (const std::string problem = config_from_json(e["config"], entry.config); !problem.empty()) {
          warnings.push_back(entry_at + ": " + problem + "; skipped");
          continue;
        }
        if (const std::string_view rule = sgemm_tile_config_error(entry.config); !rule.empty()) {
          warnings.push_back(entry_at + ": invalid tile configuration " + to_string(entry.config) + " (" +
                             std::string(rule) + "); skipped");
          continue;
        }
        if (!sgemm_config_compiled(*level, entry.config)) {
          warnings.push_back(entry_at + ": tile configuration " + to_string(entry.config) +
                             " is not compiled into this build; skipped (re-run `parallax tune gemm-fp32`)");
          continue;
        }
        if (const auto sizes = e.find("sizes"); sizes != e.end() && sizes->is_array()) {
          for (const auto& s : *sizes)
            if (s.is_number_integer()) entry.sizes.push_back(static_cast<int>(s.get<long long>()));
        }
        if (const auto gflops = e.find("gflops"); gflops != e.end() && gflops->is_number())
          entry.gflops = gflops->get<double>();
        cache.set(gpu_name, sm_count, *level, *size_class, std::move(entry));
      }
    }
  }
  return cache;
}

TuneCache TuneCache::load(const std::filesystem::path& path, std::vector<std::string>& warnings) {
  try {
    std::error_code ec;
    if (path.empty() || !std::filesystem::exists(path, ec)) return {};  // never tuned: not worth a warning
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      warnings.push_back("tune cache " + path.string() + ": cannot be read; ignoring it");
      return {};
    }
    std::ostringstream text;
    text << in.rdbuf();
    return parse(text.str(), path.string(), warnings);
  } catch (const std::exception& e) {  // e.g. bad_alloc on an absurd file, filesystem errors
    warnings.push_back("tune cache " + path.string() + ": " + e.what() + "; ignoring it");
    return {};
  }
}

TuneCache TuneCache::load_for_gpu(const std::filesystem::path& path, std::string_view gpu,
                                  std::vector<std::string>& warnings) {
  TuneCache cache = load(path, warnings);
  if (!cache.empty() && !cache.has_gpu(gpu)) {
    std::string known;
    for (const auto& [name, entry] : cache.gpus()) known += (known.empty() ? "'" : ", '") + name + "'";
    warnings.push_back("tune cache " + path.string() + ": no entry for this GPU '" + std::string(gpu) +
                       "' (it has " + known + "); using default tile configurations");
  }
  return cache;
}

std::string TuneCache::to_json_text() const {
  json gpus = json::object();
  for (const auto& [name, gpu] : gpus_) {
    json g{{"sm_count", gpu.sm_count}};
    for (const auto& [key, entry] : gpu.entries) {
      const std::string level(sgemm_level_name(key.first));
      const std::string size_class(sgemm_size_class_name(key.second));
      g[level][size_class] = json{{"config", config_to_json(entry.config)}, {"sizes", entry.sizes},
                                  {"gflops", entry.gflops}, {"name", to_string(entry.config)}};
    }
    gpus[name] = std::move(g);
  }
  const json root{{"format", std::string(kFormat)}, {"version", kVersion}, {"parallax", version()}, {"git_sha", git_sha()},
                  {"gpus", std::move(gpus)}};
  return root.dump(2) + "\n";
}

void TuneCache::save(const std::filesystem::path& path) const {
  PX_REQUIRE(!path.empty(), "path", "tune cache path must not be empty (set PARALLAX_TUNE_CACHE or HOME)");
  std::error_code ec;
  if (path.has_parent_path()) {
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) throw Error("cannot create directory " + path.parent_path().string() + ": " + ec.message());
  }
  // Write beside the target, then rename: a reader (another process's sgemm) never sees a half-written file.
  const std::filesystem::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << to_json_text();
    out.close();
    if (!out) throw Error("cannot write tune cache " + tmp.string());
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw Error("cannot move tune cache into place at " + path.string());
  }
}

const TuneCache::Entry* TuneCache::find(std::string_view gpu, SgemmLevel level, SgemmSizeClass size_class) const {
  const auto g = gpus_.find(gpu);
  if (g == gpus_.end()) return nullptr;
  const auto e = g->second.entries.find({level, size_class});
  return e == g->second.entries.end() ? nullptr : &e->second;
}

void TuneCache::set(std::string_view gpu, int sm_count, SgemmLevel level, SgemmSizeClass size_class, Entry entry) {
  auto g = gpus_.find(gpu);
  if (g == gpus_.end()) g = gpus_.emplace(std::string(gpu), Gpu{}).first;
  g->second.sm_count = sm_count;
  g->second.entries[{level, size_class}] = std::move(entry);
}

std::filesystem::path tune_cache_path_from(const char* parallax_tune_cache, const char* xdg_cache_home,
                                           const char* home) {
  auto set = [](const char* v) { return v != nullptr && v[0] != '\0'; };
  if (set(parallax_tune_cache)) return std::filesystem::path(parallax_tune_cache);
  if (set(xdg_cache_home)) return std::filesystem::path(xdg_cache_home) / "parallax" / "tune.json";
  if (set(home)) return std::filesystem::path(home) / ".cache" / "parallax" / "tune.json";
  return {};
}

std::filesystem::path default_tune_cache_path() {
  return tune_cache_path_from(std::getenv("PARALLAX_TUNE_CACHE"), std::getenv("XDG_CACHE_HOME"), std::getenv("HOME"));
}

// ---- The process's cache ------------------------------------------------------------------------------------

namespace {

// Loaded on first use, under a mutex (sgemm may be called from many threads). Held through a shared_ptr so a
// caller keeps a consistent snapshot while tune_sgemm() or reload_tune_cache() replaces it.
struct ProcessCache {
  std::mutex mutex;
  std::shared_ptr<const TuneCache> cache;  // null: not loaded yet
  std::filesystem::path path;
  std::set<std::string, std::less<>> gpus_warned;  // "no entry for this GPU" is said once per GPU
};

ProcessCache& process_cache() {
  static ProcessCache instance;
  return instance;
}

void print_warnings(const std::vector<std::string>& warnings) {
  for (const auto& w : warnings) fmt::print(stderr, "parallax: warning: {}\n", w);
}

std::shared_ptr<const TuneCache> process_cache_for(std::string_view gpu_name) {
  ProcessCache& pc = process_cache();
  std::lock_guard lock(pc.mutex);
  if (!pc.cache) {
    std::vector<std::string> warnings;
    pc.path = default_tune_cache_path();
    pc.cache = std::make_shared<const TuneCache>(TuneCache::load(pc.path, warnings));
    print_warnings(warnings);
  }
  if (!pc.cache->empty() && !pc.cache->has_gpu(gpu_name) && pc.gpus_warned.insert(std::string(gpu_name)).second)
    fmt::print(stderr,
               "parallax: warning: tune cache {}: no entry for this GPU '{}'; using default tile configurations "
               "(run `parallax tune gemm-fp32`)\n",
               pc.path.string(), gpu_name);
  return pc.cache;
}

}  // namespace

SgemmTileConfig sgemm_active_config(SgemmLevel level, int m, int n, int k, std::string_view gpu_name, int sm_count) {
  const std::shared_ptr<const TuneCache> cache = process_cache_for(gpu_name);
  return choose_sgemm_config(level, m, n, k, sm_count, cache.get(), gpu_name);
}

void reload_tune_cache() {
  ProcessCache& pc = process_cache();
  std::lock_guard lock(pc.mutex);
  pc.cache.reset();
  pc.gpus_warned.clear();
}

namespace detail {

SgemmTileConfig sgemm_runtime_config(SgemmLevel level, const SgemmArgs& args) {
  // Name and SM count per device, queried once (cudaGetDeviceProperties takes far longer than a small GEMM).
  struct Known {
    std::string name;
    int sm_count = 0;
  };
  static std::mutex mutex;
  static std::map<int, Known> devices;
  int device = 0;
  PX_CUDA_CHECK(cudaGetDevice(&device));
  const Known* known = nullptr;
  {
    std::lock_guard lock(mutex);
    auto it = devices.find(device);
    if (it == devices.end()) {
      const DeviceInfo info = device_info(device);
      it = devices.emplace(device, Known{info.name, info.sm_count}).first;
    }
    known = &it->second;  // map nodes never move and are never erased: safe to use after unlocking
  }
  return sgemm_active_config(level, args.m, args.n, args.k, known->name, known->sm_count);
}

}  // namespace detail

// ---- The tuner ----------------------------------------------------------------------------------------------

namespace {

// Relative Frobenius error of `out` against `ref`, or +inf when `out` has a non-finite element (a poisoned
// element that was never written, or a NaN the kernel produced).
double relative_error(const std::vector<float>& out, const std::vector<float>& ref) {
  double diff2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) return std::numeric_limits<double>::infinity();
    const double d = static_cast<double>(out[i]) - ref[i];
    diff2 += d * d;
    ref2 += static_cast<double>(ref[i]) * ref[i];
  }
  return ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
}

std::vector<float> download(const float* device, std::size_t count, cudaStream_t stream) {
  std::vector<float> host(count);
  PX_CUDA_CHECK(cudaMemcpyAsync(host.data(), device, count * sizeof(float), cudaMemcpyDeviceToHost, stream));
  PX_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

}  // namespace

TuneResult tune_sgemm(const TuneOptions& options) {
  PX_REQUIRE(!options.sizes.empty(), "sizes", "must name at least one size");
  for (int s : options.sizes)
    PX_REQUIRE(s >= 1 && s <= 32768, "sizes", "each size must be in 1..32768 (got " + std::to_string(s) + ")");
  PX_REQUIRE(!options.levels.empty(), "levels", "must name at least one level");
  for (SgemmLevel level : options.levels) require_tile_level(level);
  PX_REQUIRE(parallax::has_gpu(), "device", "tuning needs a CUDA GPU and none is visible");

  const DeviceInfo info = device_info();
  TuneResult result;
  result.gpu_name = info.name;
  result.sm_count = info.sm_count;
  Stream stream;

  int total = 0;
  for (std::size_t i = 0; i < options.sizes.size(); ++i) {
    total += 1;
    for (SgemmLevel level : options.levels) total += static_cast<int>(sgemm_tile_candidates(level).size());
  }
  int index = 0;
  auto report = [&](SgemmLevel level, const SgemmTileConfig& config, int size, bool is_cublas) {
    ++index;
    if (options.progress) options.progress(TuneProgress{index, total, level, config, size, is_cublas});
  };

  for (const int size : options.sizes) {
    const int m = size, n = size, k = size;
    const std::size_t a_count = static_cast<std::size_t>(m) * k, b_count = static_cast<std::size_t>(k) * n,
                      c_count = static_cast<std::size_t>(m) * n;
    // Enough copies of (A, B, C) that cycling through them streams more than 2x L2: every timed run reads
    // its inputs from DRAM, as a GEMM in a real workload would.
    const int rotations =
        bench::rotations_for_l2((a_count + b_count + c_count) * sizeof(float), info.l2_bytes, /*max_rotations=*/32);
    DeviceBuffer<float> a(a_count * rotations), b(b_count * rotations), c(c_count * rotations), ref(c_count);
    const std::uint64_t seed = fresh_seed();
    fill_uniform(a.data(), a.size(), seed, -1.f, 1.f, stream);
    fill_uniform(b.data(), b.size(), seed + 1, -1.f, 1.f, stream);
    auto args_for = [&](int r, float* out) {
      return SgemmArgs{m, n, k, 1.f, a.data() + a_count * r, k, b.data() + b_count * r, n, 0.f, out, n};
    };

    // The reference and the peer: cuBLAS in strict FP32, timed the same way in the same run.
    report(SgemmLevel::kPipelined, {}, size, true);
    sgemm_cublas(args_for(0, ref.data()), stream);
    const std::vector<float> ref_host = download(ref.data(), c_count, stream);
    const bench::Timing cublas_timing = bench::time_gpu(
        [&](cudaStream_t s, int r) { sgemm_cublas(args_for(r, c.data() + c_count * r), s); }, rotations,
        options.bench, stream);
    result.cublas.emplace_back(size, cublas_timing);
    const double flops = 2.0 * m * n * static_cast<double>(k);

    for (SgemmLevel level : options.levels) {
      for (const SgemmTileConfig& config : sgemm_tile_candidates(level)) {
        report(level, config, size, false);
        TuneMeasurement meas;
        meas.level = level;
        meas.config = config;
        meas.size = size;
        try {
          // Correctness first, on a NaN-poisoned C with beta = 0: an element the kernel fails to write stays
          // NaN and fails the check.
          c.fill_bytes(0xFF, stream);
          sgemm_with_config(level, config, args_for(0, c.data()), stream);
          PX_CUDA_CHECK(cudaStreamSynchronize(stream));
          meas.relative_error = relative_error(download(c.data(), c_count, stream), ref_host);
          if (!(meas.relative_error <= options.tolerance)) {
            meas.error = fmt::format("wrong result: relative error {:.3g} vs cuBLAS (tolerance {:.1g})",
                                     meas.relative_error, options.tolerance);
          } else {
            meas.timing = bench::time_gpu(
                [&](cudaStream_t s, int r) { sgemm_with_config(level, config, args_for(r, c.data() + c_count * r), s); },
                rotations, options.bench, stream);
            meas.gflops = flops / (meas.timing.median_ms * 1e6);
            meas.fraction_of_cublas = cublas_timing.median_ms / meas.timing.median_ms;
            meas.ok = true;
          }
        } catch (const Error& e) {
          (void)cudaGetLastError();  // clear a non-sticky launch error so the next candidate can run
          meas.error = e.what();
        }
        result.measurements.push_back(std::move(meas));
      }
    }
  }

  // Fastest per (level, size), for the table.
  for (SgemmLevel level : options.levels) {
    for (const int size : options.sizes) {
      TuneMeasurement* best = nullptr;
      for (auto& meas : result.measurements)
        if (meas.ok && meas.level == level && meas.size == size &&
            (best == nullptr || meas.timing.median_ms < best->timing.median_ms))
          best = &meas;
      if (best) best->fastest = true;
    }
  }

  // Winners per (level, size class): the configuration with the lowest sum over the class's sizes of
  // time / fastest time at that size. A configuration must have run correctly at every size of the class.
  for (SgemmLevel level : options.levels) {
    for (SgemmSizeClass size_class : {SgemmSizeClass::kSmall, SgemmSizeClass::kLarge}) {
      std::vector<int> sizes;
      for (int s : options.sizes)
        if (sgemm_size_class(s, s, s, info.sm_count) == size_class &&
            std::find(sizes.begin(), sizes.end(), s) == sizes.end())
          sizes.push_back(s);
      if (sizes.empty()) continue;
      std::map<int, double> fastest_ms;
      for (const auto& meas : result.measurements)
        if (meas.ok && meas.level == level && std::find(sizes.begin(), sizes.end(), meas.size) != sizes.end()) {
          auto [it, inserted] = fastest_ms.emplace(meas.size, meas.timing.median_ms);
          if (!inserted) it->second = std::min(it->second, meas.timing.median_ms);
        }
      const SgemmTileConfig* winner = nullptr;
      double winner_score = std::numeric_limits<double>::infinity();
      double winner_gflops = 0;
      for (const SgemmTileConfig& config : sgemm_tile_candidates(level)) {
        double score = 0;
        int measured = 0;
        double gflops_at_largest = 0;
        for (const auto& meas : result.measurements) {
          if (!meas.ok || meas.level != level || !(meas.config == config)) continue;
          if (std::find(sizes.begin(), sizes.end(), meas.size) == sizes.end()) continue;
          score += meas.timing.median_ms / fastest_ms[meas.size];
          ++measured;
          if (meas.size == *std::max_element(sizes.begin(), sizes.end())) gflops_at_largest = meas.gflops;
        }
        if (measured == static_cast<int>(sizes.size()) && score < winner_score) {
          winner_score = score;
          winner = &config;
          winner_gflops = gflops_at_largest;
        }
      }
      if (winner) result.winners.push_back({level, size_class, TuneCache::Entry{*winner, sizes, winner_gflops}});
    }
  }

  // Merge into the cache file and into this process's cache.
  std::vector<std::string> warnings;
  const std::filesystem::path path = options.cache_path.empty() ? default_tune_cache_path() : options.cache_path;
  TuneCache cache = TuneCache::load(path, warnings);
  print_warnings(warnings);
  for (const auto& w : result.winners) cache.set(info.name, info.sm_count, w.level, w.size_class, w.entry);
  if (options.save && !result.winners.empty()) {
    try {
      cache.save(path);
      result.cache_path = path;
    } catch (const Error& e) {
      result.save_error = e.what();
    }
  }
  {
    ProcessCache& pc = process_cache();
    std::lock_guard lock(pc.mutex);
    pc.cache = std::make_shared<const TuneCache>(std::move(cache));
    pc.path = path;
  }
  return result;
}

}  // namespace parallax
