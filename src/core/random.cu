#include <random>

#include "parallax/core.hpp"
#include "parallax/random.hpp"

namespace parallax {
namespace {

// splitmix64 finalizer: a bijective mix, so (seed, index) pairs never collide within one seed.
__host__ __device__ inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__host__ __device__ inline float uniform_at(std::uint64_t seed, std::uint64_t index, float lo, float hi) {
  const std::uint64_t bits = mix64(seed ^ mix64(index));
  const float unit = static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);  // 24 bits -> [0, 1)
  return lo + (hi - lo) * unit;
}

template <typename T>
__global__ void fill_uniform_kernel(T* data, std::size_t count, std::uint64_t seed, float lo, float hi) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    data[i] = static_cast<T>(uniform_at(seed, i, lo, hi));
  }
}

template <typename T>
void fill(T* data, std::size_t count, std::uint64_t seed, float lo, float hi, cudaStream_t stream) {
  if (count == 0) return;
  PX_REQUIRE(data != nullptr, "data", "must be a non-null device pointer");
  const int threads = 256;
  const std::size_t blocks = std::min<std::size_t>((count + threads - 1) / threads, 65536);
  fill_uniform_kernel<T><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(data, count, seed, lo, hi);
  PX_CUDA_CHECK_LAUNCH();
}

}  // namespace

void fill_uniform(float* d, std::size_t n, std::uint64_t s, float lo, float hi, cudaStream_t st) { fill(d, n, s, lo, hi, st); }
void fill_uniform(__nv_bfloat16* d, std::size_t n, std::uint64_t s, float lo, float hi, cudaStream_t st) { fill(d, n, s, lo, hi, st); }
void fill_uniform(__half* d, std::size_t n, std::uint64_t s, float lo, float hi, cudaStream_t st) { fill(d, n, s, lo, hi, st); }

float host_uniform(std::uint64_t seed, std::uint64_t index, float lo, float hi) { return uniform_at(seed, index, lo, hi); }

std::uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace parallax
