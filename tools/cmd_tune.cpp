// `parallax tune gemm-fp32 [--sizes 1024,4096] [--levels 7,8] [--cache PATH] [--no-save] [--repetitions N]
//                          [--json] [--json-out FILE]`
//
// Times every compiled-in tile configuration of ladder levels 7 and 8 at each size (square m = n = k), next
// to cuBLAS measured in the same run, checks each one's output against cuBLAS, and saves the winners per GPU,
// level and size class into the tuning cache that sgemm() reads (see parallax/tune.hpp for the format and
// location). Progress goes to stderr; stdout gets the table, or with --json a results document
// (parallax/results.hpp, suite "sgemm_tune") whose context names the winners.
#include <fmt/core.h>

#include <memory>
#include <string>
#include <vector>

#include "cli.hpp"
#include "parallax/results.hpp"
#include "parallax/sgemm.hpp"
#include "parallax/tune.hpp"
#include "table.hpp"

namespace parallax::cli {
namespace {

struct TuneCommandOptions {
  OutputOptions output;
  std::vector<int> sizes{1024, 4096};
  std::vector<std::string> levels{"7", "8"};
  std::string cache;  // empty: default_tune_cache_path()
  bool save = true;
  int repetitions = 20;
};

// Accepts what parse_sgemm_level accepts ("8", "sgemm8", "pipelined"), but only the two tunable levels.
const CLI::Validator kTunableLevel(
    [](std::string& text) -> std::string {
      try {
        const SgemmLevel level = parse_sgemm_level(text);
        if (level == SgemmLevel::kWarptile || level == SgemmLevel::kPipelined) return "";
        return "level " + text + " has fixed tiles; only 7 (warptile) and 8 (pipelined) can be tuned";
      } catch (const InvalidArgument& e) {
        return e.what();
      }
    },
    "LEVEL", "tunable SGEMM level");

std::string level_label(SgemmLevel level) {
  return fmt::format("{} ({})", sgemm_level_name(level), sgemm_level_description(level));
}

std::string command_line(const TuneCommandOptions& o) {
  std::string s = "parallax tune gemm-fp32 --sizes ";
  for (std::size_t i = 0; i < o.sizes.size(); ++i) s += (i ? "," : "") + std::to_string(o.sizes[i]);
  s += " --levels ";
  for (std::size_t i = 0; i < o.levels.size(); ++i) s += (i ? "," : "") + o.levels[i];
  if (!o.cache.empty()) s += " --cache " + o.cache;
  if (!o.save) s += " --no-save";
  return s;
}

results::Document to_document(const TuneCommandOptions& o, const TuneResult& r) {
  results::Document doc = results::make_document();
  doc.command = command_line(o);
  doc.context.emplace_back("cache", r.cache_path.string());
  for (const auto& w : r.winners)
    doc.context.emplace_back(fmt::format("winner.{}.{}", sgemm_level_name(w.level), sgemm_size_class_name(w.size_class)),
                             to_string(w.entry.config));
  for (const auto& [size, timing] : r.cublas) {
    const double flops = 2.0 * size * static_cast<double>(size) * size;
    const double bytes = 4.0 * 3.0 * size * static_cast<double>(size);
    const results::Fields shape{{"m", std::int64_t{size}}, {"n", std::int64_t{size}}, {"k", std::int64_t{size}}};
    doc.records.push_back(results::make_record("sgemm_tune", "cublasSgemm", shape, "fp32", timing, {flops, bytes}));
    for (const auto& meas : r.measurements) {
      if (meas.size != size) continue;
      const std::string name = fmt::format("{} {}", sgemm_level_name(meas.level), to_string(meas.config));
      results::Record rec = meas.ok ? results::make_record("sgemm_tune", name, shape, "fp32", meas.timing, {flops, bytes})
                                    : results::failed_record("sgemm_tune", name, shape, "fp32", meas.error);
      if (meas.ok) rec.set_peer("cublasSgemm", timing.median_ms);
      if (meas.ok || meas.relative_error != 0) rec.add_error("rel_fro_vs_cublas", meas.relative_error);
      rec.add_extra("level", std::int64_t{static_cast<int>(meas.level)});
      rec.add_extra("config", to_string(meas.config));
      rec.add_extra("fastest", meas.fastest);
      doc.records.push_back(std::move(rec));
    }
  }
  return doc;
}

void print_table(const TuneResult& r) {
  Table t({{"size"}, {"level"}, {"config", Align::kLeft}, {"median ms"}, {"GFLOP/s"}, {"% of cuBLAS"},
           {"rel. error"}, {"best", Align::kLeft}});
  for (const auto& [size, timing] : r.cublas) {
    const double flops = 2.0 * size * static_cast<double>(size) * size;
    t.add_row({std::to_string(size), "cuBLAS", "cublasSgemm (FP32, TF32 off)", milliseconds(timing.median_ms),
               fixed(flops / (timing.median_ms * 1e6), 0), "100.0%", "", ""});
    for (const auto& meas : r.measurements) {
      if (meas.size != size) continue;
      if (meas.ok) {
        t.add_row({std::to_string(size), std::string(sgemm_level_name(meas.level)), to_string(meas.config),
                   milliseconds(meas.timing.median_ms), fixed(meas.gflops, 0), percent(100.0 * meas.fraction_of_cublas),
                   sci(meas.relative_error), meas.fastest ? "*" : ""});
      } else {
        t.add_row({std::to_string(size), std::string(sgemm_level_name(meas.level)), to_string(meas.config),
                   std::string(kNoValue), std::string(kNoValue), std::string(kNoValue),
                   meas.relative_error != 0 ? sci(meas.relative_error) : std::string(kNoValue), "FAILED: " + meas.error});
      }
    }
  }
  fmt::print("GPU: {} ({} SMs). * = fastest configuration of its level at that size.\n\n", r.gpu_name, r.sm_count);
  t.print();
  fmt::print("\n");
  if (r.winners.empty()) {
    fmt::print("No configuration ran correctly: nothing saved.\n");
    return;
  }
  Table w({{"level"}, {"size class"}, {"sizes", Align::kLeft}, {"winner", Align::kLeft}, {"GFLOP/s"}});
  for (const auto& win : r.winners) {
    std::string sizes;
    for (int s : win.entry.sizes) sizes += (sizes.empty() ? "" : ",") + std::to_string(s);
    w.add_row({level_label(win.level), std::string(sgemm_size_class_name(win.size_class)), sizes,
               to_string(win.entry.config), fixed(win.entry.gflops, 0)});
  }
  w.print();
  if (!r.cache_path.empty())
    fmt::print("\nSaved to {} (sgemm levels 7 and 8 use it from now on).\n", r.cache_path.string());
  else if (r.save_error.empty())
    fmt::print("\nNot saved (--no-save).\n");
}

int run_tune_gemm_fp32(const TuneCommandOptions& o) {
  require_gpu("tune gemm-fp32");
  refuse_tf32_override("tune gemm-fp32");
  TuneOptions options;
  options.sizes = o.sizes;
  options.levels.clear();
  for (const auto& l : o.levels) options.levels.push_back(parse_sgemm_level(l));
  options.cache_path = o.cache;
  options.save = o.save;
  options.bench.repetitions = o.repetitions;
  options.bench.min_repetitions = std::min(options.bench.min_repetitions, o.repetitions);

  std::unique_ptr<Progress> bar;  // created on the first report, when the number of steps is known
  options.progress = [&](const TuneProgress& p) {
    if (!bar) bar = std::make_unique<Progress>(p.total);
    const std::string what = p.is_cublas ? fmt::format("{}^3 cuBLAS", p.size)
                                         : fmt::format("{}^3 {} {}", p.size, sgemm_level_name(p.level), to_string(p.config));
    bar->update(p.index - 1, what);
  };
  const TuneResult result = tune_sgemm(options);
  if (bar) bar->finish();

  if (o.output.wants_json()) emit_json(o.output, to_document(o, result));
  if (o.output.prints_table()) print_table(result);
  if (!result.save_error.empty()) {
    fmt::print(stderr, "parallax: error: the winners were not saved: {}\n", result.save_error);
    return 1;
  }
  return result.winners.empty() ? 1 : 0;
}

}  // namespace

void add_tune(CLI::App& root, Action& action) {
  CLI::App* tune = root.add_subcommand("tune", "Autotune kernels for this GPU and cache the winners");
  tune->require_subcommand(1);

  auto options = std::make_shared<TuneCommandOptions>();
  CLI::App* gemm = tune->add_subcommand(
      "gemm-fp32", "Time every tile configuration of SGEMM levels 7 and 8 against cuBLAS; save the winners");
  add_output_options(*gemm, options->output);
  gemm->add_option("--sizes", options->sizes, "Square problem sizes m=n=k to tune at (comma-separated)")
      ->delimiter(',')
      ->check(CLI::Range(1, 32768))
      ->capture_default_str();
  gemm->add_option("--levels", options->levels, "Levels to tune: 7 (warptile), 8 (pipelined)")
      ->delimiter(',')
      ->check(kTunableLevel)
      ->capture_default_str();
  gemm->add_option("--cache", options->cache,
                   "Tuning cache file to update (default: $PARALLAX_TUNE_CACHE, else "
                   "$XDG_CACHE_HOME/parallax/tune.json, else ~/.cache/parallax/tune.json)")
      ->type_name("PATH");
  gemm->add_flag("!--no-save", options->save, "Measure and print only; leave the cache file alone");
  gemm->add_option("--repetitions", options->repetitions, "Timed runs per configuration (median reported)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  gemm->callback([&action, options] { action = [options] { return run_tune_gemm_fp32(*options); }; });
}

}  // namespace parallax::cli
