// Tile configurations of ladder levels 7 and 8: the rules a configuration must obey (stated once, used by
// the kernels' static_asserts and by the host when it reads a configuration from the tuning cache), the
// compiled-in candidate list, and small host helpers the two launchers share.
//
// Included by CUDA (.cu) and plain C++ files alike: everything here is constexpr or host-only inline code.
#pragma once

#include <cstdint>
#include <iterator>
#include <string_view>

#include "parallax/sgemm.hpp"
#include "parallax/tune.hpp"

namespace parallax {

// Padding (in floats) of each k-row of level 8's transposed A tile As[bk][bm + pad]. The transposed store
// writes one column of As per thread; without padding the lanes that load the same row of A but different
// k land in the same bank (row stride bm*4 bytes is a multiple of 128). 4 floats shift successive k-rows by
// 4 banks while keeping every row 16-byte aligned for the LDS.128 fragment reads (see sgemm_08_pipelined.cu).
inline constexpr int kSgemmAPad = 4;

// Hardware facts the rules use (the smallest across the built architectures, sm_80 and sm_90).
inline constexpr int kMaxThreadsPerBlock = 1024;
inline constexpr int kMaxThreadsPerSm = 2048;
inline constexpr int kRegistersPerSm = 65536;
inline constexpr int kMaxRegistersPerThread = 255;
inline constexpr int kStaticSmemLimit = 48 * 1024;     // static __shared__ per block, no opt-in needed
inline constexpr int kSmemPerSmSm80 = 164 * 1024;      // A100: the smaller of the two built archs
inline constexpr int kSmemReservedPerBlock = 1024;     // the driver keeps 1 KiB per resident block

// Shared memory of one configuration in level 8's layout (the larger of the two levels: two buffers, A
// padded). Level 7 uses one unpadded buffer, so a configuration valid for level 8 is valid for level 7.
constexpr int sgemm_smem_bytes(const SgemmTileConfig& c) {
  return 2 * ((c.bm + kSgemmAPad) * c.bk + c.bk * c.bn) * static_cast<int>(sizeof(float));
}

// float4 loads of one block tile, per thread: A tile bm x bk, B tile bk x bn.
constexpr int sgemm_a_loads_per_thread(const SgemmTileConfig& c) {
  return c.threads() > 0 ? c.bm * c.bk / 4 / c.threads() : 0;
}
constexpr int sgemm_b_loads_per_thread(const SgemmTileConfig& c) {
  return c.threads() > 0 ? c.bk * c.bn / 4 / c.threads() : 0;
}

// Registers the launch bounds leave each thread (allocation granularity 8), and a lower bound of what the
// kernel needs live at once: the accumulators, two sets of fragments (level 8 double-buffers them), the
// staged next global tile (4 floats per float4 load), and ~16 for addresses, indices and loop counters.
constexpr int sgemm_register_cap(const SgemmTileConfig& c) {
  const int per_thread = (c.threads() > 0 && c.min_blocks > 0) ? kRegistersPerSm / (c.threads() * c.min_blocks) : 0;
  const int rounded = per_thread / 8 * 8;
  return rounded < kMaxRegistersPerThread ? rounded : kMaxRegistersPerThread;
}
constexpr int sgemm_register_need(const SgemmTileConfig& c) {
  return c.thread_m() * c.thread_n() + 2 * (c.thread_m() + c.thread_n()) +
         4 * (sgemm_a_loads_per_thread(c) + sgemm_b_loads_per_thread(c)) + 16;
}

// THE validity rules of a tile configuration, in the order they are checked. Returns "" when `c` is valid,
// else the first rule it breaks. Every kernel instantiation static_asserts this; the host rejects cache
// entries failing it (and entries that are valid but not compiled in, see sgemm_tile_candidates).
constexpr std::string_view sgemm_tile_config_error(const SgemmTileConfig& c) {
  // Sizes must be positive before anything is divided by them.
  if (c.bm <= 0 || c.bn <= 0 || c.bk <= 0 || c.wm <= 0 || c.wn <= 0 || c.wn_iter <= 0 || c.tm <= 0 ||
      c.tn <= 0 || c.min_blocks <= 0)
    return "every field must be positive";
  // Warps tile the block exactly: (bm/wm) x (bn/wn) warps, no partial warp tiles.
  if (c.bm % c.wm != 0 || c.bn % c.wn != 0) return "warp tile must divide the block tile (bm % wm, bn % wn)";
  // The hardware's block size limit.
  if (c.threads() > kMaxThreadsPerBlock) return "block has more than 1024 threads ((bm/wm)*(bn/wn)*32)";
  // Fragments are read from shared memory as float4 (LDS.128): 4 consecutive m (or n) per read.
  if (c.tm % 4 != 0 || c.tn % 4 != 0) return "thread tile tm and tn must be multiples of 4 (float4 fragment reads)";
  // A warp's n extent splits into wn_iter sub-tiles, each a whole number of tn-wide thread columns.
  if (c.wn % c.wn_iter != 0 || (c.wn / c.wn_iter) % c.tn != 0)
    return "wn must split into wn_iter sub-tiles that are multiples of tn";
  // The 32 lanes of a warp exactly cover one (wm/wm_iter) x (wn/wn_iter) sub-tile with tm x tn each;
  // wm_iter = wm*wn / (32*tm*tn*wn_iter) must be a whole number that splits wm into multiples of tm.
  if (c.wm_iter() == 0 || c.wm % c.wm_iter() != 0 || (c.wm / c.wm_iter()) % c.tm != 0 ||
      (c.wm / c.wm_iter() / c.tm) * (c.wn / c.wn_iter / c.tn) != 32)
    return "the 32 lanes of a warp must exactly cover a (wm/wm_iter) x (wn/wn_iter) sub-tile of tm x tn each";
  // Level 8 numbers the lanes of a sub-tile in 2x2 quads (see sgemm_08_pipelined.cu), so the sub-tile must
  // be at least 2 lanes along n (and hence at most 16 along m, at least 2 along m).
  if (c.wn / c.wn_iter / c.tn < 2 || c.wm / c.wm_iter() / c.tm < 2)
    return "a sub-tile must be at least 2 lanes along m and along n (level 8's 2x2 lane quads)";
  // Global loads are float4 along k for A and along n for B.
  // (Along n it is implied: bn is a multiple of wn, which is a multiple of tn, a multiple of 4.)
  if (c.bk % 4 != 0) return "bk must be a multiple of 4 (float4 loads of A along k)";
  // Every thread does the same number of float4 loads of each tile: no idle threads, no remainder loop.
  if ((c.bm * c.bk / 4) % c.threads() != 0) return "threads must evenly divide the A tile's bm*bk/4 float4 loads";
  if ((c.bk * c.bn / 4) % c.threads() != 0) return "threads must evenly divide the B tile's bk*bn/4 float4 loads";
  // Static shared memory (both buffers of level 8) fits without the dynamic opt-in.
  if (sgemm_smem_bytes(c) > kStaticSmemLimit) return "shared memory exceeds 48 KiB (2*((bm+4)*bk + bk*bn)*4 bytes)";
  // The occupancy promised by __launch_bounds__ must be reachable: threads and shared memory of min_blocks
  // blocks fit one SM.
  if (c.threads() * c.min_blocks > kMaxThreadsPerSm) return "min_blocks blocks exceed 2048 threads per SM";
  if (c.min_blocks * (sgemm_smem_bytes(c) + kSmemReservedPerBlock) > kSmemPerSmSm80)
    return "min_blocks blocks exceed the shared memory of an SM";
  // ... and the register cap it implies must hold the working set, else ptxas spills to local memory.
  if (sgemm_register_cap(c) < sgemm_register_need(c))
    return "register cap 64K/(threads*min_blocks) too small for accumulators, fragments and staged loads";
  return "";
}

// The compiled-in candidates (both levels compile every one of them). Each is a ~1 s ptxas job per level per
// architecture, so the list stays short. Chosen to span the shape space:
//   - 128x128 with 256 threads and 8x8 results per thread (as 2x2 float4 sub-tiles): the classic large-GEMM
//     tile; bk 8 vs 16 trades shared memory and staging registers against barriers per FLOP, warp shapes
//     64x32 vs 32x64 trade A vs B fragment reuse.
//   - 128x256 with 256 threads and 8x16 per thread at one block per SM: the most FFMAs per shared load.
//   - 128x64 / 64x128 with 128 threads: twice the blocks of 128x128 for mid sizes.
//   - 64x64 with 128 threads and 4x8 per thread: 4x the blocks, for small problems (1000^3 -> 256 blocks).
inline constexpr SgemmTileConfig kSgemmTileCandidates[] = {
    // bm   bn   bk  wm  wn  wn_iter tm tn min_blocks
    {128, 128, 8, 64, 32, 2, 4, 4, 2},
    {128, 128, 16, 64, 32, 2, 4, 4, 2},
    {128, 128, 8, 32, 64, 2, 4, 4, 2},
    {128, 256, 8, 64, 64, 4, 4, 4, 1},
    {128, 64, 8, 64, 32, 2, 4, 4, 4},
    {64, 128, 8, 32, 64, 2, 4, 4, 4},
    {64, 64, 8, 32, 32, 2, 4, 4, 4},
    {64, 64, 16, 32, 32, 2, 4, 4, 4},
};
inline constexpr int kSgemmTileCandidateCount = static_cast<int>(std::size(kSgemmTileCandidates));

namespace detail {

// True when every rule holds for every candidate (checked at compile time below).
constexpr bool all_candidates_valid() {
  for (const auto& c : kSgemmTileCandidates)
    if (!sgemm_tile_config_error(c).empty()) return false;
  return true;
}
static_assert(all_candidates_valid(), "a compiled-in SGEMM tile candidate breaks a rule of sgemm_tile_config_error");

// float4 global loads and stores need 16-byte aligned addresses: the base pointers aligned and every row
// starting on a multiple of 4 floats. Decided once per launch on the host; the kernels fall back to scalar
// guarded accesses otherwise (any 4-byte aligned pointer and any leading dimension work).
inline bool sgemm_vector_ok(const SgemmArgs& p) {
  auto aligned = [](const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; };
  return aligned(p.a) && aligned(p.b) && aligned(p.c) && p.lda % 4 == 0 && p.ldb % 4 == 0 && p.ldc % 4 == 0;
}

// Grid limits: gridDim.y (m tiles) is at most 65535, and keeping n per launch below 2^30 keeps every
// in-kernel column index (block start + tile width) far from int overflow. Problems beyond either limit are
// split into several launches over sub-matrices; `launch(sub_args, tiles_n, tiles_m)` runs one of them.
template <typename Launch>
void sgemm_for_each_grid_chunk(const SgemmArgs& p, int bm, int bn, Launch&& launch) {
  const int max_m = 65535 * bm;
  const int max_n = (1 << 30) / bn * bn;
  for (int m0 = 0; m0 < p.m; m0 += (p.m - m0 > max_m ? max_m : p.m - m0)) {
    const int mc = p.m - m0 > max_m ? max_m : p.m - m0;
    for (int n0 = 0; n0 < p.n; n0 += (p.n - n0 > max_n ? max_n : p.n - n0)) {
      const int nc = p.n - n0 > max_n ? max_n : p.n - n0;
      SgemmArgs q = p;
      q.m = mc;
      q.n = nc;
      q.a = p.a + static_cast<std::int64_t>(m0) * p.lda;
      q.b = p.b + n0;
      q.c = p.c + static_cast<std::int64_t>(m0) * p.ldc + n0;
      launch(q, (nc + bn - 1) / bn, (mc + bm - 1) / bm);
    }
  }
}

// One entry of a level's launch table: the configuration and the launcher of its kernel instantiation.
struct SgemmConfigLauncher {
  SgemmTileConfig config;
  void (*launch)(const SgemmArgs& args, cudaStream_t stream);
};

// The configuration levels 7/8 use for `args` on the current device: the tuned winner from the process's
// tuning cache when there is one for this GPU, else choose_sgemm_config's default. Defined in tune.cpp.
SgemmTileConfig sgemm_runtime_config(SgemmLevel level, const SgemmArgs& args);

}  // namespace detail
}  // namespace parallax
