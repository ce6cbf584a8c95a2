// Stream memory operations (cuStreamWaitValue32 / cuStreamWriteValue32): a stream blocks on, or writes, a
// 32-bit flag in device memory — local or a peer's — without a kernel and without the host. The CUDA runtime
// has no equivalent, so the driver entry points are fetched once through cudaGetDriverEntryPointByVersion
// (as tma_map.cpp does for cuTensorMapEncodeTiled): no link against libcuda.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace parallax::detail {

// True when this driver exports both entry points (CUDA >= 12 drivers always support 32-bit memops; the
// old CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1 query is deprecated).
bool stream_memops_available() noexcept;
// True when the device honours CU_STREAM_WAIT_VALUE_FLUSH (flush remote writes that arrived before the flag).
bool can_flush_remote_writes(int device);

// The stream waits until (int32_t)(*flag - value) >= 0 (cyclic >=, so a wrapped epoch still compares right).
// `flush`: add CU_STREAM_WAIT_VALUE_FLUSH (only where can_flush_remote_writes()).
void stream_wait_geq(cudaStream_t stream, const std::uint32_t* flag, std::uint32_t value, bool flush);
// The stream writes `value` to *flag after all its earlier work, with a memory fence before the write (the
// default flags): whoever sees the flag also sees what the stream wrote before it.
void stream_write(cudaStream_t stream, std::uint32_t* flag, std::uint32_t value);

}  // namespace parallax::detail
