// The C ABI's error state: status names, the thread-local last-error message, and the translation of every
// exception the C++ side can throw into a status.
#include <cstring>
#include <new>
#include <string>
#include <string_view>

#include "capi/guard.hpp"
#include "parallax/core.hpp"
#include "parallax/parallax.h"

namespace parallax::capi {
namespace {

// One slot per thread: a message written by thread A is never what thread B reads, and no lock is needed.
// `fallback` covers the one failure we cannot record normally (no memory left to build the message):
// it then points at a string literal instead.
struct LastError {
  std::string message;
  const char* fallback = nullptr;
};
thread_local LastError t_last_error;

bool contains(std::string_view text, std::string_view needle) { return text.find(needle) != std::string_view::npos; }

// Status of a parallax::Error that is not one of the typed cases. The C++ side marks checked CUDA/cuBLAS
// failures by a non-empty call(); out-of-memory and "not implemented" are told apart by the message that
// src/core/error.cpp and the level placeholders write (they have no exception type of their own yet).
parallax_status_t classify(const Error& e, Needs needs) noexcept {
  const std::string_view what = e.what();
  if (contains(what, "not implemented")) return PARALLAX_ERROR_NOT_IMPLEMENTED;
  if (needs == Needs::kGpu && device_count() == 0) return PARALLAX_ERROR_NO_DEVICE;
  if (contains(what, "cudaErrorMemoryAllocation") || contains(what, "CUBLAS_STATUS_ALLOC_FAILED"))
    return PARALLAX_ERROR_OUT_OF_MEMORY;
  if (!e.call().empty()) return PARALLAX_ERROR_CUDA;
  return PARALLAX_ERROR_RUNTIME;
}

}  // namespace

void record_success() noexcept {
  t_last_error.message.clear();  // keeps the capacity: no allocation, cannot throw
  t_last_error.fallback = nullptr;
}

parallax_status_t record_failure(parallax_status_t status, const char* function,
                                 std::initializer_list<std::string_view> message_parts) noexcept {
  try {
    std::string& m = t_last_error.message;
    m.assign(function ? function : "parallax");
    m += ": ";
    for (std::string_view part : message_parts) m += part;
    t_last_error.fallback = nullptr;
  } catch (...) {  // std::bad_alloc while building the message: still report, with a fixed text
    t_last_error.message.clear();
    t_last_error.fallback = "parallax: out of host memory while recording an error message";
  }
  return status;
}

parallax_status_t translate_current_exception(const char* function, Needs needs) noexcept {
  // Rethrow-and-catch inside a noexcept function: every handler below returns, so nothing escapes.
  // Handlers only build string_views (no allocation); record_failure does the allocating, guarded.
  try {
    throw;
  } catch (const InvalidArgument& e) {
    return record_failure(PARALLAX_ERROR_INVALID_ARGUMENT, function, {e.what()});
  } catch (const NoDevice& e) {
    return record_failure(PARALLAX_ERROR_NO_DEVICE, function, {e.what()});
  } catch (const NotImplemented& e) {
    return record_failure(PARALLAX_ERROR_NOT_IMPLEMENTED, function, {e.what()});
  } catch (const Error& e) {
    const parallax_status_t status = classify(e, needs);
    if (status == PARALLAX_ERROR_NO_DEVICE)
      return record_failure(status, function, {kNoDeviceMessage, " [", e.what(), "]"});
    return record_failure(status, function, {e.what()});
  } catch (const std::bad_alloc&) {
    return record_failure(PARALLAX_ERROR_OUT_OF_MEMORY, function, {"out of host memory (std::bad_alloc)"});
  } catch (const std::exception& e) {
    return record_failure(PARALLAX_ERROR_INTERNAL, function, {"unexpected exception: ", e.what()});
  } catch (...) {
    return record_failure(PARALLAX_ERROR_INTERNAL, function, {"unexpected exception of unknown type"});
  }
}

void require_gpu() {
  if (device_count() == 0) throw NoDevice();
}

}  // namespace parallax::capi

extern "C" {

const char* parallax_last_error(void) noexcept {
  const auto& slot = parallax::capi::t_last_error;
  return slot.fallback ? slot.fallback : slot.message.c_str();
}

const char* parallax_status_name(parallax_status_t status) noexcept {
  switch (status) {
    case PARALLAX_SUCCESS: return "PARALLAX_SUCCESS";
    case PARALLAX_ERROR_INVALID_ARGUMENT: return "PARALLAX_ERROR_INVALID_ARGUMENT";
    case PARALLAX_ERROR_NO_DEVICE: return "PARALLAX_ERROR_NO_DEVICE";
    case PARALLAX_ERROR_NOT_IMPLEMENTED: return "PARALLAX_ERROR_NOT_IMPLEMENTED";
    case PARALLAX_ERROR_OUT_OF_MEMORY: return "PARALLAX_ERROR_OUT_OF_MEMORY";
    case PARALLAX_ERROR_CUDA: return "PARALLAX_ERROR_CUDA";
    case PARALLAX_ERROR_RUNTIME: return "PARALLAX_ERROR_RUNTIME";
    case PARALLAX_ERROR_INTERNAL: return "PARALLAX_ERROR_INTERNAL";
  }
  return "PARALLAX_STATUS_UNKNOWN";  // a value from a newer header, or garbage from a caller
}

}  // extern "C"
