// PLACEHOLDER while the level is being written: throws, never computes.
#include "launchers.hpp"
#include "parallax/core.hpp"
namespace parallax::detail {
void launch_sgemm_warptile(const SgemmArgs&, cudaStream_t) { throw Error("sgemm level 'warptile' not implemented yet"); }
}  // namespace parallax::detail
