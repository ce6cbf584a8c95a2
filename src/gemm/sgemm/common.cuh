// Device helpers shared by the ladder levels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace parallax::detail {

constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// The epilogue every level shares. beta == 0 must not read C: C may be uninitialised (or NaN-poisoned),
// and 0 * NaN would be NaN.
__device__ __forceinline__ void store_c(float* c, float acc, float alpha, float beta) {
  *c = (beta == 0.f) ? alpha * acc : alpha * acc + beta * *c;
}

}  // namespace parallax::detail
