// `parallax gemm`: the FP32 ladder or the tensor-core GEMM against cuBLAS, or one kernel on one shape.
// Exposed here so tests can parse command lines, inspect the options and exercise the output check without
// a GPU.
//
//   parallax gemm --ladder [--sizes 1024,2048,4096,8192] [--levels 1,2,...] [--reps N] [--budget-ms X]
//   parallax gemm --ladder --dtype bf16|fp16 [--out-dtype fp32|bf16|fp16] [--shapes MxNxK[:OPS],...]
//                 [--levels wmma,mma,...]     (default shapes: the study of issue 4, see tc_study_shapes)
//   parallax gemm --kernel <sgemm1..8 | 1..8 | naive..pipelined | cublas> [--m M --n N --k K]
//                 [--alpha A --beta B --lda L --ldb L --ldc L]
//   parallax gemm --kernel <auto | wmma | mma | wgmma | wgmma-ws | wgmma-persistent | cublas> --dtype bf16
//                 [--op-a N|T --op-b N|T] [shape options as above]
//   both: [--warmup N] [--tolerance T] [--json] [--json-out FILE]
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli.hpp"
#include "parallax/gemm.hpp"
#include "parallax/results.hpp"
#include "parallax/sgemm.hpp"
#include "table.hpp"

namespace parallax::cli {

// One GEMM problem of a study: m x n x k with op(A), op(B) (tight leading dimensions).
struct StudyShape {
  int m = 0, n = 0, k = 0;
  Op op_a = Op::kN, op_b = Op::kN;
  bool operator==(const StudyShape&) const = default;
};
// "4096x4096x4096", "4096x4096x4096:TN" (op_a then op_b), "4096" (a cube). Throws InvalidArgument("shapes", ...).
StudyShape parse_study_shape(std::string_view text);
std::string study_shape_text(const StudyShape& s);
// The tensor-core study of issue 4: squares `sizes`; the LLM shapes 8192x28672x8192, 8192x8192x28672,
// 4096x14336x4096, 8192x1024x8192; NT, TN, TT at 4096^3; the odd shapes 4095^3 and 1000x3000x777.
std::vector<StudyShape> tc_study_shapes(const std::vector<int>& sizes);

struct GemmOptions {
  OutputOptions output;

  // Element types: fp32 runs the FP32 ladder (SGEMM); bf16 / fp16 the tensor-core GEMM (fp32 accumulation),
  // whose output type is out_dtype ("" = same as the inputs).
  std::string dtype = "fp32";
  std::string out_dtype;

  // --ladder: every chosen level at every size (square, tight leading dimensions), plus cuBLAS.
  bool ladder = false;
  std::vector<int> sizes{1024, 2048, 4096, 8192};
  std::vector<SgemmLevel> levels = all_sgemm_levels();  // fp32
  std::vector<GemmKernel> tc_kernels;                   // bf16 / fp16 (empty: every level for this GPU)
  std::vector<StudyShape> shapes;                       // bf16 / fp16 --ladder (empty: tc_study_shapes)

  // --kernel: one kernel ("sgemm3" canonical, "wgmma", or "cublas") on one shape.
  std::string kernel;
  Op op_a = Op::kN;  // tensor-core dtypes only
  Op op_b = Op::kN;
  int m = 4096;
  int n = 4096;
  int k = 4096;
  float alpha = 1.f;
  float beta = 0.f;
  int lda = 0;  // 0: tight (k)
  int ldb = 0;  // 0: tight (n)
  int ldc = 0;  // 0: tight (n)

  // Measurement (bench::Options) and the correctness verdict.
  int repetitions = 30;
  int warmup = 5;
  double budget_ms = 3000;  // per measurement; keeps the naive level at 8192^3 to a few runs
  double tolerance = 0;  // max normwise and max elementwise error vs cuBLAS for "ok"; 0: default_tolerance()
  // Each contender timed in alternating rounds with the peer (bench::time_gpu_interleaved), the "% of peer"
  // taken from those paired samples; off: the peer's own separate measurement is the denominator.
  bool interleave_peer = true;

  bool tensor_core() const { return dtype != "fp32"; }
  std::string output_dtype() const { return out_dtype.empty() ? dtype : out_dtype; }
  // 1e-4 for fp32 output; one rounding of the output dominates the 16-bit outputs: 1e-2 (bf16), 2e-3 (fp16).
  double default_tolerance() const;
  double effective_tolerance() const { return tolerance > 0 ? tolerance : default_tolerance(); }

  // The canonical command line these options stand for (recorded in the JSON document).
  std::string command_line() const;
};

// Registers `gemm` on `root`, binding its options to *options; after a successful parse `action` runs it.
// Bad values are rejected at parse time (CLI::ParseError), unknown kernel and level names with a message
// listing the valid ones.
CLI::App* register_gemm(CLI::App& root, Action& action, std::shared_ptr<GemmOptions> options);

// The command. Exit code 0 when every kernel ran and passed its check, 1 otherwise (the table still lists
// every row: a failing level does not stop the others). Throws parallax::Error without a GPU or under
// NVIDIA_TF32_OVERRIDE.
int run_gemm(const GemmOptions& options);

// Names of the two accuracy metrics in each record's "errors" (what `parallax report` looks up).
inline constexpr std::string_view kGemmFroMetric = "fro_rel_err_vs_cublas";               // ||C-R||_F / ||R||_F
inline constexpr std::string_view kGemmMaxMetric = "max_abs_err_over_max_ref_vs_cublas";  // max|C-R| / max|R|

// The table of one shape: a row per record (contenders, then the peer, marked by extra "role": "peer"),
// columns level, kernel, what it adds, median ms, runs, GFLOP/s, <peer_column>, rel err, max err, check.
// Failed rows show "-" and "FAILED: why"; incorrect rows keep their numbers and show "WRONG: why".
// Throughput in GFLOP/s, or TFLOP/s when `tflops` (the tensor-core tables).
Table gemm_table(const std::vector<results::Record>& records, std::string_view peer_column = "% cuBLAS",
                 bool tflops = false);

// "--kernel" names: a ladder level in any form parse_sgemm_level accepts, or "cublas". Returns the canonical
// name ("sgemm3", "cublas"); throws parallax::InvalidArgument listing the valid names.
std::string canonical_kernel_name(std::string_view text);

// The output check of one run against the reference, over a row-major m x n window with leading dimension
// ld. The buffers hold the whole m x ld allocation: the padding columns (ld > n) were poisoned before the
// run and must come back untouched.
struct OutputCheck {
  double rel_fro = 0;              // ||C - R||_F / ||R||_F over the finite entries
  double max_rel = 0;              // max |C - R| / max |R|
  std::size_t non_finite = 0;      // NaN/Inf in the window: never written (poison) or overflowed
  std::size_t first_non_finite = 0;  // row-major index i * n + j of the first one
  std::size_t padding_written = 0; // padding entries that no longer hold the poison pattern

  // "" when the output passes, else what is wrong, e.g. "12 outputs not finite (first at row 0, col 7)".
  std::string problem(double tolerance, int n) const;
};
OutputCheck check_output(std::span<const float> out, std::span<const float> ref, int m, int n, int ld);

// Raw device bytes of `type` elements widened to float for check_output (exactly: every bf16 / fp16 value is
// a float). The poison pattern survives: an all-ones 16-bit element becomes the all-ones float.
std::vector<float> widen_output(const std::vector<std::byte>& bytes, DType type);

}  // namespace parallax::cli
