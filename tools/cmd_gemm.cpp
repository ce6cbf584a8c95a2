// `parallax gemm`: every ladder level against cuBLAS (`--ladder`), or one kernel on one shape (`--kernel`).
//
// What one row means, and why it is measured this way:
//   * inputs are fresh random numbers every run (never zeros: zeros run measurably faster on tensor cores
//     and hide indexing bugs), drawn with a seed recorded in the JSON so a bad row can be replayed
//   * the output is poisoned (all bits set: NaN) before the checked run; afterwards every element of the
//     m x n window must be finite (so every element was written) and every padding element (ldc > n) must
//     still be poison (nothing was written outside the matrix)
//   * accuracy is measured against cuBLAS on the same inputs, two ways: the normwise error
//     ||C - C_cublas||_F / ||C_cublas||_F (what the ladder's numerics do on average) and the worst element
//     max |C - C_cublas| / max |C_cublas| (one bad tile shows here even when the norm hides it)
//   * timing goes through bench::time_gpu: several copies of A, B, C rotate so the set in use exceeds 2x L2
//     (a kernel re-reading a matrix that is still in L2 would look faster than it is), or L2 is flushed
//     between runs when copies cannot exceed it; a per-measurement time budget keeps slow levels (the naive
//     kernel at 8192^3 takes seconds a run) to a few runs
//   * the peer is cublasSgemm in strict FP32 (TF32 off), timed in the same run on the same GPU
//
// A level that throws (not implemented, bad launch, out of memory) becomes a "failed" row with its error; the
// table carries on. A level whose output fails the check is timed and shown as "incorrect".
//
// Structure: the dtype-specific part (element type, peer, contenders, suite name) is a GemmSuite<T>; the
// measuring (measure_shape) and the output (tables, JSON) are generic. A tensor-core mode (--dtype bf16|fp16)
// adds a GemmSuite<__nv_bfloat16> / <__half> built from its own levels and a cublasGemmEx peer, plus
// check_output for that element type; nothing else here changes.
#include "cmd_gemm.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>

#include "parallax/bench.hpp"
#include "parallax/core.hpp"
#include "parallax/random.hpp"
#include "parallax/results.hpp"

namespace parallax::cli {

// ------------------------------------------------------------------------------------------------ names

namespace {

// parse_sgemm_level's rule without the "invalid argument 'level': " prefix, for use inside other messages.
std::string level_rule(std::string_view text) {
  try {
    (void)parse_sgemm_level(text);
    return {};
  } catch (const InvalidArgument& e) {
    std::string why = e.what();
    const std::string prefix = "invalid argument '" + e.argument() + "': ";
    if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
    return why;
  }
}

// Why `text` is not a --kernel name ("" if it is one).
std::string kernel_rule(std::string_view text) {
  if (text == "cublas" || text == "cublasSgemm") return {};
  std::string why = level_rule(text);
  if (why.empty()) return {};
  // "unknown SGEMM level 'x'; valid: sgemm1, ... (or 1..8, or naive/...)" becomes the same list with cublas.
  const auto pos = why.find("valid: ");
  if (pos == std::string::npos) return why + "; or cublas";
  return "unknown kernel '" + std::string(text) + "'; valid: cublas, " + why.substr(pos + 7);
}

}  // namespace

std::string canonical_kernel_name(std::string_view text) {
  if (const std::string why = kernel_rule(text); !why.empty()) throw InvalidArgument("kernel", why);
  if (text == "cublas" || text == "cublasSgemm") return "cublas";
  return std::string(sgemm_level_name(parse_sgemm_level(text)));
}

// ------------------------------------------------------------------------------------------------ check

OutputCheck check_output(std::span<const float> out, std::span<const float> ref, int m, int n, int ld) {
  PX_REQUIRE(m >= 1 && n >= 1, "m, n", "must be >= 1 (got m=" + std::to_string(m) + ", n=" + std::to_string(n) + ")");
  PX_REQUIRE(ld >= n, "ld", "must be >= n (got ld=" + std::to_string(ld) + ", n=" + std::to_string(n) + ")");
  PX_REQUIRE(out.size() == ref.size(), "out",
             "must have as many elements as ref (" + std::to_string(out.size()) + " vs " + std::to_string(ref.size()) + ")");
  const std::size_t needed = static_cast<std::size_t>(m - 1) * ld + n;
  PX_REQUIRE(out.size() >= needed, "out",
             "holds " + std::to_string(out.size()) + " elements, an m x n matrix with this ld needs " + std::to_string(needed));

  OutputCheck c;
  double diff2 = 0, ref2 = 0, max_diff = 0, max_ref = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(m); ++i) {
    for (std::size_t j = 0; j < static_cast<std::size_t>(ld); ++j) {
      const std::size_t idx = i * static_cast<std::size_t>(ld) + j;
      if (idx >= out.size()) break;
      if (j >= static_cast<std::size_t>(n)) {
        // Padding: poisoned with 0xFF bytes before the run, and no kernel may touch it.
        if (std::bit_cast<std::uint32_t>(out[idx]) != 0xFFFFFFFFu) ++c.padding_written;
        continue;
      }
      const double o = out[idx], r = ref[idx];
      if (!std::isfinite(o)) {
        if (c.non_finite++ == 0) c.first_non_finite = i * static_cast<std::size_t>(n) + j;
        continue;
      }
      const double d = o - r;
      diff2 += d * d;
      ref2 += r * r;
      max_diff = std::max(max_diff, std::abs(d));
      max_ref = std::max(max_ref, std::abs(r));
    }
  }
  // A zero reference (alpha = 0, or k-products that cancel) falls back to absolute errors.
  c.rel_fro = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  c.max_rel = max_ref > 0 ? max_diff / max_ref : max_diff;
  return c;
}

std::string OutputCheck::problem(double tolerance, int n) const {
  std::vector<std::string> issues;
  if (non_finite > 0) {
    const std::size_t row = first_non_finite / static_cast<std::size_t>(n);
    const std::size_t col = first_non_finite % static_cast<std::size_t>(n);
    issues.push_back(fmt::format("{} outputs not finite, first at row {} col {} (never written, or overflow)",
                                 non_finite, row, col));
  }
  if (padding_written > 0) issues.push_back(fmt::format("{} padding entries beyond column n written", padding_written));
  // !(x <= tol) also catches NaN.
  if (!(rel_fro <= tolerance)) issues.push_back(fmt::format("rel err {} > {}", sci(rel_fro), sci(tolerance, 0)));
  if (!(max_rel <= tolerance)) issues.push_back(fmt::format("max err {} > {}", sci(max_rel), sci(tolerance, 0)));
  std::string joined;
  for (const auto& s : issues) joined += (joined.empty() ? "" : "; ") + s;
  return joined;
}

// ------------------------------------------------------------------------------------------------ options

namespace {

std::string join_ints(const std::vector<int>& values) {
  std::string s;
  for (int v : values) s += (s.empty() ? "" : ",") + std::to_string(v);
  return s;
}

std::string join_levels(const std::vector<SgemmLevel>& levels) {
  std::string s;
  for (SgemmLevel l : levels) s += (s.empty() ? "" : ",") + std::string(sgemm_level_name(l));
  return s;
}

// Shortest text that reads back as the same float ("1", "0.5", "1e-08").
std::string short_float(double v) { return fmt::format("{}", v); }

}  // namespace

std::string GemmOptions::command_line() const {
  std::string s = "parallax gemm";
  if (ladder) {
    s += " --ladder --sizes " + join_ints(sizes) + " --levels " + join_levels(levels);
  } else {
    s += fmt::format(" --kernel {} --m {} --n {} --k {} --alpha {} --beta {}", kernel, m, n, k, short_float(alpha),
                     short_float(beta));
    if (lda) s += " --lda " + std::to_string(lda);
    if (ldb) s += " --ldb " + std::to_string(ldb);
    if (ldc) s += " --ldc " + std::to_string(ldc);
  }
  s += fmt::format(" --reps {} --warmup {} --budget-ms {} --tolerance {}", repetitions, warmup, short_float(budget_ms),
                   short_float(tolerance));
  return s;
}

CLI::App* register_gemm(CLI::App& root, Action& action, std::shared_ptr<GemmOptions> options) {
  CLI::App* cmd = root.add_subcommand("gemm", "FP32 SGEMM ladder against cuBLAS, or one kernel on one shape");
  cmd->footer(
      "Examples:\n"
      "  parallax gemm --ladder\n"
      "  parallax gemm --ladder --sizes 1000,4096 --levels 1,5,sgemm8 --json-out ladder.json\n"
      "  parallax gemm --kernel sgemm5 --m 1000 --n 1024 --k 999 --beta 0.5 --ldc 1040\n"
      "  parallax gemm --kernel cublas --m 8192 --n 8192 --k 8192");
  GemmOptions& o = *options;
  add_output_options(*cmd, o.output);

  // Validators canonicalize names as they check them, so the options hold "sgemm3" whatever was typed
  // (transform(), not check(): CLI11 hands check() validators a copy they cannot change).
  const CLI::Validator level_name(
      [](std::string& value) {
        const std::string why = level_rule(value);
        if (why.empty()) value = std::string(sgemm_level_name(parse_sgemm_level(value)));
        return why;
      },
      "LEVEL");
  const CLI::Validator kernel_name(
      [](std::string& value) {
        const std::string why = kernel_rule(value);
        if (why.empty()) value = canonical_kernel_name(value);
        return why;
      },
      "KERNEL");

  CLI::Option* ladder = cmd->add_flag("--ladder", o.ladder, "Run every chosen level at every size, plus cuBLAS");
  CLI::Option* kernel = cmd->add_option("--kernel", o.kernel,
                                        "Run one kernel: a level (sgemm1..sgemm8, 1..8, naive, coalesced, smem, "
                                        "blocktile1d, blocktile2d, vectorized, warptile, pipelined) or cublas")
                            ->transform(kernel_name);
  ladder->excludes(kernel);

  // Ladder options.
  auto level_names = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--sizes", o.sizes, "Square sizes N (N x N x N) for --ladder, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(1, 65536))
      ->capture_default_str()
      ->excludes(kernel);
  cmd->add_option("--levels", *level_names, "Levels for --ladder, comma-separated (default: all)")
      ->delimiter(',')
      ->transform(level_name)
      ->excludes(kernel);

  // Single-kernel options.
  const auto single = [&](CLI::Option* opt) { return opt->excludes(ladder); };
  const CLI::Range extent(1, std::numeric_limits<int>::max());
  single(cmd->add_option("--m", o.m, "Rows of A and C (--kernel)")->check(extent)->capture_default_str());
  single(cmd->add_option("--n", o.n, "Columns of B and C (--kernel)")->check(extent)->capture_default_str());
  single(cmd->add_option("--k", o.k, "Columns of A, rows of B (--kernel)")->check(extent)->capture_default_str());
  single(cmd->add_option("--alpha", o.alpha, "C = alpha * A * B + beta * C (--kernel)")->capture_default_str());
  single(cmd->add_option("--beta", o.beta, "beta != 0 starts C from random values (--kernel)")->capture_default_str());
  single(cmd->add_option("--lda", o.lda, "Leading dimension of row-major A, >= k (default k)")->check(extent));
  single(cmd->add_option("--ldb", o.ldb, "Leading dimension of row-major B, >= n (default n)")->check(extent));
  single(cmd->add_option("--ldc", o.ldc, "Leading dimension of row-major C, >= n (default n)")->check(extent));

  // Measurement.
  cmd->add_option("--reps", o.repetitions, "Timed runs per measurement (median reported)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--warmup", o.warmup, "Untimed runs before timing")->check(CLI::Range(0, 10000))->capture_default_str();
  cmd->add_option("--budget-ms", o.budget_ms,
                  "Time budget per measurement in ms (0 = none); slow kernels get fewer runs, never fewer than 3")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  cmd->add_option("--tolerance", o.tolerance, "Largest rel err and max err vs cuBLAS that counts as correct")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();

  cmd->callback([&action, options, level_names] {
    GemmOptions& opt = *options;
    if (!opt.ladder && opt.kernel.empty())
      throw CLI::ValidationError("gemm", "choose --ladder (every level against cuBLAS) or --kernel NAME (one kernel)");
    if (!level_names->empty()) {
      opt.levels.clear();
      for (const auto& name : *level_names) {  // keep the order given, drop repeats
        const SgemmLevel level = parse_sgemm_level(name);
        if (std::find(opt.levels.begin(), opt.levels.end(), level) == opt.levels.end()) opt.levels.push_back(level);
      }
    }
    if (!std::isfinite(opt.alpha)) throw CLI::ValidationError("--alpha", "must be a finite number");
    if (!std::isfinite(opt.beta)) throw CLI::ValidationError("--beta", "must be a finite number");
    // Row-major: a row of A holds k elements, a row of B and of C n elements; ld below that overlaps rows.
    if (opt.lda != 0 && opt.lda < opt.k)
      throw CLI::ValidationError("--lda", fmt::format("must be >= k = {} (got {})", opt.k, opt.lda));
    if (opt.ldb != 0 && opt.ldb < opt.n)
      throw CLI::ValidationError("--ldb", fmt::format("must be >= n = {} (got {})", opt.n, opt.ldb));
    if (opt.ldc != 0 && opt.ldc < opt.n)
      throw CLI::ValidationError("--ldc", fmt::format("must be >= n = {} (got {})", opt.n, opt.ldc));
    action = [options] { return run_gemm(*options); };
  });
  return cmd;
}

void add_gemm(CLI::App& root, Action& action) { register_gemm(root, action, std::make_shared<GemmOptions>()); }

// ------------------------------------------------------------------------------------------------ measuring

namespace {

struct GemmShape {
  int m, n, k, lda, ldb, ldc;
  float alpha, beta;

  std::size_t a_elements() const { return static_cast<std::size_t>(m) * lda; }
  std::size_t b_elements() const { return static_cast<std::size_t>(k) * ldb; }
  std::size_t c_elements() const { return static_cast<std::size_t>(m) * ldc; }

  // 2mnk flops (the convention every GEMM benchmark uses; the alpha/beta epilogue is not counted) and the
  // fewest bytes: A and B read once, C written once (and read once when beta != 0).
  bench::Work work(std::size_t element_bytes) const {
    const double mn = static_cast<double>(m) * n, mk = static_cast<double>(m) * k, kn = static_cast<double>(k) * n;
    return {2.0 * mn * k, static_cast<double>(element_bytes) * (mk + kn + mn * (beta != 0 ? 2 : 1))};
  }
  results::Fields fields() const {
    return {{"m", std::int64_t{m}}, {"n", std::int64_t{n}},   {"k", std::int64_t{k}},       {"lda", std::int64_t{lda}},
            {"ldb", std::int64_t{ldb}}, {"ldc", std::int64_t{ldc}}, {"alpha", double{alpha}}, {"beta", double{beta}}};
  }
  std::string label() const {
    return m == n && n == k ? fmt::format("{}^3", m) : fmt::format("{}x{}x{}", m, n, k);
  }
  bool tight() const { return lda == k && ldb == n && ldc == n; }
};

template <typename T>
using GemmRun = std::function<void(const GemmShape&, const T* a, const T* b, T* c, cudaStream_t)>;

template <typename T>
struct Contender {
  int level = 0;  // ladder level, 0 for the peer
  std::string name;
  std::string description;
  GemmRun<T> run;
};

// Everything that depends on the element type.
template <typename T>
struct GemmSuite {
  std::string suite;      // the records' suite: "sgemm_ladder", "sgemm"
  std::string dtype;      // "fp32"
  std::string peer_note;  // what "% of <peer>" is relative to, printed above each table
  Contender<T> peer;      // the reference for accuracy and speed
  std::vector<Contender<T>> contenders;
};

SgemmArgs sgemm_args(const GemmShape& s, const float* a, const float* b, float* c) {
  return {s.m, s.n, s.k, s.alpha, a, s.lda, b, s.ldb, s.beta, c, s.ldc};
}

GemmSuite<float> fp32_suite(std::string suite_name, const std::vector<SgemmLevel>& levels) {
  GemmSuite<float> suite;
  suite.suite = std::move(suite_name);
  suite.dtype = "fp32";
  suite.peer_note = "cublasSgemm FP32, TF32 off, same run";
  suite.peer = {0, "cublasSgemm", "cuBLAS FP32, TF32 off",
                [](const GemmShape& s, const float* a, const float* b, float* c, cudaStream_t stream) {
                  sgemm_cublas(sgemm_args(s, a, b, c), stream);
                }};
  for (SgemmLevel level : levels)
    suite.contenders.push_back({static_cast<int>(level), std::string(sgemm_level_name(level)),
                                std::string(sgemm_level_description(level)),
                                [level](const GemmShape& s, const float* a, const float* b, float* c, cudaStream_t stream) {
                                  sgemm(level, sgemm_args(s, a, b, c), stream);
                                }});
  return suite;
}

struct MeasureSettings {
  bench::Options bench;
  double tolerance = 1e-4;
};

// What every record of one shape shares (written into each record's "extra").
struct ShapeSetup {
  int rotations = 1;
  bool flush_l2 = false;
  std::uint64_t seed = 0;
};

std::string hex(std::uint64_t v) { return fmt::format("{:#018x}", v); }

template <typename T>
results::Record base_extras(results::Record r, const Contender<T>& c, const ShapeSetup& setup, bool is_peer) {
  if (!is_peer) r.add_extra("level", std::int64_t{c.level});
  r.add_extra("description", c.description);
  if (is_peer) r.add_extra("role", std::string("peer"));
  r.add_extra("rotations", std::int64_t{setup.rotations});
  r.add_extra("flush_l2", setup.flush_l2);
  r.add_extra("seed", hex(setup.seed));
  return r;
}

// Measures the peer and every contender on one shape. Never throws: whatever fails becomes a failed record.
// Records come back contenders first, the peer last (the order of the table).
template <typename T>
std::vector<results::Record> measure_shape(const GemmSuite<T>& suite, const GemmShape& s, const MeasureSettings& ms,
                                           const DeviceInfo& device, Progress& progress, int& step) {
  const results::Fields shape = s.fields();
  const bench::Work work = s.work(sizeof(T));
  std::vector<results::Record> out;
  ShapeSetup setup;
  const int first_step = step;

  auto failed = [&](const Contender<T>& c, const std::string& why, bool is_peer) {
    results::Record r = results::failed_record(suite.suite, c.name, shape, suite.dtype, why);
    r.flops = work.flops;
    r.bytes = work.bytes;
    return base_extras(std::move(r), c, setup, is_peer);
  };

  try {
    Stream stream;
    const std::size_t set_bytes = (s.a_elements() + s.b_elements() + s.c_elements()) * sizeof(T);
    setup.rotations = bench::rotations_for_l2(set_bytes, device.l2_bytes);
    // Copies capped at the rotation limit may still fit in 2x L2 (tiny shapes): flush L2 instead.
    if (static_cast<std::size_t>(setup.rotations) * set_bytes <= 2 * device.l2_bytes) {
      setup.rotations = 1;
      setup.flush_l2 = true;
    }
    setup.seed = fresh_seed();

    std::vector<DeviceBuffer<T>> a, b, c;
    for (int r = 0; r < setup.rotations; ++r) {
      a.emplace_back(s.a_elements());
      b.emplace_back(s.b_elements());
      c.emplace_back(s.c_elements());
      // Distinct seeds per copy: identical copies would be just as valid, but distinct data costs nothing.
      fill_uniform(a.back().data(), a.back().size(), setup.seed + 3 * r, -1.f, 1.f, stream);
      fill_uniform(b.back().data(), b.back().size(), setup.seed + 3 * r + 1, -1.f, 1.f, stream);
      if (s.beta != 0) fill_uniform(c.back().data(), c.back().size(), setup.seed + 3 * r + 2, -1.f, 1.f, stream);
    }
    // The starting C of every checked run: poison (all bits set, NaN) when beta == 0 so unwritten elements
    // show; random when beta != 0 (C is then an input), with the padding columns poisoned either way.
    DeviceBuffer<T> c_start(s.c_elements()), c_checked(s.c_elements());
    c_start.fill_bytes(0xFF, stream);
    if (s.beta != 0) {
      PX_CUDA_CHECK(cudaMemcpyAsync(c_start.data(), c.front().data(), c_start.bytes(), cudaMemcpyDeviceToDevice, stream));
      if (s.ldc > s.n)
        PX_CUDA_CHECK(cudaMemset2DAsync(c_start.data() + s.n, static_cast<std::size_t>(s.ldc) * sizeof(T), 0xFF,
                                        static_cast<std::size_t>(s.ldc - s.n) * sizeof(T), static_cast<std::size_t>(s.m),
                                        stream));
    }
    stream.synchronize();

    auto checked_run = [&](const Contender<T>& ct) {
      PX_CUDA_CHECK(cudaMemcpyAsync(c_checked.data(), c_start.data(), c_start.bytes(), cudaMemcpyDeviceToDevice, stream));
      ct.run(s, a.front().data(), b.front().data(), c_checked.data(), stream);
      PX_CUDA_CHECK_LAUNCH();
      stream.synchronize();  // an asynchronous fault of this kernel surfaces here, on its own row
      return c_checked.download(stream);
    };
    auto timed = [&](const Contender<T>& ct) {
      return bench::time_gpu(
          [&](cudaStream_t st, int r) {
            const auto i = static_cast<std::size_t>(r);
            ct.run(s, a[i].data(), b[i].data(), c[i].data(), st);
          },
          setup.rotations, ms.bench, stream);
    };

    // The peer first: it is the reference for every row.
    progress.update(step, s.label() + " " + suite.peer.name);
    std::vector<T> reference;
    bench::Timing peer_timing;
    try {
      reference = checked_run(suite.peer);
      peer_timing = timed(suite.peer);
    } catch (const std::exception& e) {
      for (const auto& ct : suite.contenders)
        out.push_back(failed(ct, std::string("no reference: ") + suite.peer.name + " failed: " + e.what(), false));
      out.push_back(failed(suite.peer, e.what(), true));
      step += static_cast<int>(suite.contenders.size()) + 1;
      return out;
    }
    ++step;
    results::Record peer_record =
        base_extras(results::make_record(suite.suite, suite.peer.name, shape, suite.dtype, peer_timing, work),
                    suite.peer, setup, true);
    {  // The reference itself must be complete and untouched outside the matrix, or no row means anything.
      const OutputCheck self = check_output(reference, reference, s.m, s.n, s.ldc);
      if (self.non_finite > 0 || self.padding_written > 0) peer_record.mark_incorrect(self.problem(ms.tolerance, s.n));
    }

    for (const auto& ct : suite.contenders) {
      progress.update(step, s.label() + " " + ct.name);
      try {
        const std::vector<T> result = checked_run(ct);
        const OutputCheck check = check_output(result, reference, s.m, s.n, s.ldc);
        const bench::Timing t = timed(ct);
        results::Record r =
            base_extras(results::make_record(suite.suite, ct.name, shape, suite.dtype, t, work), ct, setup, false);
        r.set_peer(suite.peer.name, peer_timing.median_ms);
        r.add_error(std::string(kGemmFroMetric), check.rel_fro);
        r.add_error(std::string(kGemmMaxMetric), check.max_rel);
        if (const std::string problem = check.problem(ms.tolerance, s.n); !problem.empty()) r.mark_incorrect(problem);
        out.push_back(std::move(r));
      } catch (const std::exception& e) {
        out.push_back(failed(ct, e.what(), false));
      }
      ++step;
    }
    out.push_back(std::move(peer_record));
  } catch (const std::exception& e) {
    // Setup failed (allocation, fills): every row of this shape failed for that reason.
    out.clear();
    for (const auto& ct : suite.contenders) out.push_back(failed(ct, std::string("setup failed: ") + e.what(), false));
    out.push_back(failed(suite.peer, std::string("setup failed: ") + e.what(), true));
    step = first_step + static_cast<int>(suite.contenders.size()) + 1;
  }
  return out;
}

// ------------------------------------------------------------------------------------------------ output

const results::ErrorMetric* find_error(const results::Record& r, std::string_view metric) {
  for (const auto& e : r.errors)
    if (e.metric == metric) return &e;
  return nullptr;
}

std::string extra_text(const results::Record& r, std::string_view key) {
  const results::Scalar* v = results::find(r.extra, key);
  return v ? results::to_string(*v) : std::string(kNoValue);
}

bool is_peer(const results::Record& r) { return results::find(r.extra, "role") != nullptr; }

}  // namespace

Table gemm_table(const std::vector<results::Record>& records, std::string_view peer_column) {
  Table t({{"level", Align::kRight},
           {"kernel"},
           {"what it adds", Align::kLeft},
           {"median ms", Align::kRight},
           {"runs", Align::kRight},
           {"GFLOP/s", Align::kRight},
           {std::string(peer_column), Align::kRight},
           {"rel err", Align::kRight},
           {"max err", Align::kRight},
           {"check", Align::kLeft}});
  for (const auto& r : records) {
    const bool peer = is_peer(r);
    std::vector<std::string> row{peer ? std::string(kNoValue) : extra_text(r, "level"), r.name,
                                 extra_text(r, "description")};
    if (r.status == results::Status::kFailed) {
      row.insert(row.end(), 6, std::string(kNoValue));
      row.push_back("FAILED: " + r.failure);
    } else {
      row.push_back(milliseconds(r.median_ms));
      row.push_back(std::to_string(r.repetitions));
      row.push_back(fixed(r.gflops, 1));
      if (peer) {
        row.insert(row.end(), {"100.0%", "ref", "ref"});
      } else {
        row.push_back(r.peer ? percent(100.0 * r.peer->throughput_ratio) : std::string(kNoValue));
        const auto* fro = find_error(r, kGemmFroMetric);
        const auto* mx = find_error(r, kGemmMaxMetric);
        row.push_back(fro ? sci(fro->value) : std::string(kNoValue));
        row.push_back(mx ? sci(mx->value) : std::string(kNoValue));
      }
      row.push_back(r.status == results::Status::kOk ? (peer ? "reference" : "ok") : "WRONG: " + r.failure);
    }
    t.add_row(std::move(row));
  }
  return t;
}

namespace {

void print_shape_header(const GemmShape& s, const std::string& dtype, const std::string& peer_note,
                        const std::vector<results::Record>& records) {
  std::string layout = s.tight() ? "tight" : fmt::format("lda={} ldb={} ldc={}", s.lda, s.ldb, s.ldc);
  fmt::print("\n== {} x {} x {}  {}  alpha={} beta={}  {} ==\n", s.m, s.n, s.k, dtype, short_float(s.alpha),
             short_float(s.beta), layout);
  std::string inputs;
  if (!records.empty()) {
    const auto& r = records.back();
    inputs = extra_text(r, "flush_l2") == "true"
                 ? "L2 flushed between runs"
                 : extra_text(r, "rotations") + " rotating input copies (> 2x L2)";
    inputs += ", seed " + extra_text(r, "seed");
  }
  fmt::print("% of peer: {}; {}\n", peer_note, inputs);
}

void print_legend(double tolerance) {
  fmt::print(
      "\nrel err = ||C - C_cublas||_F / ||C_cublas||_F    max err = max|C - C_cublas| / max|C_cublas|\n"
      "check: every output written and finite, nothing written beyond column n, both errors <= {}\n",
      sci(tolerance, 0));
}

// Best passing level per shape, for the ladder's closing summary.
void print_ladder_summary(const std::vector<std::pair<GemmShape, std::vector<results::Record>>>& shapes) {
  Table t({{"size"}, {"best level"}, {"GFLOP/s", Align::kRight}, {"% of cuBLAS", Align::kRight},
           {"cuBLAS GFLOP/s", Align::kRight}});
  for (const auto& [shape, records] : shapes) {
    const results::Record* best = nullptr;
    const results::Record* peer = nullptr;
    for (const auto& r : records) {
      if (is_peer(r)) {
        if (r.status != results::Status::kFailed) peer = &r;
      } else if (r.status == results::Status::kOk && (!best || r.gflops > best->gflops)) {
        best = &r;
      }
    }
    t.add_row({shape.label(), best ? best->name : "none passed", best ? fixed(best->gflops, 1) : std::string(kNoValue),
               best && best->peer ? percent(100.0 * best->peer->throughput_ratio) : std::string(kNoValue),
               peer ? fixed(peer->gflops, 1) : std::string(kNoValue)});
  }
  fmt::print("\nBest passing level per size (cublasSgemm FP32, TF32 off, same run):\n");
  t.print();
}

}  // namespace

int run_gemm(const GemmOptions& o) {
  // Environment first, then hardware: the TF32 refusal is the same on every machine.
  refuse_tf32_override("gemm");
  require_gpu("gemm");
  const DeviceInfo device = device_info();

  std::vector<GemmShape> shapes;
  if (o.ladder) {
    for (int size : o.sizes) shapes.push_back({size, size, size, size, size, size, 1.f, 0.f});
  } else {
    shapes.push_back({o.m, o.n, o.k, o.lda ? o.lda : o.k, o.ldb ? o.ldb : o.n, o.ldc ? o.ldc : o.n, o.alpha, o.beta});
  }
  std::vector<SgemmLevel> levels;
  if (o.ladder) levels = o.levels;
  else if (o.kernel != "cublas") levels = {parse_sgemm_level(o.kernel)};
  const GemmSuite<float> suite = fp32_suite(o.ladder ? "sgemm_ladder" : "sgemm", levels);

  MeasureSettings ms;
  ms.bench.repetitions = o.repetitions;
  ms.bench.warmup = o.warmup;
  ms.bench.budget_ms = o.budget_ms;
  ms.tolerance = o.tolerance;

  results::Document doc = results::make_document(device);
  doc.command = o.command_line();
  doc.context = {{"mode", std::string(o.ladder ? "ladder" : "kernel")},
                 {"dtype", suite.dtype},
                 {"peer", suite.peer_note},
                 {"repetitions", std::int64_t{o.repetitions}},
                 {"warmup", std::int64_t{o.warmup}},
                 {"budget_ms", o.budget_ms},
                 {"tolerance", o.tolerance}};

  if (o.output.prints_table())
    fmt::print("parallax gemm on {} ({}), parallax {} ({})\n", device.name, device.arch(), parallax::version(),
               parallax::git_sha());

  Progress progress(static_cast<int>(shapes.size() * (suite.contenders.size() + 1)));
  int step = 0;
  std::vector<std::pair<GemmShape, std::vector<results::Record>>> measured;
  for (const GemmShape& shape : shapes) {
    std::vector<results::Record> records = measure_shape(suite, shape, ms, device, progress, step);
    if (o.output.prints_table()) {
      progress.finish();
      print_shape_header(shape, suite.dtype, suite.peer_note, records);
      gemm_table(records, "% cuBLAS").print();
    }
    doc.records.insert(doc.records.end(), records.begin(), records.end());
    measured.emplace_back(shape, std::move(records));
  }
  progress.finish();

  if (o.output.prints_table()) {
    print_legend(o.tolerance);
    if (o.ladder) print_ladder_summary(measured);
  }
  emit_json(o.output, doc);

  const auto bad = std::count_if(doc.records.begin(), doc.records.end(),
                                 [](const results::Record& r) { return r.status != results::Status::kOk; });
  if (bad > 0) {
    fmt::print(stderr, "parallax gemm: {} of {} rows did not pass (failed or incorrect); see the check column\n", bad,
               doc.records.size());
    return 1;
  }
  return 0;
}

}  // namespace parallax::cli
