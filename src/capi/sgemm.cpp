// C ABI: the FP32 SGEMM ladder and its cuBLAS reference.
//
// The bodies are the C++ API (parallax/sgemm.hpp) plus the only thing the C side adds: its dimensions are
// int64_t (so no caller truncates silently) while the ladder indexes with int, so each value is checked to
// fit before narrowing. Everything else (level range, m/n/k >= 1, null pointers, leading dimensions,
// C overlapping A or B) is validated once, by parallax::validate, before any device work.
#include <array>
#include <climits>
#include <cstdint>
#include <string>
#include <string_view>

#include "capi/guard.hpp"
#include "parallax/core.hpp"
#include "parallax/parallax.h"
#include "parallax/sgemm.hpp"

using parallax::capi::guarded;
using parallax::capi::Needs;
using parallax::capi::out_param;

namespace {

int narrow(std::int64_t value, const char* name) {
  PX_REQUIRE(value >= INT_MIN && value <= INT_MAX, name,
             "must fit in 32 bits, the FP32 ladder indexes with int (got " + std::string(name) + "=" +
                 std::to_string(value) + ")");
  return static_cast<int>(value);
}

parallax::SgemmArgs make_args(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                              std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
                              std::int64_t ldc) {
  parallax::SgemmArgs args;
  args.m = narrow(m, "m");
  args.n = narrow(n, "n");
  args.k = narrow(k, "k");
  args.alpha = alpha;
  args.a = a;
  args.lda = narrow(lda, "lda");
  args.b = b;
  args.ldb = narrow(ldb, "ldb");
  args.beta = beta;
  args.c = c;
  args.ldc = narrow(ldc, "ldc");
  return args;
}

parallax::SgemmLevel checked_level(int level) {
  PX_REQUIRE(level >= 1 && level <= parallax::kSgemmLevelCount, "level",
             "must be a ladder level 1.." + std::to_string(parallax::kSgemmLevelCount) +
                 " (got level=" + std::to_string(level) + ")");
  return static_cast<parallax::SgemmLevel>(level);
}

// The C++ API hands out string_views; C needs NUL-terminated strings with static lifetime. Copies are made
// once (thread-safe function-local static) so the pointers stay valid for the life of the library.
struct LevelStrings {
  std::array<std::string, parallax::kSgemmLevelCount> names;
  std::array<std::string, parallax::kSgemmLevelCount> descriptions;
};
const LevelStrings& level_strings() {
  static const LevelStrings strings = [] {
    LevelStrings s;
    for (parallax::SgemmLevel level : parallax::all_sgemm_levels()) {
      const auto i = static_cast<std::size_t>(static_cast<int>(level) - 1);
      s.names.at(i) = std::string(parallax::sgemm_level_name(level));
      s.descriptions.at(i) = std::string(parallax::sgemm_level_description(level));
    }
    return s;
  }();
  return strings;
}

}  // namespace

extern "C" {

parallax_status_t parallax_sgemm_level_count(int* count) noexcept {
  return guarded("parallax_sgemm_level_count", Needs::kHostOnly,
                 [&] { out_param(count, "count") = parallax::kSgemmLevelCount; });
}

parallax_status_t parallax_sgemm_level_name(int level, const char** name) noexcept {
  return guarded("parallax_sgemm_level_name", Needs::kHostOnly, [&] {
    const char*& result = out_param(name, "name");
    const auto i = static_cast<std::size_t>(static_cast<int>(checked_level(level)) - 1);
    result = level_strings().names.at(i).c_str();
  });
}

parallax_status_t parallax_sgemm_level_description(int level, const char** description) noexcept {
  return guarded("parallax_sgemm_level_description", Needs::kHostOnly, [&] {
    const char*& result = out_param(description, "description");
    const auto i = static_cast<std::size_t>(static_cast<int>(checked_level(level)) - 1);
    result = level_strings().descriptions.at(i).c_str();
  });
}

parallax_status_t parallax_sgemm_level_parse(const char* text, int* level) noexcept {
  return guarded("parallax_sgemm_level_parse", Needs::kHostOnly, [&] {
    PX_REQUIRE(text != nullptr, "text", "must be a non-null C string");
    int& result = out_param(level, "level");
    try {
      result = static_cast<int>(parallax::parse_sgemm_level(text));
    } catch (const parallax::InvalidArgument& e) {
      // The C++ parser names its input 'level'; here that input is the parameter `text` (and 'level' is
      // the out-parameter), so re-attribute the message, keeping the C++ rule text (the valid names).
      const std::string_view what = e.what();
      const std::string_view marker = "': ";
      const auto at = what.find(marker);
      throw parallax::InvalidArgument(
          "text", std::string(at == std::string_view::npos ? what : what.substr(at + marker.size())));
    }
  });
}

parallax_status_t parallax_sgemm(int level, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
                                 cudaStream_t stream) noexcept {
  return guarded("parallax_sgemm", Needs::kGpu, [&] {
    const parallax::SgemmLevel checked = checked_level(level);
    parallax::sgemm(checked, make_args(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc), stream);
  });
}

parallax_status_t parallax_sgemm_cublas(int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                                        int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                                        int64_t ldc, cudaStream_t stream) noexcept {
  return guarded("parallax_sgemm_cublas", Needs::kGpu, [&] {
    parallax::sgemm_cublas(make_args(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc), stream);
  });
}

}  // extern "C"
