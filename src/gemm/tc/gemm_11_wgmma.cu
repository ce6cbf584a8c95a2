// Level 11: the simplest correct Hopper GEMM. TMA copies A and B tiles into a 4-stage ring of 128B-swizzled
// shared memory, mbarriers say when a stage has landed / been consumed, and both warpgroups of the block
// multiply with wgmma m64n128k16 straight from shared memory. No specialization: thread 0 issues the copies
// between its own products (see wgmma_common.cuh for the pipeline, layouts and epilogue).
//
// Against level 10 (mma.sync): no ldmatrix and no register staging of operands at all (wgmma reads shared
// memory through descriptors), one instruction per 64 x 128 x 16 product instead of 64 m16n8k16 ones, and
// address generation for loads moves to the TMA unit. What it still lacks: the copy issue sits in the
// compute warps' instruction stream, and a 128 x 128 tile gives each warpgroup only 64 accumulator
// registers per thread; level 12 fixes both.
#include "gemm/tc/wgmma_launch.cuh"

namespace parallax::detail {

// 128 x 128 x 64 tile, 4 stages (4 x 32 KiB), 2 computing warpgroups.
using Level11Config = WgmmaConfig<128, 128, 4, /*warp specialized*/ false, /*persistent*/ false>;

void launch_gemm_wgmma(const GemmArgs& p, cudaStream_t stream) { launch_wgmma_level<Level11Config>(p, stream); }

}  // namespace parallax::detail
