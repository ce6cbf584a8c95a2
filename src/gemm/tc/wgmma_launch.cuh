// Host-side launch of the shared Hopper kernel (wgmma_common.cuh) for one WgmmaConfig: builds the two TMA
// maps for the operands' stored layouts, picks the instantiation for (input type, output type, op_a, op_b),
// sizes the grid (one block per tile, or one per SM for the persistent level; with clusters, one pair of
// blocks per tile pair, or as many pairs as can be resident at once) and launches it, through
// cudaLaunchKernelEx with a cluster-dimension attribute when the config asks for clusters. Included by the
// level files.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "gemm/tc/launchers.hpp"
#include "gemm/tc/tma_map.hpp"
#include "gemm/tc/wgmma_common.cuh"
#include "parallax/core.hpp"

namespace parallax::detail {

template <class Cfg, typename In, typename Out, bool kAMnMajor, bool kBMnMajor>
void launch_wgmma_instance(const GemmArgs& p, cudaStream_t stream) {
  // Stored shapes: A is m x k (op_a = N, K-major) or k x m (op_a = T, M-major); B is k x n (op_b = N,
  // N-major) or n x k (op_b = T, K-major). K-major boxes take a whole tile of rows at once; MN-major boxes
  // are 64 x 64 (the swizzle width along the contiguous dimension), several per tile.
  const CUtensorMap map_a = kAMnMajor ? make_tma_map_2d(p.a, p.a_type, p.k, p.m, p.lda, Cfg::BK, 64)
                                      : make_tma_map_2d(p.a, p.a_type, p.m, p.k, p.lda, Cfg::BM, Cfg::BK);
  // K-major B: one box per CTA covers its share of the tile's rows (all BN rows without clusters).
  const CUtensorMap map_b = kBMnMajor ? make_tma_map_2d(p.b, p.b_type, p.k, p.n, p.ldb, Cfg::BK, 64)
                                      : make_tma_map_2d(p.b, p.b_type, p.n, p.k, p.ldb, Cfg::kBShareN, Cfg::BK);
  // Work units (kernel: TileSchedule): tiles, or vertical pairs of tiles with clusters of two.
  const long long unit_rows = ((p.m + Cfg::BM - 1) / Cfg::BM + Cfg::kClusterM - 1) / Cfg::kClusterM;
  const long long units = unit_rows * ((p.n + Cfg::BN - 1) / Cfg::BN);
  if (units * Cfg::kClusterM > INT32_MAX) throw Error("gemm wgmma: too many tiles (" + std::to_string(units) + ")");
  auto kernel = gemm_wgmma_kernel<Cfg, In, Out, kAMnMajor, kBMnMajor>;
  PX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes));
  // 4-column pieces of the epilogue go out as one 8/16-byte access when every row start allows it.
  const bool vec_ok = p.ldc % 4 == 0 && reinterpret_cast<std::uintptr_t>(p.c) % (4 * sizeof(Out)) == 0;
  const EpilogueParams ep{p.alpha, p.beta, p.bias, p.epilogue};
  Out* const c = static_cast<Out*>(p.c);
  // The asynchronous TMA-store epilogue (store_tile_tma) when the epilogue is alpha only and C suits TMA.
  // n * sizeof(Out) % 16 == 0 as well: measured on an H100, a bulk tensor store clips the row's end only to
  // 16-byte granules (n = 1 fp32 wrote 16 bytes of the row), so a ragged last granule would overwrite what
  // lies between column n and the next 16-byte boundary (row padding, a neighbouring matrix).
  const bool tma_store = tma_store_epilogue_enabled() && p.beta == 0.f && p.bias == nullptr &&
                         p.epilogue == Epilogue::kNone && reinterpret_cast<std::uintptr_t>(p.c) % 16 == 0 &&
                         (p.ldc * static_cast<std::int64_t>(sizeof(Out))) % 16 == 0 &&
                         (static_cast<std::int64_t>(p.n) * static_cast<std::int64_t>(sizeof(Out))) % 16 == 0;
  const CUtensorMap map_c =
      tma_store ? make_tma_map_2d(p.c, p.c_type, p.m, p.n, p.ldc, 64, 128 / static_cast<int>(sizeof(Out)))
                : CUtensorMap{};

  if constexpr (Cfg::kClusterM == 1) {
    int blocks = static_cast<int>(units);
    if constexpr (Cfg::kPersistent) {
      int device = 0, sms = 0;
      PX_CUDA_CHECK(cudaGetDevice(&device));
      PX_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
      blocks = std::min(blocks, sms);
      if (p.max_sms > 0) blocks = std::min(blocks, p.max_sms);  // leave SMs to a concurrent kernel (NCCL)
    }
    kernel<<<blocks, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(map_a, map_b, map_c, tma_store, p.m, p.n, p.k, c,
                                                                p.ldc, vec_ok, ep);
    PX_CUDA_CHECK_LAUNCH();
  } else {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = Cfg::kClusterM;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(static_cast<unsigned>(units * Cfg::kClusterM));
    config.blockDim = dim3(Cfg::kThreads);
    config.dynamicSmemBytes = Cfg::kSmemBytes;
    config.stream = stream;
    config.attrs = attr;
    config.numAttrs = 1;
    if constexpr (Cfg::kPersistent) {
      // Persistent with clusters: as many pairs as fit at once (an SM count alone would overcount: a pair
      // needs two free SMs of one GPC, and GPCs with an odd number of usable SMs leave one idle).
      int clusters = 0;
      PX_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
      if (clusters < 1) throw Error("gemm wgmma: no cluster of " + std::to_string(Cfg::kClusterM) +
                                    " blocks with " + std::to_string(Cfg::kSmemBytes) +
                                    " bytes of shared memory fits on this GPU");
      if (p.max_sms > 0) clusters = std::min(clusters, std::max(1, p.max_sms / Cfg::kClusterM));
      config.gridDim = dim3(static_cast<unsigned>(std::min<long long>(units, clusters) * Cfg::kClusterM));
    }
    PX_CUDA_CHECK(
        cudaLaunchKernelEx(&config, kernel, map_a, map_b, map_c, tma_store, p.m, p.n, p.k, c, p.ldc, vec_ok, ep));
    PX_CUDA_CHECK_LAUNCH();
  }
}

template <class Cfg, typename In, typename Out>
void launch_wgmma_ops(const GemmArgs& p, cudaStream_t stream) {
  const bool a_mn = p.op_a == Op::kT, b_mn = p.op_b == Op::kN;
  if (!a_mn && b_mn) return launch_wgmma_instance<Cfg, In, Out, false, true>(p, stream);   // NN
  if (!a_mn && !b_mn) return launch_wgmma_instance<Cfg, In, Out, false, false>(p, stream); // NT
  if (a_mn && b_mn) return launch_wgmma_instance<Cfg, In, Out, true, true>(p, stream);     // TN
  return launch_wgmma_instance<Cfg, In, Out, true, false>(p, stream);                      // TT
}

template <class Cfg, typename In>
void launch_wgmma_out(const GemmArgs& p, cudaStream_t stream) {
  switch (p.c_type) {
    case DType::kF32: return launch_wgmma_ops<Cfg, In, float>(p, stream);
    case DType::kF16: return launch_wgmma_ops<Cfg, In, __half>(p, stream);
    case DType::kBF16: return launch_wgmma_ops<Cfg, In, __nv_bfloat16>(p, stream);
  }
  throw Error("gemm wgmma: unsupported c_type");
}

// Entry of a level: arguments validated, sm_90 checked and tma_compatible(p) true (gemm_dispatch.cpp).
template <class Cfg>
void launch_wgmma_level(const GemmArgs& p, cudaStream_t stream) {
  switch (p.a_type) {
    case DType::kBF16: return launch_wgmma_out<Cfg, __nv_bfloat16>(p, stream);
    case DType::kF16: return launch_wgmma_out<Cfg, __half>(p, stream);
    case DType::kF32: break;
  }
  throw Error("gemm wgmma: unsupported a_type");
}

}  // namespace parallax::detail
