// Host side of the tensor-core GEMM: names, argument validation, dispatch to the level launchers.
// No device code here; kernels live under tc/, one file per level (the cuBLAS peer in tc/cublas_peer.cu).
#include <array>
#include <functional>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "gemm/tc/launchers.hpp"
#include "parallax/core.hpp"
#include "parallax/gemm.hpp"

namespace parallax {
namespace {

struct KernelEntry {
  GemmKernel kernel;
  std::string_view name;
  int min_cc_major;
  std::string_view description;
  bool experimental = false;  // parsed and run, but not in gemm_kernel_names() and never chosen by auto
};
constexpr std::array<KernelEntry, 9> kKernels{{
    {GemmKernel::kAuto, "auto", 0, "the best parallax kernel for this GPU and shape"},
    {GemmKernel::kWmma, "wmma", 8, "tensor cores through nvcuda::wmma fragments"},
    {GemmKernel::kMma, "mma", 8, "mma.sync + ldmatrix, cp.async pipeline, swizzled smem"},
    {GemmKernel::kWgmma, "wgmma", 9, "Hopper wgmma fed by TMA + mbarrier pipeline"},
    {GemmKernel::kWgmmaWs, "wgmma-ws", 9, "warp-specialized producer/consumers, setmaxnreg"},
    {GemmKernel::kWgmmaPersistent, "wgmma-persistent", 9, "persistent grid, L2-friendly tile order"},
    {GemmKernel::kCublas, "cublas", 0, "cublasGemmEx, fp32 accumulation"},
    {GemmKernel::kWgmmaCluster, "wgmma-cluster", 9, "2-CTA clusters along M, B multicast by TMA", true},
    {GemmKernel::kWgmmaPersistentCluster, "wgmma-persistent-cluster", 9,
     "persistent 2-CTA clusters, B multicast by TMA", true},
}};

std::string kernel_list(bool experimental) {
  std::string s;
  for (const auto& e : kKernels)
    if (e.experimental == experimental) s += std::string(s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}
std::string valid_kernel_list() { return kernel_list(false) + "; experimental: " + kernel_list(true); }

bool valid_dtype(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }
bool valid_op(Op op) { return op == Op::kN || op == Op::kT; }
bool valid_epilogue(Epilogue e) { return e == Epilogue::kNone || e == Epilogue::kGelu || e == Epilogue::kSilu; }

std::string got(const char* name, long long v) { return std::string(" (got ") + name + "=" + std::to_string(v) + ")"; }
// " (got lda=5, k=6)": the bad value and the one it is compared with.
std::string got2(const char* name, long long v, const char* other, long long w) {
  return std::string(" (got ") + name + "=" + std::to_string(v) + ", " + other + "=" + std::to_string(w) + ")";
}
std::string got_dtype(const char* name, DType t) {
  return std::string(" (got ") + name + "=" +
         (valid_dtype(t) ? std::string(dtype_name(t)) : std::to_string(static_cast<int>(t))) + ")";
}

// Half-open byte range touched by a row-major rows x cols matrix with leading dimension ld.
struct ByteRange {
  std::uintptr_t begin, end;
};
ByteRange matrix_range(const void* ptr, int rows, int cols, std::int64_t ld, int elem) {
  const auto begin = reinterpret_cast<std::uintptr_t>(ptr);
  const auto elements = static_cast<std::uintptr_t>(rows - 1) * static_cast<std::uintptr_t>(ld) +
                        static_cast<std::uintptr_t>(cols);
  return {begin, begin + elements * static_cast<std::uintptr_t>(elem)};
}
bool overlaps(ByteRange x, ByteRange y) { return x.begin < y.end && y.begin < x.end; }
bool aligned(const void* p, int bytes) { return reinterpret_cast<std::uintptr_t>(p) % static_cast<unsigned>(bytes) == 0; }

}  // namespace

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
  }
  throw InvalidArgument("dtype", "must be f32, f16 or bf16 (got " + std::to_string(static_cast<int>(t)) + ")");
}
std::string_view op_name(Op op) {
  switch (op) {
    case Op::kN: return "N";
    case Op::kT: return "T";
  }
  throw InvalidArgument("op", "must be N or T (got " + std::to_string(static_cast<int>(op)) + ")");
}
std::string_view epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::kNone: return "none";
    case Epilogue::kGelu: return "gelu";
    case Epilogue::kSilu: return "silu";
  }
  throw InvalidArgument("epilogue", "must be none, gelu or silu (got " + std::to_string(static_cast<int>(e)) + ")");
}
int dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16:
    case DType::kBF16: return 2;
  }
  return static_cast<int>(dtype_name(t).size());  // throws InvalidArgument for a value outside the enum
}

void validate(const GemmArgs& p) {
  PX_REQUIRE(p.m >= 1, "m", "must be >= 1" + got("m", p.m));
  PX_REQUIRE(p.n >= 1, "n", "must be >= 1" + got("n", p.n));
  PX_REQUIRE(p.k >= 1, "k", "must be >= 1" + got("k", p.k));
  PX_REQUIRE(valid_op(p.op_a), "op_a", "must be Op::kN or Op::kT" + got("op_a", static_cast<int>(p.op_a)));
  PX_REQUIRE(valid_op(p.op_b), "op_b", "must be Op::kN or Op::kT" + got("op_b", static_cast<int>(p.op_b)));
  PX_REQUIRE(valid_epilogue(p.epilogue), "epilogue",
             "must be Epilogue::kNone, kGelu or kSilu" + got("epilogue", static_cast<int>(p.epilogue)));
  PX_REQUIRE(p.a_type == DType::kBF16 || p.a_type == DType::kF16, "a_type",
             "must be bf16 or f16 (tensor-core inputs)" + got_dtype("a_type", p.a_type));
  PX_REQUIRE(p.b_type == p.a_type, "b_type",
             "must equal a_type (got b_type=" +
                 (valid_dtype(p.b_type) ? std::string(dtype_name(p.b_type)) : std::to_string(static_cast<int>(p.b_type))) +
                 ", a_type=" + std::string(dtype_name(p.a_type)) + ")");
  PX_REQUIRE(valid_dtype(p.c_type), "c_type", "must be f32, f16 or bf16" + got_dtype("c_type", p.c_type));
  PX_REQUIRE(p.a != nullptr, "a", "must be a non-null device pointer");
  PX_REQUIRE(p.b != nullptr, "b", "must be a non-null device pointer");
  PX_REQUIRE(p.c != nullptr, "c", "must be a non-null device pointer");
  const int in_size = dtype_size(p.a_type), out_size = dtype_size(p.c_type);
  PX_REQUIRE(aligned(p.a, in_size), "a", "must be aligned to its element size (" + std::to_string(in_size) + " bytes)");
  PX_REQUIRE(aligned(p.b, in_size), "b", "must be aligned to its element size (" + std::to_string(in_size) + " bytes)");
  PX_REQUIRE(aligned(p.c, out_size), "c", "must be aligned to its element size (" + std::to_string(out_size) + " bytes)");
  PX_REQUIRE(p.bias == nullptr || aligned(p.bias, 4), "bias", "must be aligned to 4 bytes (fp32)");

  // Leading dimensions follow the *stored* shape: A is m x k for N and k x m for T; B is k x n or n x k.
  const bool at = p.op_a == Op::kT, bt = p.op_b == Op::kT;
  const int a_rows = at ? p.k : p.m, a_cols = at ? p.m : p.k;
  const int b_rows = bt ? p.n : p.k, b_cols = bt ? p.k : p.n;
  PX_REQUIRE(p.lda >= a_cols, "lda",
             std::string(at ? "must be >= m, the row length of A stored k x m (op_a=T)"
                            : "must be >= k, the row length of A stored m x k (op_a=N)") +
                 got2("lda", p.lda, at ? "m" : "k", at ? p.m : p.k));
  PX_REQUIRE(p.ldb >= b_cols, "ldb",
             std::string(bt ? "must be >= k, the row length of B stored n x k (op_b=T)"
                            : "must be >= n, the row length of B stored k x n (op_b=N)") +
                 got2("ldb", p.ldb, bt ? "k" : "n", bt ? p.k : p.n));
  PX_REQUIRE(p.ldc >= p.n, "ldc",
             "must be >= n, the row length of C" + got2("ldc", p.ldc, "n", p.n));
  PX_REQUIRE(p.lda <= INT_MAX, "lda", "must be <= 2^31-1 (cuBLAS takes 32-bit leading dimensions)" + got("lda", p.lda));
  PX_REQUIRE(p.ldb <= INT_MAX, "ldb", "must be <= 2^31-1 (cuBLAS takes 32-bit leading dimensions)" + got("ldb", p.ldb));
  PX_REQUIRE(p.ldc <= INT_MAX, "ldc", "must be <= 2^31-1 (cuBLAS takes 32-bit leading dimensions)" + got("ldc", p.ldc));
  PX_REQUIRE(std::isfinite(p.alpha), "alpha", "must be finite (got alpha=" + std::to_string(p.alpha) + ")");
  PX_REQUIRE(std::isfinite(p.beta), "beta", "must be finite (got beta=" + std::to_string(p.beta) + ")");
  PX_REQUIRE(p.max_sms >= 0, "max_sms", "must be >= 0, 0 meaning all SMs (got " + std::to_string(p.max_sms) + ")");

  const ByteRange c = matrix_range(p.c, p.m, p.n, p.ldc, out_size);
  PX_REQUIRE(!overlaps(c, matrix_range(p.a, a_rows, a_cols, p.lda, in_size)), "c",
             "must not overlap a (C is written in place)");
  PX_REQUIRE(!overlaps(c, matrix_range(p.b, b_rows, b_cols, p.ldb, in_size)), "c",
             "must not overlap b (C is written in place)");
  if (p.bias != nullptr)
    PX_REQUIRE(!overlaps(c, matrix_range(p.bias, 1, p.n, p.n, 4)), "c",
               "must not overlap bias (C is written in place)");
}

namespace detail {

bool tma_compatible(const GemmArgs& p) {
  const auto aligned16 = [](const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; };
  const std::int64_t in_size = dtype_size(p.a_type);
  return aligned16(p.a) && aligned16(p.b) && (p.lda * in_size) % 16 == 0 && (p.ldb * in_size) % 16 == 0;
}

bool repacking_pays(const GemmArgs& p) {
  // Copying an operand costs ~2 x its bytes of memory traffic (a few microseconds for tens of MB); level 10
  // on unaligned rows loads element by element and runs at a fraction of the TMA kernels' speed. Below a
  // few GFLOP the launch and copy overheads are comparable to the product itself.
  return 2.0 * p.m * p.n * p.k >= 2e9;
}

void gemm_with_repacked_operands(const GemmArgs& p, cudaStream_t stream,
                                 const std::function<void(const GemmArgs&, cudaStream_t)>& launch) {
  const std::int64_t elem = dtype_size(p.a_type);
  const auto aligned16 = [](const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; };
  GemmArgs q = p;
  // Stored shapes: A is m x k (N) or k x m (T); B is k x n (N) or n x k (T).
  const int a_rows = p.op_a == Op::kN ? p.m : p.k, a_cols = p.op_a == Op::kN ? p.k : p.m;
  const int b_rows = p.op_b == Op::kN ? p.k : p.n, b_cols = p.op_b == Op::kN ? p.n : p.k;
  const bool copy_a = !(aligned16(p.a) && (p.lda * elem) % 16 == 0);
  const bool copy_b = !(aligned16(p.b) && (p.ldb * elem) % 16 == 0);
  const auto padded = [](int cols) { return (static_cast<std::int64_t>(cols) + 7) / 8 * 8; };
  void* a_copy = nullptr;
  void* b_copy = nullptr;
  const auto release = [&] {
    if (a_copy) cudaFreeAsync(a_copy, stream);
    if (b_copy) cudaFreeAsync(b_copy, stream);
  };
  try {
    // Stream-ordered allocations (the pool makes repeated calls cheap) and pitched copies: the padding
    // columns are never read, the tensor maps carry the logical sizes.
    if (copy_a) {
      q.lda = padded(a_cols);
      PX_CUDA_CHECK(cudaMallocAsync(&a_copy, static_cast<std::size_t>(a_rows * q.lda * elem), stream));
      PX_CUDA_CHECK(cudaMemcpy2DAsync(a_copy, static_cast<std::size_t>(q.lda * elem), p.a,
                                      static_cast<std::size_t>(p.lda * elem), static_cast<std::size_t>(a_cols * elem),
                                      static_cast<std::size_t>(a_rows), cudaMemcpyDeviceToDevice, stream));
      q.a = a_copy;
    }
    if (copy_b) {
      q.ldb = padded(b_cols);
      PX_CUDA_CHECK(cudaMallocAsync(&b_copy, static_cast<std::size_t>(b_rows * q.ldb * elem), stream));
      PX_CUDA_CHECK(cudaMemcpy2DAsync(b_copy, static_cast<std::size_t>(q.ldb * elem), p.b,
                                      static_cast<std::size_t>(p.ldb * elem), static_cast<std::size_t>(b_cols * elem),
                                      static_cast<std::size_t>(b_rows), cudaMemcpyDeviceToDevice, stream));
      q.b = b_copy;
    }
    launch(q, stream);
  } catch (...) {
    release();
    throw;
  }
  release();
}

namespace {
int current_cc_major() {
  int device = 0, major = 0;
  PX_CUDA_CHECK(cudaGetDevice(&device));
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major;
}
}  // namespace

void require_sm90(std::string_view kernel_name) {
  const int major = current_cc_major();
  if (major != 9)
    throw Error("gemm kernel '" + std::string(kernel_name) + "' needs an sm_90 (Hopper) GPU; this device is sm_" +
                std::to_string(major) + "x (use 'mma' or 'auto')");
}

// k from which "auto" prefers level 12 over level 13 on big outputs (see choose_gemm_kernel).
constexpr int kLongReductionK = 16384;

GemmKernel choose_gemm_kernel(const GemmArgs& p) {
  const int major = current_cc_major();
  if (major < 8) return GemmKernel::kCublas;  // the parallax kernels are built for sm_80 and sm_90a
  if (major != 9 || !(tma_compatible(p) || repacking_pays(p))) return GemmKernel::kMma;
  // Wave quantization: the 128 x 256 tiles of levels 12/13 need enough tiles to give every SM work; below
  // half an SM's worth, the 128 x 128 tiles of level 11 (measured on an H100: level 11 matches cuBLAS at
  // 512^3 and 1024^3 where level 13 reaches 70%; level 10 stays below both).
  int device = 0, sms = 0;
  PX_CUDA_CHECK(cudaGetDevice(&device));
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const long long tiles_256 = static_cast<long long>((p.m + 127) / 128) * ((p.n + 255) / 256);
  if (2 * tiles_256 < sms) return GemmKernel::kWgmma;  // repacks or falls back to level 10 itself if needed
  // Long reductions with many tiles: level 12 (non-persistent) beat level 13 there on an H100 (8192 x 8192 x
  // 28672: 762 vs 692 TFLOP/s, bench/results/nvidia-h100-80gb-hbm3/2026-11-22-e38ecdd), while level 13 won
  // or tied every shape with k <= 8192. A tile's main loop is ~0.3 ms at k = 28672, so the persistent
  // level's hidden prologue/epilogue buys nothing there; the hardware block scheduler hands the next tile
  // to whichever SM frees first, keeping the tiles in flight a compact window of the grouped order.
  if (p.k >= kLongReductionK && tiles_256 >= 4LL * sms) return GemmKernel::kWgmmaWs;
  return GemmKernel::kWgmmaPersistent;
}

}  // namespace detail

std::vector<std::string_view> gemm_kernel_names() {
  std::vector<std::string_view> names;
  for (const auto& e : kKernels)
    if (!e.experimental) names.push_back(e.name);
  return names;
}

std::vector<std::string_view> gemm_experimental_kernel_names() {
  std::vector<std::string_view> names;
  for (const auto& e : kKernels)
    if (e.experimental) names.push_back(e.name);
  return names;
}

std::string_view gemm_kernel_name(GemmKernel kernel) {
  for (const auto& e : kKernels)
    if (e.kernel == kernel) return e.name;
  throw InvalidArgument("kernel", "unknown GemmKernel value " + std::to_string(static_cast<int>(kernel)) +
                                      "; valid: " + valid_kernel_list());
}

std::string_view gemm_kernel_description(GemmKernel kernel) {
  for (const auto& e : kKernels)
    if (e.kernel == kernel) return e.description;
  return gemm_kernel_name(kernel);  // throws for a value outside the enum
}

int gemm_kernel_min_cc_major(GemmKernel kernel) {
  for (const auto& e : kKernels)
    if (e.kernel == kernel) return e.min_cc_major;
  return static_cast<int>(gemm_kernel_name(kernel).size());  // throws for a value outside the enum
}

GemmKernel parse_gemm_kernel(std::string_view text) {
  for (const auto& e : kKernels)
    if (text == e.name) return e.kernel;
  for (const auto& e : kKernels)
    if (e.kernel != GemmKernel::kAuto && e.kernel != GemmKernel::kCublas && !e.experimental &&
        text == std::to_string(static_cast<int>(e.kernel)))
      return e.kernel;
  throw InvalidArgument("kernel", "unknown GEMM kernel '" + std::string(text) + "'; valid: " + valid_kernel_list() +
                                      " (or a level number 9..13)");
}

void gemm(const GemmArgs& args, cudaStream_t stream, GemmKernel kernel) {
  (void)gemm_kernel_name(kernel);  // rejects values outside the enum before anything else
  validate(args);
  switch (kernel) {
    case GemmKernel::kCublas: return gemm_cublas(args, stream);
    case GemmKernel::kAuto: return gemm(args, stream, detail::choose_gemm_kernel(args));
    case GemmKernel::kWmma: return detail::launch_gemm_wmma(args, stream);
    case GemmKernel::kMma: return detail::launch_gemm_mma(args, stream);
    case GemmKernel::kWgmma:
    case GemmKernel::kWgmmaWs:
    case GemmKernel::kWgmmaPersistent:
    case GemmKernel::kWgmmaCluster:
    case GemmKernel::kWgmmaPersistentCluster: {
      detail::require_sm90(gemm_kernel_name(kernel));
      const auto launch = [kernel](const GemmArgs& p, cudaStream_t s) {
        switch (kernel) {
          case GemmKernel::kWgmma: return detail::launch_gemm_wgmma(p, s);
          case GemmKernel::kWgmmaWs: return detail::launch_gemm_wgmma_ws(p, s);
          case GemmKernel::kWgmmaCluster: return detail::launch_gemm_wgmma_cluster(p, s);
          case GemmKernel::kWgmmaPersistentCluster: return detail::launch_gemm_wgmma_persistent_cluster(p, s);
          default: return detail::launch_gemm_wgmma_persistent(p, s);
        }
      };
      if (detail::tma_compatible(args)) return launch(args, stream);
      // TMA cannot describe an operand (odd leading dimension or base): a big product repacks it into an
      // aligned copy and still runs on TMA; a small one runs level 10 (never an error, see gemm.hpp).
      if (detail::repacking_pays(args)) return detail::gemm_with_repacked_operands(args, stream, launch);
      return detail::launch_gemm_mma(args, stream);
    }
  }
}

void gemm(const GemmArgs& args, cudaStream_t stream, std::string_view kernel) {
  gemm(args, stream, parse_gemm_kernel(kernel));
}

}  // namespace parallax
