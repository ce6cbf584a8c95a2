// Level 13: level 12 made persistent. The grid is one block per SM; block b computes tiles b, b + grid,
// b + 2 grid, ... of a grouped ("supertile") order: 8 tile rows are walked column by column, so the ~132
// tiles in flight share a handful of A row panels and B column panels in L2. Because the pipeline state
// carries over from one tile to the next, the producer starts loading tile i+1 while the consumers are
// still writing tile i's epilogue: the epilogue and the launch/prologue cost of every tile but the first
// are hidden.
#include "gemm/tc/wgmma_launch.cuh"

namespace parallax::detail {

using Level13Config = WgmmaConfig<128, 256, 4, /*warp specialized*/ true, /*persistent*/ true>;

void launch_gemm_wgmma_persistent(const GemmArgs& p, cudaStream_t stream) {
  launch_wgmma_level<Level13Config>(p, stream);
}

}  // namespace parallax::detail
