// The peer and reference of the tensor-core levels: cublasGemmEx with fp32 compute.
//
// Row-major to column-major: a row-major R x C matrix with leading dimension ld is, read column-major, its
// C x R transpose with the same ld. So row-major D = op(A) op(B) is column-major D^T = op(B)^T op(A)^T:
// pass B first with transa = op_b and A second with transb = op_a, and swap m and n.
//
// cublasGemmEx writes alpha*AB + beta*C directly when the output type is the input type or fp32 and no
// bias / activation is asked for. Otherwise the product alpha*AB goes to an fp32 scratch buffer and
// tc_epilogue_kernel applies beta*C + bias, the activation and the one rounding to c_type with the same
// code as the parallax kernels (epilogue.cuh), so the two paths round at the same point.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "core/cublas_handle.hpp"
#include "gemm/tc/epilogue.cuh"
#include "parallax/core.hpp"
#include "parallax/gemm.hpp"

namespace parallax {
namespace detail {
namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kF16: return CUDA_R_16F;
    case DType::kBF16: return CUDA_R_16BF;
  }
  throw Error("gemm_cublas: unsupported dtype");
}

cublasOperation_t cublas_op(Op op) { return op == Op::kT ? CUBLAS_OP_T : CUBLAS_OP_N; }

// d[r][c] = act(acc[r][c] + beta * d[r][c] + bias[c]); acc is m x n fp32, already scaled by alpha.
template <typename Out>
__global__ void tc_epilogue_kernel(int m, int n, const float* __restrict__ acc, Out* __restrict__ d,
                                   std::int64_t ldd, EpilogueParams ep) {
  const std::int64_t total = static_cast<std::int64_t>(m) * n;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int r = static_cast<int>(i / n), c = static_cast<int>(i % n);
    epilogue_store(d + r * ldd + c, acc[i], c, ep);
  }
}

template <typename Out>
void launch_epilogue(int m, int n, const float* acc, void* d, std::int64_t ldd, const EpilogueParams& ep,
                     cudaStream_t stream) {
  const std::int64_t total = static_cast<std::int64_t>(m) * n;
  const int threads = 256;
  const std::int64_t blocks = (total + threads - 1) / threads;
  const unsigned grid = static_cast<unsigned>(blocks < 65536 ? blocks : 65536);  // grid-stride loop
  tc_epilogue_kernel<Out><<<grid, threads, 0, stream>>>(m, n, acc, static_cast<Out*>(d), ldd, ep);
  PX_CUDA_CHECK_LAUNCH();
}

}  // namespace
}  // namespace detail

void gemm_cublas(const GemmArgs& p, cudaStream_t stream) {
  validate(p);
  cublasHandle_t handle = detail::cublas_handle(stream);
  // fp32 compute; forbid reduced-precision (fp16) reductions in split-K for fp16 outputs. Every parallax
  // entry point that uses the shared handle sets the math mode it needs before its call.
  PX_CUBLAS_CHECK(cublasSetMathMode(
      handle, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  // The shared handle keeps its SM target between calls: set it every time (0 restores "all SMs").
  PX_CUBLAS_CHECK(cublasSetSmCountTarget(handle, p.max_sms));
  const cudaDataType_t in = detail::cuda_type(p.a_type);
  const int lda = static_cast<int>(p.lda), ldb = static_cast<int>(p.ldb);  // validate(): <= INT32_MAX

  const bool direct = p.bias == nullptr && p.epilogue == Epilogue::kNone &&
                      (p.c_type == p.a_type || p.c_type == DType::kF32);
  if (direct) {
    PX_CUBLAS_CHECK(cublasGemmEx(handle, detail::cublas_op(p.op_b), detail::cublas_op(p.op_a), p.n, p.m, p.k,
                                 &p.alpha, p.b, in, ldb, p.a, in, lda, &p.beta, p.c, detail::cuda_type(p.c_type),
                                 static_cast<int>(p.ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return;
  }

  // Scratch: alpha * op(A) op(B) in fp32, m x n packed (ld = n). Stream-ordered, so no device sync.
  float* acc = nullptr;
  const std::size_t bytes = static_cast<std::size_t>(p.m) * static_cast<std::size_t>(p.n) * sizeof(float);
  PX_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&acc), bytes, stream));
  try {
    const float zero = 0.f;
    PX_CUBLAS_CHECK(cublasGemmEx(handle, detail::cublas_op(p.op_b), detail::cublas_op(p.op_a), p.n, p.m, p.k,
                                 &p.alpha, p.b, in, ldb, p.a, in, lda, &zero, acc, CUDA_R_32F, p.n,
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    const detail::EpilogueParams ep{1.f, p.beta, p.bias, p.epilogue};  // alpha already applied
    switch (p.c_type) {
      case DType::kF32: detail::launch_epilogue<float>(p.m, p.n, acc, p.c, p.ldc, ep, stream); break;
      case DType::kF16: detail::launch_epilogue<__half>(p.m, p.n, acc, p.c, p.ldc, ep, stream); break;
      case DType::kBF16: detail::launch_epilogue<__nv_bfloat16>(p.m, p.n, acc, p.c, p.ldc, ep, stream); break;
    }
  } catch (...) {
    cudaFreeAsync(acc, stream);
    throw;
  }
  PX_CUDA_CHECK(cudaFreeAsync(acc, stream));
}

}  // namespace parallax
