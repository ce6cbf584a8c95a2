// CPU tests of the tensor-core GEMM's host side: every argument rule of validate() and its message, kernel
// names and parsing, enum names, and that gemm() / gemm_cublas() reject bad arguments before touching the
// device. No GPU needed: the pointers below are host memory and are never dereferenced.
#include <gtest/gtest.h>

#include "common/expect_invalid.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "parallax/core.hpp"
#include "parallax/gemm.hpp"

namespace {

using parallax::DType;
using parallax::Epilogue;
using parallax::GemmArgs;
using parallax::GemmKernel;
using parallax::InvalidArgument;
using parallax::Op;

using parallax::testing::expect_invalid;

void expect_validate_throws(const GemmArgs& p, const std::string& argument, const std::string& rule_fragment) {
  expect_invalid([&] { parallax::validate(p); }, argument, rule_fragment);
}

// Disjoint host regions standing in for device buffers (validate() only does pointer arithmetic).
struct ArgsFixture {
  std::vector<std::uint16_t> storage = std::vector<std::uint16_t>(8192);
  std::vector<float> out = std::vector<float>(1024);
  std::vector<float> bias = std::vector<float>(64);
  // m=4, n=5, k=6, all N: A 4 x 6 (lda 8), B 6 x 5 (ldb 7), C 4 x 5 fp32 (ldc 5).
  GemmArgs valid() {
    GemmArgs p;
    p.m = 4;
    p.n = 5;
    p.k = 6;
    p.a_type = p.b_type = DType::kBF16;
    p.c_type = DType::kF32;
    p.a = storage.data();
    p.lda = 8;
    p.b = storage.data() + 1000;
    p.ldb = 7;
    p.c = out.data();
    p.ldc = 5;
    return p;
  }
};

TEST(GemmValidate, AcceptsValidArguments) {
  ArgsFixture f;
  EXPECT_NO_THROW(parallax::validate(f.valid()));
  for (DType in : {DType::kBF16, DType::kF16})
    for (DType out : {DType::kF32, DType::kF16, DType::kBF16})
      for (Epilogue e : {Epilogue::kNone, Epilogue::kGelu, Epilogue::kSilu}) {
        GemmArgs p = f.valid();
        p.a_type = p.b_type = in;
        p.c_type = out;
        p.epilogue = e;
        p.bias = f.bias.data();
        p.beta = 1.5f;  // an epilogue with beta != 0 is allowed: D = act(alpha AB + beta C + bias)
        EXPECT_NO_THROW(parallax::validate(p));
      }
  GemmArgs p = f.valid();
  p.m = p.n = p.k = 1;  // the smallest problem, tight leading dimensions
  p.lda = p.ldb = p.ldc = 1;
  EXPECT_NO_THROW(parallax::validate(p));
}

TEST(GemmValidate, RejectsNonPositiveDims) {
  ArgsFixture f;
  for (int bad : {0, -1}) {
    GemmArgs p = f.valid();
    p.m = bad;
    expect_validate_throws(p, "m", "must be >= 1");
    p = f.valid();
    p.n = bad;
    expect_validate_throws(p, "n", "must be >= 1");
    p = f.valid();
    p.k = bad;
    expect_validate_throws(p, "k", "must be >= 1");
  }
  GemmArgs p = f.valid();
  p.k = 0;
  expect_validate_throws(p, "k", "got k=0");
}

TEST(GemmValidate, RejectsNullPointers) {
  ArgsFixture f;
  GemmArgs p = f.valid();
  p.a = nullptr;
  expect_validate_throws(p, "a", "non-null");
  p = f.valid();
  p.b = nullptr;
  expect_validate_throws(p, "b", "non-null");
  p = f.valid();
  p.c = nullptr;
  expect_validate_throws(p, "c", "non-null");
  p = f.valid();
  p.bias = nullptr;  // bias is optional
  EXPECT_NO_THROW(parallax::validate(p));
}

TEST(GemmValidate, RejectsMisalignedPointers) {
  ArgsFixture f;
  const auto* bytes = reinterpret_cast<const unsigned char*>(f.storage.data());
  GemmArgs p = f.valid();
  p.a = bytes + 1;
  expect_validate_throws(p, "a", "aligned to its element size (2 bytes)");
  p = f.valid();
  p.b = bytes + 2001;
  expect_validate_throws(p, "b", "aligned to its element size (2 bytes)");
  p = f.valid();
  p.c = reinterpret_cast<unsigned char*>(f.out.data()) + 2;  // fp32 output needs 4
  expect_validate_throws(p, "c", "aligned to its element size (4 bytes)");
  p.c_type = DType::kF16;  // ... a 16-bit output only 2
  EXPECT_NO_THROW(parallax::validate(p));
  p = f.valid();
  p.bias = reinterpret_cast<const float*>(reinterpret_cast<const unsigned char*>(f.bias.data()) + 2);
  expect_validate_throws(p, "bias", "aligned to 4 bytes");
}

TEST(GemmValidate, DtypeRules) {
  ArgsFixture f;
  GemmArgs p = f.valid();
  p.a_type = p.b_type = DType::kF32;
  expect_validate_throws(p, "a_type", "must be bf16 or f16");
  expect_validate_throws(p, "a_type", "got a_type=f32");
  p = f.valid();
  p.b_type = DType::kF16;  // a is bf16
  expect_validate_throws(p, "b_type", "must equal a_type (got b_type=f16, a_type=bf16)");
  p = f.valid();
  p.a_type = p.b_type = static_cast<DType>(7);
  expect_validate_throws(p, "a_type", "got a_type=7");
  p = f.valid();
  p.c_type = static_cast<DType>(-1);
  expect_validate_throws(p, "c_type", "must be f32, f16 or bf16");
}

TEST(GemmValidate, RejectsBadEnumerators) {
  ArgsFixture f;
  GemmArgs p = f.valid();
  p.op_a = static_cast<Op>(2);
  expect_validate_throws(p, "op_a", "must be Op::kN or Op::kT");
  p = f.valid();
  p.op_b = static_cast<Op>(-3);
  expect_validate_throws(p, "op_b", "got op_b=-3");
  p = f.valid();
  p.epilogue = static_cast<Epilogue>(9);
  expect_validate_throws(p, "epilogue", "must be Epilogue::kNone, kGelu or kSilu");
}

TEST(GemmValidate, LeadingDimensionsFollowTheStoredShape) {
  ArgsFixture f;  // m=4, n=5, k=6
  GemmArgs p = f.valid();
  p.lda = 5;  // N: A stored m x k needs lda >= k = 6
  expect_validate_throws(p, "lda", "must be >= k, the row length of A stored m x k (op_a=N) (got lda=5, k=6)");
  p.op_a = Op::kT;  // T: A stored k x m needs lda >= m = 4, so 5 is fine ...
  EXPECT_NO_THROW(parallax::validate(p));
  p.lda = 3;  // ... and 3 is not
  expect_validate_throws(p, "lda", "must be >= m, the row length of A stored k x m (op_a=T) (got lda=3, m=4)");

  p = f.valid();
  p.ldb = 4;  // N: B stored k x n needs ldb >= n = 5
  expect_validate_throws(p, "ldb", "must be >= n, the row length of B stored k x n (op_b=N) (got ldb=4, n=5)");
  p.op_b = Op::kT;  // T: B stored n x k needs ldb >= k = 6
  expect_validate_throws(p, "ldb", "must be >= k, the row length of B stored n x k (op_b=T) (got ldb=4, k=6)");
  p.ldb = 6;
  EXPECT_NO_THROW(parallax::validate(p));

  p = f.valid();
  p.ldc = 4;
  expect_validate_throws(p, "ldc", "must be >= n, the row length of C (got ldc=4, n=5)");
}

TEST(GemmValidate, RejectsLeadingDimensionsBeyondInt32) {
  ArgsFixture f;
  const std::int64_t big = std::int64_t{1} << 31;
  GemmArgs p = f.valid();
  p.lda = big;
  expect_validate_throws(p, "lda", "must be <= 2^31-1");
  p = f.valid();
  p.ldb = big;
  expect_validate_throws(p, "ldb", "must be <= 2^31-1");
  p = f.valid();
  p.ldc = big;
  p.m = 1;  // keep C's byte range inside the fixture's address space arithmetic
  expect_validate_throws(p, "ldc", "must be <= 2^31-1");
}

TEST(GemmValidate, AlphaAndBetaMustBeFinite) {
  ArgsFixture f;
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    GemmArgs p = f.valid();
    p.alpha = bad;
    expect_validate_throws(p, "alpha", "must be finite");
    p = f.valid();
    p.beta = bad;
    expect_validate_throws(p, "beta", "must be finite");
  }
  GemmArgs p = f.valid();
  p.alpha = -0.f;
  p.beta = -2.5f;
  EXPECT_NO_THROW(parallax::validate(p));
}

TEST(GemmValidate, RejectsOverlapOfCWithInputs) {
  ArgsFixture f;
  GemmArgs p = f.valid();
  p.c_type = DType::kBF16;
  p.c = f.storage.data() + 20;  // inside A (A spans elements 0 .. 3*8+6)
  expect_validate_throws(p, "c", "must not overlap a");
  p.c = f.storage.data() + 1000;  // B starts here
  expect_validate_throws(p, "c", "must not overlap b");
  p.c = f.storage.data() + 30;  // right after A's last element: fine
  EXPECT_NO_THROW(parallax::validate(p));

  // The T layout changes A's extent: stored k x m = 6 x 4 with lda 8 spans 5*8+4 = 44 elements.
  p = f.valid();
  p.op_a = Op::kT;
  p.c_type = DType::kBF16;
  p.c = f.storage.data() + 40;
  expect_validate_throws(p, "c", "must not overlap a");
  p.c = f.storage.data() + 44;
  EXPECT_NO_THROW(parallax::validate(p));

  p = f.valid();
  p.bias = f.out.data() + 3;  // inside C
  expect_validate_throws(p, "c", "must not overlap bias");
}

TEST(GemmNames, EnumNames) {
  EXPECT_EQ(parallax::dtype_name(DType::kF32), "f32");
  EXPECT_EQ(parallax::dtype_name(DType::kF16), "f16");
  EXPECT_EQ(parallax::dtype_name(DType::kBF16), "bf16");
  EXPECT_EQ(parallax::dtype_size(DType::kF32), 4);
  EXPECT_EQ(parallax::dtype_size(DType::kF16), 2);
  EXPECT_EQ(parallax::dtype_size(DType::kBF16), 2);
  EXPECT_EQ(parallax::op_name(Op::kN), "N");
  EXPECT_EQ(parallax::op_name(Op::kT), "T");
  EXPECT_EQ(parallax::epilogue_name(Epilogue::kNone), "none");
  EXPECT_EQ(parallax::epilogue_name(Epilogue::kGelu), "gelu");
  EXPECT_EQ(parallax::epilogue_name(Epilogue::kSilu), "silu");
  expect_invalid([] { (void)parallax::dtype_name(static_cast<DType>(5)); }, "dtype", "must be f32, f16 or bf16");
  expect_invalid([] { (void)parallax::op_name(static_cast<Op>(5)); }, "op", "must be N or T");
  expect_invalid([] { (void)parallax::epilogue_name(static_cast<Epilogue>(5)); }, "epilogue", "must be none");
}

// Experimental kernels: parsed and named like the rest, but kept out of gemm_kernel_names() (the C ABI list,
// default ladders) and out of the level-number shorthand.
TEST(GemmKernels, ExperimentalNames) {
  const auto experimental = parallax::gemm_experimental_kernel_names();
  const std::vector<std::string_view> expected{"wgmma-cluster", "wgmma-persistent-cluster"};
  EXPECT_EQ(experimental, expected);
  const auto names = parallax::gemm_kernel_names();
  for (auto name : experimental) {
    EXPECT_EQ(std::find(names.begin(), names.end(), name), names.end()) << name;
    EXPECT_EQ(parallax::gemm_kernel_name(parallax::parse_gemm_kernel(name)), name);
    EXPECT_EQ(parallax::gemm_kernel_min_cc_major(parallax::parse_gemm_kernel(name)), 9);
    EXPECT_FALSE(parallax::gemm_kernel_description(parallax::parse_gemm_kernel(name)).empty());
  }
  EXPECT_EQ(parallax::parse_gemm_kernel("wgmma-cluster"), GemmKernel::kWgmmaCluster);
  EXPECT_EQ(parallax::parse_gemm_kernel("wgmma-persistent-cluster"), GemmKernel::kWgmmaPersistentCluster);
  expect_invalid([] { (void)parallax::parse_gemm_kernel("14"); }, "kernel", "unknown GEMM kernel '14'");
  expect_invalid([] { (void)parallax::parse_gemm_kernel("15"); }, "kernel", "unknown GEMM kernel '15'");
}

TEST(GemmKernels, NamesAndParsing) {
  const auto names = parallax::gemm_kernel_names();
  const std::vector<std::string_view> expected{"auto", "wmma", "mma", "wgmma", "wgmma-ws", "wgmma-persistent",
                                               "cublas"};
  EXPECT_EQ(names, expected);
  std::set<std::string_view> unique(names.begin(), names.end());
  EXPECT_EQ(unique.size(), names.size());
  for (auto name : names) EXPECT_EQ(parallax::gemm_kernel_name(parallax::parse_gemm_kernel(name)), name);
  EXPECT_EQ(parallax::parse_gemm_kernel("9"), GemmKernel::kWmma);
  EXPECT_EQ(parallax::parse_gemm_kernel("10"), GemmKernel::kMma);
  EXPECT_EQ(parallax::parse_gemm_kernel("13"), GemmKernel::kWgmmaPersistent);
  EXPECT_EQ(parallax::parse_gemm_kernel("auto"), GemmKernel::kAuto);
  EXPECT_EQ(parallax::parse_gemm_kernel("cublas"), GemmKernel::kCublas);
  expect_invalid([] { (void)parallax::parse_gemm_kernel("mma.sync"); }, "kernel",
                 "unknown GEMM kernel 'mma.sync'; valid: auto, wmma, mma, wgmma, wgmma-ws, wgmma-persistent, cublas; "
                 "experimental: wgmma-cluster, wgmma-persistent-cluster");
  expect_invalid([] { (void)parallax::parse_gemm_kernel("100"); }, "kernel", "a level number 9..13");
  expect_invalid([] { (void)parallax::parse_gemm_kernel("8"); }, "kernel", "unknown GEMM kernel '8'");
  expect_invalid([] { (void)parallax::parse_gemm_kernel(""); }, "kernel", "unknown GEMM kernel ''");
  expect_invalid([] { (void)parallax::parse_gemm_kernel("WMMA"); }, "kernel", "valid: auto, wmma, mma");
  expect_invalid([] { (void)parallax::gemm_kernel_name(static_cast<GemmKernel>(3)); }, "kernel",
                 "unknown GemmKernel value 3");
}

// gemm() and gemm_cublas() must reject bad arguments on the host: these run (and must throw
// InvalidArgument, not a CUDA error) on a machine without a GPU.
TEST(GemmEntryPoints, RejectBeforeTouchingTheDevice) {
  ArgsFixture f;
  GemmArgs p = f.valid();
  p.ldc = 2;
  std::vector<std::string_view> all = parallax::gemm_kernel_names();
  for (auto name : parallax::gemm_experimental_kernel_names()) all.push_back(name);
  for (auto name : all) {
    expect_invalid([&] { parallax::gemm(p, nullptr, name); }, "ldc", "must be >= n");
    expect_invalid([&] { parallax::gemm(p, nullptr, parallax::parse_gemm_kernel(name)); }, "ldc", "must be >= n");
  }
  expect_invalid([&] { parallax::gemm(p); }, "ldc", "must be >= n");
  expect_invalid([&] { parallax::gemm_cublas(p, nullptr); }, "ldc", "must be >= n");
  // A bad kernel name is reported even when the arguments are fine.
  expect_invalid([&] { parallax::gemm(f.valid(), nullptr, "sgemm8"); }, "kernel", "unknown GEMM kernel 'sgemm8'");
  expect_invalid([&] { parallax::gemm(f.valid(), nullptr, static_cast<GemmKernel>(42)); }, "kernel",
                 "unknown GemmKernel value 42");
  GemmArgs q = f.valid();
  q.a_type = q.b_type = DType::kF32;
  expect_invalid([&] { parallax::gemm(q, nullptr, "wmma"); }, "a_type", "must be bf16 or f16");
}

}  // namespace
