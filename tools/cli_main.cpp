#include <fmt/core.h>

#include <cstdio>
#include <exception>

#include "cli.hpp"
#include "parallax/core.hpp"

namespace parallax::cli {

std::unique_ptr<CLI::App> make_app(Action& action) {
  auto app = std::make_unique<CLI::App>(
      "parallax: GEMM from a naive kernel to tensor cores, FlashAttention, tensor parallelism.\n"
      "Run `parallax <command> --help` for each command's options.",
      "parallax");
  app->require_subcommand(1);
  app->set_version_flag("--version", std::string(parallax::version()) + " (" + parallax::git_sha() + ")");
  add_info(*app, action);
  add_gemm(*app, action);
  add_tune(*app, action);
  add_attention(*app, action);
  add_report(*app, action);
  add_comm(*app, action);
  add_tp(*app, action);
  return app;
}

int run_main(int argc, const char* const* argv) {
  Action action;
  auto app = make_app(action);
  try {
    app->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Prints help (exit 0) or the parse error; every bad command line exits 2, as documented in cli.hpp.
    const int code = app->exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    return action ? action() : 0;
  } catch (const parallax::InvalidArgument& e) {
    fmt::print(stderr, "parallax: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "parallax: error: {}\n", e.what());
    return 1;
  }
}

}  // namespace parallax::cli
