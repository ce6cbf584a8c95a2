// `parallax gemm`: the FP32 ladder against cuBLAS, or one kernel on one shape. Exposed here so tests can
// parse command lines, inspect the options and exercise the output check without a GPU.
//
//   parallax gemm --ladder [--sizes 1024,2048,4096,8192] [--levels 1,2,...] [--reps N] [--budget-ms X]
//   parallax gemm --kernel <sgemm1..8 | 1..8 | naive..pipelined | cublas> [--m M --n N --k K]
//                 [--alpha A --beta B --lda L --ldb L --ldc L]
//   both: [--warmup N] [--tolerance T] [--json] [--json-out FILE]
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli.hpp"
#include "parallax/results.hpp"
#include "parallax/sgemm.hpp"
#include "table.hpp"

namespace parallax::cli {

struct GemmOptions {
  OutputOptions output;

  // --ladder: every chosen level at every size (square, tight leading dimensions), plus cuBLAS.
  bool ladder = false;
  std::vector<int> sizes{1024, 2048, 4096, 8192};
  std::vector<SgemmLevel> levels = all_sgemm_levels();

  // --kernel: one kernel ("sgemm3" canonical, or "cublas") on one shape.
  std::string kernel;
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
  double tolerance = 1e-4;  // max normwise and max elementwise error vs cuBLAS for "ok"

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
Table gemm_table(const std::vector<results::Record>& records, std::string_view peer_column = "% cuBLAS");

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

}  // namespace parallax::cli
