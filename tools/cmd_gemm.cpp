// PLACEHOLDER while the command is being written.
#include "cli.hpp"
namespace parallax::cli {
void add_gemm(CLI::App& root, Action&) { root.add_subcommand("gemm", "(not implemented yet)"); }
}  // namespace parallax::cli
