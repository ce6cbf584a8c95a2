// Driver entry points for stream memory operations (see stream_memops.hpp).
#include "tp/stream_memops.hpp"

#include <cuda.h>
#include <fmt/core.h>

#include <mutex>

#include "parallax/core.hpp"

namespace parallax::detail {

namespace {

using WaitFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
using WriteFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

struct MemopEntryPoints {
  WaitFn wait = nullptr;
  WriteFn write = nullptr;
};

const MemopEntryPoints& entry_points() {
  static const MemopEntryPoints eps = [] {
    MemopEntryPoints e;
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult query{};
    // Version 12000: the _v2 symbols (cuStreamWaitValue32_v2), the ones cuda.h maps the names to.
    if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &ptr, 12000, cudaEnableDefault, &query) ==
            cudaSuccess && query == cudaDriverEntryPointSuccess)
      e.wait = reinterpret_cast<WaitFn>(ptr);
    ptr = nullptr;
    if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &ptr, 12000, cudaEnableDefault, &query) ==
            cudaSuccess && query == cudaDriverEntryPointSuccess)
      e.write = reinterpret_cast<WriteFn>(ptr);
    cudaGetLastError();  // a failed lookup must not linger as the "last error"
    return e;
  }();
  return eps;
}

void check(CUresult r, const char* call) {
  if (r != CUDA_SUCCESS) throw Error(fmt::format("{} failed with CUresult {}", call, static_cast<int>(r)), call);
}

}  // namespace

bool stream_memops_available() noexcept {
  try {
    const auto& e = entry_points();
    return e.wait != nullptr && e.write != nullptr;
  } catch (...) {
    return false;
  }
}

bool can_flush_remote_writes(int device) {
  int v = 0;
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrCanFlushRemoteWrites, device));
  return v != 0;
}

void stream_wait_geq(cudaStream_t stream, const std::uint32_t* flag, std::uint32_t value, bool flush) {
  const auto& e = entry_points();
  if (!e.wait) throw Error("cuStreamWaitValue32 is not exported by this CUDA driver");
  const unsigned flags = CU_STREAM_WAIT_VALUE_GEQ | (flush ? CU_STREAM_WAIT_VALUE_FLUSH : 0u);
  check(e.wait(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(flag), value, flags),
        "cuStreamWaitValue32");
}

void stream_write(cudaStream_t stream, std::uint32_t* flag, std::uint32_t value) {
  const auto& e = entry_points();
  if (!e.write) throw Error("cuStreamWriteValue32 is not exported by this CUDA driver");
  check(e.write(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(flag), value,
                CU_STREAM_WRITE_VALUE_DEFAULT),
        "cuStreamWriteValue32");
}

}  // namespace parallax::detail
