// Device-side random fills for tests and benchmarks (counter-based hash: any seed, any size, no state).
// Tests draw a fresh seed every run and print it on failure so a failing case can be replayed.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace parallax {

// Fills `count` elements with values uniform in [lo, hi) derived from (seed, index).
void fill_uniform(float* data, std::size_t count, std::uint64_t seed, float lo = -1.f, float hi = 1.f,
                  cudaStream_t stream = nullptr);
void fill_uniform(__nv_bfloat16* data, std::size_t count, std::uint64_t seed, float lo = -1.f, float hi = 1.f,
                  cudaStream_t stream = nullptr);
void fill_uniform(__half* data, std::size_t count, std::uint64_t seed, float lo = -1.f, float hi = 1.f,
                  cudaStream_t stream = nullptr);

// The same hash on the host: host_uniform(seed, i, lo, hi) equals element i of a device fill.
float host_uniform(std::uint64_t seed, std::uint64_t index, float lo = -1.f, float hi = 1.f);

// A seed that differs from run to run (std::random_device), for "fresh random inputs every run".
std::uint64_t fresh_seed();

}  // namespace parallax
