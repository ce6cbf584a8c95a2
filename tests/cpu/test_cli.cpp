// The `parallax` command line without a GPU: parsing (values, lists, names, bad input), exit codes and
// messages of run_main, the table printer, JSON output, and the gemm output check.
#include <gtest/gtest.h>

#include <bit>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "cmd_gemm.hpp"
#include "cmd_info.hpp"
#include "common/expect_invalid.hpp"
#include "parallax/core.hpp"
#include "table.hpp"

namespace {

using parallax::SgemmLevel;
using parallax::testing::expect_invalid;
namespace cli = parallax::cli;

// CLI11's vector overload of parse() consumes its arguments from the back (argv reversed, program name
// dropped); this takes them in reading order.
void parse(CLI::App& app, std::vector<std::string> args) {
  std::reverse(args.begin(), args.end());
  app.parse(args);
}

// A root app with only `gemm` registered, exposing its parsed options.
struct GemmParse {
  CLI::App root{"test"};
  cli::Action action;
  std::shared_ptr<cli::GemmOptions> options = std::make_shared<cli::GemmOptions>();
  explicit GemmParse(std::vector<std::string> args) {
    cli::register_gemm(root, action, options);
    args.insert(args.begin(), "gemm");
    parse(root, std::move(args));
  }
};

struct InfoParse {
  CLI::App root{"test"};
  cli::Action action;
  std::shared_ptr<cli::InfoOptions> options = std::make_shared<cli::InfoOptions>();
  explicit InfoParse(std::vector<std::string> args) {
    cli::register_info(root, action, options);
    args.insert(args.begin(), "info");
    parse(root, std::move(args));
  }
};

// The message of the parse error a command line raises ("" if it parses).
template <typename Parse>
std::string parse_error(std::vector<std::string> args) {
  try {
    Parse p(std::move(args));
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// run_main over an argument list (program name added), with stdout and stderr captured.
struct RunResult {
  int code;
  std::string out;
  std::string err;
};
RunResult run(std::vector<std::string> args) {
  args.insert(args.begin(), "parallax");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int code = cli::run_main(static_cast<int>(argv.size()), argv.data());
  std::fflush(stdout);
  std::fflush(stderr);
  RunResult r{code, ::testing::internal::GetCapturedStdout(), ::testing::internal::GetCapturedStderr()};
  return r;
}

// Sets an environment variable for one scope, restoring what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_.c_str(), old_->c_str(), 1);
    else unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// ------------------------------------------------------------------------------------------------ gemm

TEST(CliGemm, LadderDefaults) {
  GemmParse p({"--ladder"});
  const cli::GemmOptions& o = *p.options;
  EXPECT_TRUE(o.ladder);
  EXPECT_EQ(o.sizes, (std::vector<int>{1024, 2048, 4096, 8192}));
  EXPECT_EQ(o.levels, parallax::all_sgemm_levels());
  EXPECT_EQ(o.repetitions, 30);
  EXPECT_EQ(o.warmup, 5);
  EXPECT_GT(o.budget_ms, 0) << "a budget by default, so the naive level at 8192^3 stays short";
  EXPECT_DOUBLE_EQ(o.tolerance, 0) << "0 = by output type";
  EXPECT_DOUBLE_EQ(o.effective_tolerance(), 1e-4);
  EXPECT_EQ(o.dtype, "fp32");
  EXPECT_FALSE(o.tensor_core());
  EXPECT_FALSE(o.output.json);
  EXPECT_TRUE(o.output.json_out.empty());
  EXPECT_TRUE(static_cast<bool>(p.action)) << "a parsed command leaves an action to run";
}

TEST(CliGemm, SizesList) {
  EXPECT_EQ(GemmParse({"--ladder", "--sizes", "1000,4096"}).options->sizes, (std::vector<int>{1000, 4096}));
  EXPECT_EQ(GemmParse({"--ladder", "--sizes", "64"}).options->sizes, (std::vector<int>{64}));
  EXPECT_EQ(GemmParse({"--ladder", "--sizes=1,2,3"}).options->sizes, (std::vector<int>{1, 2, 3}));
}

TEST(CliGemm, BadSizesAreRejected) {
  for (const char* bad : {"0", "-5", "1024,-5", "abc", "1024,abc", "70000", "1.5"})
    EXPECT_NE(parse_error<GemmParse>({"--ladder", "--sizes", bad}), "") << "--sizes " << bad;
}

TEST(CliGemm, LevelsByNumberNameAndKeyInGivenOrderWithoutRepeats) {
  GemmParse p({"--ladder", "--levels", "5,sgemm1,smem,naive,5"});
  EXPECT_EQ(p.options->levels, (std::vector<SgemmLevel>{SgemmLevel::kBlocktile2D, SgemmLevel::kNaive,
                                                        SgemmLevel::kSharedMem}));
  EXPECT_EQ(GemmParse({"--ladder", "--levels", "8"}).options->levels, (std::vector<SgemmLevel>{SgemmLevel::kPipelined}));
  EXPECT_EQ(GemmParse({"--ladder", "--levels", "vectorized,warptile"}).options->levels,
            (std::vector<SgemmLevel>{SgemmLevel::kVectorized, SgemmLevel::kWarptile}));
}

TEST(CliGemm, UnknownLevelListsValidNames) {
  for (const char* bad : {"9", "0", "sgemm9", "fast", "1,2,bogus"}) {
    const std::string e = parse_error<GemmParse>({"--ladder", "--levels", bad});
    EXPECT_TRUE(contains(e, "sgemm1") && contains(e, "sgemm8")) << bad << ": " << e;
    EXPECT_TRUE(contains(e, "--levels")) << e;
  }
}

TEST(CliGemm, MeasurementOptions) {
  GemmParse p({"--ladder", "--reps", "7", "--warmup", "0", "--budget-ms", "250.5", "--tolerance", "1e-5"});
  EXPECT_EQ(p.options->repetitions, 7);
  EXPECT_EQ(p.options->warmup, 0);
  EXPECT_DOUBLE_EQ(p.options->budget_ms, 250.5);
  EXPECT_DOUBLE_EQ(p.options->tolerance, 1e-5);
  EXPECT_DOUBLE_EQ(GemmParse({"--ladder", "--budget-ms", "0"}).options->budget_ms, 0) << "0 = no budget";
}

TEST(CliGemm, BadMeasurementOptionsAreRejected) {
  const std::vector<std::vector<std::string>> bad = {
      {"--reps", "0"},       {"--reps", "-3"},      {"--reps", "x"},          {"--warmup", "-1"},
      {"--budget-ms", "-1"}, {"--budget-ms", "x"},  {"--tolerance", "2"},     {"--tolerance", "-1e-3"},
  };
  for (auto args : bad) {
    args.insert(args.begin(), "--ladder");
    EXPECT_NE(parse_error<GemmParse>(args), "") << args[1] << " " << args[2];
  }
}

TEST(CliGemm, NeedsLadderOrKernel) {
  const std::string e = parse_error<GemmParse>({});
  EXPECT_TRUE(contains(e, "--ladder") && contains(e, "--kernel")) << e;
  EXPECT_NE(parse_error<GemmParse>({"--reps", "3"}), "");
}

TEST(CliGemm, LadderAndKernelExcludeEachOther) {
  EXPECT_NE(parse_error<GemmParse>({"--ladder", "--kernel", "sgemm1"}), "");
  EXPECT_NE(parse_error<GemmParse>({"--kernel", "sgemm1", "--sizes", "1024"}), "") << "--sizes is a ladder option";
  EXPECT_NE(parse_error<GemmParse>({"--kernel", "sgemm1", "--levels", "2"}), "") << "--levels is a ladder option";
  for (const char* single : {"--m", "--n", "--k", "--lda", "--ldb", "--ldc"})
    EXPECT_NE(parse_error<GemmParse>({"--ladder", single, "64"}), "") << single << " is a --kernel option";
  EXPECT_NE(parse_error<GemmParse>({"--ladder", "--beta", "1"}), "");
}

TEST(CliGemm, KernelShape) {
  GemmParse p({"--kernel", "sgemm5", "--m", "1000", "--n", "1024", "--k", "999", "--alpha", "2", "--beta", "0.5",
               "--lda", "1001", "--ldb", "1030", "--ldc", "1040"});
  const cli::GemmOptions& o = *p.options;
  EXPECT_FALSE(o.ladder);
  EXPECT_EQ(o.kernel, "sgemm5");
  EXPECT_EQ(o.m, 1000);
  EXPECT_EQ(o.n, 1024);
  EXPECT_EQ(o.k, 999);
  EXPECT_FLOAT_EQ(o.alpha, 2.f);
  EXPECT_FLOAT_EQ(o.beta, 0.5f);
  EXPECT_EQ(o.lda, 1001);
  EXPECT_EQ(o.ldb, 1030);
  EXPECT_EQ(o.ldc, 1040);
}

TEST(CliGemm, KernelDefaultsToTightSquare) {
  GemmParse p({"--kernel", "1"});
  EXPECT_EQ(p.options->m, 4096);
  EXPECT_EQ(p.options->n, 4096);
  EXPECT_EQ(p.options->k, 4096);
  EXPECT_EQ(p.options->lda, 0) << "0 = tight";
  EXPECT_FLOAT_EQ(p.options->alpha, 1.f);
  EXPECT_FLOAT_EQ(p.options->beta, 0.f);
}

TEST(CliGemm, KernelNamesAreCanonicalized) {
  EXPECT_EQ(GemmParse({"--kernel", "3"}).options->kernel, "sgemm3");
  EXPECT_EQ(GemmParse({"--kernel", "smem"}).options->kernel, "sgemm3");
  EXPECT_EQ(GemmParse({"--kernel", "sgemm3"}).options->kernel, "sgemm3");
  EXPECT_EQ(GemmParse({"--kernel", "pipelined"}).options->kernel, "sgemm8");
  EXPECT_EQ(GemmParse({"--kernel", "cublas"}).options->kernel, "cublas");
  EXPECT_EQ(GemmParse({"--kernel", "cublasSgemm"}).options->kernel, "cublas");
}

TEST(CliGemm, UnknownKernelIsRejectedAtParseListingValidNames) {
  const std::string e = parse_error<GemmParse>({"--kernel", "bogus"});
  ASSERT_NE(e, "");
  for (const char* name : {"bogus", "cublas", "sgemm1", "sgemm8", "naive", "pipelined"})
    EXPECT_TRUE(contains(e, name)) << "missing '" << name << "' in: " << e;
  EXPECT_NE(parse_error<GemmParse>({"--kernel", "9"}), "");
  EXPECT_NE(parse_error<GemmParse>({"--kernel", ""}), "");
}

// ---- tensor-core mode (--dtype bf16 | fp16)

TEST(CliGemmTc, DtypeNamesAreCanonicalizedAndOutputDefaultsToInput) {
  for (const char* name : {"bf16", "bfloat16"}) {
    GemmParse p({"--ladder", "--dtype", name});
    EXPECT_EQ(p.options->dtype, "bf16");
    EXPECT_TRUE(p.options->tensor_core());
    EXPECT_EQ(p.options->output_dtype(), "bf16");
    EXPECT_DOUBLE_EQ(p.options->effective_tolerance(), 1e-2);
  }
  GemmParse h({"--ladder", "--dtype", "f16", "--out-dtype", "float32"});
  EXPECT_EQ(h.options->dtype, "fp16");
  EXPECT_EQ(h.options->output_dtype(), "fp32");
  EXPECT_DOUBLE_EQ(h.options->effective_tolerance(), 1e-4) << "fp32 output: the fp32 tolerance";
  EXPECT_DOUBLE_EQ(GemmParse({"--ladder", "--dtype", "fp16"}).options->effective_tolerance(), 2e-3);
  EXPECT_DOUBLE_EQ(GemmParse({"--ladder", "--dtype", "fp16", "--tolerance", "0.5"}).options->effective_tolerance(), 0.5);
}

TEST(CliGemmTc, BadDtypesAreRejectedListingValidOnes) {
  const std::string e = parse_error<GemmParse>({"--ladder", "--dtype", "int8"});
  EXPECT_TRUE(contains(e, "int8") && contains(e, "fp32, bf16, fp16")) << e;
  EXPECT_TRUE(contains(parse_error<GemmParse>({"--ladder", "--out-dtype", "bf16"}), "tensor-core GEMM only"));
}

TEST(CliGemmTc, TensorCoreKernelsNeedA16BitDtypeAndLadderLevelsNeedFp32) {
  EXPECT_TRUE(contains(parse_error<GemmParse>({"--kernel", "wgmma"}), "add --dtype bf16 or fp16"));
  EXPECT_TRUE(contains(parse_error<GemmParse>({"--kernel", "sgemm3", "--dtype", "bf16"}), "FP32 ladder level"));
  GemmParse p({"--kernel", "11", "--dtype", "bf16", "--op-a", "t", "--op-b", "N"});
  EXPECT_EQ(p.options->kernel, "wgmma") << "level numbers 9..13 name the tensor-core kernels";
  EXPECT_EQ(p.options->op_a, parallax::Op::kT);
  EXPECT_EQ(p.options->op_b, parallax::Op::kN);
  EXPECT_EQ(GemmParse({"--kernel", "cublas", "--dtype", "fp16"}).options->kernel, "cublas");
  EXPECT_TRUE(contains(parse_error<GemmParse>({"--kernel", "1", "--op-b", "T"}), "transposes need --dtype"));
  EXPECT_TRUE(contains(parse_error<GemmParse>({"--kernel", "mma", "--dtype", "bf16", "--op-a", "X"}), "must be N or T"));
}

TEST(CliGemmTc, LevelsAreTensorCoreKernelsInGivenOrder) {
  GemmParse p({"--ladder", "--dtype", "bf16", "--levels", "wgmma-persistent,mma,10,wmma"});
  EXPECT_EQ(p.options->tc_kernels, (std::vector<parallax::GemmKernel>{parallax::GemmKernel::kWgmmaPersistent,
                                                                      parallax::GemmKernel::kMma,
                                                                      parallax::GemmKernel::kWmma}));
  EXPECT_TRUE(contains(parse_error<GemmParse>({"--ladder", "--dtype", "bf16", "--levels", "sgemm8"}),
                       "unknown tensor-core kernel 'sgemm8'"));
  EXPECT_TRUE(contains(parse_error<GemmParse>({"--ladder", "--dtype", "bf16", "--levels", "cublas"}), "peer"));
  // Experimental kernels are reachable by name (one benchmark run compares them with the levels).
  GemmParse x({"--ladder", "--dtype", "bf16", "--levels", "wgmma-persistent,wgmma-cluster,wgmma-persistent-cluster"});
  EXPECT_EQ(x.options->tc_kernels, (std::vector<parallax::GemmKernel>{parallax::GemmKernel::kWgmmaPersistent,
                                                                      parallax::GemmKernel::kWgmmaCluster,
                                                                      parallax::GemmKernel::kWgmmaPersistentCluster}));
  EXPECT_TRUE(contains(parse_error<GemmParse>({"--ladder", "--dtype", "bf16", "--levels", "wgmma-clusters"}),
                       "experimental (--levels / --kernel by name): wgmma-cluster, wgmma-persistent-cluster"));
}

TEST(CliGemmTc, LeadingDimensionRulesFollowTheStoredShape) {
  // op(A) = T: A is stored k x m, so lda >= m.
  EXPECT_TRUE(contains(parse_error<GemmParse>({"--kernel", "mma", "--dtype", "bf16", "--op-a", "T", "--m", "100",
                                               "--k", "50", "--lda", "60"}),
                       ">= m = 100"));
  EXPECT_EQ(parse_error<GemmParse>({"--kernel", "mma", "--dtype", "bf16", "--op-a", "T", "--m", "100", "--k", "500",
                                    "--lda", "100"}),
            "");
  EXPECT_TRUE(contains(parse_error<GemmParse>({"--kernel", "mma", "--dtype", "bf16", "--op-b", "T", "--n", "10",
                                               "--k", "50", "--ldb", "40"}),
                       ">= k = 50"));
}

TEST(CliGemmTc, StudyShapesParseAndPrintBack) {
  using cli::StudyShape;
  EXPECT_EQ(cli::parse_study_shape("4096"), (StudyShape{4096, 4096, 4096}));
  EXPECT_EQ(cli::parse_study_shape("8192x28672x8192"), (StudyShape{8192, 28672, 8192}));
  EXPECT_EQ(cli::parse_study_shape("1x2x3:TN"), (StudyShape{1, 2, 3, parallax::Op::kT, parallax::Op::kN}));
  for (const char* text : {"1x2x3", "1x2x3:TN", "7x7x7:TT"})
    EXPECT_EQ(cli::study_shape_text(cli::parse_study_shape(text)), text);
  for (const char* bad : {"", "x", "1x2", "1x2x3x4", "0x5x5", "-1", "1x2x3:", "1x2x3:TX", "1x2x3:NNN", "axbxc",
                          "99999999999"})
    expect_invalid([&] { (void)cli::parse_study_shape(bad); }, "shapes", "expected MxNxK");
  EXPECT_NE(parse_error<GemmParse>({"--ladder", "--dtype", "bf16", "--shapes", "1x2"}), "");
  EXPECT_TRUE(contains(parse_error<GemmParse>({"--ladder", "--shapes", "4096"}), "tensor-core GEMM only"));
  GemmParse p({"--ladder", "--dtype", "bf16", "--shapes", "4096,1000x3000x777:NT"});
  EXPECT_EQ(p.options->shapes.size(), 2u);
}

TEST(CliGemmTc, DefaultStudyCoversTheIssuesShapes) {
  const auto shapes = cli::tc_study_shapes({1024, 8192});
  const auto has = [&](cli::StudyShape s) { return std::find(shapes.begin(), shapes.end(), s) != shapes.end(); };
  using parallax::Op;
  for (cli::StudyShape s :
       {cli::StudyShape{1024, 1024, 1024}, {8192, 8192, 8192}, {8192, 28672, 8192}, {8192, 8192, 28672},
        {4096, 14336, 4096}, {8192, 1024, 8192}, {4096, 4096, 4096, Op::kN, Op::kT}, {4096, 4096, 4096, Op::kT, Op::kN},
        {4096, 4096, 4096, Op::kT, Op::kT}, {4095, 4095, 4095}, {1000, 3000, 777}})
    EXPECT_TRUE(has(s)) << cli::study_shape_text(s);
  const std::string line = GemmParse({"--ladder", "--dtype", "bf16"}).options->command_line();
  EXPECT_TRUE(contains(line, "--dtype bf16 --out-dtype bf16") && contains(line, "8192x28672x8192")) << line;
}

TEST(CliGemmTc, WidenOutputIsExactAndKeepsThePoison) {
  const auto bytes16 = [](std::vector<std::uint16_t> v) {
    std::vector<std::byte> b(v.size() * 2);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  // bf16: 1.0 = 0x3F80, -2.5 = 0xC020; fp16: 1.0 = 0x3C00, -2.5 = 0xC100, smallest subnormal 0x0001 = 2^-24.
  auto bf = cli::widen_output(bytes16({0x3F80, 0xC020, 0xFFFF}), parallax::DType::kBF16);
  EXPECT_EQ(bf[0], 1.f);
  EXPECT_EQ(bf[1], -2.5f);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(bf[2]), 0xFFFFFFFFu);
  auto h = cli::widen_output(bytes16({0x3C00, 0xC100, 0x0001, 0x7BFF, 0xFFFF}), parallax::DType::kF16);
  EXPECT_EQ(h[0], 1.f);
  EXPECT_EQ(h[1], -2.5f);
  EXPECT_EQ(h[2], std::ldexp(1.f, -24));
  EXPECT_EQ(h[3], 65504.f);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(h[4]), 0xFFFFFFFFu);
  // The widened poison is recognised by check_output as padding that was never written.
  const std::vector<float> ref{1.f, 2.f, 0.f, 3.f, 4.f, 0.f};
  auto padded = cli::widen_output(bytes16({0x3F80, 0x4000, 0xFFFF, 0x4040, 0x4080, 0xFFFF}), parallax::DType::kBF16);
  const cli::OutputCheck c = cli::check_output(padded, ref, 2, 2, 3);
  EXPECT_EQ(c.padding_written, 0u);
  EXPECT_EQ(c.non_finite, 0u);
  EXPECT_EQ(c.rel_fro, 0.0);
  expect_invalid([] { (void)cli::widen_output(std::vector<std::byte>(3), parallax::DType::kBF16); }, "bytes",
                 "whole elements");
}

TEST(CliGemm, CanonicalKernelName) {
  EXPECT_EQ(cli::canonical_kernel_name("7"), "sgemm7");
  EXPECT_EQ(cli::canonical_kernel_name("cublas"), "cublas");
  try {
    cli::canonical_kernel_name("sgemm0");
    FAIL();
  } catch (const parallax::InvalidArgument& e) {
    EXPECT_EQ(e.argument(), "kernel");
    EXPECT_TRUE(contains(e.what(), "cublas") && contains(e.what(), "sgemm1")) << e.what();
  }
}

TEST(CliGemm, BadShapesAreRejected) {
  const std::vector<std::vector<std::string>> bad = {
      {"--m", "0"},   {"--n", "-1"}, {"--k", "x"},     {"--m", "1e3"},  {"--lda", "0"},
      {"--alpha", "x"}, {"--beta", "nan"}, {"--alpha", "inf"},
  };
  for (auto args : bad) {
    args.insert(args.begin(), {"--kernel", "1"});
    EXPECT_NE(parse_error<GemmParse>(args), "") << args[2] << " " << args[3];
  }
}

TEST(CliGemm, LeadingDimensionsBelowRowLengthAreRejectedByName) {
  std::string e = parse_error<GemmParse>({"--kernel", "1", "--k", "100", "--lda", "50"});
  EXPECT_TRUE(contains(e, "--lda") && contains(e, ">= k = 100")) << e;
  e = parse_error<GemmParse>({"--kernel", "1", "--n", "64", "--ldb", "63"});
  EXPECT_TRUE(contains(e, "--ldb") && contains(e, ">= n = 64")) << e;
  e = parse_error<GemmParse>({"--kernel", "1", "--n", "64", "--ldc", "10"});
  EXPECT_TRUE(contains(e, "--ldc")) << e;
  EXPECT_EQ(parse_error<GemmParse>({"--kernel", "1", "--n", "64", "--k", "32", "--lda", "32", "--ldb", "64", "--ldc", "65"}),
            "")
      << "ld equal to or above the row length is fine";
}

TEST(CliGemm, JsonOptions) {
  GemmParse p({"--ladder", "--json", "--json-out", "ladder.json"});
  EXPECT_TRUE(p.options->output.json);
  EXPECT_EQ(p.options->output.json_out, "ladder.json");
  EXPECT_FALSE(p.options->output.prints_table());
  EXPECT_TRUE(p.options->output.wants_json());
  GemmParse q({"--ladder", "--json-out", "x.json"});
  EXPECT_TRUE(q.options->output.prints_table()) << "--json-out alone still prints the table";
  EXPECT_TRUE(q.options->output.wants_json());
}

TEST(CliGemm, CommandLineIsCanonical) {
  EXPECT_EQ(GemmParse({"--ladder", "--sizes", "1000,64", "--levels", "naive,3"}).options->command_line(),
            "parallax gemm --ladder --sizes 1000,64 --levels sgemm1,sgemm3 --reps 30 --warmup 5 --budget-ms 3000 "
            "--tolerance 0.0001");
  EXPECT_EQ(GemmParse({"--kernel", "smem", "--m", "10", "--n", "20", "--k", "30", "--beta", "0.5", "--ldc", "24"})
                .options->command_line(),
            "parallax gemm --kernel sgemm3 --m 10 --n 20 --k 30 --alpha 1 --beta 0.5 --ldc 24 --reps 30 --warmup 5 "
            "--budget-ms 3000 --tolerance 0.0001");
  // The peer is timed interleaved with each kernel unless asked otherwise; only the non-default is spelled.
  const GemmParse separate({"--ladder", "--sizes", "64", "--levels", "3", "--interleave-peer", "false"});
  EXPECT_FALSE(separate.options->interleave_peer);
  EXPECT_NE(separate.options->command_line().find(" --interleave-peer false"), std::string::npos);
  EXPECT_TRUE(GemmParse({"--ladder"}).options->interleave_peer);
}

// ------------------------------------------------------------------------------------------------ info

TEST(CliInfo, Defaults) {
  InfoParse p({});
  EXPECT_TRUE(p.options->measure);
  EXPECT_EQ(p.options->gemm_size, 8192);
  EXPECT_TRUE(static_cast<bool>(p.action));
  EXPECT_EQ(p.options->command_line(), "parallax info");
}

TEST(CliInfo, Options) {
  InfoParse p({"--no-measure", "--gemm-size", "4096", "--json"});
  EXPECT_FALSE(p.options->measure);
  EXPECT_EQ(p.options->gemm_size, 4096);
  EXPECT_TRUE(p.options->output.json);
  EXPECT_EQ(p.options->command_line(), "parallax info --no-measure --gemm-size 4096");
}

TEST(CliInfo, BadGemmSizeIsRejected) {
  for (const char* bad : {"100", "0", "-1", "x", "100000"})
    EXPECT_NE(parse_error<InfoParse>({"--gemm-size", bad}), "") << bad;
  EXPECT_NE(parse_error<InfoParse>({"--bogus"}), "");
}

TEST(CliInfo, TheoreticalBf16PeakOnlyWhereKnown) {
  parallax::DeviceInfo d;
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.clock_khz = 1830000;
  EXPECT_NEAR(cli::theoretical_bf16_tflops(d), 989.4, 0.5) << "H100 SXM datasheet: 989 TFLOP/s dense";
  d.cc_major = 8;
  d.sm_count = 108;
  d.clock_khz = 1410000;
  EXPECT_NEAR(cli::theoretical_bf16_tflops(d), 311.9, 0.5) << "A100 datasheet: 312 TFLOP/s";
  d.cc_minor = 6;
  EXPECT_TRUE(std::isnan(cli::theoretical_bf16_tflops(d))) << "consumer Ampere: not guessed";
}

// ------------------------------------------------------------------------------------------------ root app

TEST(CliApp, HasEverySubcommand) {
  cli::Action action;
  auto app = cli::make_app(action);
  for (const char* name : {"info", "gemm", "tune"}) EXPECT_NO_THROW(app->get_subcommand(name)) << name;
}

TEST(CliApp, RequiresASubcommand) {
  cli::Action action;
  auto app = cli::make_app(action);
  EXPECT_THROW(parse(*app, {}), CLI::ParseError);
  EXPECT_THROW(parse(*app, {"frobnicate"}), CLI::ParseError);
}

TEST(CliApp, ParsesThroughTheRoot) {
  cli::Action action;
  auto app = cli::make_app(action);
  parse(*app, {"gemm", "--ladder", "--sizes", "128"});
  EXPECT_TRUE(static_cast<bool>(action));
}

TEST(CliRunMain, HelpExitsZero) {
  const RunResult r = run({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(contains(r.out, "gemm") && contains(r.out, "info")) << r.out;
  const RunResult g = run({"gemm", "--help"});
  EXPECT_EQ(g.code, 0);
  EXPECT_TRUE(contains(g.out, "--ladder") && contains(g.out, "--kernel") && contains(g.out, "--budget-ms")) << g.out;
}

TEST(CliRunMain, BadArgumentsAreNotRuntimeFailures) {
  // cli.hpp: exit 1 is a runtime failure, bad arguments exit with another nonzero code.
  const RunResult r = run({"gemm", "--kernel", "bogus"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.code, 1);
  EXPECT_TRUE(contains(r.err, "cublas") && contains(r.err, "sgemm1")) << r.err;
  EXPECT_TRUE(r.out.empty()) << "errors go to stderr: " << r.out;
  EXPECT_NE(run({"gemm", "--ladder", "--sizes", "0"}).code, 0);
  EXPECT_NE(run({"info", "--gemm-size", "1"}).code, 0);
}

TEST(CliRunMain, InfoWithoutGpuExitsOneWithAClearMessage) {
  if (parallax::has_gpu()) GTEST_SKIP() << "a GPU is visible: this test is about machines without one";
  for (const auto& args : std::vector<std::vector<std::string>>{{"info"}, {"info", "--no-measure"}, {"info", "--json"}}) {
    const RunResult r = run(args);
    EXPECT_EQ(r.code, 1) << args.back();
    EXPECT_TRUE(contains(r.err, "no CUDA GPU visible") && contains(r.err, "parallax info")) << r.err;
    EXPECT_TRUE(r.out.empty()) << "nothing on stdout, not even under --json: " << r.out;
  }
}

TEST(CliRunMain, GemmWithoutGpuExitsOneWithAClearMessage) {
  if (parallax::has_gpu()) GTEST_SKIP() << "a GPU is visible: this test is about machines without one";
  ScopedEnv tf32("NVIDIA_TF32_OVERRIDE", nullptr);
  for (const auto& args : std::vector<std::vector<std::string>>{{"gemm", "--ladder"}, {"gemm", "--kernel", "cublas"}}) {
    const RunResult r = run(args);
    EXPECT_EQ(r.code, 1);
    EXPECT_TRUE(contains(r.err, "no CUDA GPU visible") && contains(r.err, "parallax gemm")) << r.err;
  }
  ScopedEnv zero("NVIDIA_TF32_OVERRIDE", "0");  // 0 forbids TF32: fine to run under
  EXPECT_TRUE(contains(run({"gemm", "--ladder"}).err, "no CUDA GPU visible"));
}

TEST(CliRunMain, GemmRefusesTf32Override) {
  // Checked before looking for a GPU, so this holds (and runs nothing) on every machine.
  ScopedEnv tf32("NVIDIA_TF32_OVERRIDE", "1");
  const RunResult r = run({"gemm", "--ladder", "--sizes", "64"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.err, "NVIDIA_TF32_OVERRIDE=1") && contains(r.err, "TF32")) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

// ------------------------------------------------------------------------------------------------ table

TEST(Table, AlignsNumbersRightAndTextLeft) {
  cli::Table t({{"level"}, {"name"}, {"GFLOP/s"}});
  t.add_row({"1", "sgemm1", "312.5"});
  t.add_row({"10", "cublasSgemm", "51234.0"});
  EXPECT_EQ(t.render(),
            "level  name         GFLOP/s\n"
            "-----  -----------  -------\n"
            "    1  sgemm1         312.5\n"
            "   10  cublasSgemm  51234.0\n");
}

TEST(Table, HeaderFollowsColumnAlignmentAndWidth) {
  cli::Table t({{"x"}, {"a long header"}});
  t.add_row({"12345678", "1"});
  EXPECT_EQ(t.render(),
            "       x  a long header\n"
            "--------  -------------\n"
            "12345678              1\n");
}

TEST(Table, PlaceholdersKeepANumericColumnRightAligned) {
  cli::Table t({{"ms"}, {"check"}});
  t.add_row({"1.5", "ok"});
  t.add_row({"-", "FAILED: not implemented"});
  t.add_row({"nan", "WRONG"});
  EXPECT_EQ(t.alignment(0), cli::Align::kRight);
  EXPECT_EQ(t.alignment(1), cli::Align::kLeft);
  const std::string s = t.render();
  EXPECT_TRUE(contains(s, "\n  -  FAILED: not implemented\n")) << s;
}

TEST(Table, MixedColumnIsLeftAlignedAndExplicitAlignmentWins) {
  cli::Table t({{"v"}, {"w", cli::Align::kRight}, {"n", cli::Align::kLeft}});
  t.add_row({"1", "abc", "1"});
  t.add_row({"ref", "d", "100"});
  EXPECT_EQ(t.alignment(0), cli::Align::kLeft);
  EXPECT_EQ(t.alignment(1), cli::Align::kRight);
  EXPECT_EQ(t.alignment(2), cli::Align::kLeft);
  EXPECT_EQ(t.render(),
            "v      w  n\n"
            "---  ---  ---\n"
            "1    abc  1\n"
            "ref    d  100\n");
}

TEST(Table, NoTrailingBlanksAndEqualColumnStarts) {
  cli::Table t({{"a"}, {"bbbbbb"}, {"c"}});
  t.add_row({"xxxxx", "", ""});
  t.add_row({"y"});  // missing cells are blank
  std::istringstream lines(t.render());
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    ++count;
    EXPECT_TRUE(line.empty() || line.back() != ' ') << "'" << line << "'";
  }
  EXPECT_EQ(count, 4);
  EXPECT_EQ(t.rows(), 2u);
}

TEST(Table, EmptyTableHasHeaderAndRule) {
  cli::Table t({{"only"}});
  EXPECT_EQ(t.render(), "only\n----\n");
}

TEST(Table, RejectsTooManyCellsAndNoColumns) {
  cli::Table t({{"a"}, {"b"}});
  EXPECT_THROW(t.add_row({"1", "2", "3"}), parallax::InvalidArgument);
  EXPECT_THROW(cli::Table({}), parallax::InvalidArgument);
}

TEST(Table, WidthCountsCodePointsNotBytes) {
  EXPECT_EQ(cli::display_width("µs"), 2u);
  EXPECT_EQ(cli::display_width("abc"), 3u);
  cli::Table t({{"unit"}, {"v"}});
  t.add_row({"µs", "1"});
  t.add_row({"ms", "2"});
  EXPECT_EQ(t.render(), "unit  v\n----  -\nµs    1\nms    2\n");
}

TEST(Table, LooksNumeric) {
  for (const char* yes : {"1", "-3.5", "1.2e-07", "81.3%", "2.5x", "nan", "inf", "-inf", "+4", ".5", "100.0%"})
    EXPECT_TRUE(cli::looks_numeric(yes)) << yes;
  for (const char* no : {"", "-", "%", "x", "abc", "sgemm1", "1 GB", "12a", "e5", "ok"})
    EXPECT_FALSE(cli::looks_numeric(no)) << no;
}

TEST(Format, Numbers) {
  EXPECT_EQ(cli::fixed(3.14159, 2), "3.14");
  EXPECT_EQ(cli::fixed(std::nan(""), 2), "nan");
  EXPECT_EQ(cli::fixed(-std::numeric_limits<double>::infinity(), 2), "-inf");
  EXPECT_EQ(cli::sci(3.14159e-7), "3.14e-07");
  EXPECT_EQ(cli::sci(1e-4, 0), "1e-04");
  EXPECT_EQ(cli::sci(std::nan("")), "nan");
  EXPECT_EQ(cli::percent(81.26), "81.3%");
  EXPECT_EQ(cli::percent(std::nan("")), "nan");
  EXPECT_EQ(cli::milliseconds(1234.56), "1234.560");
  EXPECT_EQ(cli::milliseconds(1.23456), "1.235");
  EXPECT_EQ(cli::milliseconds(0.012345), "0.012");
}

TEST(Format, Bytes) {
  EXPECT_EQ(cli::bytes_iec(512), "512 B");
  EXPECT_EQ(cli::bytes_iec(48 * 1024), "48.0 KiB");
  EXPECT_EQ(cli::bytes_iec(228 * 1024), "228 KiB");
  EXPECT_EQ(cli::bytes_iec(50.0 * 1024 * 1024), "50.0 MiB");
  EXPECT_EQ(cli::bytes_iec(81559.0 * 1024 * 1024), "79.6 GiB");
}

// ------------------------------------------------------------------------------------------------ JSON out

class JsonOut : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("parallax_cli_test_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
            "_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  static std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::filesystem::path dir_;
};

TEST_F(JsonOut, JsonPrintsOnlyJsonOnStdout) {
  cli::OutputOptions o;
  o.json = true;
  ::testing::internal::CaptureStdout();
  cli::emit_json(o, std::string(R"({"a": 1})"));
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "{\"a\": 1}\n");
}

TEST_F(JsonOut, JsonOutWritesTheFileAndLeavesStdoutAlone) {
  cli::OutputOptions o;
  o.json_out = (dir_ / "out.json").string();
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  cli::emit_json(o, std::string("{}"));
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
  EXPECT_TRUE(contains(::testing::internal::GetCapturedStderr(), "out.json"));
  EXPECT_EQ(slurp(dir_ / "out.json"), "{}\n");
}

TEST_F(JsonOut, BothAtOnce) {
  cli::OutputOptions o;
  o.json = true;
  o.json_out = (dir_ / "both.json").string();
  ::testing::internal::CaptureStdout();
  cli::emit_json(o, std::string("[1]"));
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "[1]\n");
  EXPECT_EQ(slurp(dir_ / "both.json"), "[1]\n");
}

TEST_F(JsonOut, NeitherWritesNothing) {
  cli::OutputOptions o;
  ::testing::internal::CaptureStdout();
  parallax::DeviceInfo d;
  d.name = "test";
  cli::emit_json(o, parallax::results::make_document(d));
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
  EXPECT_FALSE(o.wants_json());
}

TEST_F(JsonOut, DocumentIsSerializedAsResultsJson) {
  cli::OutputOptions o;
  o.json_out = (dir_ / "doc.json").string();
  parallax::DeviceInfo d;
  d.name = "test gpu";
  ::testing::internal::CaptureStderr();
  cli::emit_json(o, parallax::results::make_document(d));
  ::testing::internal::GetCapturedStderr();
  const parallax::results::Document back = parallax::results::read_file(o.json_out);
  EXPECT_EQ(back.device.name, "test gpu");
}

TEST_F(JsonOut, UnwritableFileIsAnErrorNamingIt) {
  cli::OutputOptions o;
  o.json_out = (dir_ / "missing_dir" / "x.json").string();
  try {
    cli::emit_json(o, std::string("{}"));
    FAIL();
  } catch (const parallax::Error& e) {
    EXPECT_TRUE(contains(e.what(), "x.json")) << e.what();
  }
}

// ------------------------------------------------------------------------------------------------ progress

std::string progress_text(cli::Progress::Mode mode, double interval, int steps) {
  std::FILE* f = std::tmpfile();
  {
    cli::Progress p(steps, mode, interval, f);
    for (int i = 0; i < steps; ++i) p.update(i, "step " + std::to_string(i));
  }
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int ch; (ch = std::fgetc(f)) != EOF;) s.push_back(static_cast<char>(ch));
  std::fclose(f);
  return s;
}

TEST(Progress, LinesModePrintsPlainLinesAtMostEveryInterval) {
  const std::string every = progress_text(cli::Progress::Mode::kLines, 0.0, 3);
  EXPECT_EQ(std::count(every.begin(), every.end(), '\n'), 3) << every;
  EXPECT_TRUE(contains(every, "progress: 2/3 step 2")) << every;
  EXPECT_EQ(every.find('\r'), std::string::npos) << "no carriage returns in logs";
  EXPECT_EQ(progress_text(cli::Progress::Mode::kLines, 3600.0, 50), "") << "quiet until the interval has passed";
}

TEST(Progress, TerminalModeRedrawsOneLineAndClearsIt) {
  const std::string s = progress_text(cli::Progress::Mode::kTerminal, 0.0, 4);
  EXPECT_TRUE(contains(s, "\r\033[K[")) << s;
  EXPECT_TRUE(contains(s, "3/4  step 3")) << s;
  EXPECT_EQ(s.find('\n'), std::string::npos) << "redrawn in place";
  EXPECT_EQ(s.substr(s.size() - 4), "\r\033[K") << "the line is cleared at the end";
}

TEST(Progress, OffModeIsSilent) { EXPECT_EQ(progress_text(cli::Progress::Mode::kOff, 0.0, 5), ""); }

// ------------------------------------------------------------------------------------------------ output check

std::vector<float> matrix(int m, int ld, float seed) {
  std::vector<float> v(static_cast<std::size_t>(m) * ld);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(seed + static_cast<float>(i)) * 3.f;
  return v;
}

// Padding entries (columns n..ld-1) set to the poison pattern, as before a run.
void poison_padding(std::vector<float>& v, int m, int n, int ld) {
  for (int i = 0; i < m; ++i)
    for (int j = n; j < ld; ++j) std::memset(&v[static_cast<std::size_t>(i) * ld + j], 0xFF, sizeof(float));
}

TEST(OutputCheck, IdenticalOutputPasses) {
  auto ref = matrix(5, 7, 1.f);
  poison_padding(ref, 5, 6, 7);
  const cli::OutputCheck c = cli::check_output(ref, ref, 5, 6, 7);
  EXPECT_EQ(c.rel_fro, 0);
  EXPECT_EQ(c.max_rel, 0);
  EXPECT_EQ(c.non_finite, 0u);
  EXPECT_EQ(c.padding_written, 0u);
  EXPECT_EQ(c.problem(1e-4, 6), "");
}

TEST(OutputCheck, ErrorsAreNormwiseAndWorstElement) {
  const int m = 4, n = 4;
  std::vector<float> ref(16, 1.f), out(16, 1.f);
  ref[5] = 2.f;  // max |ref| = 2
  out[5] = 2.f;
  out[3] = 1.5f;  // one element off by 0.5
  const cli::OutputCheck c = cli::check_output(out, ref, m, n, n);
  EXPECT_NEAR(c.rel_fro, 0.5 / std::sqrt(15.0 + 4.0), 1e-12);
  EXPECT_NEAR(c.max_rel, 0.5 / 2.0, 1e-12);
  const std::string p = c.problem(1e-4, n);
  EXPECT_TRUE(contains(p, "rel err") && contains(p, "max err")) << p;
  EXPECT_EQ(c.problem(0.5, n), "") << "within a loose tolerance";
}

TEST(OutputCheck, UnwrittenElementsAreFoundAndLocated) {
  const int m = 3, n = 5;
  auto ref = matrix(m, n, 2.f);
  auto out = ref;
  std::memset(&out[2 * n + 4], 0xFF, sizeof(float));  // row 2, col 4 never written (still poison)
  std::memset(&out[2 * n + 1], 0xFF, sizeof(float));  // and row 2, col 1 (the first one)
  const cli::OutputCheck c = cli::check_output(out, ref, m, n, n);
  EXPECT_EQ(c.non_finite, 2u);
  EXPECT_EQ(c.first_non_finite, static_cast<std::size_t>(2 * n + 1));
  EXPECT_EQ(c.rel_fro, 0) << "non-finite entries are counted, not folded into the norm";
  EXPECT_TRUE(contains(c.problem(1e-4, n), "2 outputs not finite, first at row 2 col 1")) << c.problem(1e-4, n);
}

TEST(OutputCheck, WritesIntoPaddingAreFound) {
  const int m = 4, n = 3, ld = 5;
  auto ref = matrix(m, ld, 3.f);
  poison_padding(ref, m, n, ld);
  auto out = ref;
  out[1 * ld + 3] = 0.f;  // a kernel that ignored ldc and wrote past column n
  out[3 * ld + 4] = 1.f;
  const cli::OutputCheck c = cli::check_output(out, ref, m, n, ld);
  EXPECT_EQ(c.padding_written, 2u);
  EXPECT_EQ(c.non_finite, 0u);
  EXPECT_TRUE(contains(c.problem(1e-4, n), "2 padding entries")) << c.problem(1e-4, n);
}

TEST(OutputCheck, ZeroReferenceFallsBackToAbsoluteError) {
  std::vector<float> ref(4, 0.f), out(4, 0.f);
  out[2] = 1e-3f;
  const cli::OutputCheck c = cli::check_output(out, ref, 2, 2, 2);
  EXPECT_NEAR(c.rel_fro, 1e-3, 1e-9);
  EXPECT_NEAR(c.max_rel, 1e-3, 1e-9);
}

TEST(OutputCheck, NaNErrorFailsTheCheck) {
  cli::OutputCheck c;
  c.rel_fro = std::nan("");
  EXPECT_NE(c.problem(1e-4, 1), "");
}

TEST(OutputCheck, RejectsInconsistentSizes) {
  std::vector<float> a(6), b(7), small(5);
  EXPECT_THROW(cli::check_output(a, b, 2, 3, 3), parallax::InvalidArgument);
  EXPECT_THROW(cli::check_output(small, small, 2, 3, 3), parallax::InvalidArgument);
  EXPECT_THROW(cli::check_output(a, a, 2, 3, 2), parallax::InvalidArgument) << "ld < n";
  EXPECT_THROW(cli::check_output(a, a, 0, 3, 3), parallax::InvalidArgument);
}

// ------------------------------------------------------------------------------------------------ gemm table

namespace pr = parallax::results;

pr::Record ladder_row(const char* name, int level, const char* description, double ms, double peer_ms) {
  parallax::bench::Timing t;
  t.median_ms = t.min_ms = t.max_ms = ms;
  t.repetitions = 30;
  pr::Record r = pr::make_record("sgemm_ladder", name, {{"m", std::int64_t{1024}}}, "fp32", t,
                                 {2.0 * 1024 * 1024 * 1024, 12.0 * 1024 * 1024});
  r.add_extra("level", std::int64_t{level}).add_extra("description", std::string(description));
  r.set_peer("cublasSgemm", peer_ms);
  r.add_error(std::string(cli::kGemmFroMetric), 3.14159e-7).add_error(std::string(cli::kGemmMaxMetric), 1.5e-6);
  return r;
}

TEST(GemmTable, RowsForOkWrongFailedAndThePeer) {
  std::vector<pr::Record> records;
  records.push_back(ladder_row("sgemm1", 1, "naive", 20.0, 0.5));
  records.push_back(ladder_row("sgemm5", 5, "2D blocktiling", 1.0, 0.5));
  records.back().mark_incorrect("rel err 1.00e-02 > 1e-04");
  records.push_back(pr::failed_record("sgemm_ladder", "sgemm7", {}, "fp32", "sgemm level 'warptile' not implemented yet"));
  records.back().add_extra("level", std::int64_t{7}).add_extra("description", std::string("warptiling"));
  parallax::bench::Timing t;
  t.median_ms = t.min_ms = t.max_ms = 0.5;
  t.repetitions = 30;
  pr::Record peer = pr::make_record("sgemm_ladder", "cublasSgemm", {}, "fp32", t, {2.0 * 1024 * 1024 * 1024, 0});
  peer.add_extra("description", std::string("cuBLAS FP32, TF32 off")).add_extra("role", std::string("peer"));
  records.push_back(peer);

  const cli::Table table = cli::gemm_table(records);
  ASSERT_EQ(table.rows(), 4u);
  const std::string s = table.render();
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 6u) << s;
  EXPECT_TRUE(contains(lines[0], "level") && contains(lines[0], "% cuBLAS") && contains(lines[0], "rel err") &&
              contains(lines[0], "max err") && contains(lines[0], "check"))
      << lines[0];
  EXPECT_TRUE(contains(lines[2], "sgemm1") && contains(lines[2], "20.000") && contains(lines[2], "2.5%") &&
              contains(lines[2], "3.14e-07") && contains(lines[2], "1.50e-06") && contains(lines[2], " ok"))
      << lines[2];
  EXPECT_TRUE(contains(lines[3], "50.0%") && contains(lines[3], "WRONG: rel err 1.00e-02 > 1e-04")) << lines[3];
  EXPECT_TRUE(contains(lines[4], "sgemm7") && contains(lines[4], "FAILED: sgemm level 'warptile' not implemented yet"))
      << lines[4];
  EXPECT_TRUE(contains(lines[5], "cublasSgemm") && contains(lines[5], "100.0%") && contains(lines[5], "ref") &&
              contains(lines[5], "reference"))
      << lines[5];
  // Numbers line up on the right: every row's "GFLOP/s" cell ends in the same column as its header.
  const std::size_t end = lines[0].find("GFLOP/s") + std::string("GFLOP/s").size();
  for (int row : {2, 3, 5}) EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(lines[row][end - 1]))) << lines[row];
}

}  // namespace
