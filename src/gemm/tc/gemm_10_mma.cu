// Level 10: mma.sync m16n8k16 + ldmatrix + a multi-stage cp.async pipeline over XOR-swizzled shared memory.
// The sm_80 / sm_89 production path, and on Hopper the fallback for operands TMA cannot describe.
//
// What changes against level 9 (WMMA) and why:
//
//  * Registers instead of opaque fragments. mma.sync's fragment layout is documented (PTX ISA, "Matrix
//    fragments for mma.m16n8k16"): lane l holds accumulator rows l/4 and l/4+8, columns 2(l%4)+{0,1}. So the
//    epilogue works straight from the accumulator registers (level 9 had to spill every fragment to shared
//    memory to learn which element it held), and fragments are loaded by `ldmatrix`, which delivers exactly
//    that layout from eight 16-byte shared-memory rows per 8x8 tile.
//  * ldmatrix vs ldmatrix.trans. A tile that is K-contiguous in shared memory (A with op N, B with op T)
//    is read with plain ldmatrix; an MN-contiguous one (A with op T, B with op N) with .trans, which hands
//    out the transpose. Shared memory therefore keeps each operand in its *stored* global layout: the copy
//    global -> shared is always a straight, coalesced, 16-byte-chunk copy, and all four op_a / op_b
//    combinations cost the same (template parameters kATrans / kBTrans pick the addressing at compile time).
//  * cp.async bypasses registers: the copies go global -> shared without occupying registers and complete in
//    the background, so kStages - 1 future k-tiles are in flight while the tensor cores work on the current
//    one (level 9 loaded synchronously through registers and then waited at a barrier).
//  * Swizzle instead of padding. ldmatrix reads eight 16-byte rows at once; if they start on the same bank
//    group (row pitch a multiple of 128 bytes) that is an 8-way conflict. Padding fixes it but breaks 16-byte
//    chunk alignment patterns and wastes memory; XOR-ing the 16-byte chunk index with low row bits spreads
//    the eight rows over all 32 banks, for both the cp.async writes and the ldmatrix reads, at zero bytes.
//  * Fragment double buffering inside a k-tile: the ldmatrix of k-slice s+1 is issued before the mma of
//    slice s, so shared-memory latency hides behind tensor-core work.
//
// Alignment. The fast path copies 16-byte chunks (8 elements) with cp.async; it needs the operand's base
// 16-byte aligned and ld % 8 == 0 (each row starts aligned). Otherwise (odd lda: 4095^3, 1000x3000x777) the
// operand is loaded element by element through registers into the same swizzled layout. The choice is per
// operand, at launch, as a block-uniform kernel argument (no divergence, half the instantiations of a
// template parameter). Tile edges: chunks outside the matrix are zero-filled (cp.async src-size 0 or partial),
// so the mma loop has no guards; only the epilogue checks bounds.
//
// Tiles. 128 x 128 x 32 with 8 warps (2 x 4, each 64 x 32 = 4 x 4 mma tiles, 64 fp32 accumulators per lane),
// 4 stages = 64 KiB of dynamic shared memory. When those tiles would leave SMs idle (few tiles, e.g. 1000^2
// outputs on 132 SMs) the host picks 64 x 64 x 32 with 4 warps (each 32 x 32), same code, other template
// arguments.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "gemm/sgemm/common.cuh"  // TileGrid, make_tile_grid, block_row0/col0, big_tiles_leave_sms_idle
#include "gemm/tc/epilogue.cuh"
#include "gemm/tc/launchers.hpp"
#include "parallax/core.hpp"
#include "ptx/sm80.cuh"

namespace parallax::detail {
namespace {

// Tile geometry, as template arguments so that every index below folds to constants.
template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_>
struct MmaConfig {
  static constexpr int kBM = BM_, kBN = BN_, kBK = BK_;
  static constexpr int kWarpsM = WARPS_M_, kWarpsN = WARPS_N_, kStages = STAGES_;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kWM = kBM / kWarpsM;  // rows of C per warp
  static constexpr int kWN = kBN / kWarpsN;  // columns of C per warp
  static constexpr int kMmaM = kWM / 16;     // m16 tiles per warp
  static constexpr int kMmaN = kWN / 8;      // n8 tiles per warp
  static constexpr int kKSlices = kBK / 16;  // k16 slices per k-tile
  static constexpr int kTileABytes = kBM * kBK * 2;
  static constexpr int kTileBBytes = kBN * kBK * 2;
  static constexpr int kStageBytes = kTileABytes + kTileBBytes;
  static constexpr int kSmemBytes = kStages * kStageBytes;

  static_assert(kBM % (16 * kWarpsM) == 0, "each warp owns whole m16 tiles");
  static_assert(kBN % (16 * kWarpsN) == 0, "each warp owns whole pairs of n8 tiles (one ldmatrix.x4 = 16 columns)");
  static_assert(kBK % 16 == 0, "the k-tile is made of k16 mma slices");
  static_assert(kBK >= 32 && kBM >= 64 && kBN >= 64,
                "every shared-memory row is >= 64 bytes: the swizzle below needs 4+ chunks per row");
  static_assert(kStages >= 2, "a pipeline needs at least two stages");
  static_assert((kBM * kBK / 8) % kThreads == 0 && (kBN * kBK / 8) % kThreads == 0,
                "16-byte chunks of a tile split evenly over the block");
  static_assert((kBM * kBK) % kThreads == 0 && (kBN * kBK) % kThreads == 0,
                "elements of a tile split evenly over the block (unaligned path)");
  static_assert(kTileABytes % 128 == 0 && kTileBBytes % 128 == 0, "sub-buffers stay 128-byte aligned");
};
using BigTiles = MmaConfig<128, 128, 32, 2, 4, 4>;   // 256 threads, 64 KiB smem
using SmallTiles = MmaConfig<64, 64, 32, 2, 2, 4>;  // 128 threads, 32 KiB smem

// A shared-memory tile of ROWS x COLS 16-bit elements, row-major, COLS contiguous, its 16-byte chunks
// swizzled. Element (r, c) lives in chunk (c / 8) ^ swizzle(r) of row r. Within a 128-byte line (32 banks)
// the eight rows that one ldmatrix phase reads must land on eight distinct chunk positions:
//   COLS >= 64 (row >= 128 bytes): rows r..r+7 all start on bank 0, so XOR the chunk with r % 8;
//   COLS == 32 (row = 64 bytes): two rows share a 128-byte line, so XOR with (r / 2) % 4.
template <int ROWS, int COLS>
struct SwizzledTile {
  static constexpr int kChunksPerRow = COLS / 8;
  static_assert(COLS % 8 == 0 && (kChunksPerRow == 4 || kChunksPerRow % 8 == 0),
                "rows of 64 bytes or of a multiple of 128 bytes");
  static_assert(ROWS % 8 == 0, "whole 8-row swizzle periods");
  __device__ __forceinline__ static int offset(int r, int c) {
    const int sw = kChunksPerRow == 4 ? (r >> 1) & 3 : r & 7;
    return r * COLS + (((c >> 3) ^ sw) << 3) + (c & 7);
  }
};

// Copies the ROWS x COLS window at (row0, col0) of the *stored* matrix g (rows_total x cols_total, leading
// dimension ld, row-major) into the swizzled tile `s`. Anything outside the matrix becomes 0.
//   vec16: 16-byte cp.asyncs (asynchronous, needs 16-byte aligned rows);
//   else:  2-byte loads through registers, then st.shared (synchronous, any alignment).
template <typename Cfg, int ROWS, int COLS, typename T>
__device__ __forceinline__ void load_tile(T* __restrict__ s, const T* __restrict__ g, std::int64_t ld, int row0,
                                          int col0, int rows_total, int cols_total, bool vec16) {
  using Tile = SwizzledTile<ROWS, COLS>;
  const int tid = static_cast<int>(threadIdx.x);
  if (vec16) {
    constexpr int kChunks = ROWS * COLS / 8;
#pragma unroll
    for (int i = 0; i < kChunks / Cfg::kThreads; ++i) {
      const int idx = tid + i * Cfg::kThreads;
      // Consecutive threads take consecutive chunks of a stored row: coalesced 16-byte requests.
      const int r = idx / Tile::kChunksPerRow;
      const int c = (idx % Tile::kChunksPerRow) * 8;
      const int gr = row0 + r, gc = col0 + c;
      int valid = 0;
      if (gr < rows_total) valid = min(max(cols_total - gc, 0), 8);
      // src-size 0 reads nothing; point at the base anyway so that no out-of-range address is formed.
      const T* src = valid > 0 ? g + static_cast<std::int64_t>(gr) * ld + gc : g;
      ptx::cp_async_16_partial(s + Tile::offset(r, c), src, valid * 2);
    }
  } else {
    constexpr int kPerThread = ROWS * COLS / Cfg::kThreads;
    const T zero = from_float<T>(0.f);
    T v[kPerThread];
    // All loads first, then all stores: kPerThread loads in flight per thread instead of one.
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int idx = tid + i * Cfg::kThreads;
      const int r = idx / COLS, c = idx % COLS;
      const int gr = row0 + r, gc = col0 + c;
      v[i] = (gr < rows_total && gc < cols_total) ? g[static_cast<std::int64_t>(gr) * ld + gc] : zero;
    }
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int idx = tid + i * Cfg::kThreads;
      s[Tile::offset(idx / COLS, idx % COLS)] = v[i];
    }
  }
}

// Shared-memory layouts of one stage (kATrans: op_a == T, i.e. A is stored k x m; kBTrans: op_b == T, B
// stored n x k):
//   A: op N -> [BM][BK] (K-contiguous)     op T -> [BK][BM] (M-contiguous)
//   B: op N -> [BK][BN] (N-contiguous)     op T -> [BN][BK] (K-contiguous)
template <typename Cfg, bool kATrans>
using ATile = SwizzledTile<kATrans ? Cfg::kBK : Cfg::kBM, kATrans ? Cfg::kBM : Cfg::kBK>;
template <typename Cfg, bool kBTrans>
using BTile = SwizzledTile<kBTrans ? Cfg::kBN : Cfg::kBK, kBTrans ? Cfg::kBK : Cfg::kBN>;

// A fragment of the m16 x k16 block at (m0, k0) of the A tile (ldmatrix.x4). Lane l addresses row l % 8 of
// 8x8 matrix i = l / 8; the four matrices must come out as a0..a3 = (m 0-7, k 0-7), (m 8-15, k 0-7),
// (m 0-7, k 8-15), (m 8-15, k 8-15).
template <typename Cfg, bool kATrans, typename T>
__device__ __forceinline__ void load_a_fragment(std::uint32_t (&frag)[4], const T* tile, int m0, int k0, int lane) {
  const int i = lane >> 3, r = lane & 7;
  if constexpr (!kATrans) {
    // [m][k]: matrix i covers m-rows 8*(i%2).., k-columns 8*(i/2)..
    ptx::ldmatrix_x4(frag, tile + ATile<Cfg, kATrans>::offset(m0 + r + 8 * (i & 1), k0 + 8 * (i >> 1)));
  } else {
    // [k][m], transposed on the way: matrix i is stored as k-rows 8*(i/2).., m-columns 8*(i%2)..
    ptx::ldmatrix_x4_trans(frag, tile + ATile<Cfg, kATrans>::offset(k0 + r + 8 * (i >> 1), m0 + 8 * (i & 1)));
  }
}

// B fragments of two adjacent n8 tiles at (k0, n0) and (k0, n0 + 8): frag[0..1] for columns n0..n0+7 (b0 =
// k 0-7, b1 = k 8-15), frag[2..3] for n0+8..n0+15.
template <typename Cfg, bool kBTrans, typename T>
__device__ __forceinline__ void load_b_fragments(std::uint32_t (&frag)[4], const T* tile, int k0, int n0, int lane) {
  const int i = lane >> 3, r = lane & 7;
  if constexpr (kBTrans) {
    // [n][k]: matrix i covers n-rows 8*(i/2).., k-columns 8*(i%2)..
    ptx::ldmatrix_x4(frag, tile + BTile<Cfg, kBTrans>::offset(n0 + r + 8 * (i >> 1), k0 + 8 * (i & 1)));
  } else {
    // [k][n], transposed: matrix i is stored as k-rows 8*(i%2).., n-columns 8*(i/2)..
    ptx::ldmatrix_x4_trans(frag, tile + BTile<Cfg, kBTrans>::offset(k0 + r + 8 * (i & 1), n0 + 8 * (i >> 1)));
  }
}

// Stores two horizontally adjacent results (row, col) and (row, col + 1). `pair_ok`: both columns exist and
// the address is aligned for a 2-element vector store.
template <typename Out>
__device__ __forceinline__ void store_pair(Out* c, float v0, float v1, int col, int n, bool pair_ok,
                                           const EpilogueParams& ep) {
  if (pair_ok && ep.beta == 0.f) {
    float x0 = ep.alpha * v0, x1 = ep.alpha * v1;
    if (ep.bias != nullptr) {
      x0 += ep.bias[col];
      x1 += ep.bias[col + 1];
    }
    x0 = activate(x0, ep.act);
    x1 = activate(x1, ep.act);
    if constexpr (sizeof(Out) == 4) {
      *reinterpret_cast<float2*>(c) = make_float2(x0, x1);
    } else {
      const Out pair[2] = {from_float<Out>(x0), from_float<Out>(x1)};
      *reinterpret_cast<std::uint32_t*>(c) = *reinterpret_cast<const std::uint32_t*>(pair);
    }
    return;
  }
  epilogue_store(c, v0, col, ep);
  if (col + 1 < n) epilogue_store(c + 1, v1, col + 1, ep);
}

template <typename Cfg, bool kATrans, bool kBTrans, typename In, typename Out>
__global__ void __launch_bounds__(Cfg::kThreads)
    gemm_mma_kernel(int m, int n, int k, const In* __restrict__ a, std::int64_t lda, bool a_vec16,
                    const In* __restrict__ b, std::int64_t ldb, bool b_vec16, Out* __restrict__ c,
                    std::int64_t ldc, EpilogueParams ep, bool m_on_x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kBM = Cfg::kBM, kBN = Cfg::kBN, kBK = Cfg::kBK, kStages = Cfg::kStages;
  auto a_stage = [&](int s) { return reinterpret_cast<In*>(smem + s * Cfg::kStageBytes); };
  auto b_stage = [&](int s) { return reinterpret_cast<In*>(smem + s * Cfg::kStageBytes + Cfg::kTileABytes); };

  const int row0 = block_row0(m_on_x, kBM);
  const int col0 = block_col0(m_on_x, kBN);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp_m0 = (warp / Cfg::kWarpsN) * Cfg::kWM;  // within the block tile
  const int warp_n0 = (warp % Cfg::kWarpsN) * Cfg::kWN;

  // Issues the copies of k-tile `kt` into stage `s`.
  auto load_stage = [&](int kt, int s) {
    const int k0 = kt * kBK;
    if constexpr (!kATrans)
      load_tile<Cfg, kBM, kBK>(a_stage(s), a, lda, row0, k0, m, k, a_vec16);  // A stored m x k
    else
      load_tile<Cfg, kBK, kBM>(a_stage(s), a, lda, k0, row0, k, m, a_vec16);  // A stored k x m
    if constexpr (!kBTrans)
      load_tile<Cfg, kBK, kBN>(b_stage(s), b, ldb, k0, col0, k, n, b_vec16);  // B stored k x n
    else
      load_tile<Cfg, kBN, kBK>(b_stage(s), b, ldb, col0, k0, n, k, b_vec16);  // B stored n x k
  };

  float acc[Cfg::kMmaM][Cfg::kMmaN][4];
#pragma unroll
  for (int i = 0; i < Cfg::kMmaM; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::kMmaN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  const int k_tiles = (k + kBK - 1) / kBK;
  // Prologue: kStages - 1 k-tiles in flight. One commit per stage even when there is nothing to load, so
  // that "wait until <= kStages - 2 groups pending" always means "the oldest stage has landed".
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) load_stage(s, s);
    ptx::cp_async_commit();
  }

  std::uint32_t fa[2][Cfg::kMmaM][4];
  std::uint32_t fb[2][Cfg::kMmaN / 2][4];
  for (int kt = 0; kt < k_tiles; ++kt) {
    ptx::cp_async_wait<kStages - 2>();  // this thread's copies of k-tile kt have landed...
    __syncthreads();                    // ...and everyone's; also: everyone is done with k-tile kt - 1
    // Refill the stage consumed in the previous iteration with k-tile kt + kStages - 1.
    const int next = kt + kStages - 1;
    if (next < k_tiles) load_stage(next, next % kStages);
    ptx::cp_async_commit();

    const In* as = a_stage(kt % kStages);
    const In* bs = b_stage(kt % kStages);
    auto load_fragments = [&](int slice, int buf) {
#pragma unroll
      for (int i = 0; i < Cfg::kMmaM; ++i) load_a_fragment<Cfg, kATrans>(fa[buf][i], as, warp_m0 + 16 * i, 16 * slice, lane);
#pragma unroll
      for (int j = 0; j < Cfg::kMmaN / 2; ++j)
        load_b_fragments<Cfg, kBTrans>(fb[buf][j], bs, 16 * slice, warp_n0 + 16 * j, lane);
    };
    load_fragments(0, 0);
#pragma unroll
    for (int slice = 0; slice < Cfg::kKSlices; ++slice) {
      if (slice + 1 < Cfg::kKSlices) load_fragments(slice + 1, (slice + 1) & 1);  // next slice's ldmatrix first
      const int buf = slice & 1;
#pragma unroll
      for (int i = 0; i < Cfg::kMmaM; ++i)
#pragma unroll
        for (int j = 0; j < Cfg::kMmaN; ++j) {
          const std::uint32_t bj[2] = {fb[buf][j / 2][2 * (j % 2)], fb[buf][j / 2][2 * (j % 2) + 1]};
          ptx::mma_m16n8k16<In>(acc[i][j], fa[buf][i], bj);
        }
    }
  }
  ptx::cp_async_wait<0>();  // no copy may still target shared memory when the block exits

  // Epilogue straight from the registers: acc[i][j] = rows g and g + 8, columns 2t, 2t + 1 of mma tile (i, j).
  const int g = lane / 4, t = lane % 4;
  // Two-element stores need both columns' addresses 2-element aligned: an even ldc (and column) keeps
  // every row start aligned if the base is.
  const bool ldc_even = (ldc % 2) == 0 && (reinterpret_cast<std::uintptr_t>(c) % (2 * sizeof(Out))) == 0;
#pragma unroll
  for (int i = 0; i < Cfg::kMmaM; ++i)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row0 + warp_m0 + 16 * i + g + 8 * half;
      if (row >= m) continue;
      Out* crow = c + static_cast<std::int64_t>(row) * ldc;
      // Fully unrolled: acc must be indexed by constants to stay in registers (a runtime j would move the
      // whole accumulator array to local memory).
#pragma unroll
      for (int j = 0; j < Cfg::kMmaN; ++j) {
        const int col = col0 + warp_n0 + 8 * j + 2 * t;
        if (col >= n) continue;
        store_pair(crow + col, acc[i][j][2 * half], acc[i][j][2 * half + 1], col, n, ldc_even && col + 1 < n, ep);
      }
    }
#endif
}

template <typename Cfg, bool kATrans, bool kBTrans, typename In, typename Out>
void launch_config(const GemmArgs& p, cudaStream_t stream) {
  const auto kernel = gemm_mma_kernel<Cfg, kATrans, kBTrans, In, Out>;
  // > 48 KiB of dynamic shared memory needs an explicit opt-in per kernel (cheap; done on every launch so
  // that it holds on whichever device is current).
  PX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes));
  const TileGrid tg = make_tile_grid(p.m, p.n, Cfg::kBM, Cfg::kBN);
  const EpilogueParams ep{p.alpha, p.beta, p.bias, p.epilogue};
  auto vec16_ok = [](const void* base, std::int64_t ld) {
    return reinterpret_cast<std::uintptr_t>(base) % 16 == 0 && ld % 8 == 0;
  };
  kernel<<<tg.grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(
      p.m, p.n, p.k, static_cast<const In*>(p.a), p.lda, vec16_ok(p.a, p.lda), static_cast<const In*>(p.b), p.ldb,
      vec16_ok(p.b, p.ldb), static_cast<Out*>(p.c), p.ldc, ep, tg.m_on_x);
  PX_CUDA_CHECK_LAUNCH();
}

template <bool kATrans, bool kBTrans, typename In, typename Out>
void launch_ops(const GemmArgs& p, cudaStream_t stream) {
  if (big_tiles_leave_sms_idle(p.m, p.n, BigTiles::kBM, BigTiles::kBN))
    return launch_config<SmallTiles, kATrans, kBTrans, In, Out>(p, stream);
  launch_config<BigTiles, kATrans, kBTrans, In, Out>(p, stream);
}

template <typename In, typename Out>
void launch_types(const GemmArgs& p, cudaStream_t stream) {
  const bool at = p.op_a == Op::kT, bt = p.op_b == Op::kT;
  if (!at && !bt) return launch_ops<false, false, In, Out>(p, stream);
  if (!at && bt) return launch_ops<false, true, In, Out>(p, stream);
  if (at && !bt) return launch_ops<true, false, In, Out>(p, stream);
  return launch_ops<true, true, In, Out>(p, stream);
}

template <typename In>
void launch_out(const GemmArgs& p, cudaStream_t stream) {
  switch (p.c_type) {
    case DType::kF32: return launch_types<In, float>(p, stream);
    case DType::kF16: return launch_types<In, __half>(p, stream);
    case DType::kBF16: return launch_types<In, __nv_bfloat16>(p, stream);
  }
  throw Error("gemm mma: unsupported c_type");
}

}  // namespace

void launch_gemm_mma(const GemmArgs& p, cudaStream_t stream) {
  int device = 0, major = 0;
  PX_CUDA_CHECK(cudaGetDevice(&device));
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 8) throw Error("gemm kernel mma needs an sm_80 or newer GPU (mma.sync bf16, cp.async, ldmatrix)");
  switch (p.a_type) {
    case DType::kF16: return launch_out<__half>(p, stream);
    case DType::kBF16: return launch_out<__nv_bfloat16>(p, stream);
    case DType::kF32: break;
  }
  throw Error("gemm mma: unsupported a_type");
}

}  // namespace parallax::detail
