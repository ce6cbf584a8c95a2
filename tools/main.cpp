#include "cli.hpp"

int main(int argc, char** argv) { return parallax::cli::run_main(argc, argv); }
