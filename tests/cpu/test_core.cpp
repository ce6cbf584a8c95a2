#include <gtest/gtest.h>

#include "parallax/bench.hpp"
#include "parallax/core.hpp"
#include "parallax/random.hpp"

namespace {

TEST(Core, InvalidArgumentNamesArgumentAndRule) {
  try {
    PX_REQUIRE(1 > 2, "lda", "must be >= k (got lda=1, k=2)");
    FAIL() << "PX_REQUIRE did not throw";
  } catch (const parallax::InvalidArgument& e) {
    EXPECT_EQ(e.argument(), "lda");
    EXPECT_STREQ(e.what(), "invalid argument 'lda': must be >= k (got lda=1, k=2)");
  }
}

TEST(Core, CudaCheckCarriesCallFileAndLine) {
  try {
    PX_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "PX_CUDA_CHECK did not throw";
  } catch (const parallax::Error& e) {
    EXPECT_EQ(e.call(), "cudaErrorInvalidValue");
    EXPECT_NE(e.file().find("test_core.cpp"), std::string::npos);
    EXPECT_GT(e.line(), 0);
    EXPECT_NE(std::string(e.what()).find("cudaErrorInvalidValue"), std::string::npos);
  }
}

TEST(Core, DeviceCountNeverThrows) { EXPECT_GE(parallax::device_count(), 0); }

TEST(Core, DeviceInfoOfMissingDeviceIsAnError) {
  EXPECT_THROW(parallax::device_info(parallax::device_count() + 3), parallax::Error);
}

TEST(Random, HostHashIsInRangeAndVaries) {
  const std::uint64_t seed = parallax::fresh_seed();
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const float v = parallax::host_uniform(seed, i, -2.f, 3.f);
    ASSERT_GE(v, -2.f);
    ASSERT_LT(v, 3.f);
    sum += v;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.1);  // mean of U[-2,3)
  EXPECT_NE(parallax::host_uniform(seed, 0), parallax::host_uniform(seed, 1));
  EXPECT_NE(parallax::host_uniform(seed, 0), parallax::host_uniform(seed + 1, 0));
}

TEST(Bench, MedianOfOddAndEvenSamples) {
  EXPECT_DOUBLE_EQ(parallax::bench::median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(parallax::bench::median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(parallax::bench::median({7}), 7);
  EXPECT_THROW(parallax::bench::median({}), parallax::InvalidArgument);
}

TEST(Bench, RotationsExceedTwiceL2) {
  const std::size_t l2 = 50u << 20;
  for (std::size_t set : {std::size_t{1} << 20, std::size_t{7} << 20, std::size_t{100} << 20, l2, 2 * l2}) {
    const int r = parallax::bench::rotations_for_l2(set, l2, 1000);
    EXPECT_GT(r * set, 2 * l2) << "set=" << set;
    EXPECT_LE((r - 1) * set, 2 * l2) << "set=" << set << ": not the fewest copies";
  }
  EXPECT_EQ(parallax::bench::rotations_for_l2(1, l2, 64), 64);  // clamped
  EXPECT_EQ(parallax::bench::rotations_for_l2(0, l2), 1);
  EXPECT_THROW(parallax::bench::rotations_for_l2(1, l2, 0), parallax::InvalidArgument);
}

TEST(Bench, WorkRatesAndFloor) {
  const parallax::bench::Work w{2e12, 1e9};
  EXPECT_DOUBLE_EQ(w.arithmetic_intensity(), 2000);
  EXPECT_DOUBLE_EQ(w.gflops_per_s(100), 2e4);  // 2 TFLOP in 0.1 s
  EXPECT_DOUBLE_EQ(w.gbytes_per_s(100), 10);
  EXPECT_DOUBLE_EQ(w.floor_ms(50e3, 3000), 40);  // compute-bound: 2e12 / 50e12 s
}

}  // namespace
