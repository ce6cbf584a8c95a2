// One cuBLAS handle per (host thread, device), created on first use and kept for the thread's lifetime.
// Creating a handle costs milliseconds and allocates; doing it per call would dominate small GEMMs.
#pragma once

#include <cublas_v2.h>

namespace parallax::detail {

// The calling thread's handle for the current device, bound to `stream`.
cublasHandle_t cublas_handle(cudaStream_t stream);

}  // namespace parallax::detail
