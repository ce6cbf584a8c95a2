// Host-callable launchers of the attention forward levels (one per file under src/attention/). Arguments are
// already validated by the caller (attention_dispatch.cpp); scale is args.scale().
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "parallax/attention.hpp"

namespace parallax::detail {

void launch_attention_reference(const AttentionArgs& args, cudaStream_t stream);  // level 1
void launch_attention_tiled(const AttentionArgs& args, cudaStream_t stream);      // level 2
// Levels 3 and 4 (mma, wgmma) load 16-byte vectors (8 elements) along D: the dispatch runs them only when
// attention_vector_aligned(args) holds (q/k/v/out bases 16-byte aligned and every seq/head/batch stride a
// multiple of 8 elements); "auto" falls back to level 2 otherwise, an explicit request is an InvalidArgument.
bool attention_vector_aligned(const AttentionArgs& args);
// Level 4 (wgmma) reads q/k/v through TMA tensor maps: on top of attention_vector_aligned it needs every q/k/v
// stride of a dimension longer than 1 to be positive (a TMA stride cannot be 0, i.e. no broadcasting), and
// batch, heads <= 65535 (its grid is (query blocks, H, B)). "auto" falls back to level 3 otherwise.
bool attention_tma_compatible(const AttentionArgs& args);
// What kernel "auto" runs for these arguments on the current device: "wgmma" on sm_90 (compute capability
// 9.0) when attention_tma_compatible, else "mma" on sm_80+ with 16-byte-aligned operands, else "tiled".
AttentionKernel choose_attention_kernel(const AttentionArgs& args);

void launch_attention_mma(const AttentionArgs& args, cudaStream_t stream);        // level 3, sm_80+
void launch_attention_wgmma(const AttentionArgs& args, cudaStream_t stream);      // level 4, sm_90a

// ---- backward --------------------------------------------------------------------------------------------
// Workspace of one backward call, allocated by the dispatcher (stream-ordered) and passed to the levels:
// delta = rowsum(dO * O) fp32 [B, H, Sq]; dq_accum fp32 [B, H, Sq, D] (nullptr when the level does not use it).
// dq_semaphore int [B, H, ceil(Sq / 64)]: level 4's deterministic mode (the order of the dq additions).
struct AttentionBackwardWorkspace {
  float* delta = nullptr;
  float* dq_accum = nullptr;
  int* dq_semaphore = nullptr;
};
void launch_attention_backward_reference(const AttentionBackwardArgs& args, const AttentionBackwardWorkspace& ws,
                                         cudaStream_t stream);  // level 1
void launch_attention_backward_mma(const AttentionBackwardArgs& args, const AttentionBackwardWorkspace& ws,
                                   cudaStream_t stream);        // level 3, sm_80+
// The 16-byte vector rule of levels 3-4, for the backward's eight tensors.
bool attention_vector_aligned(const AttentionBackwardArgs& args);
// Level 3's first and last launches, shared with level 4: Delta = rowsum(dO * out) into ws.delta (and, when
// ws.dq_accum is set, zeroing the accumulator); dq = scale * ws.dq_accum in the input type.
void launch_attention_backward_preprocess(const AttentionBackwardArgs& args, const AttentionBackwardWorkspace& ws,
                                          cudaStream_t stream);
void launch_attention_backward_dq_convert(const AttentionBackwardArgs& args, const AttentionBackwardWorkspace& ws,
                                          cudaStream_t stream);
// Backward level 4 (wgmma, sm_90a): reads q, k, v, dout through TMA tensor maps, so on top of the 16-byte rule
// for all eight tensors it needs every q/k/v/dout stride of a dimension longer than 1 to be positive and
// batch, heads <= 65535 (grid). "auto" falls back to level 3 otherwise.
bool attention_backward_tma_compatible(const AttentionBackwardArgs& args);
// What the backward's "auto" runs: "wgmma" on compute capability 9.0 when attention_backward_tma_compatible,
// else "mma" on sm_80+ when all eight tensors allow 16-byte vectors, else "reference". The second form takes
// the compute capability as arguments (the rule itself, testable without a GPU).
AttentionKernel choose_attention_backward_kernel(const AttentionBackwardArgs& args);
AttentionKernel choose_attention_backward_kernel(const AttentionBackwardArgs& args, int cc_major, int cc_minor);
// Number of int semaphores level 4 needs in ws.dq_semaphore (0 unless deterministic).
std::size_t attention_backward_wgmma_semaphores(const AttentionBackwardArgs& args);
void launch_attention_backward_wgmma(const AttentionBackwardArgs& args, const AttentionBackwardWorkspace& ws,
                                     cudaStream_t stream);      // level 4, sm_90a

}  // namespace parallax::detail
