#include <algorithm>
#include <cmath>
#include <numeric>

#include "parallax/bench.hpp"
#include "parallax/core.hpp"

namespace parallax::bench {

double median(std::vector<double> samples) {
  PX_REQUIRE(!samples.empty(), "samples", "must not be empty");
  const std::size_t mid = samples.size() / 2;
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(mid), samples.end());
  const double upper = samples[mid];
  if (samples.size() % 2 == 1) return upper;
  const double lower = *std::max_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(mid));
  return 0.5 * (lower + upper);
}

int rotations_for_l2(std::size_t bytes_per_set, std::size_t l2_bytes, int max_rotations) {
  PX_REQUIRE(max_rotations >= 1, "max_rotations", "must be >= 1 (got " + std::to_string(max_rotations) + ")");
  if (bytes_per_set == 0) return 1;
  const std::size_t target = 2 * l2_bytes;
  // Enough copies that the whole rotation exceeds 2x L2: by the time a copy comes round again it has been
  // evicted. One more than the quotient so that exact multiples are also strictly larger.
  const std::size_t needed = target / bytes_per_set + 1;
  return static_cast<int>(std::clamp<std::size_t>(needed, 1, static_cast<std::size_t>(max_rotations)));
}

double Work::floor_ms(double compute_gflops, double bandwidth_gbps) const {
  const double compute_ms = compute_gflops > 0 ? flops / (compute_gflops * 1e6) : 0;
  const double memory_ms = bandwidth_gbps > 0 ? bytes / (bandwidth_gbps * 1e6) : 0;
  return std::max(compute_ms, memory_ms);
}

Timing time_gpu(const std::function<void(cudaStream_t, int)>& run, int rotations, const Options& options,
                cudaStream_t stream) {
  PX_REQUIRE(rotations >= 1, "rotations", "must be >= 1 (got " + std::to_string(rotations) + ")");
  PX_REQUIRE(options.warmup >= 0, "options.warmup", "must be >= 0 (got " + std::to_string(options.warmup) + ")");
  PX_REQUIRE(options.repetitions >= 1, "options.repetitions",
             "must be >= 1 (got " + std::to_string(options.repetitions) + ")");

  DeviceBuffer<unsigned char> flush;
  if (options.flush_l2) flush = DeviceBuffer<unsigned char>(2 * device_info().l2_bytes);

  int call = 0;
  int repetitions = options.repetitions;
  if (options.budget_ms > 0) {
    // Warm up one run at a time while it is cheap, and size the timed loop from the last warm-up's time.
    Event begin, end;
    double last_ms = 0, spent_ms = 0;
    for (int i = 0; i < std::max(options.warmup, 1); ++i) {
      begin.record(stream);
      run(stream, call++ % rotations);
      end.record(stream);
      end.synchronize();
      last_ms = end.elapsed_since(begin);
      spent_ms += last_ms;
      if (spent_ms > 0.25 * options.budget_ms) break;
    }
    const double left_ms = std::max(0.0, options.budget_ms - spent_ms);
    const int affordable = last_ms > 0 ? static_cast<int>(left_ms / last_ms) : repetitions;
    repetitions = std::clamp(affordable, std::min(options.min_repetitions, repetitions), repetitions);
  } else {
    for (int i = 0; i < options.warmup; ++i) run(stream, call++ % rotations);
  }
  PX_CUDA_CHECK(cudaStreamSynchronize(stream));

  // One event pair per repetition, all recorded up front and read at the end: reading an event's time
  // forces a host synchronization, which would leave the GPU idle between runs.
  std::vector<Event> starts(static_cast<std::size_t>(repetitions));
  std::vector<Event> stops(static_cast<std::size_t>(repetitions));
  for (int i = 0; i < repetitions; ++i) {
    if (options.flush_l2) flush.fill_bytes(i & 0xFF, stream);
    starts[static_cast<std::size_t>(i)].record(stream);
    run(stream, call++ % rotations);
    stops[static_cast<std::size_t>(i)].record(stream);
  }
  PX_CUDA_CHECK(cudaGetLastError());
  stops.back().synchronize();

  std::vector<double> samples;
  for (int i = 0; i < repetitions; ++i)
    samples.push_back(stops[static_cast<std::size_t>(i)].elapsed_since(starts[static_cast<std::size_t>(i)]));
  return timing_from_samples(std::move(samples));
}

Timing timing_from_samples(std::vector<double> samples_ms) {
  PX_REQUIRE(!samples_ms.empty(), "samples_ms", "must not be empty");
  Timing t;
  t.repetitions = static_cast<int>(samples_ms.size());
  t.median_ms = median(samples_ms);
  t.min_ms = *std::min_element(samples_ms.begin(), samples_ms.end());
  t.max_ms = *std::max_element(samples_ms.begin(), samples_ms.end());
  t.mean_ms = std::accumulate(samples_ms.begin(), samples_ms.end(), 0.0) / static_cast<double>(samples_ms.size());
  t.samples_ms = std::move(samples_ms);
  return t;
}

int interleaved_repetitions(const Options& options, double spent_ms, double round_ms) {
  PX_REQUIRE(options.repetitions >= 1, "options.repetitions",
             "must be >= 1 (got " + std::to_string(options.repetitions) + ")");
  if (options.budget_ms <= 0 || round_ms <= 0) return options.repetitions;
  const double left_ms = std::max(0.0, options.budget_ms - spent_ms);
  const int affordable = static_cast<int>(left_ms / round_ms);
  return std::clamp(affordable, std::min(options.min_repetitions, options.repetitions), options.repetitions);
}

std::vector<Timing> time_gpu_interleaved(const std::vector<std::function<void(cudaStream_t, int)>>& runs,
                                         int rotations, const Options& options, cudaStream_t stream) {
  PX_REQUIRE(!runs.empty(), "runs", "must name at least one function to time");
  PX_REQUIRE(rotations >= 1, "rotations", "must be >= 1 (got " + std::to_string(rotations) + ")");
  PX_REQUIRE(options.warmup >= 0, "options.warmup", "must be >= 0 (got " + std::to_string(options.warmup) + ")");
  PX_REQUIRE(options.repetitions >= 1, "options.repetitions",
             "must be >= 1 (got " + std::to_string(options.repetitions) + ")");
  const std::size_t n = runs.size();
  DeviceBuffer<unsigned char> flush;
  if (options.flush_l2) flush = DeviceBuffer<unsigned char>(2 * device_info().l2_bytes);

  // One call counter for all: consecutive runs (of different functions) use different input copies, so none
  // finds its inputs left in L2 by the run before it.
  int call = 0;
  // Warm-up rounds, each function once per round, timed so that the budget can size the timed rounds.
  double spent_ms = 0, round_ms = 0;
  std::vector<Event> begin(n), end(n);
  for (int w = 0; w < std::max(options.warmup, 1); ++w) {
    for (std::size_t j = 0; j < n; ++j) {
      begin[j].record(stream);
      runs[j](stream, call++ % rotations);
      end[j].record(stream);
    }
    end[n - 1].synchronize();
    round_ms = 0;
    for (std::size_t j = 0; j < n; ++j) round_ms += end[j].elapsed_since(begin[j]);
    spent_ms += round_ms;
    if (options.budget_ms > 0 && spent_ms > 0.25 * options.budget_ms) break;
  }
  const int repetitions = interleaved_repetitions(options, spent_ms, round_ms);
  PX_CUDA_CHECK(cudaStreamSynchronize(stream));

  std::vector<std::vector<Event>> starts, stops;  // Event is neither copyable nor movable: built in place
  starts.reserve(n);
  stops.reserve(n);
  for (std::size_t j = 0; j < n; ++j) {
    starts.emplace_back(static_cast<std::size_t>(repetitions));
    stops.emplace_back(static_cast<std::size_t>(repetitions));
  }
  for (int i = 0; i < repetitions; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      if (options.flush_l2) flush.fill_bytes((i * static_cast<int>(n) + static_cast<int>(j)) & 0xFF, stream);
      starts[j][static_cast<std::size_t>(i)].record(stream);
      runs[j](stream, call++ % rotations);
      stops[j][static_cast<std::size_t>(i)].record(stream);
    }
  PX_CUDA_CHECK(cudaGetLastError());
  stops[n - 1].back().synchronize();

  std::vector<Timing> out;
  for (std::size_t j = 0; j < n; ++j) {
    std::vector<double> samples;
    for (int i = 0; i < repetitions; ++i)
      samples.push_back(stops[j][static_cast<std::size_t>(i)].elapsed_since(starts[j][static_cast<std::size_t>(i)]));
    out.push_back(timing_from_samples(std::move(samples)));
  }
  return out;
}

}  // namespace parallax::bench
