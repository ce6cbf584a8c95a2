// Level 3 placeholder: the FA2-style mma.sync kernel is written in a separate commit (another helper owns this
// file and replaces it). Until then the launcher exists so the library links, and it says why it cannot run.
#include "attention/launchers.hpp"
#include "parallax/core.hpp"

namespace parallax::detail {

void launch_attention_mma(const AttentionArgs&, cudaStream_t) {
  throw Error("attention kernel 'mma' (level 3) is not implemented yet");
}

}  // namespace parallax::detail
