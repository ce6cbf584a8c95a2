// parallax core: errors, device queries, RAII wrappers for device memory, streams and events.
//
// Every public entry point of parallax validates its arguments on the host *before* touching the device and
// throws parallax::InvalidArgument naming the argument and the rule it broke. Every CUDA / cuBLAS call is
// checked; a failure throws parallax::Error carrying the failing call, the file and the line.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace parallax {

// Base of every exception parallax throws.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, std::string call = {}, std::string file = {}, int line = 0)
      : std::runtime_error(message), call_(std::move(call)), file_(std::move(file)), line_(line) {}
  // The expression that failed ("cudaMalloc(&ptr, bytes)"), empty when not from a checked call.
  const std::string& call() const noexcept { return call_; }
  const std::string& file() const noexcept { return file_; }
  int line() const noexcept { return line_; }

 private:
  std::string call_;
  std::string file_;
  int line_;
};

// A public entry point was given an argument that breaks one of its rules. Nothing ran on the device.
// what() reads: "invalid argument 'lda': must be >= n ... (got lda=3, n=5)".
class InvalidArgument : public Error {
 public:
  InvalidArgument(std::string argument, const std::string& rule)
      : Error("invalid argument '" + argument + "': " + rule), argument_(std::move(argument)) {}
  const std::string& argument() const noexcept { return argument_; }

 private:
  std::string argument_;
};

namespace detail {
[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(int status, const char* call, const char* file, int line);
}  // namespace detail

}  // namespace parallax

// Checks a CUDA runtime call; throws parallax::Error("<call> failed: <cuda message>") on failure.
#define PX_CUDA_CHECK(call)                                                              \
  do {                                                                                   \
    const cudaError_t px_status_ = (call);                                               \
    if (px_status_ != cudaSuccess)                                                       \
      ::parallax::detail::throw_cuda_error(px_status_, #call, __FILE__, __LINE__);       \
  } while (0)

// After a kernel launch: a bad launch configuration surfaces here, not at the next unrelated call.
#define PX_CUDA_CHECK_LAUNCH() PX_CUDA_CHECK(cudaGetLastError())

// Checks a cuBLAS call (status compared with CUBLAS_STATUS_SUCCESS == 0).
#define PX_CUBLAS_CHECK(call)                                                            \
  do {                                                                                   \
    const int px_status_ = static_cast<int>(call);                                       \
    if (px_status_ != 0)                                                                 \
      ::parallax::detail::throw_cublas_error(px_status_, #call, __FILE__, __LINE__);     \
  } while (0)

// Argument validation for public entry points. `rule` is only evaluated when the check fails, so it may
// build a descriptive string: PX_REQUIRE(lda >= n, "lda", "must be >= n (got " + ... + ")").
#define PX_REQUIRE(condition, argument, rule)                                            \
  do {                                                                                   \
    if (!(condition)) throw ::parallax::InvalidArgument((argument), (rule));              \
  } while (0)

namespace parallax {

// What a kernel author and a benchmark need to know about a GPU.
struct DeviceInfo {
  int device = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  std::size_t global_memory_bytes = 0;
  std::size_t l2_bytes = 0;
  std::size_t shared_memory_per_block = 0;        // default limit (48 KiB)
  std::size_t shared_memory_per_block_optin = 0;  // after cudaFuncSetAttribute(MaxDynamicSharedMemorySize)
  std::size_t shared_memory_per_sm = 0;
  int registers_per_sm = 0;
  int max_threads_per_sm = 0;
  int warp_size = 32;
  int clock_khz = 0;         // peak SM clock
  int memory_clock_khz = 0;  // peak memory clock
  int memory_bus_bits = 0;

  std::string arch() const;  // "sm_90"
  // Datasheet-style peaks derived from clock and unit counts (leads, not measurements).
  double theoretical_fp32_tflops() const;
  double theoretical_dram_gbps() const;
};

// Number of usable CUDA devices; 0 (never an exception) when there is no driver or no GPU.
int device_count() noexcept;
inline bool has_gpu() noexcept { return device_count() > 0; }
// Properties of `device` (-1: the current device). Throws parallax::Error if it does not exist.
DeviceInfo device_info(int device = -1);

// Git revision and version the library was built from (for every JSON result).
const char* git_sha() noexcept;
const char* version() noexcept;

// Owning device allocation of `count` elements of T. Move-only; freed in the destructor.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    if (count_ > 0) PX_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), count_ * sizeof(T)));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return count_; }
  std::size_t bytes() const noexcept { return count_ * sizeof(T); }

  void upload(std::span<const T> host, cudaStream_t stream = nullptr) {
    PX_REQUIRE(host.size() <= count_, "host", "upload of " + std::to_string(host.size()) +
                                                  " elements into a buffer of " + std::to_string(count_));
    PX_CUDA_CHECK(cudaMemcpyAsync(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
    PX_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  std::vector<T> download(cudaStream_t stream = nullptr) const {
    std::vector<T> host(count_);
    PX_CUDA_CHECK(cudaMemcpyAsync(host.data(), data_, bytes(), cudaMemcpyDeviceToHost, stream));
    PX_CUDA_CHECK(cudaStreamSynchronize(stream));
    return host;
  }
  // Sets every byte to `byte` (0xFF makes every float a NaN: the poison used before each test run). With a stream: queued on it (stream order only). Without one: finished when
  // the call returns, so it is ordered before work queued afterwards on ANY stream; a memset left pending on
  // the legacy default stream is NOT ordered before a non-blocking stream's work (parallax::Stream is one),
  // and a poison fill could then land on top of results (a test saw NaN rows that way, 2026-11-23).
  void fill_bytes(int byte, cudaStream_t stream) {
    if (count_ > 0) PX_CUDA_CHECK(cudaMemsetAsync(data_, byte, bytes(), stream));
  }
  void fill_bytes(int byte) {
    if (count_ == 0) return;
    PX_CUDA_CHECK(cudaMemsetAsync(data_, byte, bytes(), nullptr));
    PX_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }

 private:
  void release() noexcept {
    if (data_) cudaFree(data_);  // never throws from a destructor
    data_ = nullptr;
    count_ = 0;
  }
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

// Owning CUDA stream (non-blocking with respect to the legacy default stream).
class Stream {
 public:
  Stream() { PX_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { if (stream_) cudaStreamDestroy(stream_); }
  cudaStream_t get() const noexcept { return stream_; }
  operator cudaStream_t() const noexcept { return stream_; }
  void synchronize() const { PX_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
};

// Owning CUDA event (timing enabled unless asked otherwise).
class Event {
 public:
  explicit Event(bool timing = true) {
    PX_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { if (event_) cudaEventDestroy(event_); }
  cudaEvent_t get() const noexcept { return event_; }
  operator cudaEvent_t() const noexcept { return event_; }
  void record(cudaStream_t stream) { PX_CUDA_CHECK(cudaEventRecord(event_, stream)); }
  void synchronize() const { PX_CUDA_CHECK(cudaEventSynchronize(event_)); }
  // Milliseconds from `start` to this event (both recorded and completed).
  float elapsed_since(const Event& start) const {
    float ms = 0.f;
    PX_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
    return ms;
  }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace parallax
