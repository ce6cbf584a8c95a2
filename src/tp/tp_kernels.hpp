// Small elementwise / reduction kernels of the tensor-parallel layers (tp_kernels.cu).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace parallax::tp::detail {

// out[j] = sum_{i < rows} in[i * ld + j] for j < cols, in fp32 (the bias gradient db = 1ᵀ dY). out is
// overwritten. Each block owns 32 columns x a slice of rows, partial sums go out with one atomicAdd per
// column per block, so out is zeroed first on `stream`.
void column_sum(const __nv_bfloat16* in, std::int64_t ld, std::int64_t rows, std::int64_t cols, float* out,
                cudaStream_t stream);
// a[i, j] = gelu(h[i, j]) (tanh form, the GEMM epilogue's kGelu), rows x cols, leading dimension ld for both.
void gelu_forward(const __nv_bfloat16* h, __nv_bfloat16* a, std::int64_t ld, std::int64_t rows, std::int64_t cols,
                  cudaStream_t stream);
// dh[i, j] = da[i, j] * gelu'(h[i, j]) (derivative of the same tanh form), computed in fp32, rounded once;
// dh may alias da.
void gelu_backward(const __nv_bfloat16* da, const __nv_bfloat16* h, __nv_bfloat16* dh, std::int64_t ld,
                   std::int64_t rows, std::int64_t cols, cudaStream_t stream);

// Host-side mirrors of the device math (for tests): gelu(x) and gelu'(x), tanh form, in double.
double gelu_reference(double x);
double gelu_derivative_reference(double x);

}  // namespace parallax::tp::detail
