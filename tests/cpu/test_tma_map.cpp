// CPU tests of the TMA descriptor builder's own rules (src/gemm/tc/tma_map.cpp): every rule is checked on
// the host and throws InvalidArgument before the driver is asked, so no GPU (and no driver) is needed. The
// pointers are never dereferenced.
#include <gtest/gtest.h>

#include <cstdint>

#include "common/expect_invalid.hpp"
#include "gemm/tc/tma_map.hpp"

namespace {

using parallax::DType;
using parallax::detail::make_tma_map_2d;
using parallax::testing::expect_invalid;

alignas(16) unsigned char fake_matrix[64];

TEST(TmaMap, RejectsWhatTmaCannotDescribe) {
  const void* ok = fake_matrix;
  const void* misaligned = fake_matrix + 2;
  expect_invalid([&] { make_tma_map_2d(ok, static_cast<DType>(7), 8, 8, 8, 64, 64); }, "type", "not a DType");
  expect_invalid([&] { make_tma_map_2d(misaligned, DType::kBF16, 8, 8, 8, 64, 64); }, "base", "16-byte aligned");
  expect_invalid([&] { make_tma_map_2d(ok, DType::kBF16, 0, 8, 8, 64, 64); }, "rows", "must be >= 1");
  expect_invalid([&] { make_tma_map_2d(ok, DType::kBF16, 8, 0, 8, 64, 64); }, "cols", "must be >= 1");
  // ld shorter than a row, and ld whose byte stride is not a multiple of 16 (7 and 12 elements).
  expect_invalid([&] { make_tma_map_2d(ok, DType::kF16, 8, 16, 8, 64, 64); }, "ld", "must be >= cols");
  expect_invalid([&] { make_tma_map_2d(ok, DType::kF16, 8, 7, 7, 64, 64); }, "ld", "multiple of 16 bytes");
  expect_invalid([&] { make_tma_map_2d(ok, DType::kF16, 8, 12, 12, 64, 64); }, "ld", "got ld=12");
  // The box: 64 16-bit values wide (the 128-byte swizzle row), at most 256 rows.
  expect_invalid([&] { make_tma_map_2d(ok, DType::kBF16, 8, 8, 8, 64, 32); }, "box_cols", "128-byte");
  expect_invalid([&] { make_tma_map_2d(ok, DType::kBF16, 8, 8, 8, 257, 64); }, "box_rows", "[1, 256]");
  expect_invalid([&] { make_tma_map_2d(ok, DType::kBF16, 8, 8, 8, 0, 64); }, "box_rows", "[1, 256]");
  // fp32 (the epilogue's TMA store of fp32 outputs): 32 values span the swizzle row, rows step by 4 elements.
  expect_invalid([&] { make_tma_map_2d(ok, DType::kF32, 8, 8, 8, 64, 64); }, "box_cols", "32 elements");
  expect_invalid([&] { make_tma_map_2d(ok, DType::kF32, 8, 6, 6, 64, 32); }, "ld", "multiple of 16 bytes (4 elements)");
  expect_invalid([&] { make_tma_map_2d(ok, DType::kF16, 8, 12, 12, 64, 64); }, "ld", "(8 elements)");
}

}  // namespace
