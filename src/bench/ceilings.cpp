// The measured roofs: every "% of ceiling" in parallax is relative to these numbers, taken on the GPU at
// hand, not to datasheet peaks.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include "core/cublas_handle.hpp"
#include "parallax/bench.hpp"
#include "parallax/core.hpp"
#include "parallax/random.hpp"
#include "parallax/sgemm.hpp"

namespace parallax::bench {

Ceilings measure_ceilings(int gemm_size, const Options& options) {
  PX_REQUIRE(gemm_size >= 256, "gemm_size", "must be >= 256 (got " + std::to_string(gemm_size) + ")");
  const DeviceInfo info = device_info();
  Stream stream;
  Ceilings c;
  c.gemm_size = gemm_size;

  {  // Copy bandwidth: far larger than L2 so it measures DRAM; counted as bytes read + bytes written.
    const std::size_t bytes = std::max<std::size_t>(std::size_t{1} << 30, 16 * info.l2_bytes);
    DeviceBuffer<unsigned char> src(bytes), dst(bytes);
    src.fill_bytes(0x3C, stream);
    const Timing t = time_gpu(
        [&](cudaStream_t s, int) {
          PX_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, s));
        },
        1, options, stream);
    c.copy_gbps = Work{0, 2.0 * bytes}.gbytes_per_s(t.median_ms);
  }

  const std::size_t n = static_cast<std::size_t>(gemm_size);
  const double flops = 2.0 * n * n * n;
  {  // cuBLAS SGEMM, FP32 (TF32 off), random data (zeros run measurably faster).
    DeviceBuffer<float> a(n * n), b(n * n), out(n * n);
    fill_uniform(a.data(), a.size(), fresh_seed(), -1, 1, stream);
    fill_uniform(b.data(), b.size(), fresh_seed(), -1, 1, stream);
    SgemmArgs args{gemm_size, gemm_size, gemm_size, 1.f, a.data(), gemm_size, b.data(), gemm_size, 0.f,
                   out.data(), gemm_size};
    const Timing t = time_gpu([&](cudaStream_t s, int) { sgemm_cublas(args, s); }, 1, options, stream);
    c.cublas_sgemm_gflops = Work{flops, 0}.gflops_per_s(t.median_ms);
  }
  {  // cuBLAS BF16 tensor cores: bf16 in/out, fp32 accumulate.
    DeviceBuffer<__nv_bfloat16> a(n * n), b(n * n), out(n * n);
    fill_uniform(a.data(), a.size(), fresh_seed(), -1, 1, stream);
    fill_uniform(b.data(), b.size(), fresh_seed(), -1, 1, stream);
    const float alpha = 1.f, beta = 0.f;
    const Timing t = time_gpu(
        [&](cudaStream_t s, int) {
          PX_CUBLAS_CHECK(cublasGemmEx(detail::cublas_handle(s), CUBLAS_OP_N, CUBLAS_OP_N, gemm_size, gemm_size,
                                       gemm_size, &alpha, b.data(), CUDA_R_16BF, gemm_size, a.data(), CUDA_R_16BF,
                                       gemm_size, &beta, out.data(), CUDA_R_16BF, gemm_size,
                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        },
        1, options, stream);
    c.cublas_bf16_gflops = Work{flops, 0}.gflops_per_s(t.median_ms);
  }
  return c;
}

}  // namespace parallax::bench
