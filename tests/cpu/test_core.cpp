#include <gtest/gtest.h>

#include <functional>

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

TEST(Bench, TimingFromSamplesKeepsOrderAndStatistics) {
  const parallax::bench::Timing t = parallax::bench::timing_from_samples({3, 1, 4, 1, 5});
  EXPECT_EQ(t.repetitions, 5);
  EXPECT_DOUBLE_EQ(t.median_ms, 3);
  EXPECT_DOUBLE_EQ(t.min_ms, 1);
  EXPECT_DOUBLE_EQ(t.max_ms, 5);
  EXPECT_DOUBLE_EQ(t.mean_ms, 14.0 / 5);
  EXPECT_EQ(t.samples_ms, (std::vector<double>{3, 1, 4, 1, 5}));  // run order, not sorted
  EXPECT_THROW(parallax::bench::timing_from_samples({}), parallax::InvalidArgument);
}

// Interleaved timing sizes whole rounds (one run of every function) from what is left of the budget.
TEST(Bench, InterleavedRoundsFitTheBudget) {
  parallax::bench::Options o;
  o.repetitions = 30;
  o.min_repetitions = 3;
  EXPECT_EQ(parallax::bench::interleaved_repetitions(o, 100, 10), 30) << "no budget: all repetitions";
  o.budget_ms = 1000;
  EXPECT_EQ(parallax::bench::interleaved_repetitions(o, 100, 10), 30) << "90 rounds affordable, capped at 30";
  EXPECT_EQ(parallax::bench::interleaved_repetitions(o, 100, 60), 15) << "900 ms left / 60 ms a round";
  EXPECT_EQ(parallax::bench::interleaved_repetitions(o, 990, 60), 3) << "never below min_repetitions";
  EXPECT_EQ(parallax::bench::interleaved_repetitions(o, 2000, 60), 3) << "budget overspent in warm-up";
  o.repetitions = 2;
  EXPECT_EQ(parallax::bench::interleaved_repetitions(o, 990, 60), 2) << "min_repetitions above repetitions";
  o.repetitions = 0;
  EXPECT_THROW(parallax::bench::interleaved_repetitions(o, 0, 1), parallax::InvalidArgument);
}

TEST(Bench, InterleavedTimingRejectsBadArguments) {
  parallax::bench::Options o;
  EXPECT_THROW(parallax::bench::time_gpu_interleaved({}, 1, o, nullptr), parallax::InvalidArgument);
  const std::function<void(cudaStream_t, int)> noop = [](cudaStream_t, int) {};
  EXPECT_THROW(parallax::bench::time_gpu_interleaved({noop}, 0, o, nullptr), parallax::InvalidArgument);
  o.warmup = -1;
  EXPECT_THROW(parallax::bench::time_gpu_interleaved({noop}, 1, o, nullptr), parallax::InvalidArgument);
}

TEST(Bench, WorkRatesAndFloor) {
  const parallax::bench::Work w{2e12, 1e9};
  EXPECT_DOUBLE_EQ(w.arithmetic_intensity(), 2000);
  EXPECT_DOUBLE_EQ(w.gflops_per_s(100), 2e4);  // 2 TFLOP in 0.1 s
  EXPECT_DOUBLE_EQ(w.gbytes_per_s(100), 10);
  EXPECT_DOUBLE_EQ(w.floor_ms(50e3, 3000), 40);  // compute-bound: 2e12 / 50e12 s
}

}  // namespace
