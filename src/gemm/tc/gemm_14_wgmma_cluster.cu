// Level 14 (experimental, issue 4): thread-block clusters of two CTAs along M with TMA multicast of B.
//
// Levels 12/13 load, per CTA and k-tile, a 128 x 64 slice of A (16 KB) and a 64 x 256 slice of B (32 KB)
// from L2. Two CTAs computing vertically adjacent tiles (same columns) load the SAME B slice. Clustered, each
// loads half of it and multicasts the half into both CTAs' shared memory: per CTA and k-tile 16 KB of A +
// 16 KB of B leave L2 instead of 48 KB (-33% L2 -> SM traffic; at 800 TFLOP/s the 128 x 256 tile asks
// ~9 TB/s of L2 bandwidth without it). Everything else is level 12 / 13 (same kernel template, kClusterM = 2;
// the cross-CTA flow control is described in wgmma_common.cuh).
//
// Two schedules, both reachable only by their experimental names until a benchmark decides:
//   "wgmma-cluster"             one cluster per tile pair (level 12 + clusters)
//   "wgmma-persistent-cluster"  as many clusters as fit at once, walking tile pairs in grouped order
//                               (level 13 + clusters)
#include "gemm/tc/wgmma_launch.cuh"

namespace parallax::detail {

using Level14Config = WgmmaConfig<128, 256, 4, /*warp specialized*/ true, /*persistent*/ false, /*cluster M*/ 2>;
using Level14PersistentConfig =
    WgmmaConfig<128, 256, 4, /*warp specialized*/ true, /*persistent*/ true, /*cluster M*/ 2>;

void launch_gemm_wgmma_cluster(const GemmArgs& p, cudaStream_t stream) { launch_wgmma_level<Level14Config>(p, stream); }

void launch_gemm_wgmma_persistent_cluster(const GemmArgs& p, cudaStream_t stream) {
  launch_wgmma_level<Level14PersistentConfig>(p, stream);
}

}  // namespace parallax::detail
