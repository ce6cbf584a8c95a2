// Level 4 placeholder: the FA3-style Hopper kernel (wgmma + TMA, warp-specialized, sm_90a) is future work.
// The launcher exists so the dispatch links and "wgmma" is a known name that fails with a clear message.
#include "attention/launchers.hpp"
#include "parallax/core.hpp"

namespace parallax::detail {

void launch_attention_wgmma(const AttentionArgs&, cudaStream_t) {
  throw Error("attention kernel 'wgmma' (level 4) is not implemented yet");
}

}  // namespace parallax::detail
