// PLACEHOLDER while the command is being written.
#include "cli.hpp"
namespace parallax::cli {
void add_info(CLI::App& root, Action&) { root.add_subcommand("info", "(not implemented yet)"); }
}  // namespace parallax::cli
