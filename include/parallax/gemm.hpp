// Tensor-core GEMM: bf16 / fp16 inputs, fp32 accumulation, bf16 / fp16 / fp32 output, fused epilogue.
//
//   D = act(alpha * op(A) * op(B) + beta * C + bias)          (written over C)
//
// All matrices are ROW-MAJOR with leading dimensions in elements. op(A) is m x k and op(B) is k x n:
//   op_a == kN: A is stored m x k (lda >= k)      op_a == kT: A is stored k x m (lda >= m), op(A) = A^T
//   op_b == kN: B is stored k x n (ldb >= n)      op_b == kT: B is stored n x k (ldb >= k), op(B) = B^T
//   C / D is stored m x n (ldc >= n).
//
// Epilogue order (the cuBLASLt convention): the fp32 accumulator is scaled by alpha, beta * C (old value,
// converted to fp32) is added, then the per-column bias (fp32, length n, bias[j] added to column j), then
// the activation, then one rounding to c_type. beta == 0 never reads C, so C may hold garbage or NaN.
//
// Activations:
//   kGelu: the tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  (not the erf form)
//   kSilu: x * sigmoid(x) = x / (1 + exp(-x))
//
// Kernels ("ladder levels" continuing the FP32 ladder of sgemm.hpp):
//   "wmma"              level 9: nvcuda::wmma 16x16x16 fragments, shared-memory staging (sm_80+)
//   "mma"               level 10: mma.sync m16n8k16 + ldmatrix, cp.async multi-stage pipeline, swizzled
//                       shared memory (sm_80+)
//   "wgmma"             level 11: Hopper wgmma fed by TMA through an mbarrier pipeline (sm_90a)
//   "wgmma-ws"          level 12: warp-specialized: a TMA producer warpgroup, consumer warpgroups, register
//                       reallocation (sm_90a)
//   "wgmma-persistent"  level 13: persistent grid with an L2-friendly tile schedule (sm_90a)
//   The sm_90a levels need operands TMA can describe (16-byte aligned base pointers and leading dimensions
//   that are multiples of 8 elements). Otherwise a big product (>= 2 GFLOP) first copies the offending
//   operand into an aligned stream-ordered buffer (memory-bound, a few percent of the product), and a small
//   one runs level 10: a valid shape is never an error. On a GPU older than sm_90 they throw Error naming
//   the requirement.
//   "cublas"  the peer / reference: cublasGemmEx, CUBLAS_COMPUTE_32F (+ a separate epilogue kernel when
//             bias / activation / mixed output type need it)
//   "auto"              the best parallax kernel for this device and shape (see gemm_dispatch.cpp)
//
// Experimental kernels (gemm_experimental_kernel_names(); accepted by name everywhere a kernel name is, never
// chosen by "auto" and not listed by gemm_kernel_names() until a benchmark shows they pay, issue 4):
//   "wgmma-cluster"             level 14: level 12 in thread-block clusters of 2 CTAs along M, each B tile
//                               loaded once per pair with TMA multicast (sm_90a)
//   "wgmma-persistent-cluster"  level 14 with level 13's persistent grouped schedule (sm_90a)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace parallax {

enum class DType : int { kF32 = 0, kF16 = 1, kBF16 = 2 };
enum class Op : int { kN = 0, kT = 1 };
enum class Epilogue : int { kNone = 0, kGelu = 1, kSilu = 2 };

// "f32", "f16", "bf16" / "N", "T" / "none", "gelu", "silu".
std::string_view dtype_name(DType t);
std::string_view op_name(Op op);
std::string_view epilogue_name(Epilogue e);
// Bytes per element (4, 2, 2).
int dtype_size(DType t);

struct GemmArgs {
  int m = 0;
  int n = 0;
  int k = 0;
  Op op_a = Op::kN;
  Op op_b = Op::kN;
  DType a_type = DType::kBF16;  // bf16 or f16
  DType b_type = DType::kBF16;  // must equal a_type
  DType c_type = DType::kF32;   // bf16, f16 or f32
  const void* a = nullptr;
  std::int64_t lda = 0;
  const void* b = nullptr;
  std::int64_t ldb = 0;
  void* c = nullptr;
  std::int64_t ldc = 0;
  float alpha = 1.f;
  float beta = 0.f;
  const float* bias = nullptr;  // optional: n floats on the device
  Epilogue epilogue = Epilogue::kNone;
  // Cap on the SMs the GEMM may occupy (0: all). Honoured by the persistent level 13 (grid = min(tiles,
  // SMs, max_sms)) and by cuBLAS (cublasSetSmCountTarget); the one-block-per-tile levels ignore it. Used to
  // leave SMs free for a communication kernel (NCCL) that should run concurrently with the GEMM: a
  // persistent grid that fills every SM otherwise makes the collective wait until the GEMM ends.
  int max_sms = 0;
};

// Host-side argument checks; throws InvalidArgument naming the argument and the rule. Rules:
//   m, n, k >= 1; a, b, c non-null and aligned to their element size (bias: 4 bytes);
//   op_a, op_b, epilogue, dtypes are valid enumerators; a_type in {bf16, f16}; b_type == a_type;
//   lda >= (op_a == kN ? k : m); ldb >= (op_b == kN ? n : k); ldc >= n; all leading dims <= INT32_MAX;
//   alpha, beta finite; c overlaps neither a, b nor bias; max_sms >= 0.
void validate(const GemmArgs& args);

enum class GemmKernel : int {
  kAuto = 0,
  kWmma = 9,
  kMma = 10,
  kWgmma = 11,
  kWgmmaWs = 12,
  kWgmmaPersistent = 13,
  kWgmmaCluster = 14,            // experimental
  kWgmmaPersistentCluster = 15,  // experimental
  kCublas = 100
};
// "auto", "wmma", "mma", "wgmma", "wgmma-ws", "wgmma-persistent", "cublas" (in that order).
std::vector<std::string_view> gemm_kernel_names();
// The experimental kernels: "wgmma-cluster", "wgmma-persistent-cluster". Parsed, named, described and run
// like the others; kept out of gemm_kernel_names() (the C ABI's list, tables that run "everything").
std::vector<std::string_view> gemm_experimental_kernel_names();
std::string_view gemm_kernel_name(GemmKernel kernel);
// One line on what the kernel adds over the level before it (for tables).
std::string_view gemm_kernel_description(GemmKernel kernel);
// Oldest GPU generation (compute capability major) the kernel runs on: 8 for wmma / mma, 9 for the wgmma
// levels, 0 for auto / cublas.
int gemm_kernel_min_cc_major(GemmKernel kernel);
// Accepts the names above, the experimental names, and the level numbers "9".."13"; throws
// InvalidArgument("kernel", ... valid: ...; experimental: ...).
GemmKernel parse_gemm_kernel(std::string_view text);

// Runs `kernel` on `stream` (asynchronous). Parses the name and validates the arguments before anything
// touches the device.
void gemm(const GemmArgs& args, cudaStream_t stream = nullptr, std::string_view kernel = "auto");
void gemm(const GemmArgs& args, cudaStream_t stream, GemmKernel kernel);

// The peer / reference: cublasGemmEx with CUBLAS_COMPUTE_32F (split-K reductions stay in fp32). When a bias,
// an activation, or an output type cuBLAS cannot write directly is asked for, the product goes to an fp32
// scratch buffer (stream-ordered allocation) and a small elementwise kernel applies the same epilogue as
// the parallax kernels.
void gemm_cublas(const GemmArgs& args, cudaStream_t stream = nullptr);

}  // namespace parallax
