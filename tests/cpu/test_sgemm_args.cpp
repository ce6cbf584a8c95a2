// CPU tests of the FP32 ladder's host side: the float64 reference, argument validation, level names and
// parsing. No GPU needed: every check here must hold on a CI machine without a driver.
#include <gtest/gtest.h>

#include "common/expect_invalid.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "parallax/core.hpp"
#include "parallax/random.hpp"
#include "parallax/reference.hpp"
#include "parallax/sgemm.hpp"

namespace {

using parallax::InvalidArgument;
using parallax::SgemmArgs;
using parallax::SgemmLevel;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Row-major rows x cols matrix with leading dimension ld: values from the host hash, padding set to NaN so
// any read of it would poison the result.
std::vector<float> random_matrix(int rows, int cols, int ld, std::uint64_t seed) {
  std::vector<float> m(static_cast<std::size_t>(rows) * ld, kNaN);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      m[static_cast<std::size_t>(r) * ld + c] = parallax::host_uniform(seed, static_cast<std::uint64_t>(r) * cols + c);
  return m;
}

// The obvious triple loop (dot product per element, in double), independent of the reference's i-k-j order.
std::vector<double> naive_gemm(int m, int n, int k, double alpha, const std::vector<float>& a, int lda,
                               const std::vector<float>& b, int ldb, double beta, const std::vector<float>& c,
                               int ldc) {
  std::vector<double> out(static_cast<std::size_t>(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double dot = 0;
      for (int p = 0; p < k; ++p)
        dot += static_cast<double>(a[static_cast<std::size_t>(i) * lda + p]) * b[static_cast<std::size_t>(p) * ldb + j];
      out[static_cast<std::size_t>(i) * n + j] =
          beta == 0 ? alpha * dot : alpha * dot + beta * c[static_cast<std::size_t>(i) * ldc + j];
    }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// Reference: hand-computed cases.

TEST(SgemmReference, TwoByThreeTimesThreeByTwo) {
  // A = [1 2 3; 4 5 6], B = [7 8; 9 10; 11 12]  =>  A*B = [58 64; 139 154]
  const std::vector<float> a{1, 2, 3, 4, 5, 6};
  const std::vector<float> b{7, 8, 9, 10, 11, 12};
  const auto out = parallax::gemm_reference_f64(2, 2, 3, 1.0, a, 3, b, 2, 0.0, {}, 2);
  EXPECT_EQ(out, (std::vector<double>{58, 64, 139, 154}));
}

TEST(SgemmReference, AlphaBetaNonSquare) {
  // A (1x2) = [1 -2], B (2x3) = [1 2 3; 4 5 6]: A*B = [-7 -8 -9]; C = [10 20 30].
  const std::vector<float> a{1, -2};
  const std::vector<float> b{1, 2, 3, 4, 5, 6};
  const std::vector<float> c{10, 20, 30};
  const auto out = parallax::gemm_reference_f64(1, 3, 2, 2.0, a, 2, b, 3, -0.5, c, 3);
  EXPECT_EQ(out, (std::vector<double>{-14 - 5, -16 - 10, -18 - 15}));
}

TEST(SgemmReference, OneByOneByOne) {
  const std::vector<float> a{3}, b{-4}, c{1.5f};
  EXPECT_EQ(parallax::gemm_reference_f64(1, 1, 1, 1.0, a, 1, b, 1, 0.0, {}, 1), std::vector<double>{-12});
  EXPECT_EQ(parallax::gemm_reference_f64(1, 1, 1, 0.5, a, 1, b, 1, 2.0, c, 1), std::vector<double>{-3});
}

TEST(SgemmReference, LeadingDimensionsSkipPadding) {
  // A is 2x2 stored with lda = 3, B 2x2 with ldb = 4, C 2x2 with ldc = 5; every padding slot holds NaN.
  const std::vector<float> a{1, 2, kNaN, 3, 4, kNaN};
  const std::vector<float> b{5, 6, kNaN, kNaN, 7, 8, kNaN, kNaN};
  const std::vector<float> c{1, 1, kNaN, kNaN, kNaN, 2, 2};
  // A*B = [1*5+2*7, 1*6+2*8; 3*5+4*7, 3*6+4*8] = [19 22; 43 50]
  EXPECT_EQ(parallax::gemm_reference_f64(2, 2, 2, 1.0, a, 3, b, 4, 0.0, {}, 2),
            (std::vector<double>{19, 22, 43, 50}));
  EXPECT_EQ(parallax::gemm_reference_f64(2, 2, 2, 1.0, a, 3, b, 4, 3.0, c, 5),
            (std::vector<double>{22, 25, 49, 56}));
}

TEST(SgemmReference, BetaZeroNeverReadsC) {
  const std::vector<float> a{1, 2}, b{3, 4};  // 1x2 * 2x1 = 11
  const std::vector<float> nan_c{kNaN};
  EXPECT_EQ(parallax::gemm_reference_f64(1, 1, 2, 1.0, a, 2, b, 1, 0.0, nan_c, 1), std::vector<double>{11});
  EXPECT_EQ(parallax::gemm_reference_f64(1, 1, 2, 1.0, a, 2, b, 1, 0.0, {}, 0), std::vector<double>{11})
      << "with beta == 0, ldc is ignored too";
  // beta != 0 does read C: NaN propagates.
  EXPECT_TRUE(std::isnan(parallax::gemm_reference_f64(1, 1, 2, 1.0, a, 2, b, 1, 1.0, nan_c, 1)[0]));
}

TEST(SgemmReference, AccumulatesInDouble) {
  // 1 + 2^-30 - 1 vanishes in FP32 but not in double.
  const std::vector<float> a{1.f, std::ldexp(1.f, -30), -1.f};
  const std::vector<float> b{1.f, 1.f, 1.f};
  EXPECT_EQ(parallax::gemm_reference_f64(1, 1, 3, 1.0, a, 3, b, 1, 0.0, {}, 1)[0], std::ldexp(1.0, -30));
}

// ---------------------------------------------------------------------------------------------------------
// Reference against the naive triple loop on random data.

struct RefCase {
  int m, n, k, lda_pad, ldb_pad, ldc_pad;
  double alpha, beta;
};

class SgemmReferenceVsNaive : public ::testing::TestWithParam<RefCase> {};

TEST_P(SgemmReferenceVsNaive, Matches) {
  const RefCase p = GetParam();
  const std::uint64_t seed = parallax::fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const int lda = p.k + p.lda_pad, ldb = p.n + p.ldb_pad, ldc = p.n + p.ldc_pad;
  const auto a = random_matrix(p.m, p.k, lda, seed);
  const auto b = random_matrix(p.k, p.n, ldb, seed + 1);
  const auto c = random_matrix(p.m, p.n, ldc, seed + 2);
  const auto expect = naive_gemm(p.m, p.n, p.k, p.alpha, a, lda, b, ldb, p.beta, c, ldc);
  const auto got = parallax::gemm_reference_f64(p.m, p.n, p.k, p.alpha, a, lda, b, ldb, p.beta, c, ldc);
  ASSERT_EQ(got.size(), static_cast<std::size_t>(p.m) * p.n);
  for (std::size_t i = 0; i < got.size(); ++i) {
    // Same products, same summation order up to the final scaling: equal to double rounding.
    ASSERT_NEAR(got[i], expect[i], 1e-12 * (1 + std::abs(expect[i]))) << "element " << i;
    ASSERT_TRUE(std::isfinite(got[i])) << "padding (NaN) was read: element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SgemmReferenceVsNaive,
    ::testing::Values(RefCase{1, 1, 1, 0, 0, 0, 1, 0}, RefCase{7, 1, 31, 0, 0, 0, 1, 0},
                      RefCase{1, 31, 7, 0, 0, 0, -0.7, 1.3}, RefCase{13, 17, 19, 5, 3, 7, 2, 0},
                      RefCase{31, 127, 129, 1, 0, 2, -0.7, 1.3}, RefCase{129, 31, 64, 0, 4, 0, 1, -1},
                      RefCase{64, 64, 1, 3, 3, 3, 0.5, 0.25}, RefCase{100, 200, 150, 0, 0, 0, 1, 0},
                      // Large enough to take the multi-threaded path (rows split across CPU threads).
                      RefCase{301, 257, 129, 2, 1, 3, 1.5, -0.5}),
    [](const ::testing::TestParamInfo<RefCase>& info) {
      const RefCase& p = info.param;
      return "m" + std::to_string(p.m) + "_n" + std::to_string(p.n) + "_k" + std::to_string(p.k) + "_case" +
             std::to_string(info.index);
    });

// ---------------------------------------------------------------------------------------------------------
// Reference argument validation.

using parallax::testing::expect_invalid;

TEST(SgemmReference, ValidatesArguments) {
  const std::vector<float> a(6, 1.f), b(6, 1.f), c(4, 1.f);  // 2x3 * 3x2 with tight leading dimensions
  auto ref = [&](int m, int n, int k, std::span<const float> a_, int lda, std::span<const float> b_, int ldb,
                 double beta, std::span<const float> c_, int ldc) {
    return [=] { (void)parallax::gemm_reference_f64(m, n, k, 1.0, a_, lda, b_, ldb, beta, c_, ldc); };
  };
  EXPECT_NO_THROW(ref(2, 2, 3, a, 3, b, 2, 1.0, c, 2)());
  expect_invalid(ref(0, 2, 3, a, 3, b, 2, 0.0, c, 2), "m", "must be >= 1");
  expect_invalid(ref(2, -1, 3, a, 3, b, 2, 0.0, c, 2), "n", "must be >= 1");
  expect_invalid(ref(2, 2, 0, a, 3, b, 2, 0.0, c, 2), "k", "must be >= 1");
  expect_invalid(ref(2, 2, 3, a, 2, b, 2, 0.0, c, 2), "lda", "must be >= k");
  expect_invalid(ref(2, 2, 3, a, 3, b, 1, 0.0, c, 2), "ldb", "must be >= n");
  expect_invalid(ref(2, 2, 3, a, 3, b, 2, 1.0, c, 1), "ldc", "must be >= n");
  expect_invalid(ref(2, 2, 3, std::span<const float>(a).first(5), 3, b, 2, 0.0, c, 2), "a", "must hold");
  expect_invalid(ref(2, 2, 3, a, 4, b, 2, 0.0, c, 2), "a", "must hold");  // (m-1)*lda + k = 7 > 6
  expect_invalid(ref(2, 2, 3, a, 3, std::span<const float>(b).first(5), 2, 0.0, c, 2), "b", "must hold");
  expect_invalid(ref(2, 2, 3, a, 3, b, 2, 1.0, {}, 2), "c_in", "must hold");
  expect_invalid(ref(2, 2, 3, a, 3, b, 2, 1.0, std::span<const float>(c).first(3), 2), "c_in", "must hold");
  // Exactly (rows - 1) * ld + cols elements is enough: the last row needs no padding.
  const std::vector<float> a_tight(static_cast<std::size_t>(1) * 5 + 3, 1.f);  // m=2, k=3, lda=5
  EXPECT_NO_THROW(ref(2, 2, 3, a_tight, 5, b, 2, 0.0, {}, 2)());
}

// ---------------------------------------------------------------------------------------------------------
// parallax::validate(SgemmArgs): every rule, with the argument it names and the rule it states.

// Host buffers stand in for device memory: validate() only compares pointers, it never dereferences them.
struct ArgsFixture {
  std::vector<float> storage = std::vector<float>(4096);
  SgemmArgs valid() {
    SgemmArgs p;
    p.m = 4;
    p.n = 5;
    p.k = 6;
    p.a = storage.data();  // 4 x 6, lda 8: 3*8+6 = 30 elements
    p.lda = 8;
    p.b = storage.data() + 100;  // 6 x 5, ldb 7: 5*7+5 = 40 elements
    p.ldb = 7;
    p.c = storage.data() + 200;  // 4 x 5, ldc 5
    p.ldc = 5;
    p.alpha = 1.f;
    p.beta = 0.f;
    return p;
  }
};

void expect_validate_throws(const SgemmArgs& p, const std::string& argument, const std::string& rule_fragment) {
  expect_invalid([&] { parallax::validate(p); }, argument, rule_fragment);
}

TEST(SgemmValidate, AcceptsValidArguments) {
  ArgsFixture f;
  EXPECT_NO_THROW(parallax::validate(f.valid()));
  SgemmArgs p = f.valid();
  p.lda = p.k;  // tight leading dimensions
  p.ldb = p.n;
  p.ldc = p.n;
  EXPECT_NO_THROW(parallax::validate(p));
  p.m = p.n = p.k = 1;  // the smallest problem
  p.lda = p.ldb = p.ldc = 1;
  EXPECT_NO_THROW(parallax::validate(p));
  p = f.valid();
  p.alpha = std::numeric_limits<float>::quiet_NaN();  // alpha/beta are data, not arguments to check
  p.beta = -3.f;
  EXPECT_NO_THROW(parallax::validate(p));
}

TEST(SgemmValidate, RejectsNonPositiveSizes) {
  ArgsFixture f;
  for (int bad : {0, -1, std::numeric_limits<int>::min()}) {
    SgemmArgs p = f.valid();
    p.m = bad;
    expect_validate_throws(p, "m", "must be >= 1");
    p = f.valid();
    p.n = bad;
    expect_validate_throws(p, "n", "must be >= 1");
    p = f.valid();
    p.k = bad;
    expect_validate_throws(p, "k", "must be >= 1");
  }
  SgemmArgs p = f.valid();
  p.m = 0;
  try {
    parallax::validate(p);
    FAIL() << "m=0 accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("got m=0"), std::string::npos) << "states the bad value: " << e.what();
  }
}

TEST(SgemmValidate, RejectsNullPointers) {
  ArgsFixture f;
  SgemmArgs p = f.valid();
  p.a = nullptr;
  expect_validate_throws(p, "a", "non-null");
  p = f.valid();
  p.b = nullptr;
  expect_validate_throws(p, "b", "non-null");
  p = f.valid();
  p.c = nullptr;
  expect_validate_throws(p, "c", "non-null");
}

TEST(SgemmValidate, RejectsShortLeadingDimensions) {
  ArgsFixture f;
  SgemmArgs p = f.valid();
  p.lda = p.k - 1;
  expect_validate_throws(p, "lda", "must be >= k");
  p.lda = 0;
  expect_validate_throws(p, "lda", "must be >= k");
  p = f.valid();
  p.ldb = p.n - 1;
  expect_validate_throws(p, "ldb", "must be >= n");
  p = f.valid();
  p.ldc = p.n - 1;
  expect_validate_throws(p, "ldc", "must be >= n");
  p = f.valid();
  p.ldc = -5;
  expect_validate_throws(p, "ldc", "must be >= n");
  // ldb is compared with n, not k; lda with k, not n.
  p = f.valid();
  p.k = 2;
  p.lda = 2;  // < n = 5, fine
  EXPECT_NO_THROW(parallax::validate(p));
}

TEST(SgemmValidate, RejectsOutputOverlappingInputs) {
  ArgsFixture f;
  SgemmArgs p = f.valid();
  p.c = const_cast<float*>(p.a);  // C == A
  expect_validate_throws(p, "c", "must not overlap a");
  p.c = const_cast<float*>(p.a) + 29;  // C starts at A's last element
  expect_validate_throws(p, "c", "must not overlap a");
  p.c = const_cast<float*>(p.a) + 30;  // C starts right after A's last element
  EXPECT_NO_THROW(parallax::validate(p));
  // C (4 x 5, ldc 5: 20 elements) placed before A.
  p.b = f.storage.data() + 1000;
  p.a = f.storage.data() + 500;
  p.c = f.storage.data() + 500 - 19;  // C's last element is A's first
  expect_validate_throws(p, "c", "must not overlap a");
  p.c = f.storage.data() + 500 - 20;  // C ends right before A
  EXPECT_NO_THROW(parallax::validate(p));

  p = f.valid();
  p.c = const_cast<float*>(p.b) + 10;  // inside B
  expect_validate_throws(p, "c", "must not overlap b");
  p.c = const_cast<float*>(p.b) + 40;  // right after B
  EXPECT_NO_THROW(parallax::validate(p));

  // A and B may overlap (both are only read): e.g. A * A^T-style aliasing of the same buffer.
  p = f.valid();
  p.b = p.a;
  EXPECT_NO_THROW(parallax::validate(p));
}

TEST(SgemmValidate, EntryPointsValidateBeforeTouchingTheDevice) {
  // Host pointers and bad sizes: if any entry point reached the device first it would fail with a CUDA error
  // (or crash), not InvalidArgument. This also holds on machines without a GPU.
  ArgsFixture f;
  SgemmArgs p = f.valid();
  p.m = 0;
  for (SgemmLevel level : parallax::all_sgemm_levels()) {
    SCOPED_TRACE(std::string(parallax::sgemm_level_name(level)));
    expect_invalid([&] { parallax::sgemm(level, p); }, "m", "must be >= 1");
    SgemmArgs q = f.valid();
    q.b = nullptr;
    expect_invalid([&] { parallax::sgemm(level, q); }, "b", "non-null");
    q = f.valid();
    q.ldc = 1;
    expect_invalid([&] { parallax::sgemm(level, q, nullptr); }, "ldc", "must be >= n");
    q = f.valid();
    q.c = const_cast<float*>(q.b);
    expect_invalid([&] { parallax::sgemm(level, q); }, "c", "must not overlap b");
  }
  expect_invalid([&] { parallax::sgemm_cublas(p); }, "m", "must be >= 1");
  SgemmArgs q = f.valid();
  q.lda = 1;
  expect_invalid([&] { parallax::sgemm_cublas(q); }, "lda", "must be >= k");
}

TEST(SgemmValidate, UnknownLevelValueIsRejected) {
  ArgsFixture f;
  for (int bad : {0, 9, -1, 100}) {
    expect_invalid([&] { parallax::sgemm(static_cast<SgemmLevel>(bad), f.valid()); }, "level", "ladder level");
    expect_invalid([&] { (void)parallax::sgemm_level_name(static_cast<SgemmLevel>(bad)); }, "level",
                   "ladder level");
    expect_invalid([&] { (void)parallax::sgemm_level_description(static_cast<SgemmLevel>(bad)); }, "level",
                   "ladder level");
  }
}

// ---------------------------------------------------------------------------------------------------------
// Level names, descriptions and parsing.

TEST(SgemmLevels, AllEightInLadderOrder) {
  const auto levels = parallax::all_sgemm_levels();
  ASSERT_EQ(levels.size(), static_cast<std::size_t>(parallax::kSgemmLevelCount));
  ASSERT_EQ(parallax::kSgemmLevelCount, 8);
  for (std::size_t i = 0; i < levels.size(); ++i) EXPECT_EQ(static_cast<int>(levels[i]), static_cast<int>(i) + 1);
  EXPECT_EQ(levels.front(), SgemmLevel::kNaive);
  EXPECT_EQ(levels.back(), SgemmLevel::kPipelined);
}

TEST(SgemmLevels, NamesAndDescriptionsRoundTrip) {
  std::set<std::string> names, descriptions;
  for (SgemmLevel level : parallax::all_sgemm_levels()) {
    const int number = static_cast<int>(level);
    const std::string name(parallax::sgemm_level_name(level));
    const std::string description(parallax::sgemm_level_description(level));
    EXPECT_EQ(name, "sgemm" + std::to_string(number));
    EXPECT_FALSE(description.empty()) << name;
    EXPECT_EQ(parallax::parse_sgemm_level(name), level) << name;
    EXPECT_EQ(parallax::parse_sgemm_level(std::to_string(number)), level) << number;
    names.insert(name);
    descriptions.insert(description);
  }
  EXPECT_EQ(names.size(), 8u) << "names must be distinct";
  EXPECT_EQ(descriptions.size(), 8u) << "descriptions must be distinct";
}

TEST(SgemmLevels, ParseAcceptsNameNumberAndKey) {
  EXPECT_EQ(parallax::parse_sgemm_level("sgemm3"), SgemmLevel::kSharedMem);
  EXPECT_EQ(parallax::parse_sgemm_level("3"), SgemmLevel::kSharedMem);
  EXPECT_EQ(parallax::parse_sgemm_level("smem"), SgemmLevel::kSharedMem);
  const std::pair<const char*, SgemmLevel> keys[] = {
      {"naive", SgemmLevel::kNaive},           {"coalesced", SgemmLevel::kCoalesced},
      {"smem", SgemmLevel::kSharedMem},        {"blocktile1d", SgemmLevel::kBlocktile1D},
      {"blocktile2d", SgemmLevel::kBlocktile2D}, {"vectorized", SgemmLevel::kVectorized},
      {"warptile", SgemmLevel::kWarptile},     {"pipelined", SgemmLevel::kPipelined},
  };
  for (const auto& [key, level] : keys) EXPECT_EQ(parallax::parse_sgemm_level(key), level) << key;
}

TEST(SgemmLevels, ParseRejectsUnknownNamesListingValidOnes) {
  for (const char* bad : {"", "0", "9", "10", "sgemm0", "sgemm9", "sgemm", "cublas", "sgemm3 ", " 3", "fast"}) {
    SCOPED_TRACE(std::string("input '") + bad + "'");
    try {
      (void)parallax::parse_sgemm_level(bad);
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(e.argument(), "level");
      const std::string what = e.what();
      EXPECT_NE(what.find(std::string("'") + bad + "'"), std::string::npos) << "echoes the input: " << what;
      for (int i = 1; i <= 8; ++i)
        EXPECT_NE(what.find("sgemm" + std::to_string(i)), std::string::npos) << "lists sgemm" << i << ": " << what;
      EXPECT_NE(what.find("smem"), std::string::npos) << "lists the short keys: " << what;
    }
  }
}

}  // namespace
