// Level 1: naive. One thread computes one element of C by walking a row of A and a column of B.
//
// Consecutive threads (threadIdx.x) map to consecutive *rows* of C here, so within a warp the 32 loads of A
// hit 32 different rows (32 separate memory transactions) and the B loads are all to the same address.
// This is the baseline every later level is measured against; level 2 fixes exactly this mapping.
#include "common.cuh"
#include "launchers.hpp"
#include "parallax/core.hpp"

namespace parallax::detail {
namespace {

__global__ void sgemm_naive_kernel(int m, int n, int k, float alpha, const float* __restrict__ a, int lda,
                                   const float* __restrict__ b, int ldb, float beta, float* __restrict__ c,
                                   int ldc) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  const int col = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= m || col >= n) return;
  float acc = 0.f;
  for (int i = 0; i < k; ++i) acc += a[static_cast<int64_t>(row) * lda + i] * b[static_cast<int64_t>(i) * ldb + col];
  store_c(&c[static_cast<int64_t>(row) * ldc + col], acc, alpha, beta);
}

}  // namespace

void launch_sgemm_naive(const SgemmArgs& p, cudaStream_t stream) {
  const dim3 block(32, 32);
  const dim3 grid(ceil_div(p.m, 32), ceil_div(p.n, 32));
  sgemm_naive_kernel<<<grid, block, 0, stream>>>(p.m, p.n, p.k, p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, p.c,
                                                 p.ldc);
  PX_CUDA_CHECK_LAUNCH();
}

}  // namespace parallax::detail
