// Shared by the GPU test suites: skip cleanly without a GPU, and compare against references.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <span>
#include <string>

#include "parallax/core.hpp"

namespace parallax::testing {

// Every GPU test fixture derives from this: on a machine without a GPU (CI) each test is reported as
// SKIPPED with the reason, never as passed.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!parallax::has_gpu()) GTEST_SKIP() << "no CUDA GPU visible: GPU test skipped";
  }
};

template <typename Param>
class GpuTestWithParam : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (!parallax::has_gpu()) GTEST_SKIP() << "no CUDA GPU visible: GPU test skipped";
  }
};

struct Comparison {
  double relative_error = 0;   // ||out - ref||_2 / ||ref||_2
  double max_abs_error = 0;
  std::size_t non_finite = 0;  // elements still NaN/Inf (e.g. poisoned and never written)
  std::size_t first_bad = 0;   // index of the first non-finite element
};

// Compares `out` with a higher-precision reference. Non-finite outputs are counted, not folded into the norm.
template <typename T>
Comparison compare(std::span<const T> out, std::span<const double> ref) {
  Comparison c;
  double diff2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double o = static_cast<double>(out[i]);
    if (!std::isfinite(o)) {
      if (c.non_finite++ == 0) c.first_bad = i;
      continue;
    }
    const double d = o - ref[i];
    diff2 += d * d;
    ref2 += ref[i] * ref[i];
    c.max_abs_error = std::max(c.max_abs_error, std::abs(d));
  }
  c.relative_error = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  return c;
}

}  // namespace parallax::testing
