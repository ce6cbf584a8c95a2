// `parallax info [--json] [--json-out FILE] [--no-measure] [--gemm-size N]`
//
// Two tables: the device's properties with its datasheet-style peaks, then the MEASURED roofs (copy
// bandwidth, cuBLAS SGEMM and BF16 throughput) next to those peaks. The measured roofs are what every other
// command's "% of ceiling" means; the theoretical numbers are only there to show how far from the datasheet
// the real machine sits (clocks throttle, copies pay for both directions, cuBLAS is not perfect either).
#include "cmd_info.hpp"

#include <fmt/core.h>

#include <cmath>
#include <limits>

#include "parallax/bench.hpp"
#include "parallax/results.hpp"

namespace parallax::cli {

double theoretical_bf16_tflops(const DeviceInfo& info) {
  // Dense (no sparsity) BF16 FLOP per clock per SM: A100 312 TFLOP/s = 2048 x 108 SMs x 1.41 GHz;
  // H100 SXM 989 TFLOP/s = 4096 x 132 SMs x 1.83 GHz. Other parts (consumer Ampere/Ada, Blackwell) differ
  // and are left unknown rather than guessed.
  int per_sm_per_clock = 0;
  if (info.cc_major == 8 && info.cc_minor == 0) per_sm_per_clock = 2048;
  if (info.cc_major == 9 && info.cc_minor == 0) per_sm_per_clock = 4096;
  if (per_sm_per_clock == 0 || info.clock_khz <= 0) return std::numeric_limits<double>::quiet_NaN();
  return static_cast<double>(per_sm_per_clock) * info.sm_count * (info.clock_khz * 1e3) / 1e12;
}

std::string InfoOptions::command_line() const {
  std::string s = "parallax info";
  if (!measure) s += " --no-measure";
  if (gemm_size != InfoOptions{}.gemm_size) s += " --gemm-size " + std::to_string(gemm_size);
  return s;
}

CLI::App* register_info(CLI::App& root, Action& action, std::shared_ptr<InfoOptions> options) {
  CLI::App* cmd = root.add_subcommand(
      "info", "Device properties and the measured roofs (copy GB/s, cuBLAS SGEMM and BF16 TFLOP/s)");
  add_output_options(*cmd, options->output);
  cmd->add_flag("!--no-measure", options->measure,
                "Print the properties only; skip measuring the roofs (takes a few seconds)");
  cmd->add_option("--gemm-size", options->gemm_size, "Matrix size N of the N^3 cuBLAS roofs")
      ->check(CLI::Range(256, 65536))
      ->capture_default_str();
  // The callback owns a reference to the options, so they live exactly as long as the app.
  cmd->callback([&action, options] { action = [options] { return run_info(*options); }; });
  return cmd;
}

void add_info(CLI::App& root, Action& action) { register_info(root, action, std::make_shared<InfoOptions>()); }

namespace {

std::string mhz(int khz) { return fmt::format("{} MHz", khz / 1000); }

Table properties_table(const DeviceInfo& d) {
  Table t({{"property"}, {"value", Align::kLeft}});
  t.add_row({"name", d.name});
  t.add_row({"device index", std::to_string(d.device)});
  t.add_row({"compute capability", fmt::format("{}.{} ({})", d.cc_major, d.cc_minor, d.arch())});
  t.add_row({"SMs", std::to_string(d.sm_count)});
  t.add_row({"global memory", bytes_iec(static_cast<double>(d.global_memory_bytes))});
  t.add_row({"L2 cache", bytes_iec(static_cast<double>(d.l2_bytes))});
  t.add_row({"shared memory per block (default)", bytes_iec(static_cast<double>(d.shared_memory_per_block))});
  t.add_row({"shared memory per block (opt-in)", bytes_iec(static_cast<double>(d.shared_memory_per_block_optin))});
  t.add_row({"shared memory per SM", bytes_iec(static_cast<double>(d.shared_memory_per_sm))});
  t.add_row({"registers per SM", fmt::format("{} x 32-bit", d.registers_per_sm)});
  t.add_row({"max threads per SM", std::to_string(d.max_threads_per_sm)});
  t.add_row({"warp size", std::to_string(d.warp_size)});
  t.add_row({"SM clock (peak)", mhz(d.clock_khz)});
  t.add_row({"memory clock (peak)", mhz(d.memory_clock_khz)});
  t.add_row({"memory bus width", fmt::format("{} bits", d.memory_bus_bits)});
  t.add_row({"theoretical FP32 (CUDA cores)", fmt::format("{} TFLOP/s", fixed(d.theoretical_fp32_tflops(), 1))});
  const double bf16 = theoretical_bf16_tflops(d);
  t.add_row({"theoretical BF16 dense (tensor cores)",
             std::isfinite(bf16) ? fmt::format("{} TFLOP/s", fixed(bf16, 0)) : "unknown for " + d.arch()});
  t.add_row({"theoretical DRAM bandwidth", fmt::format("{} GB/s", fixed(d.theoretical_dram_gbps(), 0))});
  return t;
}

// "measured / theoretical" as a percentage cell, or "-" when the theoretical peak is unknown.
std::string share(double measured, double theoretical) {
  if (!(theoretical > 0) || !std::isfinite(theoretical)) return std::string(kNoValue);
  return percent(100.0 * measured / theoretical);
}

Table roofs_table(const DeviceInfo& d, const bench::Ceilings& c) {
  Table t({{"measured roof"}, {"unit"}, {"measured"}, {"theoretical"}, {"% of theoretical"}});
  const double fp32 = d.theoretical_fp32_tflops(), bf16 = theoretical_bf16_tflops(d), dram = d.theoretical_dram_gbps();
  t.add_row({"copy, device to device (read + write)", "GB/s", fixed(c.copy_gbps, 0), fixed(dram, 0),
             share(c.copy_gbps, dram)});
  t.add_row({fmt::format("cublasSgemm FP32, TF32 off, {}^3", c.gemm_size), "TFLOP/s",
             fixed(c.cublas_sgemm_gflops / 1e3, 1), fixed(fp32, 1), share(c.cublas_sgemm_gflops / 1e3, fp32)});
  t.add_row({fmt::format("cublasGemmEx BF16, FP32 accumulate, {}^3", c.gemm_size), "TFLOP/s",
             fixed(c.cublas_bf16_gflops / 1e3, 1),
             std::isfinite(bf16) ? fixed(bf16, 0) : std::string(kNoValue), share(c.cublas_bf16_gflops / 1e3, bf16)});
  return t;
}

}  // namespace

int run_info(const InfoOptions& options) {
  require_gpu("info");
  if (options.measure) refuse_tf32_override("info");
  const DeviceInfo device = device_info();

  results::Document doc = results::make_document(device);
  doc.command = options.command_line();
  doc.context.emplace_back("measured", options.measure);
  if (const double bf16 = theoretical_bf16_tflops(device); std::isfinite(bf16))
    doc.context.emplace_back("theoretical_bf16_tflops", bf16);

  if (options.output.prints_table()) {
    fmt::print("{} ({}), parallax {} ({})\n\n", device.name, device.arch(), parallax::version(), parallax::git_sha());
    properties_table(device).print();
  }
  if (options.measure) {
    doc.context.emplace_back("gemm_size", static_cast<std::int64_t>(options.gemm_size));
    // A few seconds of GPU work with no natural steps: one line says what the pause is.
    fmt::print(stderr, "measuring roofs: device copy, cublasSgemm and BF16 cublasGemmEx at {}^3 ...\n",
               options.gemm_size);
    std::fflush(stderr);
    try {
      doc.ceilings = bench::measure_ceilings(options.gemm_size);
    } catch (const std::exception& e) {
      // The properties are still worth having: write them, then fail.
      fmt::print(stderr, "parallax: error: measuring the roofs failed: {}\n", e.what());
      emit_json(options.output, doc);
      return 1;
    }
    if (options.output.prints_table()) {
      fmt::print("\n");
      roofs_table(device, *doc.ceilings).print();
      fmt::print("\nThe measured roofs are what every \"% of ceiling\" in parallax refers to; the theoretical "
                 "peaks use the peak SM clock\nand are leads only (sustained clocks are lower under load).\n");
    }
  }
  emit_json(options.output, doc);
  return 0;
}

}  // namespace parallax::cli
