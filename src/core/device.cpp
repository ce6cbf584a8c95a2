#include "parallax/core.hpp"

namespace parallax {

int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // "no driver" / "no device" is an answer here, not an error
    return 0;
  }
  return count;
}

DeviceInfo device_info(int device) {
  if (device < 0) PX_CUDA_CHECK(cudaGetDevice(&device));
  const int count = device_count();
  PX_REQUIRE(device < count, "device",
             "must name an existing GPU (got device=" + std::to_string(device) + ", " +
                 std::to_string(count) + " visible)");
  cudaDeviceProp prop{};
  PX_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  DeviceInfo info;
  info.device = device;
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.global_memory_bytes = prop.totalGlobalMem;
  info.l2_bytes = static_cast<std::size_t>(prop.l2CacheSize);
  info.shared_memory_per_block = prop.sharedMemPerBlock;
  info.shared_memory_per_block_optin = prop.sharedMemPerBlockOptin;
  info.shared_memory_per_sm = prop.sharedMemPerMultiprocessor;
  info.registers_per_sm = prop.regsPerMultiprocessor;
  info.max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
  info.warp_size = prop.warpSize;
  info.memory_bus_bits = prop.memoryBusWidth;
  // CUDA 13 dropped the clock fields from cudaDeviceProp; the attributes remain.
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&info.clock_khz, cudaDevAttrClockRate, device));
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&info.memory_clock_khz, cudaDevAttrMemoryClockRate, device));
  return info;
}

std::string DeviceInfo::arch() const { return "sm_" + std::to_string(cc_major * 10 + cc_minor); }

double DeviceInfo::theoretical_fp32_tflops() const {
  // FP32 lanes per SM: 128 on sm_80-less-A100 consumer parts and Hopper, 64 on A100 (sm_80) and Volta.
  int lanes = 128;
  if ((cc_major == 8 && cc_minor == 0) || cc_major == 7) lanes = 64;
  return 2.0 * lanes * sm_count * (clock_khz * 1e3) / 1e12;
}

double DeviceInfo::theoretical_dram_gbps() const {
  // Double data rate: two transfers per memory clock.
  return 2.0 * (memory_clock_khz * 1e3) * (memory_bus_bits / 8.0) / 1e9;
}

const char* git_sha() noexcept { return PARALLAX_GIT_SHA; }
const char* version() noexcept { return "0.1.0"; }

}  // namespace parallax
