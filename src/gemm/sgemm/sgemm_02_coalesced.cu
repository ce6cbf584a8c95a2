// PLACEHOLDER while the level is being written: throws, never computes.
#include "launchers.hpp"
#include "parallax/core.hpp"
namespace parallax::detail {
void launch_sgemm_coalesced(const SgemmArgs&, cudaStream_t) { throw Error("sgemm level 'coalesced' not implemented yet"); }
}  // namespace parallax::detail
