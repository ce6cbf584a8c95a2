// Host-callable launchers of the tensor-core GEMM levels (one per file under tc/). Arguments are already
// validated by the caller (gemm_dispatch.cpp), which also guarantees the preconditions noted here.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string_view>

#include "parallax/gemm.hpp"

namespace parallax::detail {

void launch_gemm_wmma(const GemmArgs& args, cudaStream_t stream);  // level 9, sm_80+
void launch_gemm_mma(const GemmArgs& args, cudaStream_t stream);   // level 10, sm_80+, any layout
// Levels 11-13: sm_90 device and tma_compatible(args) hold.
void launch_gemm_wgmma(const GemmArgs& args, cudaStream_t stream);             // level 11
void launch_gemm_wgmma_ws(const GemmArgs& args, cudaStream_t stream);          // level 12
void launch_gemm_wgmma_persistent(const GemmArgs& args, cudaStream_t stream);  // level 13
// Level 14 (experimental): clusters of two CTAs along M, B multicast; non-persistent and persistent.
void launch_gemm_wgmma_cluster(const GemmArgs& args, cudaStream_t stream);
void launch_gemm_wgmma_persistent_cluster(const GemmArgs& args, cudaStream_t stream);

// True when TMA can load both operands: base pointers 16-byte aligned and leading dimensions whose byte
// stride is a multiple of 16 (the rules of cuTensorMapEncodeTiled for the non-innermost global stride).
bool tma_compatible(const GemmArgs& args);
// Whether a product whose operands TMA cannot describe is big enough to be worth copying them into aligned
// buffers first (gemm_with_repacked_operands) rather than running level 10 on them.
bool repacking_pays(const GemmArgs& args);
// Copies every operand TMA cannot describe into a stream-ordered buffer with 16-byte aligned rows, then
// runs `launch` on the copies (C is written in place as usual). Memory-bound, a few percent of a big product.
void gemm_with_repacked_operands(const GemmArgs& args, cudaStream_t stream,
                                 const std::function<void(const GemmArgs&, cudaStream_t)>& launch);
// Throws Error when the current device is older than sm_90 ("kernel <name> needs an sm_90 GPU ...").
void require_sm90(std::string_view kernel_name);
// What kernel "auto" runs for these arguments on the current device.
GemmKernel choose_gemm_kernel(const GemmArgs& args);

}  // namespace parallax::detail
