// The one timing harness of parallax. Everything that reports a time (the ladder, tensor-core GEMM,
// attention, collectives, tensor parallelism, the report) goes through time_gpu().
//
// How it measures: CUDA events recorded around each run on the given stream, `warmup` untimed runs first
// (module load, cuBLAS heuristics, clocks ramping up), then `repetitions` timed runs; the median is the
// number to quote, min/max show the spread. Inputs that fit in L2 would be served from cache on every run
// after the first, so callers keep several copies of their inputs and the harness cycles through them
// (`rotations`, sized by rotations_for_l2) or, when copies are too large, flushes L2 between runs.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace parallax::bench {

struct Options {
  int warmup = 5;          // untimed runs before timing
  int repetitions = 30;    // timed runs; median reported
  bool flush_l2 = false;   // write a 2x-L2 scratch buffer between runs (when rotation is not possible)
  // Time budget for the whole measurement (0 = none). Slow kernels (the naive level at 8192^3 takes seconds
  // a run) then get fewer warm-ups and repetitions, never fewer than 1 warm-up and min_repetitions runs.
  double budget_ms = 0;
  int min_repetitions = 3;
};

struct Timing {
  double median_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  double mean_ms = 0;
  int repetitions = 0;
  std::vector<double> samples_ms;  // in run order
};

// Times `run(stream, rotation)` where rotation cycles 0..rotations-1 across calls (warm-up included).
// `run` must only enqueue work on `stream`. Throws parallax::Error on any CUDA failure.
Timing time_gpu(const std::function<void(cudaStream_t stream, int rotation)>& run, int rotations,
                const Options& options, cudaStream_t stream);

// Times several functions against each other in ROUNDS: round i runs runs[0], runs[1], ... once each, so every
// function sees the same clocks and temperature. A large GEMM at full power makes an H100's clock drift over
// seconds; timed one after the other, a kernel and its peer can land on different sides of such a drift
// (seen 2026-11-23: one kernel's median 4.73 and 5.01 ms in one run). Quoting "x% of the peer" from
// interleaved samples removes that bias. Warm-up and budget as time_gpu (the budget sizes whole rounds);
// one result per function, in order.
std::vector<Timing> time_gpu_interleaved(const std::vector<std::function<void(cudaStream_t stream, int rotation)>>& runs,
                                         int rotations, const Options& options, cudaStream_t stream);

// Timed rounds that fit `options.budget_ms` after `spent_ms` of warm-up, one round costing `round_ms`: between
// min(min_repetitions, repetitions) and repetitions; `repetitions` when there is no budget. (Exposed for tests.)
int interleaved_repetitions(const Options& options, double spent_ms, double round_ms);

// The statistics of a sample (median, min, max, mean, in-order samples). Throws on an empty sample.
Timing timing_from_samples(std::vector<double> samples_ms);

// Number of copies of a working set of `bytes_per_set` bytes such that cycling through them touches more
// than twice the L2 size; at least 1, at most `max_rotations`.
int rotations_for_l2(std::size_t bytes_per_set, std::size_t l2_bytes, int max_rotations = 64);

// Median of a sample (the harness's statistic; exposed for tests and for host-timed measurements).
double median(std::vector<double> samples);

// Work done by one run, for rates and roofline placement.
struct Work {
  double flops = 0;  // floating-point operations (a multiply-add counts 2)
  double bytes = 0;  // fewest bytes that must cross device memory (each input read once, output written once)

  double arithmetic_intensity() const { return bytes > 0 ? flops / bytes : 0; }
  double gflops_per_s(double ms) const { return ms > 0 ? flops / (ms * 1e6) : 0; }
  double gbytes_per_s(double ms) const { return ms > 0 ? bytes / (ms * 1e6) : 0; }
  // The time floor from the two measured roofs: max(flops / compute roof, bytes / bandwidth roof), in ms.
  double floor_ms(double compute_gflops, double bandwidth_gbps) const;
};

// Measured roofs of the current GPU (what `parallax info` prints; every "% of ceiling" uses these).
struct Ceilings {
  double copy_gbps = 0;            // device-to-device copy, bytes read + bytes written
  double cublas_sgemm_gflops = 0;  // cublasSgemm FP32 (TF32 off) at size^3
  double cublas_bf16_gflops = 0;   // cublasGemmEx bf16 in, fp32 accumulate, bf16 out, at size^3
  int gemm_size = 0;
};
// Measures the roofs (a few seconds at size 8192). `gemm_size` may be lowered for quick runs.
Ceilings measure_ceilings(int gemm_size = 8192, const Options& options = {});

}  // namespace parallax::bench
