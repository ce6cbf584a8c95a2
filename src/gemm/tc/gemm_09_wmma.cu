// Level 9: the first tensor-core level. nvcuda::wmma 16x16x16 fragments, fp32 accumulation.
//
// What changes against the FP32 ladder: the inner product no longer runs on the FP32 pipes one FMA per
// thread per cycle; a warp hands a 16x16x16 bf16/fp16 tile product to the tensor cores in one
// `wmma::mma_sync` (4096 multiply-adds). WMMA hides the register layout of the fragments: the warp loads a
// fragment from shared memory with `load_matrix_sync`, multiplies, and stores the accumulator back with
// `store_matrix_sync`. That opacity is its limit (level 10 takes the layout into its own hands with
// mma.sync + ldmatrix), but it makes the structure of a tensor-core GEMM easy to read:
//
//   block tile 128 x 128, k-step 32, 8 warps in a 2 x 4 grid, each warp owns 64 x 32 = 4 x 2 fragments.
//
//   for each k-step:
//     all 256 threads copy op(A)[128 x 32] and op(B)[32 x 128] into shared memory (zero outside the matrix)
//     each warp: 2 sub-steps of k=16: 4 A fragments, 2 B fragments, 8 mma_sync
//   epilogue: each warp spills one accumulator fragment at a time to a private 16x16 fp32 scratch in shared
//             memory, then its 32 lanes apply alpha/beta/bias/activation and store with bounds checks.
//
// Transposes. The fragments always read the same shared-memory layouts (A tile row-major [m][k], B tile
// row-major [k][n]); op_a / op_b only change how the global loads walk memory. For op == N the consecutive
// threads of a warp walk along a stored row (coalesced); for op == T the stored matrix is the transpose,
// so consecutive threads walk along the *other* tile index, which is again contiguous in global memory.
// The price is a strided shared-memory store for T (a 4-way bank conflict with the padded pitch below);
// level 10 removes it with ldmatrix(.trans).
//
// Edges. Any m, n, k >= 1: every global load is predicated and a missing element is written as 0 (a zero
// contributes nothing to a dot product, so the fragment loop needs no guards), and every store is guarded.
// Loads are scalar (2 bytes) so no alignment beyond the element size is required; vector loads and cp.async
// come with level 10.
//
// Requires sm_80+ (bf16 WMMA); fp16 WMMA would run on sm_70, but the library builds for 80 and 90a.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cstdint>

#include "gemm/sgemm/common.cuh"  // TileGrid, make_tile_grid, block_row0/col0
#include "gemm/tc/epilogue.cuh"
#include "gemm/tc/launchers.hpp"
#include "parallax/core.hpp"

namespace parallax::detail {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kBM = 128, kBN = 128, kBK = 32;
constexpr int kWarpsM = 2, kWarpsN = 4;
constexpr int kThreads = 32 * kWarpsM * kWarpsN;  // 256
constexpr int kWM = kBM / kWarpsM;                // 64 rows per warp
constexpr int kWN = kBN / kWarpsN;                // 32 columns per warp
constexpr int kFragM = kWM / 16;                  // 4
constexpr int kFragN = kWN / 16;                  // 2
// Shared-memory pitches (elements). +8 halves = +16 bytes: rows no longer start on the same bank, and
// load_matrix_sync's requirements hold (ldm a multiple of 8 for 16-bit types, every fragment pointer
// 32-byte aligned: 16-row steps are 16*40*2 = 1280 bytes, 16-column steps 32 bytes).
constexpr int kLdA = kBK + 8;  // 40
constexpr int kLdB = kBN + 8;  // 136

constexpr int kSmemA = kBM * kLdA * 2;      // 10240 bytes
constexpr int kSmemB = kBK * kLdB * 2;      // 8704 bytes
constexpr int kSmemScratch = 8 * 256 * 4;   // one 16x16 fp32 tile per warp: 8192 bytes
static_assert(kSmemA % 128 == 0 && kSmemB % 128 == 0, "keep the sub-buffers 128-byte aligned");

// Copies the ROWS x COLS tile at (row0, col0) of the logical matrix X (rows_total x cols_total) into shared
// memory `s` (row-major, pitch LDS). X is stored row-major in `g` with leading dimension `ld` when
// !transposed (X[i][j] = g[i*ld + j]), or as its transpose when transposed (X[i][j] = g[j*ld + i]).
template <typename T, int ROWS, int COLS, int LDS>
__device__ __forceinline__ void load_tile(T* __restrict__ s, const T* __restrict__ g, std::int64_t ld,
                                          bool transposed, int row0, int col0, int rows_total,
                                          int cols_total) {
  static_assert((ROWS * COLS) % kThreads == 0, "tile must split evenly over the block");
  const T zero = from_float<T>(0.f);
#pragma unroll
  for (int i = 0; i < (ROWS * COLS) / kThreads; ++i) {
    const int idx = static_cast<int>(threadIdx.x) + i * kThreads;
    // Consecutive threads take consecutive elements of the *stored* row: along COLS for N, ROWS for T.
    const int r = transposed ? idx % ROWS : idx / COLS;
    const int c = transposed ? idx / ROWS : idx % COLS;
    const int gr = row0 + r, gc = col0 + c;
    T v = zero;
    if (gr < rows_total && gc < cols_total)
      v = transposed ? g[static_cast<std::int64_t>(gc) * ld + gr] : g[static_cast<std::int64_t>(gr) * ld + gc];
    s[r * LDS + c] = v;
  }
}

// ptxas (sm_90a): ~220 registers, no spills, 27 KiB static shared memory: one 256-thread block per SM.
// Forcing two blocks (__launch_bounds__(256, 2), 128 registers) spills ~400 bytes per thread; the 64
// accumulator registers plus 32 in-flight scalar loads are the budget, which level 10's cp.async (loads go
// straight to shared memory, no registers) frees.
template <typename In, typename Out>
__global__ void __launch_bounds__(kThreads)
    gemm_wmma_kernel(int m, int n, int k, const In* __restrict__ a, std::int64_t lda, bool a_t,
                     const In* __restrict__ b, std::int64_t ldb, bool b_t, Out* __restrict__ c,
                     std::int64_t ldc, EpilogueParams ep, bool m_on_x) {
  // Raw bytes, carved up by hand: __half / __nv_bfloat16 have constructors, which __shared__ arrays of
  // them would trip over, and it keeps the alignment explicit.
  __shared__ __align__(128) unsigned char smem[kSmemA + kSmemB + kSmemScratch];
  In* As = reinterpret_cast<In*>(smem);
  In* Bs = reinterpret_cast<In*>(smem + kSmemA);
  float* scratch = reinterpret_cast<float*>(smem + kSmemA + kSmemB);

  const int row0 = block_row0(m_on_x, kBM);
  const int col0 = block_col0(m_on_x, kBN);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int wm = warp / kWarpsN;  // 0..1
  const int wn = warp % kWarpsN;  // 0..3

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kFragM][kFragN];
#pragma unroll
  for (int i = 0; i < kFragM; ++i)
#pragma unroll
    for (int j = 0; j < kFragN; ++j) wmma::fill_fragment(acc[i][j], 0.f);

  for (int k0 = 0; k0 < k; k0 += kBK) {
    load_tile<In, kBM, kBK, kLdA>(As, a, lda, a_t, row0, k0, m, k);  // op(A) is m x k
    load_tile<In, kBK, kBN, kLdB>(Bs, b, ldb, b_t, k0, col0, k, n);  // op(B) is k x n
    __syncthreads();

#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, In, wmma::row_major> fa[kFragM];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, In, wmma::row_major> fb[kFragN];
#pragma unroll
      for (int i = 0; i < kFragM; ++i) wmma::load_matrix_sync(fa[i], As + (wm * kWM + i * 16) * kLdA + kk, kLdA);
#pragma unroll
      for (int j = 0; j < kFragN; ++j) wmma::load_matrix_sync(fb[j], Bs + kk * kLdB + wn * kWN + j * 16, kLdB);
      // Each A fragment is reused kFragN times and each B fragment kFragM times from registers.
#pragma unroll
      for (int i = 0; i < kFragM; ++i)
#pragma unroll
        for (int j = 0; j < kFragN; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();  // the next k-step overwrites the tiles other warps may still be reading
  }

  // Epilogue. The accumulator's register layout is opaque in WMMA, so to know which (row, col) a value
  // belongs to (bounds, bias column) the warp goes through shared memory: 16x16 floats, then lane e
  // handles elements e, e+32, ... (two rows of 16 per pass: half-warp-contiguous stores).
  float* s = scratch + warp * 256;
#pragma unroll
  for (int i = 0; i < kFragM; ++i)
#pragma unroll
    for (int j = 0; j < kFragN; ++j) {
      wmma::store_matrix_sync(s, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      const int fr = row0 + wm * kWM + i * 16;
      const int fc = col0 + wn * kWN + j * 16;
      // Not unrolled: the activation (tanhf / expf) inlined 8 x 8 times would bloat code and compile time.
#pragma unroll 1
      for (int e = lane; e < 256; e += 32) {
        const int gr = fr + e / 16, gc = fc + e % 16;
        if (gr < m && gc < n) epilogue_store(c + static_cast<std::int64_t>(gr) * ldc + gc, s[e], gc, ep);
      }
      __syncwarp();  // the scratch is rewritten by the next fragment
    }
}

template <typename In, typename Out>
void launch(const GemmArgs& p, cudaStream_t stream) {
  const TileGrid tg = make_tile_grid(p.m, p.n, kBM, kBN);
  const EpilogueParams ep{p.alpha, p.beta, p.bias, p.epilogue};
  gemm_wmma_kernel<In, Out><<<tg.grid, kThreads, 0, stream>>>(
      p.m, p.n, p.k, static_cast<const In*>(p.a), p.lda, p.op_a == Op::kT, static_cast<const In*>(p.b), p.ldb,
      p.op_b == Op::kT, static_cast<Out*>(p.c), p.ldc, ep, tg.m_on_x);
  PX_CUDA_CHECK_LAUNCH();
}

template <typename In>
void launch_out(const GemmArgs& p, cudaStream_t stream) {
  switch (p.c_type) {
    case DType::kF32: return launch<In, float>(p, stream);
    case DType::kF16: return launch<In, __half>(p, stream);
    case DType::kBF16: return launch<In, __nv_bfloat16>(p, stream);
  }
  throw Error("gemm wmma: unsupported c_type");
}

}  // namespace

void launch_gemm_wmma(const GemmArgs& p, cudaStream_t stream) {
  switch (p.a_type) {
    case DType::kF16: return launch_out<__half>(p, stream);
    case DType::kBF16: return launch_out<__nv_bfloat16>(p, stream);
    case DType::kF32: break;
  }
  throw Error("gemm wmma: unsupported a_type");
}

}  // namespace parallax::detail
