// Level 10: SCAFFOLDING ONLY, replaced by the real kernel in its own commit. Throws so that nothing can
// mistake it for a working level.
#include "gemm/tc/launchers.hpp"
#include "parallax/core.hpp"

namespace parallax::detail {

void launch_gemm_mma(const GemmArgs&, cudaStream_t) { throw Error("gemm level 10 is not implemented yet"); }

}  // namespace parallax::detail
