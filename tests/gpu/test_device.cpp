#include "common/gpu_test.hpp"
#include "parallax/random.hpp"

namespace {

using parallax::testing::GpuTest;

class DeviceTest : public GpuTest {};

TEST_F(DeviceTest, InfoIsPlausible) {
  const parallax::DeviceInfo info = parallax::device_info();
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.cc_major, 7);
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GT(info.l2_bytes, 0u);
  EXPECT_GE(info.shared_memory_per_block_optin, info.shared_memory_per_block);
  EXPECT_GT(info.clock_khz, 0);
}

TEST_F(DeviceTest, DeviceFillMatchesHostHash) {
  const std::uint64_t seed = parallax::fresh_seed();
  parallax::DeviceBuffer<float> buf(100003);
  parallax::fill_uniform(buf.data(), buf.size(), seed, -1.f, 1.f);
  const auto host = buf.download();
  for (std::size_t i = 0; i < host.size(); i += 97)
    ASSERT_EQ(host[i], parallax::host_uniform(seed, i, -1.f, 1.f)) << "seed=" << seed << " i=" << i;
}

}  // namespace
