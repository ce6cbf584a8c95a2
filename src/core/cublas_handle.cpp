#include "core/cublas_handle.hpp"

#include <map>

#include "parallax/core.hpp"

namespace parallax::detail {
namespace {

struct HandleCache {
  std::map<int, cublasHandle_t> by_device;
  ~HandleCache() {
    for (auto& [device, handle] : by_device) cublasDestroy(handle);
  }
};

}  // namespace

cublasHandle_t cublas_handle(cudaStream_t stream) {
  thread_local HandleCache cache;
  int device = 0;
  PX_CUDA_CHECK(cudaGetDevice(&device));
  auto it = cache.by_device.find(device);
  if (it == cache.by_device.end()) {
    cublasHandle_t handle = nullptr;
    PX_CUBLAS_CHECK(cublasCreate(&handle));
    it = cache.by_device.emplace(device, handle).first;
  }
  PX_CUBLAS_CHECK(cublasSetStream(it->second, stream));
  return it->second;
}

}  // namespace parallax::detail
