// Kernels of the tensor-parallel layers: the bias-gradient column sum and the GELU forward / backward of the
// MLP (see tp_kernels.hpp). Memory-bound and tiny next to the GEMMs; written for clarity, coalesced along
// rows (consecutive threads read consecutive columns).
#include "tp/tp_kernels.hpp"

#include <cmath>

#include "parallax/core.hpp"

namespace parallax::tp::detail {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluC = 0.044715f;

// The tanh-form GELU of gemm.hpp: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
__device__ __forceinline__ float gelu(float x) {
  const float u = kSqrt2OverPi * (x + kGeluC * x * x * x);
  return 0.5f * x * (1.f + tanhf(u));
}
// d/dx: 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
__device__ __forceinline__ float gelu_grad(float x) {
  const float u = kSqrt2OverPi * (x + kGeluC * x * x * x);
  const float th = tanhf(u);
  return 0.5f * (1.f + th) + 0.5f * x * (1.f - th * th) * kSqrt2OverPi * (1.f + 3.f * kGeluC * x * x);
}

constexpr int kColsPerBlock = 32;
constexpr int kRowsPerThread = 64;

// Block (32 x 8 threads): threadIdx.x picks the column, threadIdx.y strides over a slice of rows.
__global__ void column_sum_kernel(const __nv_bfloat16* in, std::int64_t ld, std::int64_t rows, std::int64_t cols,
                                  float* out) {
  __shared__ float partial[8][kColsPerBlock + 1];
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * kColsPerBlock + threadIdx.x;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.y) * kRowsPerThread * blockDim.y;
  const std::int64_t row_end = min(rows, row0 + static_cast<std::int64_t>(kRowsPerThread) * blockDim.y);
  float sum = 0.f;
  if (col < cols)
    for (std::int64_t r = row0 + threadIdx.y; r < row_end; r += blockDim.y) sum += __bfloat162float(in[r * ld + col]);
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    for (int y = 1; y < static_cast<int>(blockDim.y); ++y) sum += partial[y][threadIdx.x];
    atomicAdd(out + col, sum);
  }
}

__global__ void gelu_forward_kernel(const __nv_bfloat16* h, __nv_bfloat16* a, std::int64_t ld, std::int64_t rows,
                                    std::int64_t cols) {
  const std::int64_t total = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t off = (i / cols) * ld + i % cols;
    a[off] = __float2bfloat16(gelu(__bfloat162float(h[off])));
  }
}

__global__ void gelu_backward_kernel(const __nv_bfloat16* da, const __nv_bfloat16* h, __nv_bfloat16* dh,
                                     std::int64_t ld, std::int64_t rows, std::int64_t cols) {
  const std::int64_t total = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t off = (i / cols) * ld + i % cols;
    dh[off] = __float2bfloat16(__bfloat162float(da[off]) * gelu_grad(__bfloat162float(h[off])));
  }
}

unsigned grid_for(std::int64_t total, int threads) {
  const std::int64_t blocks = (total + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65536 ? blocks : 65536);  // grid-stride loops cover the rest
}

}  // namespace

void column_sum(const __nv_bfloat16* in, std::int64_t ld, std::int64_t rows, std::int64_t cols, float* out,
                cudaStream_t stream) {
  if (cols <= 0) return;
  PX_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<std::size_t>(cols) * sizeof(float), stream));
  if (rows <= 0) return;
  const dim3 block(kColsPerBlock, 8);
  const std::int64_t row_blocks = (rows + kRowsPerThread * 8 - 1) / (kRowsPerThread * 8);
  const dim3 grid(static_cast<unsigned>((cols + kColsPerBlock - 1) / kColsPerBlock),
                  static_cast<unsigned>(row_blocks));
  column_sum_kernel<<<grid, block, 0, stream>>>(in, ld, rows, cols, out);
  PX_CUDA_CHECK_LAUNCH();
}

void gelu_forward(const __nv_bfloat16* h, __nv_bfloat16* a, std::int64_t ld, std::int64_t rows, std::int64_t cols,
                  cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  gelu_forward_kernel<<<grid_for(rows * cols, 256), 256, 0, stream>>>(h, a, ld, rows, cols);
  PX_CUDA_CHECK_LAUNCH();
}

void gelu_backward(const __nv_bfloat16* da, const __nv_bfloat16* h, __nv_bfloat16* dh, std::int64_t ld,
                   std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  gelu_backward_kernel<<<grid_for(rows * cols, 256), 256, 0, stream>>>(da, h, dh, ld, rows, cols);
  PX_CUDA_CHECK_LAUNCH();
}

double gelu_reference(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}

double gelu_derivative_reference(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  const double u = k * (x + 0.044715 * x * x * x);
  const double th = std::tanh(u);
  return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

}  // namespace parallax::tp::detail
