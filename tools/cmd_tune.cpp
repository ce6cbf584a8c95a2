// PLACEHOLDER while the command is being written.
#include "cli.hpp"
namespace parallax::cli {
void add_tune(CLI::App& root, Action&) { root.add_subcommand("tune", "(not implemented yet)"); }
}  // namespace parallax::cli
