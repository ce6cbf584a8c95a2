// Shared by the tensor-parallel GPU suites (tests/gpu/test_tp.cpp, tests/mpi/test_tp_mpi.cpp): random bf16
// inputs kept with their exact double values, a float64 reference GEMM, the element-wise + relative-norm
// comparison and an upload helper.
#pragma once

#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "parallax/core.hpp"

namespace parallax::testing {

using bf16 = __nv_bfloat16;

// Random bf16 values in [-1, 1] (never zeros-only), kept as both bf16 and the exact double they round to.
struct HostMatrix {
  std::vector<bf16> h;
  std::vector<double> d;
};
inline HostMatrix random_matrix(std::size_t count, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  HostMatrix m;
  m.h.resize(count);
  m.d.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    m.h[i] = __float2bfloat16(u(rng));
    m.d[i] = static_cast<double>(__bfloat162float(m.h[i]));
  }
  return m;
}

// C[m x n] = op(A) op(B) with A, B row-major given as accessors.
template <typename FA, typename FB>
std::vector<double> matmul(std::int64_t m, std::int64_t n, std::int64_t k, FA a, FB b) {
  std::vector<double> c(static_cast<std::size_t>(m * n), 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t p = 0; p < k; ++p) {
      const double av = a(i, p);
      for (std::int64_t j = 0; j < n; ++j) c[i * n + j] += av * b(p, j);
    }
  return c;
}

template <typename T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, bf16>) return static_cast<double>(__bfloat162float(v));
  else return static_cast<double>(v);
}

// Checks `out` (rows x cols, leading dim ld_out) against ref (rows x cols at column offset col0, ld_ref).
template <typename T>
void expect_close(const std::string& what, const std::vector<T>& out, std::int64_t ld_out, const std::vector<double>& ref,
                  std::int64_t ld_ref, std::int64_t rows, std::int64_t cols, std::int64_t col0, const std::string& ctx) {
  double ref2 = 0, diff2 = 0;
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) ref2 += ref[i * ld_ref + col0 + j] * ref[i * ld_ref + col0 + j];
  const double rms = std::sqrt(ref2 / std::max<double>(1, rows * cols));
  std::size_t bad = 0;
  std::string first;
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      const double r = ref[i * ld_ref + col0 + j];
      const double o = to_double(out[i * ld_out + j]);
      const double d = std::abs(o - r);
      if (std::isfinite(o)) diff2 += d * d;
      if (!std::isfinite(o) || d > 0.02 * std::abs(r) + 0.02 * rms) {
        if (bad++ == 0) first = "(" + std::to_string(i) + ", " + std::to_string(j) + "): expected " +
                                std::to_string(r) + " got " + std::to_string(o);
      }
    }
  const double rel = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  EXPECT_EQ(bad, 0u) << what << " " << ctx << ": " << bad << " bad elements, first " << first;
  EXPECT_LT(rel, 1e-2) << what << " " << ctx << ": relative error " << rel;
}

template <typename T>
parallax::DeviceBuffer<T> upload(const std::vector<T>& host) {
  parallax::DeviceBuffer<T> b(std::max<std::size_t>(1, host.size()));
  if (!host.empty()) b.upload(host);
  return b;
}

}  // namespace parallax::testing
