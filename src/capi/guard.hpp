// Internal to the C ABI (src/capi): the one place where C++ exceptions become status codes.
//
// Every extern "C" entry point is a thin wrapper: `return guarded("parallax_x", Needs::kGpu, [&] { ... });`
// The body is ordinary parallax C++ (PX_REQUIRE, PX_CUDA_CHECK, the C++ API), free to throw; guarded() is
// noexcept and catches everything, so no exception can unwind through an extern "C" frame into C or ctypes.
// Exposed as a header (not hidden in a .cpp) so the CPU tests can drive every translation branch with
// synthetic exceptions.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "parallax/core.hpp"
#include "parallax/parallax.h"

namespace parallax::capi {

inline constexpr const char* kNoDeviceMessage =
    "no CUDA device visible (no driver, no GPU, or CUDA_VISIBLE_DEVICES hides them)";

// Thrown by C ABI bodies: the operation needs a GPU and none is visible. Maps to PARALLAX_ERROR_NO_DEVICE.
class NoDevice : public Error {
 public:
  NoDevice() : Error(kNoDeviceMessage) {}
};

// Thrown by C ABI bodies for a declared-but-unsupported combination. Maps to PARALLAX_ERROR_NOT_IMPLEMENTED.
class NotImplemented : public Error {
 public:
  explicit NotImplemented(const std::string& what) : Error(what) {}
};

// Whether the body talks to a GPU. For such bodies, a CUDA failure on a machine that has no GPU at all is
// reported as PARALLAX_ERROR_NO_DEVICE (the actionable cause) rather than as the raw CUDA error (which,
// without a driver, reads "CUDA driver version is insufficient": true, but misleading). The check costs a
// cudaGetDeviceCount only on the failure path.
enum class Needs { kHostOnly, kGpu };

// This thread's error slot (parallax_last_error). Both never throw.
void record_success() noexcept;
parallax_status_t record_failure(parallax_status_t status, const char* function,
                                 std::initializer_list<std::string_view> message_parts) noexcept;

// Maps the exception currently being handled (call only from inside a catch block) to a status, records
// "<function>: <message>" and returns the status.
parallax_status_t translate_current_exception(const char* function, Needs needs) noexcept;

template <typename Body>
parallax_status_t guarded(const char* function, Needs needs, Body&& body) noexcept {
  try {
    std::forward<Body>(body)();
  } catch (...) {
    return translate_current_exception(function, needs);
  }
  record_success();
  return PARALLAX_SUCCESS;
}

// Out-parameter access: a null pointer is an invalid argument named after the parameter.
template <typename T>
T& out_param(T* pointer, const char* name) {
  PX_REQUIRE(pointer != nullptr, name, "must be a non-null pointer to receive the result");
  return *pointer;
}

// Throws NoDevice when no GPU is visible.
void require_gpu();

}  // namespace parallax::capi
