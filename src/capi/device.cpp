// C ABI: library identity and devices.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "capi/guard.hpp"
#include "parallax/core.hpp"
#include "parallax/parallax.h"

using parallax::capi::guarded;
using parallax::capi::Needs;
using parallax::capi::out_param;
using parallax::capi::require_gpu;

namespace {

// Copies a std::string into a fixed C buffer, truncating and always NUL-terminating.
template <std::size_t N>
void copy_string(char (&dst)[N], const std::string& src) {
  const std::size_t n = std::min(src.size(), N - 1);
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

}  // namespace

extern "C" {

int parallax_abi_version(void) noexcept { return PARALLAX_ABI_VERSION; }
const char* parallax_version(void) noexcept { return parallax::version(); }
const char* parallax_git_sha(void) noexcept { return parallax::git_sha(); }

parallax_status_t parallax_device_count(int* count) noexcept {
  return guarded("parallax_device_count", Needs::kHostOnly,
                 [&] { out_param(count, "count") = parallax::device_count(); });
}

parallax_status_t parallax_get_device(int* device) noexcept {
  return guarded("parallax_get_device", Needs::kGpu, [&] {
    int& result = out_param(device, "device");
    require_gpu();  // cudaGetDevice can answer 0 on a machine with no GPU; "device 0" would be a lie
    int current = 0;
    PX_CUDA_CHECK(cudaGetDevice(&current));
    result = current;
  });
}

parallax_status_t parallax_set_device(int device) noexcept {
  return guarded("parallax_set_device", Needs::kGpu, [&] {
    PX_REQUIRE(device >= 0, "device", "must be a device index >= 0 (got device=" + std::to_string(device) + ")");
    require_gpu();
    const int count = parallax::device_count();
    PX_REQUIRE(device < count, "device",
               "must name an existing GPU (got device=" + std::to_string(device) + ", " +
                   std::to_string(count) + " visible)");
    PX_CUDA_CHECK(cudaSetDevice(device));
  });
}

parallax_status_t parallax_pointer_device(const void* ptr, int* device) noexcept {
  return guarded("parallax_pointer_device", Needs::kGpu, [&] {
    PX_REQUIRE(ptr != nullptr, "ptr", "must be a non-null pointer");
    int& result = out_param(device, "device");
    require_gpu();
    cudaPointerAttributes attributes{};
    PX_CUDA_CHECK(cudaPointerGetAttributes(&attributes, ptr));
    switch (attributes.type) {
      case cudaMemoryTypeDevice:
      case cudaMemoryTypeManaged:
        result = attributes.device;
        return;
      case cudaMemoryTypeHost:
        // Pinned host memory is device-accessible, but a GEMM streaming it over PCIe is never what a caller
        // meant: reject it like pageable memory.
        throw parallax::InvalidArgument("ptr", "is pinned host memory; CUDA device memory is required");
      default:
        throw parallax::InvalidArgument("ptr", "is not CUDA device memory (a host address or not a CUDA allocation)");
    }
  });
}

parallax_status_t parallax_device_info(int device, parallax_device_info_t* info) noexcept {
  return guarded("parallax_device_info", Needs::kGpu, [&] {
    parallax_device_info_t& result = out_param(info, "info");
    // Checked before anything else, so that a binding can verify its struct mirror even without a GPU
    // (it then gets PARALLAX_ERROR_NO_DEVICE, not INVALID_ARGUMENT).
    PX_REQUIRE(result.struct_size == sizeof(parallax_device_info_t), "info->struct_size",
               "must be sizeof(parallax_device_info_t) = " + std::to_string(sizeof(parallax_device_info_t)) +
                   " (got " + std::to_string(result.struct_size) +
                   "): the caller's copy of the struct does not match this library's parallax.h");
    PX_REQUIRE(device >= -1, "device",
               "must be -1 (the current device) or a device index >= 0 (got device=" + std::to_string(device) +
                   ")");
    require_gpu();
    const parallax::DeviceInfo d = parallax::device_info(device);  // InvalidArgument 'device' if out of range

    // Filled in a local and copied at the end: on any failure above, *info is left untouched.
    parallax_device_info_t out{};
    out.struct_size = sizeof(parallax_device_info_t);
    out.device = d.device;
    out.cc_major = d.cc_major;
    out.cc_minor = d.cc_minor;
    out.sm_count = d.sm_count;
    out.registers_per_sm = d.registers_per_sm;
    out.max_threads_per_sm = d.max_threads_per_sm;
    out.warp_size = d.warp_size;
    out.clock_khz = d.clock_khz;
    out.memory_clock_khz = d.memory_clock_khz;
    out.memory_bus_bits = d.memory_bus_bits;
    out.global_memory_bytes = d.global_memory_bytes;
    out.l2_bytes = d.l2_bytes;
    out.shared_memory_per_block = d.shared_memory_per_block;
    out.shared_memory_per_block_optin = d.shared_memory_per_block_optin;
    out.shared_memory_per_sm = d.shared_memory_per_sm;
    out.theoretical_fp32_tflops = d.theoretical_fp32_tflops();
    out.theoretical_dram_gbps = d.theoretical_dram_gbps();
    copy_string(out.name, d.name);
    copy_string(out.arch, d.arch());
    result = out;
  });
}

}  // extern "C"
