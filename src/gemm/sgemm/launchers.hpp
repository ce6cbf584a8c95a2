// Internal interface between the host dispatcher (src/gemm/sgemm_dispatch.cpp, plain C++) and the ladder
// kernels (src/gemm/sgemm/*.cu). Each level's file defines its kernel and one launcher; arguments arrive
// already validated, and m, n, k >= 1.
#pragma once

#include <cuda_runtime.h>

#include <span>

#include "gemm/sgemm_tiles.hpp"
#include "parallax/sgemm.hpp"

namespace parallax::detail {

void launch_sgemm_naive(const SgemmArgs& args, cudaStream_t stream);
void launch_sgemm_coalesced(const SgemmArgs& args, cudaStream_t stream);
void launch_sgemm_shared_mem(const SgemmArgs& args, cudaStream_t stream);
void launch_sgemm_blocktile_1d(const SgemmArgs& args, cudaStream_t stream);
void launch_sgemm_blocktile_2d(const SgemmArgs& args, cudaStream_t stream);
void launch_sgemm_vectorized(const SgemmArgs& args, cudaStream_t stream);
// Levels 7 and 8 take their tile configuration at run time: see sgemm_tiles.hpp and the tuner.
void launch_sgemm_warptile(const SgemmArgs& args, cudaStream_t stream);
void launch_sgemm_pipelined(const SgemmArgs& args, cudaStream_t stream);
// Per-configuration launch tables of levels 7 and 8: one entry per kSgemmTileCandidates element, in order.
std::span<const SgemmConfigLauncher> sgemm_warptile_launchers();
std::span<const SgemmConfigLauncher> sgemm_pipelined_launchers();

}  // namespace parallax::detail
