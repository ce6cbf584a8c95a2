// The `parallax` command-line tool. Every subcommand lives in its own tools/cmd_<name>.cpp and registers
// itself on the root CLI11 app through an add_<name>() function below. Parsing is separated from running so
// tests can parse argument lists on the CPU and inspect the result without a GPU.
//
// Conventions every subcommand follows:
//   * a readable table on stdout by default; `--json` prints one JSON document instead (nothing else on stdout);
//     `--json-out FILE` writes it to a file as well as printing the table
//   * progress for long runs goes to stderr, so stdout stays clean for tables / JSON
//   * exit code 0 on success, 1 on a runtime failure (message on stderr), 2 on bad arguments
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>

namespace parallax::cli {

// What a parsed command line will do when run; returns the process exit code.
using Action = std::function<int()>;

// Registration of each subcommand (one per cmd_*.cpp). After root.parse(...), `action` holds the chosen
// subcommand's work.
void add_info(CLI::App& root, Action& action);
void add_gemm(CLI::App& root, Action& action);
void add_tune(CLI::App& root, Action& action);
void add_attention(CLI::App& root, Action& action);
void add_report(CLI::App& root, Action& action);
void add_comm(CLI::App& root, Action& action);
void add_tp(CLI::App& root, Action& action);

// The root app with every subcommand registered.
std::unique_ptr<CLI::App> make_app(Action& action);

// Parses argv, runs the chosen subcommand, and turns exceptions into messages and exit codes.
int run_main(int argc, const char* const* argv);

}  // namespace parallax::cli
