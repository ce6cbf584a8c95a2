// `parallax gemm`: every ladder level against cuBLAS (`--ladder`), or one kernel on one shape (`--kernel`);
// FP32 (the SGEMM ladder, peer cublasSgemm) or, with --dtype bf16|fp16, the tensor-core GEMM (peer
// cublasGemmEx with fp32 accumulation).
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
//   * the peer is cublasSgemm in strict FP32 (TF32 off) for fp32, cublasGemmEx (CUBLAS_COMPUTE_32F) for the
//     16-bit inputs, timed in the same run on the same GPU
//
// A level that throws (not implemented, bad launch, out of memory) becomes a "failed" row with its error; the
// table carries on. A level whose output fails the check is timed and shown as "incorrect".
//
// Structure: the dtype-specific part (element types, peer, contenders, suite name) is a GemmSuite; the
// measuring (measure_shape, on untyped device buffers) and the output (tables, JSON) are generic. Outputs are
// widened to float on the host for the check, keeping the poison pattern recognisable.
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

bool is_tc_kernel_name(std::string_view text) {
  try {
    (void)parse_gemm_kernel(text);
    return true;
  } catch (const InvalidArgument&) {
    return false;
  }
}

std::string tc_kernel_list() {
  std::string s;
  for (auto name : gemm_kernel_names()) s += std::string(s.empty() ? "" : ", ") + std::string(name);
  std::string experimental;
  for (auto name : gemm_experimental_kernel_names())
    experimental += std::string(experimental.empty() ? "" : ", ") + std::string(name);
  return s + (experimental.empty() ? "" : "; experimental (--levels / --kernel by name): " + experimental);
}

// Why `text` is not a --kernel name ("" if it is one): an FP32 ladder level, a tensor-core kernel or cublas.
std::string kernel_rule(std::string_view text) {
  if (text == "cublas" || text == "cublasSgemm") return {};
  std::string why = level_rule(text);
  if (why.empty() || is_tc_kernel_name(text)) return {};
  // "unknown SGEMM level 'x'; valid: sgemm1, ... (or 1..8, or naive/...)" becomes the same list with cublas.
  const auto pos = why.find("valid: ");
  if (pos == std::string::npos) return why + "; or cublas";
  return "unknown kernel '" + std::string(text) + "'; valid: cublas, " + why.substr(pos + 7) +
         "; tensor-core kernels (--dtype bf16|fp16): " + tc_kernel_list();
}

// Canonical --dtype names: "fp32", "bf16", "fp16" (also accepting f32 / f16 / float32 / float16 / bfloat16).
std::string dtype_rule(std::string& value) {
  if (value == "fp32" || value == "f32" || value == "float32") value = "fp32";
  else if (value == "bf16" || value == "bfloat16") value = "bf16";
  else if (value == "fp16" || value == "f16" || value == "float16" || value == "half") value = "fp16";
  else return "unknown dtype '" + value + "'; valid: fp32, bf16, fp16";
  return {};
}

DType to_dtype(std::string_view name) {
  if (name == "bf16") return DType::kBF16;
  if (name == "fp16") return DType::kF16;
  return DType::kF32;
}

}  // namespace

std::string canonical_kernel_name(std::string_view text) {
  if (const std::string why = kernel_rule(text); !why.empty()) throw InvalidArgument("kernel", why);
  if (text == "cublas" || text == "cublasSgemm") return "cublas";
  if (level_rule(text).empty()) return std::string(sgemm_level_name(parse_sgemm_level(text)));
  return std::string(gemm_kernel_name(parse_gemm_kernel(text)));
}

// ------------------------------------------------------------------------------------------------ shapes

StudyShape parse_study_shape(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return InvalidArgument("shapes", "'" + std::string(text) + "': " + why +
                                         " (expected MxNxK, MxNxK:OPS with OPS one of NN, NT, TN, TT, or N for a cube)");
  };
  StudyShape s;
  std::string_view dims = text, ops;
  if (const auto colon = text.find(':'); colon != std::string_view::npos) {
    dims = text.substr(0, colon);
    ops = text.substr(colon + 1);
    if (ops.size() != 2 || (ops[0] != 'N' && ops[0] != 'T') || (ops[1] != 'N' && ops[1] != 'T'))
      throw bad("OPS must be two letters from N, T");
    s.op_a = ops[0] == 'T' ? Op::kT : Op::kN;
    s.op_b = ops[1] == 'T' ? Op::kT : Op::kN;
  }
  std::vector<long long> values;
  std::size_t start = 0;
  while (true) {
    const std::size_t x = dims.find('x', start);
    const std::string_view part = dims.substr(start, x == std::string_view::npos ? std::string_view::npos : x - start);
    if (part.empty() || part.size() > 9 || part.find_first_not_of("0123456789") != std::string_view::npos)
      throw bad("dimensions must be positive integers");
    values.push_back(std::stoll(std::string(part)));
    if (x == std::string_view::npos) break;
    start = x + 1;
  }
  if (values.size() == 1) values = {values[0], values[0], values[0]};
  if (values.size() != 3) throw bad("give three dimensions");
  for (long long v : values)
    if (v < 1 || v > 1'000'000) throw bad("dimensions must be in 1..1000000");
  s.m = static_cast<int>(values[0]);
  s.n = static_cast<int>(values[1]);
  s.k = static_cast<int>(values[2]);
  return s;
}

std::string study_shape_text(const StudyShape& s) {
  std::string t = fmt::format("{}x{}x{}", s.m, s.n, s.k);
  if (s.op_a != Op::kN || s.op_b != Op::kN) t += ":" + std::string(op_name(s.op_a)) + std::string(op_name(s.op_b));
  return t;
}

std::vector<StudyShape> tc_study_shapes(const std::vector<int>& sizes) {
  std::vector<StudyShape> shapes;
  for (int n : sizes) shapes.push_back({n, n, n});
  // LLM projections (tokens x out x in): Llama-70B MLP up/down, Llama-8B MLP, a GQA key/value projection.
  for (StudyShape s : {StudyShape{8192, 28672, 8192}, StudyShape{8192, 8192, 28672}, StudyShape{4096, 14336, 4096},
                       StudyShape{8192, 1024, 8192}})
    shapes.push_back(s);
  for (auto [a, b] : {std::pair{Op::kN, Op::kT}, std::pair{Op::kT, Op::kN}, std::pair{Op::kT, Op::kT}})
    shapes.push_back({4096, 4096, 4096, a, b});
  shapes.push_back({4095, 4095, 4095});
  shapes.push_back({1000, 3000, 777});
  return shapes;
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

std::vector<float> widen_output(const std::vector<std::byte>& bytes, DType type) {
  const std::size_t size = static_cast<std::size_t>(dtype_size(type));
  PX_REQUIRE(bytes.size() % size == 0, "bytes", "must hold whole elements (" + std::to_string(bytes.size()) +
                                                    " bytes of " + std::to_string(size) + "-byte elements)");
  std::vector<float> out(bytes.size() / size);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (type == DType::kF32) {
      std::memcpy(&out[i], bytes.data() + 4 * i, 4);
      continue;
    }
    std::uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    if (h == 0xFFFF) {  // the poison pattern stays the float poison pattern
      out[i] = std::bit_cast<float>(0xFFFFFFFFu);
      continue;
    }
    if (type == DType::kBF16) {
      out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
    } else {  // IEEE binary16: sign, 5-bit exponent (bias 15), 10-bit mantissa
      const std::uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
      float v;
      if (exp == 0) v = std::ldexp(static_cast<float>(man), -24);                      // zero / subnormal
      else if (exp == 31) v = man ? std::numeric_limits<float>::quiet_NaN() : INFINITY;  // inf / NaN
      else v = std::ldexp(static_cast<float>(man | 0x400u), static_cast<int>(exp) - 25);
      out[i] = sign ? -v : v;
    }
  }
  return out;
}

// ------------------------------------------------------------------------------------------------ options

double GemmOptions::default_tolerance() const {
  const std::string out = output_dtype();
  if (out == "bf16") return 1e-2;
  if (out == "fp16") return 2e-3;
  return 1e-4;
}

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
  if (tensor_core()) s += " --dtype " + dtype + " --out-dtype " + output_dtype();
  if (ladder && tensor_core()) {
    s += " --ladder --shapes ";
    const std::vector<StudyShape> list = shapes.empty() ? tc_study_shapes(sizes) : shapes;
    for (std::size_t i = 0; i < list.size(); ++i) s += (i ? "," : "") + study_shape_text(list[i]);
    if (!tc_kernels.empty()) {
      s += " --levels ";
      for (std::size_t i = 0; i < tc_kernels.size(); ++i) s += (i ? "," : "") + std::string(gemm_kernel_name(tc_kernels[i]));
    }
  } else if (ladder) {
    s += " --ladder --sizes " + join_ints(sizes) + " --levels " + join_levels(levels);
  } else {
    s += fmt::format(" --kernel {} --m {} --n {} --k {} --alpha {} --beta {}", kernel, m, n, k, short_float(alpha),
                     short_float(beta));
    if (tensor_core()) s += fmt::format(" --op-a {} --op-b {}", op_name(op_a), op_name(op_b));
    if (lda) s += " --lda " + std::to_string(lda);
    if (ldb) s += " --ldb " + std::to_string(ldb);
    if (ldc) s += " --ldc " + std::to_string(ldc);
  }
  s += fmt::format(" --reps {} --warmup {} --budget-ms {} --tolerance {}", repetitions, warmup, short_float(budget_ms),
                   short_float(effective_tolerance()));
  if (!interleave_peer) s += " --interleave-peer false";
  return s;
}

CLI::App* register_gemm(CLI::App& root, Action& action, std::shared_ptr<GemmOptions> options) {
  CLI::App* cmd = root.add_subcommand(
      "gemm", "GEMM against cuBLAS: the FP32 ladder, or the tensor-core GEMM (--dtype bf16|fp16); or one kernel");
  cmd->footer(
      "Examples:\n"
      "  parallax gemm --ladder\n"
      "  parallax gemm --ladder --sizes 1000,4096 --levels 1,5,sgemm8 --json-out ladder.json\n"
      "  parallax gemm --ladder --dtype bf16                 (issue 4's study: squares, LLM shapes, transposes, odd)\n"
      "  parallax gemm --ladder --dtype fp16 --shapes 4096,8192x28672x8192,4096x4096x4096:TN --levels mma,wgmma\n"
      "  parallax gemm --kernel sgemm5 --m 1000 --n 1024 --k 999 --beta 0.5 --ldc 1040\n"
      "  parallax gemm --kernel wgmma-persistent --dtype bf16 --m 8192 --n 8192 --k 8192 --op-b T\n"
      "  parallax gemm --kernel cublas --m 8192 --n 8192 --k 8192");
  GemmOptions& o = *options;
  add_output_options(*cmd, o.output);

  const CLI::Validator kernel_name(
      [](std::string& value) {
        const std::string why = kernel_rule(value);
        if (why.empty()) value = canonical_kernel_name(value);
        return why;
      },
      "KERNEL");
  const CLI::Validator dtype_name_check([](std::string& value) { return dtype_rule(value); }, "DTYPE");
  const CLI::Validator op_check(
      [](std::string& value) {
        if (value == "n") value = "N";
        if (value == "t") value = "T";
        return value == "N" || value == "T" ? std::string() : "must be N or T (got '" + value + "')";
      },
      "N|T");

  cmd->add_option("--dtype", o.dtype, "Input type: fp32 (the SGEMM ladder), bf16 or fp16 (tensor cores)")
      ->transform(dtype_name_check)
      ->capture_default_str();
  cmd->add_option("--out-dtype", o.out_dtype, "Output type of the tensor-core GEMM: fp32, bf16, fp16 (default: --dtype)")
      ->transform(dtype_name_check);

  CLI::Option* ladder = cmd->add_flag("--ladder", o.ladder, "Run every chosen level at every size, plus cuBLAS");
  CLI::Option* kernel = cmd->add_option("--kernel", o.kernel,
                                        "Run one kernel: a level (sgemm1..sgemm8, 1..8, naive, coalesced, smem, "
                                        "blocktile1d, blocktile2d, vectorized, warptile, pipelined), a tensor-core "
                                        "kernel (" + tc_kernel_list() + ") or cublas")
                            ->transform(kernel_name);
  ladder->excludes(kernel);

  // Ladder options.
  auto level_names = std::make_shared<std::vector<std::string>>();
  auto shape_texts = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--sizes", o.sizes, "Square sizes N (N x N x N) for --ladder, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(1, 65536))
      ->capture_default_str()
      ->excludes(kernel);
  cmd->add_option("--levels", *level_names,
                  "Levels for --ladder, comma-separated (default: all; fp32: sgemm1..8, bf16/fp16: " + tc_kernel_list() +
                      ")")
      ->delimiter(',')
      ->excludes(kernel);
  cmd->add_option("--shapes", *shape_texts,
                  "Tensor-core --ladder shapes MxNxK[:OPS] (OPS: NN, NT, TN, TT), comma-separated "
                  "(default: squares of --sizes + LLM shapes + transposes at 4096^3 + 4095^3 + 1000x3000x777)")
      ->delimiter(',')
      ->excludes(kernel);

  // Single-kernel options.
  const auto single = [&](CLI::Option* opt) { return opt->excludes(ladder); };
  const CLI::Range extent(1, std::numeric_limits<int>::max());
  auto op_texts = std::make_shared<std::pair<std::string, std::string>>("N", "N");
  single(cmd->add_option("--op-a", op_texts->first, "op(A): N (A stored m x k) or T (A stored k x m); bf16/fp16 only")
             ->transform(op_check));
  single(cmd->add_option("--op-b", op_texts->second, "op(B): N (B stored k x n) or T (B stored n x k); bf16/fp16 only")
             ->transform(op_check));
  single(cmd->add_option("--m", o.m, "Rows of op(A) and C (--kernel)")->check(extent)->capture_default_str());
  single(cmd->add_option("--n", o.n, "Columns of op(B) and C (--kernel)")->check(extent)->capture_default_str());
  single(cmd->add_option("--k", o.k, "Columns of op(A), rows of op(B) (--kernel)")->check(extent)->capture_default_str());
  single(cmd->add_option("--alpha", o.alpha, "C = alpha * A * B + beta * C (--kernel)")->capture_default_str());
  single(cmd->add_option("--beta", o.beta, "beta != 0 starts C from random values (--kernel)")->capture_default_str());
  single(cmd->add_option("--lda", o.lda, "Leading dimension of row-major A, >= its row length (default tight)")->check(extent));
  single(cmd->add_option("--ldb", o.ldb, "Leading dimension of row-major B, >= its row length (default tight)")->check(extent));
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
  cmd->add_option("--interleave-peer", o.interleave_peer,
                  "Time each kernel in alternating rounds with the peer and take its % of the peer from those "
                  "paired samples (same clocks for both); false: against the peer's own separate measurement")
      ->capture_default_str();
  cmd->add_option("--tolerance", o.tolerance,
                  "Largest rel err and max err vs cuBLAS that counts as correct (0 = by output type: fp32 1e-4, "
                  "bf16 1e-2, fp16 2e-3)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();

  cmd->callback([&action, options, level_names, shape_texts, op_texts] {
    GemmOptions& opt = *options;
    if (!opt.ladder && opt.kernel.empty())
      throw CLI::ValidationError("gemm", "choose --ladder (every level against cuBLAS) or --kernel NAME (one kernel)");
    const bool tc = opt.tensor_core();
    if (!opt.out_dtype.empty() && !tc)
      throw CLI::ValidationError("--out-dtype", "applies to the tensor-core GEMM only (--dtype bf16 or fp16)");
    if (!tc && !shape_texts->empty())
      throw CLI::ValidationError("--shapes", "applies to the tensor-core GEMM only (--dtype bf16 or fp16); use --sizes");
    opt.op_a = op_texts->first == "T" ? Op::kT : Op::kN;
    opt.op_b = op_texts->second == "T" ? Op::kT : Op::kN;
    if (!tc && (opt.op_a != Op::kN || opt.op_b != Op::kN))
      throw CLI::ValidationError("--op-a/--op-b", "the FP32 ladder computes C = A * B only; transposes need --dtype bf16|fp16");
    if (!opt.kernel.empty() && opt.kernel != "cublas") {
      const bool is_fp32_level = level_rule(opt.kernel).empty();
      if (tc && is_fp32_level)
        throw CLI::ValidationError("--kernel", "'" + opt.kernel + "' is an FP32 ladder level; with --dtype " + opt.dtype +
                                                   " choose one of " + tc_kernel_list());
      if (!tc && !is_fp32_level)
        throw CLI::ValidationError("--kernel", "'" + opt.kernel + "' is a tensor-core kernel: add --dtype bf16 or fp16");
    }
    if (!level_names->empty()) {
      opt.levels.clear();
      opt.tc_kernels.clear();
      for (const auto& name : *level_names) {  // keep the order given, drop repeats
        if (tc) {
          GemmKernel kern{};
          try {
            kern = parse_gemm_kernel(name);
          } catch (const InvalidArgument& e) {
            throw CLI::ValidationError("--levels", "unknown tensor-core kernel '" + name + "'; valid: " + tc_kernel_list());
          }
          if (kern == GemmKernel::kCublas)
            throw CLI::ValidationError("--levels", "cublas is the peer of every row already; list parallax kernels");
          if (std::find(opt.tc_kernels.begin(), opt.tc_kernels.end(), kern) == opt.tc_kernels.end())
            opt.tc_kernels.push_back(kern);
        } else {
          if (const std::string why = level_rule(name); !why.empty()) throw CLI::ValidationError("--levels", why);
          const SgemmLevel level = parse_sgemm_level(name);
          if (std::find(opt.levels.begin(), opt.levels.end(), level) == opt.levels.end()) opt.levels.push_back(level);
        }
      }
    }
    opt.shapes.clear();
    for (const auto& text : *shape_texts) {
      try {
        opt.shapes.push_back(parse_study_shape(text));
      } catch (const InvalidArgument& e) {
        throw CLI::ValidationError("--shapes", e.what());
      }
    }
    if (!std::isfinite(opt.alpha)) throw CLI::ValidationError("--alpha", "must be a finite number");
    if (!std::isfinite(opt.beta)) throw CLI::ValidationError("--beta", "must be a finite number");
    // Row-major storage: A is m x k (op N) or k x m (op T); B is k x n or n x k; C is m x n. An ld below the
    // stored row length overlaps rows.
    const bool at = opt.op_a == Op::kT, bt = opt.op_b == Op::kT;
    if (opt.lda != 0 && opt.lda < (at ? opt.m : opt.k))
      throw CLI::ValidationError("--lda", fmt::format("must be >= {} = {} (got {})", at ? "m" : "k", at ? opt.m : opt.k, opt.lda));
    if (opt.ldb != 0 && opt.ldb < (bt ? opt.k : opt.n))
      throw CLI::ValidationError("--ldb", fmt::format("must be >= {} = {} (got {})", bt ? "k" : "n", bt ? opt.k : opt.n, opt.ldb));
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
  int m, n, k;
  Op op_a, op_b;
  int lda, ldb, ldc;
  float alpha, beta;

  // Stored (row-major) shapes: A is m x k for N and k x m for T; B is k x n or n x k.
  int a_rows() const { return op_a == Op::kN ? m : k; }
  int a_cols() const { return op_a == Op::kN ? k : m; }
  int b_rows() const { return op_b == Op::kN ? k : n; }
  int b_cols() const { return op_b == Op::kN ? n : k; }
  std::size_t a_elements() const { return static_cast<std::size_t>(a_rows()) * lda; }
  std::size_t b_elements() const { return static_cast<std::size_t>(b_rows()) * ldb; }
  std::size_t c_elements() const { return static_cast<std::size_t>(m) * ldc; }

  // 2mnk flops (the convention every GEMM benchmark uses; the alpha/beta epilogue is not counted) and the
  // fewest bytes: A and B read once, C written once (and read once when beta != 0).
  bench::Work work(std::size_t in_bytes, std::size_t out_bytes) const {
    const double mn = static_cast<double>(m) * n, mk = static_cast<double>(m) * k, kn = static_cast<double>(k) * n;
    return {2.0 * mn * k, static_cast<double>(in_bytes) * (mk + kn) +
                              static_cast<double>(out_bytes) * mn * (beta != 0 ? 2 : 1)};
  }
  results::Fields fields() const {
    return {{"m", std::int64_t{m}},     {"n", std::int64_t{n}},     {"k", std::int64_t{k}},
            {"op_a", std::string(op_name(op_a))}, {"op_b", std::string(op_name(op_b))},
            {"lda", std::int64_t{lda}}, {"ldb", std::int64_t{ldb}}, {"ldc", std::int64_t{ldc}},
            {"alpha", double{alpha}},   {"beta", double{beta}}};
  }
  std::string label() const {
    std::string t = m == n && n == k ? fmt::format("{}^3", m) : fmt::format("{}x{}x{}", m, n, k);
    if (op_a != Op::kN || op_b != Op::kN) t += " " + std::string(op_name(op_a)) + std::string(op_name(op_b));
    return t;
  }
  bool tight() const { return lda == a_cols() && ldb == b_cols() && ldc == n; }
};

// A kernel run on untyped device buffers (the suite knows the element types).
using GemmRun = std::function<void(const GemmShape&, const void* a, const void* b, void* c, cudaStream_t)>;

struct Contender {
  int level = 0;  // ladder level, 0 for the peer
  std::string name;
  std::string description;
  GemmRun run;
};

// Everything that depends on the element types.
struct GemmSuite {
  std::string suite;      // the records' suite: "sgemm_ladder", "sgemm", "gemm"
  std::string dtype;      // of the inputs: "fp32", "bf16", "fp16"
  DType in = DType::kF32;
  DType out = DType::kF32;
  std::string peer_note;  // what "% of <peer>" is relative to, printed above each table
  Contender peer;         // the reference for accuracy and speed
  std::vector<Contender> contenders;
};

std::string record_dtype(DType t) { return t == DType::kF32 ? "fp32" : t == DType::kF16 ? "fp16" : "bf16"; }

SgemmArgs sgemm_args(const GemmShape& s, const void* a, const void* b, void* c) {
  return {s.m, s.n, s.k, s.alpha, static_cast<const float*>(a), s.lda, static_cast<const float*>(b), s.ldb, s.beta,
          static_cast<float*>(c), s.ldc};
}

GemmSuite fp32_suite(std::string suite_name, const std::vector<SgemmLevel>& levels) {
  GemmSuite suite;
  suite.suite = std::move(suite_name);
  suite.dtype = "fp32";
  suite.peer_note = "cublasSgemm FP32, TF32 off, same run";
  suite.peer = {0, "cublasSgemm", "cuBLAS FP32, TF32 off",
                [](const GemmShape& s, const void* a, const void* b, void* c, cudaStream_t stream) {
                  sgemm_cublas(sgemm_args(s, a, b, c), stream);
                }};
  for (SgemmLevel level : levels)
    suite.contenders.push_back({static_cast<int>(level), std::string(sgemm_level_name(level)),
                                std::string(sgemm_level_description(level)),
                                [level](const GemmShape& s, const void* a, const void* b, void* c, cudaStream_t stream) {
                                  sgemm(level, sgemm_args(s, a, b, c), stream);
                                }});
  return suite;
}

GemmArgs tc_args(const GemmShape& s, DType in, DType out, const void* a, const void* b, void* c) {
  GemmArgs g;
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.op_a = s.op_a;
  g.op_b = s.op_b;
  g.a_type = g.b_type = in;
  g.c_type = out;
  g.a = a;
  g.lda = s.lda;
  g.b = b;
  g.ldb = s.ldb;
  g.c = c;
  g.ldc = s.ldc;
  g.alpha = s.alpha;
  g.beta = s.beta;
  return g;
}

GemmSuite tc_suite(std::string suite_name, DType in, DType out, const std::vector<GemmKernel>& kernels) {
  GemmSuite suite;
  suite.suite = std::move(suite_name);
  suite.dtype = record_dtype(in);
  suite.in = in;
  suite.out = out;
  suite.peer_note = "cublasGemmEx " + record_dtype(in) + " -> " + record_dtype(out) +
                    ", CUBLAS_COMPUTE_32F, same run";
  suite.peer = {0, "cublas", "cublasGemmEx, fp32 accumulation",
                [in, out](const GemmShape& s, const void* a, const void* b, void* c, cudaStream_t stream) {
                  gemm_cublas(tc_args(s, in, out, a, b, c), stream);
                }};
  for (GemmKernel kern : kernels)
    suite.contenders.push_back({static_cast<int>(kern), std::string(gemm_kernel_name(kern)),
                                std::string(gemm_kernel_description(kern)),
                                [in, out, kern](const GemmShape& s, const void* a, const void* b, void* c,
                                                cudaStream_t stream) { gemm(tc_args(s, in, out, a, b, c), stream, kern); }});
  return suite;
}

// Fresh uniform(-1, 1) values of type t.
void fill_random(void* data, std::size_t count, DType t, std::uint64_t seed, cudaStream_t stream) {
  switch (t) {
    case DType::kF32: return fill_uniform(static_cast<float*>(data), count, seed, -1.f, 1.f, stream);
    case DType::kF16: return fill_uniform(static_cast<__half*>(data), count, seed, -1.f, 1.f, stream);
    case DType::kBF16: return fill_uniform(static_cast<__nv_bfloat16*>(data), count, seed, -1.f, 1.f, stream);
  }
}

struct MeasureSettings {
  bench::Options bench;
  double tolerance = 1e-4;
  bool interleave_peer = true;
};

// What every record of one shape shares (written into each record's "extra").
struct ShapeSetup {
  int rotations = 1;
  bool flush_l2 = false;
  std::uint64_t seed = 0;
};

std::string hex(std::uint64_t v) { return fmt::format("{:#018x}", v); }

results::Record base_extras(results::Record r, const GemmSuite& suite, const Contender& c, const ShapeSetup& setup,
                            bool is_peer) {
  if (!is_peer) r.add_extra("level", std::int64_t{c.level});
  r.add_extra("description", c.description);
  if (is_peer) r.add_extra("role", std::string("peer"));
  if (suite.in != DType::kF32) r.add_extra("out_dtype", record_dtype(suite.out));
  r.add_extra("rotations", std::int64_t{setup.rotations});
  r.add_extra("flush_l2", setup.flush_l2);
  r.add_extra("seed", hex(setup.seed));
  return r;
}

// Untyped device memory for `count` elements of type t.
struct TypedBuffer {
  DeviceBuffer<std::byte> bytes;
  DType type;
  std::size_t count;
  TypedBuffer(std::size_t n, DType t) : bytes(n * static_cast<std::size_t>(dtype_size(t))), type(t), count(n) {}
  void* data() { return bytes.data(); }
};

// Measures the peer and every contender on one shape. Never throws: whatever fails becomes a failed record.
// Records come back contenders first, the peer last (the order of the table).
std::vector<results::Record> measure_shape(const GemmSuite& suite, const GemmShape& s, const MeasureSettings& ms,
                                           const DeviceInfo& device, Progress& progress, int& step) {
  const results::Fields shape = s.fields();
  const std::size_t in_size = static_cast<std::size_t>(dtype_size(suite.in));
  const std::size_t out_size = static_cast<std::size_t>(dtype_size(suite.out));
  const bench::Work work = s.work(in_size, out_size);
  std::vector<results::Record> out;
  ShapeSetup setup;
  const int first_step = step;

  auto failed = [&](const Contender& c, const std::string& why, bool is_peer) {
    results::Record r = results::failed_record(suite.suite, c.name, shape, suite.dtype, why);
    r.flops = work.flops;
    r.bytes = work.bytes;
    return base_extras(std::move(r), suite, c, setup, is_peer);
  };

  try {
    Stream stream;
    const std::size_t set_bytes = (s.a_elements() + s.b_elements()) * in_size + s.c_elements() * out_size;
    setup.rotations = bench::rotations_for_l2(set_bytes, device.l2_bytes);
    // Copies capped at the rotation limit may still fit in 2x L2 (tiny shapes): flush L2 instead.
    if (static_cast<std::size_t>(setup.rotations) * set_bytes <= 2 * device.l2_bytes) {
      setup.rotations = 1;
      setup.flush_l2 = true;
    }
    setup.seed = fresh_seed();

    std::vector<TypedBuffer> a, b, c;
    for (int r = 0; r < setup.rotations; ++r) {
      a.emplace_back(s.a_elements(), suite.in);
      b.emplace_back(s.b_elements(), suite.in);
      c.emplace_back(s.c_elements(), suite.out);
      // Distinct seeds per copy: identical copies would be just as valid, but distinct data costs nothing.
      fill_random(a.back().data(), a.back().count, suite.in, setup.seed + 3 * r, stream);
      fill_random(b.back().data(), b.back().count, suite.in, setup.seed + 3 * r + 1, stream);
      if (s.beta != 0) fill_random(c.back().data(), c.back().count, suite.out, setup.seed + 3 * r + 2, stream);
    }
    // The starting C of every checked run: poison (all bits set, NaN) when beta == 0 so unwritten elements
    // show; random when beta != 0 (C is then an input), with the padding columns poisoned either way.
    TypedBuffer c_start(s.c_elements(), suite.out), c_checked(s.c_elements(), suite.out);
    c_start.bytes.fill_bytes(0xFF, stream);
    if (s.beta != 0) {
      PX_CUDA_CHECK(cudaMemcpyAsync(c_start.data(), c.front().data(), c_start.bytes.bytes(), cudaMemcpyDeviceToDevice,
                                    stream));
      if (s.ldc > s.n)
        PX_CUDA_CHECK(cudaMemset2DAsync(static_cast<std::byte*>(c_start.data()) + s.n * out_size,
                                        static_cast<std::size_t>(s.ldc) * out_size, 0xFF,
                                        static_cast<std::size_t>(s.ldc - s.n) * out_size, static_cast<std::size_t>(s.m),
                                        stream));
    }
    stream.synchronize();

    auto checked_run = [&](const Contender& ct) {
      PX_CUDA_CHECK(cudaMemcpyAsync(c_checked.data(), c_start.data(), c_start.bytes.bytes(), cudaMemcpyDeviceToDevice,
                                    stream));
      ct.run(s, a.front().data(), b.front().data(), c_checked.data(), stream);
      PX_CUDA_CHECK_LAUNCH();
      stream.synchronize();  // an asynchronous fault of this kernel surfaces here, on its own row
      return widen_output(c_checked.bytes.download(stream), suite.out);
    };
    auto runner = [&](const Contender& ct) {
      return [&](cudaStream_t st, int r) {
        const auto i = static_cast<std::size_t>(r);
        ct.run(s, a[i].data(), b[i].data(), c[i].data(), st);
      };
    };
    auto timed = [&](const Contender& ct) { return bench::time_gpu(runner(ct), setup.rotations, ms.bench, stream); };
    // A contender and the peer in alternating rounds (bench::time_gpu_interleaved): the ratio then compares
    // runs made under the same clocks, which drift over seconds on a GPU at full power.
    auto timed_with_peer = [&](const Contender& ct) {
      return bench::time_gpu_interleaved({runner(ct), runner(suite.peer)}, setup.rotations, ms.bench, stream);
    };

    // The peer first: it is the reference for every row.
    progress.update(step, s.label() + " " + suite.peer.name);
    std::vector<float> reference;
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
        base_extras(results::make_record(suite.suite, suite.peer.name, shape, suite.dtype, peer_timing, work), suite,
                    suite.peer, setup, true);
    {  // The reference itself must be complete and untouched outside the matrix, or no row means anything.
      const OutputCheck self = check_output(reference, reference, s.m, s.n, s.ldc);
      if (self.non_finite > 0 || self.padding_written > 0) peer_record.mark_incorrect(self.problem(ms.tolerance, s.n));
    }

    for (const auto& ct : suite.contenders) {
      progress.update(step, s.label() + " " + ct.name);
      try {
        const std::vector<float> result = checked_run(ct);
        const OutputCheck check = check_output(result, reference, s.m, s.n, s.ldc);
        bench::Timing t, peer_t = peer_timing;
        if (ms.interleave_peer) {
          const std::vector<bench::Timing> pair = timed_with_peer(ct);
          t = pair[0];
          peer_t = pair[1];
        } else {
          t = timed(ct);
        }
        results::Record r = base_extras(results::make_record(suite.suite, ct.name, shape, suite.dtype, t, work), suite,
                                        ct, setup, false);
        r.set_peer(suite.peer.name, peer_t.median_ms);
        r.add_extra("peer_timing", std::string(ms.interleave_peer ? "interleaved" : "separate"));
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

Table gemm_table(const std::vector<results::Record>& records, std::string_view peer_column, bool tflops) {
  Table t({{"level", Align::kRight},
           {"kernel"},
           {"what it adds", Align::kLeft},
           {"median ms", Align::kRight},
           {"runs", Align::kRight},
           {tflops ? "TFLOP/s" : "GFLOP/s", Align::kRight},
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
      row.push_back(fixed(tflops ? r.gflops / 1000 : r.gflops, 1));
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

void print_shape_header(const GemmShape& s, const GemmSuite& suite, const std::vector<results::Record>& records) {
  std::string layout = s.tight() ? "tight" : fmt::format("lda={} ldb={} ldc={}", s.lda, s.ldb, s.ldc);
  std::string types = suite.dtype;
  if (suite.in != DType::kF32) types += " -> " + record_dtype(suite.out) + ", op(A)=" + std::string(op_name(s.op_a)) +
                                        " op(B)=" + std::string(op_name(s.op_b));
  fmt::print("\n== {} x {} x {}  {}  alpha={} beta={}  {} ==\n", s.m, s.n, s.k, types, short_float(s.alpha),
             short_float(s.beta), layout);
  std::string inputs;
  if (!records.empty()) {
    const auto& r = records.back();
    inputs = extra_text(r, "flush_l2") == "true"
                 ? "L2 flushed between runs"
                 : extra_text(r, "rotations") + " rotating input copies (> 2x L2)";
    inputs += ", seed " + extra_text(r, "seed");
  }
  fmt::print("% of peer: {}; {}\n", suite.peer_note, inputs);
}

void print_legend(double tolerance) {
  fmt::print(
      "\nrel err = ||C - C_cublas||_F / ||C_cublas||_F    max err = max|C - C_cublas| / max|C_cublas|\n"
      "check: every output written and finite, nothing written beyond column n, both errors <= {}\n",
      sci(tolerance, 0));
}

// Best passing level per shape, for the ladder's closing summary.
void print_ladder_summary(const std::vector<std::pair<GemmShape, std::vector<results::Record>>>& shapes,
                          const GemmSuite& suite) {
  const bool tflops = suite.in != DType::kF32;
  const double scale = tflops ? 1e-3 : 1.0;
  const std::string unit = tflops ? "TFLOP/s" : "GFLOP/s";
  Table t({{"shape"}, {"best level"}, {unit, Align::kRight}, {"% of cuBLAS", Align::kRight},
           {"cuBLAS " + unit, Align::kRight}});
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
    t.add_row({shape.label(), best ? best->name : "none passed",
               best ? fixed(best->gflops * scale, 1) : std::string(kNoValue),
               best && best->peer ? percent(100.0 * best->peer->throughput_ratio) : std::string(kNoValue),
               peer ? fixed(peer->gflops * scale, 1) : std::string(kNoValue)});
  }
  fmt::print("\nBest passing level per shape ({}):\n", suite.peer_note);
  t.print();
}

}  // namespace

int run_gemm(const GemmOptions& o) {
  // Environment first, then hardware: the TF32 refusal is the same on every machine.
  refuse_tf32_override("gemm");
  require_gpu("gemm");
  const DeviceInfo device = device_info();
  const bool tc = o.tensor_core();

  std::vector<GemmShape> shapes;
  const auto tight_shape = [](const StudyShape& st) {
    const int lda = st.op_a == Op::kN ? st.k : st.m, ldb = st.op_b == Op::kN ? st.n : st.k;
    return GemmShape{st.m, st.n, st.k, st.op_a, st.op_b, lda, ldb, st.n, 1.f, 0.f};
  };
  if (o.ladder && tc) {
    for (const StudyShape& st : o.shapes.empty() ? tc_study_shapes(o.sizes) : o.shapes) shapes.push_back(tight_shape(st));
  } else if (o.ladder) {
    for (int size : o.sizes) shapes.push_back(tight_shape({size, size, size}));
  } else {
    GemmShape s = tight_shape({o.m, o.n, o.k, o.op_a, o.op_b});
    if (o.lda) s.lda = o.lda;
    if (o.ldb) s.ldb = o.ldb;
    if (o.ldc) s.ldc = o.ldc;
    s.alpha = o.alpha;
    s.beta = o.beta;
    shapes.push_back(s);
  }

  GemmSuite suite;
  std::string skipped_note;
  if (tc) {
    std::vector<GemmKernel> kernels;
    if (o.ladder) {
      kernels = o.tc_kernels;
      if (kernels.empty()) {
        for (auto name : gemm_kernel_names()) {
          const GemmKernel kern = parse_gemm_kernel(name);
          if (kern == GemmKernel::kAuto || kern == GemmKernel::kCublas) continue;
          // The sm_90a levels cannot run elsewhere: leave them out (said above the tables) instead of failing.
          if (gemm_kernel_min_cc_major(kern) > device.cc_major) {
            skipped_note += (skipped_note.empty() ? "" : ", ") + std::string(name);
            continue;
          }
          kernels.push_back(kern);
        }
      }
    } else if (o.kernel != "cublas") {
      kernels = {parse_gemm_kernel(o.kernel)};
    }
    suite = tc_suite(o.ladder ? "gemm" : "gemm_kernel", to_dtype(o.dtype), to_dtype(o.output_dtype()), kernels);
  } else {
    std::vector<SgemmLevel> levels;
    if (o.ladder) levels = o.levels;
    else if (o.kernel != "cublas") levels = {parse_sgemm_level(o.kernel)};
    suite = fp32_suite(o.ladder ? "sgemm_ladder" : "sgemm", levels);
  }

  MeasureSettings ms;
  ms.bench.repetitions = o.repetitions;
  ms.bench.warmup = o.warmup;
  ms.bench.budget_ms = o.budget_ms;
  ms.tolerance = o.effective_tolerance();
  ms.interleave_peer = o.interleave_peer;

  results::Document doc = results::make_document(device);
  doc.command = o.command_line();
  doc.context = {{"mode", std::string(o.ladder ? "ladder" : "kernel")},
                 {"dtype", suite.dtype},
                 {"peer", suite.peer_note},
                 {"repetitions", std::int64_t{o.repetitions}},
                 {"warmup", std::int64_t{o.warmup}},
                 {"budget_ms", o.budget_ms},
                 {"tolerance", ms.tolerance}};
  if (tc) doc.context.emplace_back("out_dtype", record_dtype(suite.out));

  if (o.output.prints_table()) {
    fmt::print("parallax gemm on {} ({}), parallax {} ({})\n", device.name, device.arch(), parallax::version(),
               parallax::git_sha());
    if (!skipped_note.empty())
      fmt::print("not run on this {} GPU (need sm_90): {}\n", device.arch(), skipped_note);
  }

  Progress progress(static_cast<int>(shapes.size() * (suite.contenders.size() + 1)));
  int step = 0;
  std::vector<std::pair<GemmShape, std::vector<results::Record>>> measured;
  for (const GemmShape& shape : shapes) {
    std::vector<results::Record> records = measure_shape(suite, shape, ms, device, progress, step);
    if (o.output.prints_table()) {
      progress.finish();
      print_shape_header(shape, suite, records);
      gemm_table(records, "% cuBLAS", tc).print();
    }
    doc.records.insert(doc.records.end(), records.begin(), records.end());
    measured.emplace_back(shape, std::move(records));
  }
  progress.finish();

  if (o.output.prints_table()) {
    print_legend(ms.tolerance);
    if (o.ladder) print_ladder_summary(measured, suite);
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
