// The C ABI (parallax/parallax.h) on the CPU: every bad argument gives the right status and a message naming
// the argument; no exception escapes (statically: every entry point is noexcept; dynamically: every
// exception type the C++ side can throw becomes a status); parallax_last_error is per thread; and the
// entry points that need no GPU work without one.
//
// Pointers below are fake addresses: every call that uses them either fails host-side validation before
// touching the device, or runs only on a machine without a GPU (where nothing can dereference them).
#include <gtest/gtest.h>

#include <barrier>
#include <cstdint>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "capi/guard.hpp"
#include "parallax/core.hpp"
#include "parallax/gemm.hpp"
#include "parallax/parallax.h"

namespace {

// Fake device addresses, far apart so that small matrices never overlap unless a test wants them to.
float* fake(std::uintptr_t megabytes) { return reinterpret_cast<float*>(megabytes << 20); }

std::string last_error() { return parallax_last_error(); }

// Expects `status` and a message that starts with the function and names 'argument'.
void expect_failure(parallax_status_t status, parallax_status_t expected, const std::string& function,
                    const std::string& argument) {
  EXPECT_EQ(status, expected) << parallax_status_name(status) << ": " << last_error();
  const std::string message = last_error();
  EXPECT_EQ(message.rfind(function + ": ", 0), 0u) << message;
  if (!argument.empty()) {
    EXPECT_NE(message.find("invalid argument '" + argument + "'"), std::string::npos)
        << "message does not name '" << argument << "': " << message;
  }
}

// ---------------------------------------------------------------------------------------------------------
// No exception can escape: the declarations themselves promise it, and the compiler holds the definitions
// to it (a throwing definition would call std::terminate, which the translation tests below rule out).
static_assert(noexcept(parallax_last_error()));
static_assert(noexcept(parallax_status_name(PARALLAX_SUCCESS)));
static_assert(noexcept(parallax_abi_version()));
static_assert(noexcept(parallax_version()));
static_assert(noexcept(parallax_git_sha()));
static_assert(noexcept(parallax_device_count(nullptr)));
static_assert(noexcept(parallax_get_device(nullptr)));
static_assert(noexcept(parallax_set_device(0)));
static_assert(noexcept(parallax_pointer_device(nullptr, nullptr)));
static_assert(noexcept(parallax_device_info(0, nullptr)));
static_assert(noexcept(parallax_sgemm_level_count(nullptr)));
static_assert(noexcept(parallax_sgemm_level_name(1, nullptr)));
static_assert(noexcept(parallax_sgemm_level_description(1, nullptr)));
static_assert(noexcept(parallax_sgemm_level_parse(nullptr, nullptr)));
static_assert(noexcept(parallax_sgemm(1, 1, 1, 1, 1.f, nullptr, 1, nullptr, 1, 0.f, nullptr, 1, nullptr)));
static_assert(noexcept(parallax_sgemm_cublas(1, 1, 1, 1.f, nullptr, 1, nullptr, 1, 0.f, nullptr, 1, nullptr)));
static_assert(noexcept(parallax_gemm_kernel_count(nullptr)));
static_assert(noexcept(parallax_gemm_kernel_name(0, nullptr)));
static_assert(noexcept(parallax_gemm(nullptr, nullptr, nullptr)));
static_assert(std::is_standard_layout_v<parallax_gemm_args_t>);
// The enums are int-sized, as ctypes (c_int) and every C compiler in practice assume.
static_assert(sizeof(parallax_status_t) == sizeof(int));
static_assert(sizeof(parallax_dtype_t) == sizeof(int));
static_assert(std::is_standard_layout_v<parallax_device_info_t>);

// ---------------------------------------------------------------------------------------------------------
TEST(CApi, StatusNamesAreDistinctAndTotal) {
  const parallax_status_t all[] = {PARALLAX_SUCCESS,          PARALLAX_ERROR_INVALID_ARGUMENT,
                                   PARALLAX_ERROR_NO_DEVICE,  PARALLAX_ERROR_NOT_IMPLEMENTED,
                                   PARALLAX_ERROR_OUT_OF_MEMORY, PARALLAX_ERROR_CUDA,
                                   PARALLAX_ERROR_RUNTIME,    PARALLAX_ERROR_INTERNAL};
  std::vector<std::string> names;
  for (parallax_status_t s : all) {
    const std::string name = parallax_status_name(s);
    EXPECT_EQ(name.rfind("PARALLAX_", 0), 0u) << name;
    for (const auto& other : names) EXPECT_NE(name, other);
    names.push_back(name);
  }
  EXPECT_STREQ(parallax_status_name(PARALLAX_SUCCESS), "PARALLAX_SUCCESS");
  EXPECT_STREQ(parallax_status_name(static_cast<parallax_status_t>(999)), "PARALLAX_STATUS_UNKNOWN");
}

TEST(CApi, IdentityMatchesTheCppApi) {
  EXPECT_EQ(parallax_abi_version(), PARALLAX_ABI_VERSION);
  EXPECT_STREQ(parallax_version(), parallax::version());
  EXPECT_STREQ(parallax_git_sha(), parallax::git_sha());
  EXPECT_GT(std::string(parallax_git_sha()).size(), 0u);
}

TEST(CApi, SuccessClearsTheLastError) {
  int count = -1;
  expect_failure(parallax_device_count(nullptr), PARALLAX_ERROR_INVALID_ARGUMENT, "parallax_device_count", "count");
  EXPECT_FALSE(last_error().empty());
  ASSERT_EQ(parallax_sgemm_level_count(&count), PARALLAX_SUCCESS);
  EXPECT_EQ(last_error(), "");
  // Pure getters leave the slot alone.
  parallax_device_count(nullptr);
  const std::string before = last_error();
  parallax_status_name(PARALLAX_SUCCESS);
  parallax_version();
  EXPECT_EQ(last_error(), before);
}

// ---------------------------------------------------------------------------------------------------------
TEST(CApi, DeviceCountWorksWithoutAGpu) {
  int count = -1;
  ASSERT_EQ(parallax_device_count(&count), PARALLAX_SUCCESS) << last_error();
  EXPECT_EQ(count, parallax::device_count());
  expect_failure(parallax_device_count(nullptr), PARALLAX_ERROR_INVALID_ARGUMENT, "parallax_device_count", "count");
}

TEST(CApi, DeviceInfoChecksItsArgumentsBeforeLookingForAGpu) {
  expect_failure(parallax_device_info(0, nullptr), PARALLAX_ERROR_INVALID_ARGUMENT, "parallax_device_info", "info");

  parallax_device_info_t info{};
  info.struct_size = sizeof(info) - 8;  // a binding with a stale mirror of the struct
  info.sm_count = 12345;
  expect_failure(parallax_device_info(0, &info), PARALLAX_ERROR_INVALID_ARGUMENT, "parallax_device_info",
                 "info->struct_size");
  EXPECT_NE(last_error().find(std::to_string(sizeof(parallax_device_info_t))), std::string::npos) << last_error();
  EXPECT_EQ(info.sm_count, 12345) << "a failed call must leave *info untouched";

  info.struct_size = sizeof(info);
  expect_failure(parallax_device_info(-2, &info), PARALLAX_ERROR_INVALID_ARGUMENT, "parallax_device_info", "device");
}

TEST(CApi, DeviceInfoWithoutAGpuIsNoDevice) {
  if (parallax::has_gpu()) GTEST_SKIP() << "checks the no-GPU path; this machine has a GPU";
  parallax_device_info_t info{};
  info.struct_size = sizeof(info);
  for (int device : {-1, 0, 3}) {
    expect_failure(parallax_device_info(device, &info), PARALLAX_ERROR_NO_DEVICE, "parallax_device_info", "");
    EXPECT_NE(last_error().find("no CUDA device visible"), std::string::npos) << last_error();
  }
}

TEST(CApi, DeviceInfoOnAGpu) {
  if (!parallax::has_gpu()) GTEST_SKIP() << "no CUDA GPU visible: GPU part skipped";
  parallax_device_info_t info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(parallax_device_info(0, &info), PARALLAX_SUCCESS) << last_error();
  const parallax::DeviceInfo ref = parallax::device_info(0);
  EXPECT_EQ(std::string(info.name), ref.name);
  EXPECT_EQ(std::string(info.arch), ref.arch());
  EXPECT_EQ(info.sm_count, ref.sm_count);
  EXPECT_EQ(info.global_memory_bytes, ref.global_memory_bytes);
  EXPECT_DOUBLE_EQ(info.theoretical_fp32_tflops, ref.theoretical_fp32_tflops());
  expect_failure(parallax_device_info(parallax::device_count(), &info), PARALLAX_ERROR_INVALID_ARGUMENT,
                 "parallax_device_info", "device");
}

TEST(CApi, GetSetDeviceAndPointerDeviceArguments) {
  expect_failure(parallax_get_device(nullptr), PARALLAX_ERROR_INVALID_ARGUMENT, "parallax_get_device", "device");
  expect_failure(parallax_set_device(-1), PARALLAX_ERROR_INVALID_ARGUMENT, "parallax_set_device", "device");
  int device = -1;
  expect_failure(parallax_pointer_device(nullptr, &device), PARALLAX_ERROR_INVALID_ARGUMENT,
                 "parallax_pointer_device", "ptr");
  expect_failure(parallax_pointer_device(fake(1), nullptr), PARALLAX_ERROR_INVALID_ARGUMENT,
                 "parallax_pointer_device", "device");

  float host_value = 0.f;
  if (parallax::has_gpu()) {
    // Host memory is rejected by name; a device allocation reports its device.
    expect_failure(parallax_pointer_device(&host_value, &device), PARALLAX_ERROR_INVALID_ARGUMENT,
                   "parallax_pointer_device", "ptr");
    parallax::DeviceBuffer<float> buffer(16);
    ASSERT_EQ(parallax_pointer_device(buffer.data() + 3, &device), PARALLAX_SUCCESS) << last_error();
    int current = -1;
    ASSERT_EQ(parallax_get_device(&current), PARALLAX_SUCCESS) << last_error();
    EXPECT_EQ(device, current);
    expect_failure(parallax_set_device(parallax::device_count()), PARALLAX_ERROR_INVALID_ARGUMENT,
                   "parallax_set_device", "device");
  } else {
    expect_failure(parallax_pointer_device(&host_value, &device), PARALLAX_ERROR_NO_DEVICE,
                   "parallax_pointer_device", "");
    expect_failure(parallax_get_device(&device), PARALLAX_ERROR_NO_DEVICE, "parallax_get_device", "");
    expect_failure(parallax_set_device(0), PARALLAX_ERROR_NO_DEVICE, "parallax_set_device", "");
  }
}

// ---------------------------------------------------------------------------------------------------------
TEST(CApi, LevelNamesDescriptionsAndParsing) {
  int count = 0;
  ASSERT_EQ(parallax_sgemm_level_count(&count), PARALLAX_SUCCESS);
  EXPECT_EQ(count, 8);
  for (int level = 1; level <= count; ++level) {
    const char* name = nullptr;
    const char* description = nullptr;
    ASSERT_EQ(parallax_sgemm_level_name(level, &name), PARALLAX_SUCCESS) << last_error();
    ASSERT_EQ(parallax_sgemm_level_description(level, &description), PARALLAX_SUCCESS) << last_error();
    EXPECT_EQ(std::string(name), "sgemm" + std::to_string(level));
    EXPECT_GT(std::string(description).size(), 0u);
    int parsed = 0;
    ASSERT_EQ(parallax_sgemm_level_parse(name, &parsed), PARALLAX_SUCCESS) << last_error();
    EXPECT_EQ(parsed, level);
    ASSERT_EQ(parallax_sgemm_level_parse(std::to_string(level).c_str(), &parsed), PARALLAX_SUCCESS);
    EXPECT_EQ(parsed, level);
  }
  int parsed = 0;
  ASSERT_EQ(parallax_sgemm_level_parse("smem", &parsed), PARALLAX_SUCCESS);
  EXPECT_EQ(parsed, 3);

  const char* name = nullptr;
  for (int bad : {0, 9, -1}) {
    expect_failure(parallax_sgemm_level_name(bad, &name), PARALLAX_ERROR_INVALID_ARGUMENT,
                   "parallax_sgemm_level_name", "level");
    expect_failure(parallax_sgemm_level_description(bad, &name), PARALLAX_ERROR_INVALID_ARGUMENT,
                   "parallax_sgemm_level_description", "level");
  }
  expect_failure(parallax_sgemm_level_name(1, nullptr), PARALLAX_ERROR_INVALID_ARGUMENT,
                 "parallax_sgemm_level_name", "name");
  expect_failure(parallax_sgemm_level_count(nullptr), PARALLAX_ERROR_INVALID_ARGUMENT,
                 "parallax_sgemm_level_count", "count");
  expect_failure(parallax_sgemm_level_parse(nullptr, &parsed), PARALLAX_ERROR_INVALID_ARGUMENT,
                 "parallax_sgemm_level_parse", "text");
  expect_failure(parallax_sgemm_level_parse("sgemm3", nullptr), PARALLAX_ERROR_INVALID_ARGUMENT,
                 "parallax_sgemm_level_parse", "level");
  parsed = 77;
  expect_failure(parallax_sgemm_level_parse("sgemm9", &parsed), PARALLAX_ERROR_INVALID_ARGUMENT,
                 "parallax_sgemm_level_parse", "text");
  EXPECT_NE(last_error().find("sgemm9"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("valid: sgemm1"), std::string::npos) << last_error();
  EXPECT_EQ(parsed, 77) << "a failed parse must leave *level untouched";
}

// One bad SGEMM call: which argument is wrong and how.
struct BadSgemm {
  const char* argument;  // expected in the message
  int64_t m = 64, n = 48, k = 32;
  const float* a = fake(1);
  int64_t lda = 32;
  const float* b = fake(2);
  int64_t ldb = 48;
  float* c = fake(3);
  int64_t ldc = 48;
};

std::vector<BadSgemm> bad_sgemm_cases() {
  constexpr int64_t big = int64_t{1} << 31;  // INT_MAX + 1: would wrap if narrowed without a check
  std::vector<BadSgemm> cases;
  auto add = [&](const char* argument, auto&& mutate) {
    BadSgemm c{argument};
    mutate(c);
    cases.push_back(c);
  };
  add("m", [](BadSgemm& c) { c.m = 0; });
  add("m", [](BadSgemm& c) { c.m = -5; });
  add("m", [&](BadSgemm& c) { c.m = big; });
  add("n", [](BadSgemm& c) { c.n = 0; });
  add("n", [&](BadSgemm& c) { c.n = big + 48; });  // big + 48 would narrow to 48: a valid-looking n
  add("k", [](BadSgemm& c) { c.k = 0; });
  add("k", [&](BadSgemm& c) { c.k = -big - 1; });
  add("a", [](BadSgemm& c) { c.a = nullptr; });
  add("b", [](BadSgemm& c) { c.b = nullptr; });
  add("c", [](BadSgemm& c) { c.c = nullptr; });
  add("lda", [](BadSgemm& c) { c.lda = 31; });
  add("lda", [&](BadSgemm& c) { c.lda = big; });
  add("ldb", [](BadSgemm& c) { c.ldb = 47; });
  add("ldc", [](BadSgemm& c) { c.ldc = 0; });
  add("c", [](BadSgemm& c) { c.c = const_cast<float*>(c.a) + 100; });  // C overlaps A
  add("c", [](BadSgemm& c) { c.c = const_cast<float*>(c.b) + 5; });    // C overlaps B
  return cases;
}

TEST(CApi, SgemmRejectsEveryBadArgumentByName) {
  for (const BadSgemm& t : bad_sgemm_cases()) {
    SCOPED_TRACE(std::string("bad ") + t.argument);
    for (int level = 1; level <= 8; ++level) {
      SCOPED_TRACE("level " + std::to_string(level));
      expect_failure(parallax_sgemm(level, t.m, t.n, t.k, 1.f, t.a, t.lda, t.b, t.ldb, 0.f, t.c, t.ldc, nullptr),
                     PARALLAX_ERROR_INVALID_ARGUMENT, "parallax_sgemm", t.argument);
    }
    expect_failure(parallax_sgemm_cublas(t.m, t.n, t.k, 1.f, t.a, t.lda, t.b, t.ldb, 0.f, t.c, t.ldc, nullptr),
                   PARALLAX_ERROR_INVALID_ARGUMENT, "parallax_sgemm_cublas", t.argument);
  }
  const BadSgemm ok{""};
  for (int level : {0, 9, -3, 1000}) {
    expect_failure(parallax_sgemm(level, ok.m, ok.n, ok.k, 1.f, ok.a, ok.lda, ok.b, ok.ldb, 0.f, ok.c, ok.ldc,
                                  nullptr),
                   PARALLAX_ERROR_INVALID_ARGUMENT, "parallax_sgemm", "level");
  }
}

// ---- tensor-core GEMM

parallax_gemm_args_t valid_gemm_args() {
  parallax_gemm_args_t g{};
  g.struct_size = sizeof(parallax_gemm_args_t);
  g.m = 64;
  g.n = 48;
  g.k = 32;
  g.op_a = PARALLAX_OP_N;
  g.op_b = PARALLAX_OP_T;
  g.ab_dtype = PARALLAX_DTYPE_BF16;
  g.c_dtype = PARALLAX_DTYPE_F32;
  g.a = fake(1);
  g.lda = 32;
  g.b = fake(2);
  g.ldb = 32;
  g.c = fake(3);
  g.ldc = 48;
  g.alpha = 1.f;
  g.beta = 0.f;
  return g;
}

TEST(CApi, GemmKernelNamesMatchTheCppApi) {
  int count = 0;
  ASSERT_EQ(parallax_gemm_kernel_count(&count), PARALLAX_SUCCESS);
  const auto names = parallax::gemm_kernel_names();
  ASSERT_EQ(count, static_cast<int>(names.size()));
  for (int i = 0; i < count; ++i) {
    const char* name = nullptr;
    ASSERT_EQ(parallax_gemm_kernel_name(i, &name), PARALLAX_SUCCESS);
    EXPECT_EQ(std::string(name), std::string(names[static_cast<std::size_t>(i)]));
  }
  const char* name = nullptr;
  expect_failure(parallax_gemm_kernel_name(count, &name), PARALLAX_ERROR_INVALID_ARGUMENT, "parallax_gemm_kernel_name",
                 "index");
  expect_failure(parallax_gemm_kernel_name(-1, &name), PARALLAX_ERROR_INVALID_ARGUMENT, "parallax_gemm_kernel_name",
                 "index");
  expect_failure(parallax_gemm_kernel_count(nullptr), PARALLAX_ERROR_INVALID_ARGUMENT, "parallax_gemm_kernel_count",
                 "count");
}

TEST(CApi, GemmRejectsEveryBadArgumentByName) {
  struct Bad {
    const char* argument;
    void (*mutate)(parallax_gemm_args_t&);
  };
  const Bad cases[] = {
      {"struct_size", [](parallax_gemm_args_t& g) { g.struct_size = 8; }},
      {"reserved", [](parallax_gemm_args_t& g) { g.reserved = 1; }},
      {"m", [](parallax_gemm_args_t& g) { g.m = 0; }},
      {"n", [](parallax_gemm_args_t& g) { g.n = std::int64_t{1} << 40; }},
      {"k", [](parallax_gemm_args_t& g) { g.k = -5; }},
      {"op_a", [](parallax_gemm_args_t& g) { g.op_a = 7; }},
      {"op_b", [](parallax_gemm_args_t& g) { g.op_b = -1; }},
      {"a_type", [](parallax_gemm_args_t& g) { g.ab_dtype = PARALLAX_DTYPE_F32; }},
      {"c_type", [](parallax_gemm_args_t& g) { g.c_dtype = 9; }},
      {"epilogue", [](parallax_gemm_args_t& g) { g.epilogue = 3; }},
      {"a", [](parallax_gemm_args_t& g) { g.a = nullptr; }},
      {"b", [](parallax_gemm_args_t& g) { g.b = nullptr; }},
      {"c", [](parallax_gemm_args_t& g) { g.c = nullptr; }},
      {"lda", [](parallax_gemm_args_t& g) { g.lda = 31; }},
      {"ldb", [](parallax_gemm_args_t& g) { g.ldb = 16; }},  // op_b = T: ldb >= k
      {"ldc", [](parallax_gemm_args_t& g) { g.ldc = 47; }},
      {"alpha", [](parallax_gemm_args_t& g) { g.alpha = std::numeric_limits<float>::infinity(); }},
      {"c", [](parallax_gemm_args_t& g) { g.c = const_cast<void*>(g.a); }},
  };
  for (const Bad& t : cases) {
    SCOPED_TRACE(std::string("bad ") + t.argument);
    parallax_gemm_args_t g = valid_gemm_args();
    t.mutate(g);
    for (const char* kernel : {static_cast<const char*>(nullptr), "auto", "mma", "wgmma", "cublas"})
      expect_failure(parallax_gemm(&g, kernel, nullptr), PARALLAX_ERROR_INVALID_ARGUMENT, "parallax_gemm", t.argument);
  }
  parallax_gemm_args_t g = valid_gemm_args();
  expect_failure(parallax_gemm(nullptr, "auto", nullptr), PARALLAX_ERROR_INVALID_ARGUMENT, "parallax_gemm", "args");
  expect_failure(parallax_gemm(&g, "sgemm8", nullptr), PARALLAX_ERROR_INVALID_ARGUMENT, "parallax_gemm", "kernel");
  EXPECT_NE(last_error().find("wgmma-persistent"), std::string::npos) << "lists the valid kernels: " << last_error();
}

TEST(CApi, GemmWithValidArgumentsAndNoGpuReportsWhy) {
  if (parallax::has_gpu()) GTEST_SKIP() << "checks the no-GPU path (fake pointers must never reach a real GPU)";
  parallax_gemm_args_t g = valid_gemm_args();
  for (const char* kernel : {"auto", "wmma", "cublas"})
    expect_failure(parallax_gemm(&g, kernel, nullptr), PARALLAX_ERROR_NO_DEVICE, "parallax_gemm", "");
}

TEST(CApi, SgemmWithValidArgumentsAndNoGpuReportsWhy) {
  if (parallax::has_gpu()) GTEST_SKIP() << "checks the no-GPU path (fake pointers must never reach a real GPU)";
  const BadSgemm ok{""};
  for (int level = 1; level <= 8; ++level) {
    SCOPED_TRACE("level " + std::to_string(level));
    const parallax_status_t s =
        parallax_sgemm(level, ok.m, ok.n, ok.k, 1.f, ok.a, ok.lda, ok.b, ok.ldb, 0.f, ok.c, ok.ldc, nullptr);
    // A written level finds no GPU; a level still being written says so. Either way: a status, a message.
    EXPECT_TRUE(s == PARALLAX_ERROR_NO_DEVICE || s == PARALLAX_ERROR_NOT_IMPLEMENTED)
        << parallax_status_name(s) << ": " << last_error();
    if (s == PARALLAX_ERROR_NOT_IMPLEMENTED) EXPECT_NE(last_error().find("not implemented"), std::string::npos);
    if (s == PARALLAX_ERROR_NO_DEVICE) EXPECT_NE(last_error().find("no CUDA device"), std::string::npos);
  }
  // Level 1 exists from the start: its launch fails for want of a GPU.
  EXPECT_EQ(parallax_sgemm(1, ok.m, ok.n, ok.k, 1.f, ok.a, ok.lda, ok.b, ok.ldb, 0.f, ok.c, ok.ldc, nullptr),
            PARALLAX_ERROR_NO_DEVICE) << last_error();
  expect_failure(parallax_sgemm_cublas(ok.m, ok.n, ok.k, 1.f, ok.a, ok.lda, ok.b, ok.ldb, 0.f, ok.c, ok.ldc, nullptr),
                 PARALLAX_ERROR_NO_DEVICE, "parallax_sgemm_cublas", "");
}

// ---------------------------------------------------------------------------------------------------------
// Every exception type the C++ side can throw becomes the right status and message (driven through the
// same guard every entry point uses).
TEST(CApiGuard, TranslatesEveryExceptionType) {
  using parallax::capi::guarded;
  using parallax::capi::Needs;
  struct Case {
    const char* label;
    void (*body)();
    Needs needs;
    parallax_status_t status;
    const char* message;  // substring expected after "test_fn: "
  };
  const Case cases[] = {
      {"InvalidArgument", [] { PX_REQUIRE(false, "lda", "must be >= k"); }, Needs::kHostOnly,
       PARALLAX_ERROR_INVALID_ARGUMENT, "invalid argument 'lda': must be >= k"},
      {"placeholder", [] { throw parallax::Error("sgemm level 'x' not implemented yet"); }, Needs::kGpu,
       PARALLAX_ERROR_NOT_IMPLEMENTED, "not implemented yet"},
      {"capi NotImplemented", [] { throw parallax::capi::NotImplemented("bf16 gemm"); }, Needs::kHostOnly,
       PARALLAX_ERROR_NOT_IMPLEMENTED, "bf16 gemm"},
      {"NoDevice", [] { throw parallax::capi::NoDevice(); }, Needs::kHostOnly, PARALLAX_ERROR_NO_DEVICE,
       "no CUDA device visible"},
      {"cuda oom", [] { PX_CUDA_CHECK(cudaErrorMemoryAllocation); }, Needs::kHostOnly,
       PARALLAX_ERROR_OUT_OF_MEMORY, "cudaErrorMemoryAllocation"},
      {"cuda error", [] { PX_CUDA_CHECK(cudaErrorInvalidValue); }, Needs::kHostOnly, PARALLAX_ERROR_CUDA,
       "cudaErrorInvalidValue"},
      {"cublas error", [] { PX_CUBLAS_CHECK(7); }, Needs::kHostOnly, PARALLAX_ERROR_CUDA, "CUBLAS_STATUS"},
      {"library error", [] { throw parallax::Error("tuning cache is corrupt"); }, Needs::kHostOnly,
       PARALLAX_ERROR_RUNTIME, "tuning cache is corrupt"},
      {"bad_alloc", [] { throw std::bad_alloc(); }, Needs::kHostOnly, PARALLAX_ERROR_OUT_OF_MEMORY,
       "out of host memory"},
      {"std exception", [] { throw std::out_of_range("vector::at"); }, Needs::kHostOnly, PARALLAX_ERROR_INTERNAL,
       "unexpected exception: vector::at"},
      {"non-exception", [] { throw 42; }, Needs::kHostOnly, PARALLAX_ERROR_INTERNAL, "unknown type"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    const parallax_status_t s = guarded("test_fn", c.needs, c.body);
    EXPECT_EQ(s, c.status) << parallax_status_name(s) << ": " << last_error();
    EXPECT_EQ(last_error().rfind("test_fn: ", 0), 0u) << last_error();
    EXPECT_NE(last_error().find(c.message), std::string::npos) << last_error();
  }
  EXPECT_EQ(guarded("test_fn", Needs::kHostOnly, [] {}), PARALLAX_SUCCESS);
  EXPECT_EQ(last_error(), "");
}

TEST(CApiGuard, CudaFailureWithoutAGpuIsReportedAsNoDevice) {
  if (parallax::has_gpu()) GTEST_SKIP() << "checks the no-GPU path; this machine has a GPU";
  const parallax_status_t s = parallax::capi::guarded("test_fn", parallax::capi::Needs::kGpu,
                                                      [] { PX_CUDA_CHECK(cudaErrorInsufficientDriver); });
  EXPECT_EQ(s, PARALLAX_ERROR_NO_DEVICE) << last_error();
  // The original CUDA error stays in the message for whoever needs the details.
  EXPECT_NE(last_error().find("cudaErrorInsufficientDriver"), std::string::npos) << last_error();
}

// ---------------------------------------------------------------------------------------------------------
// parallax_last_error is per thread: two threads fail on different arguments at the same time, then each
// reads its own message; a third thread that succeeded reads "".
TEST(CApi, LastErrorIsThreadLocal) {
  constexpr int kRounds = 200;
  std::barrier sync(3);
  std::vector<std::string> seen(3);
  std::vector<int> wrong(3, 0);
  const BadSgemm ok{""};
  auto worker = [&](int id) {
    for (int round = 0; round < kRounds; ++round) {
      if (id == 0) {
        parallax_sgemm(1, ok.m, ok.n, ok.k, 1.f, ok.a, /*lda=*/1, ok.b, ok.ldb, 0.f, ok.c, ok.ldc, nullptr);
      } else if (id == 1) {
        parallax_sgemm_cublas(ok.m, ok.n, ok.k, 1.f, ok.a, ok.lda, ok.b, /*ldb=*/1, 0.f, ok.c, ok.ldc, nullptr);
      } else {
        int count = 0;
        parallax_sgemm_level_count(&count);
      }
      sync.arrive_and_wait();  // all three have written their slot before anyone reads
      seen[id] = parallax_last_error();
      const char* expected[] = {"invalid argument 'lda'", "invalid argument 'ldb'", ""};
      if (id < 2 ? seen[id].find(expected[id]) == std::string::npos : !seen[id].empty()) ++wrong[id];
      sync.arrive_and_wait();  // all three have read before the next round writes
    }
  };
  std::thread t0(worker, 0), t1(worker, 1), t2(worker, 2);
  t0.join();
  t1.join();
  t2.join();
  EXPECT_EQ(wrong[0], 0) << "thread 0 last saw: " << seen[0];
  EXPECT_EQ(wrong[1], 0) << "thread 1 last saw: " << seen[1];
  EXPECT_EQ(wrong[2], 0) << "thread 2 last saw: " << seen[2];
  EXPECT_NE(seen[0].find("parallax_sgemm: "), std::string::npos);
  EXPECT_NE(seen[1].find("parallax_sgemm_cublas: "), std::string::npos);

  // The main thread's slot was never touched by the workers.
  int count = 0;
  ASSERT_EQ(parallax_sgemm_level_count(&count), PARALLAX_SUCCESS);
  std::thread([] { parallax_device_count(nullptr); }).join();
  EXPECT_EQ(last_error(), "");
}

}  // namespace
