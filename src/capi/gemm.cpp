// C ABI: the tensor-core GEMM. The C struct mirrors parallax::GemmArgs with fixed-width fields; this file
// checks what only the C side can get wrong (struct_size, enum values outside their range, 64-bit dimensions
// that do not fit the kernels' int) and hands the rest to parallax::validate, inside parallax::gemm.
#include <array>
#include <climits>
#include <cstdint>
#include <string>

#include "capi/guard.hpp"
#include "parallax/core.hpp"
#include "parallax/gemm.hpp"
#include "parallax/parallax.h"

using parallax::capi::guarded;
using parallax::capi::Needs;
using parallax::capi::out_param;

namespace {

int narrow(std::int64_t value, const char* name) {
  PX_REQUIRE(value >= INT_MIN && value <= INT_MAX, name,
             "must fit in 32 bits (got " + std::string(name) + "=" + std::to_string(value) + ")");
  return static_cast<int>(value);
}

parallax::GemmArgs to_cpp(const parallax_gemm_args_t* c) {
  PX_REQUIRE(c != nullptr, "args", "must point to a parallax_gemm_args_t");
  PX_REQUIRE(c->struct_size == sizeof(parallax_gemm_args_t), "struct_size",
             "must be sizeof(parallax_gemm_args_t) = " + std::to_string(sizeof(parallax_gemm_args_t)) +
                 " (got " + std::to_string(c->struct_size) + "): the caller's mirror of the struct is out of date");
  PX_REQUIRE(c->reserved == 0, "reserved", "must be 0");
  parallax::GemmArgs g;
  g.m = narrow(c->m, "m");
  g.n = narrow(c->n, "n");
  g.k = narrow(c->k, "k");
  // Out-of-range enum values pass through unchanged: parallax::validate rejects them by name.
  g.op_a = static_cast<parallax::Op>(c->op_a);
  g.op_b = static_cast<parallax::Op>(c->op_b);
  g.a_type = g.b_type = static_cast<parallax::DType>(c->ab_dtype);
  g.c_type = static_cast<parallax::DType>(c->c_dtype);
  g.a = c->a;
  g.lda = c->lda;
  g.b = c->b;
  g.ldb = c->ldb;
  g.c = c->c;
  g.ldc = c->ldc;
  g.alpha = c->alpha;
  g.beta = c->beta;
  g.bias = c->bias;
  g.epilogue = static_cast<parallax::Epilogue>(c->epilogue);
  return g;
}

// NUL-terminated copies of the kernel names with static lifetime.
const std::vector<std::string>& kernel_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (auto n : parallax::gemm_kernel_names()) v.emplace_back(n);
    return v;
  }();
  return names;
}

}  // namespace

extern "C" {

parallax_status_t parallax_gemm_kernel_count(int* count) noexcept {
  return guarded("parallax_gemm_kernel_count", Needs::kHostOnly,
                 [&] { out_param(count, "count") = static_cast<int>(kernel_names().size()); });
}

parallax_status_t parallax_gemm_kernel_name(int index, const char** name) noexcept {
  return guarded("parallax_gemm_kernel_name", Needs::kHostOnly, [&] {
    const char*& result = out_param(name, "name");
    const int count = static_cast<int>(kernel_names().size());
    PX_REQUIRE(index >= 0 && index < count, "index",
               "must be 0.." + std::to_string(count - 1) + " (got index=" + std::to_string(index) + ")");
    result = kernel_names()[static_cast<std::size_t>(index)].c_str();
  });
}

parallax_status_t parallax_gemm(const parallax_gemm_args_t* args, const char* kernel, cudaStream_t stream) noexcept {
  return guarded("parallax_gemm", Needs::kGpu, [&] {
    const parallax::GemmArgs g = to_cpp(args);
    const parallax::GemmKernel which = parallax::parse_gemm_kernel(kernel == nullptr ? "auto" : kernel);
    parallax::gemm(g, stream, which);
  });
}

}  // extern "C"
