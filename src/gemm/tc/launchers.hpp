// Host-callable launchers of the tensor-core GEMM levels (one per file under tc/). Arguments are already
// validated by the caller (gemm_dispatch.cpp).
#pragma once

#include <cuda_runtime.h>

#include "parallax/gemm.hpp"

namespace parallax::detail {

void launch_gemm_wmma(const GemmArgs& args, cudaStream_t stream);  // level 9

}  // namespace parallax::detail
