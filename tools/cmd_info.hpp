// `parallax info`: what the GPU is (properties, datasheet-style peaks) and what it measurably does (the roofs
// every "% of ceiling" in parallax is relative to). Exposed here so tests can parse command lines and inspect
// the options without a GPU.
#pragma once

#include <memory>
#include <string>

#include "cli.hpp"
#include "parallax/core.hpp"
#include "table.hpp"

namespace parallax::cli {

struct InfoOptions {
  OutputOptions output;
  bool measure = true;  // --no-measure: properties only (instant, no GPU work)
  int gemm_size = 8192;  // size^3 of the cuBLAS roofs

  // The canonical command line these options stand for (recorded in the JSON document).
  std::string command_line() const;
};

// Registers `info` on `root`, binding its options to *options; after a successful parse `action` runs it.
CLI::App* register_info(CLI::App& root, Action& action, std::shared_ptr<InfoOptions> options);

// The command itself (throws parallax::Error without a GPU, which run_main turns into exit code 1).
int run_info(const InfoOptions& options);

// Dense BF16 tensor-core peak (fp32 accumulate) from clock x SMs x per-SM rate, for the architectures whose
// per-SM rate is known here (sm_80: 2048, sm_90: 4096 FLOP/clock/SM); NaN elsewhere. A lead, not a measurement.
double theoretical_bf16_tflops(const DeviceInfo& info);

}  // namespace parallax::cli
