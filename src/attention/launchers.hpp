// Host-callable launchers of the attention forward levels (one per file under src/attention/). Arguments are
// already validated by the caller (attention_dispatch.cpp); scale is args.scale().
#pragma once

#include <cuda_runtime.h>

#include "parallax/attention.hpp"

namespace parallax::detail {

void launch_attention_reference(const AttentionArgs& args, cudaStream_t stream);  // level 1
void launch_attention_tiled(const AttentionArgs& args, cudaStream_t stream);      // level 2
void launch_attention_mma(const AttentionArgs& args, cudaStream_t stream);        // level 3, sm_80+
void launch_attention_wgmma(const AttentionArgs& args, cudaStream_t stream);      // level 4, sm_90a

}  // namespace parallax::detail
