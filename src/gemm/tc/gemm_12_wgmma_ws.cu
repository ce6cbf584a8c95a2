// Level 12: warp specialization. A third warpgroup only produces: one elected thread waits for a free
// stage and issues its TMA copies, the rest of it idles. It keeps 40 registers per thread (setmaxnreg.dec)
// and the two consumer warpgroups take 232 (setmaxnreg.inc), which pays for a 64 x 256 fp32 accumulator per
// warpgroup (128 registers/thread): block tile 128 x 256 x 64, wgmma m64n256k16, 4 stages of 48 KiB.
// The larger tile halves the shared-memory traffic per flop against level 11 (each A value feeds 256
// columns), and the consumers' instruction stream is nothing but waits and wgmma.
#include "gemm/tc/wgmma_launch.cuh"

namespace parallax::detail {

using Level12Config = WgmmaConfig<128, 256, 4, /*warp specialized*/ true, /*persistent*/ false>;

void launch_gemm_wgmma_ws(const GemmArgs& p, cudaStream_t stream) { launch_wgmma_level<Level12Config>(p, stream); }

}  // namespace parallax::detail
