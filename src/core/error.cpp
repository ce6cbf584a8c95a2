#include "parallax/core.hpp"

#include <cublas_v2.h>

#include <string>

namespace parallax::detail {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  // Clear a sticky-free error so a caught exception does not poison the next unrelated check.
  (void)cudaGetLastError();
  std::string message = std::string(call) + " failed: " + cudaGetErrorName(status) + " (" +
                        cudaGetErrorString(status) + ") at " + file + ":" + std::to_string(line);
  throw Error(message, call, file, line);
}

[[noreturn]] void throw_cublas_error(int status, const char* call, const char* file, int line) {
  const auto s = static_cast<cublasStatus_t>(status);
  std::string message = std::string(call) + " failed: " + cublasGetStatusName(s) + " (" +
                        cublasGetStatusString(s) + ") at " + file + ":" + std::to_string(line);
  throw Error(message, call, file, line);
}

}  // namespace parallax::detail
