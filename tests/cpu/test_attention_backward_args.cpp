// CPU tests of the attention backward's host side (issue 6): every rule validate(AttentionBackwardArgs) adds to
// the forward's and its message, the backward kernel names, the FLOP convention, and the float64 reference
// gradients: hand-computed tiny cases and central finite differences of the float64 forward reference (causal,
// GQA, Sq != Sk, fully masked rows). Pointers are host memory and never dereferenced by validate().
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/attention_reference.hpp"
#include "attention/launchers.hpp"
#include "common/expect_invalid.hpp"
#include "parallax/attention.hpp"
#include "parallax/core.hpp"
#include "parallax/parallax.h"

namespace {

using parallax::AttentionBackwardArgs;
using parallax::AttentionKernel;
using parallax::AttentionStrides;
using parallax::testing::AttentionShape;
using parallax::testing::expect_invalid;
using parallax::testing::Strides4;

void expect_throws(const AttentionBackwardArgs& a, const std::string& argument, const std::string& fragment) {
  expect_invalid([&] { parallax::validate(a); }, argument, fragment);
}

// Disjoint host regions standing in for device buffers: B=2, Sq=3, Sk=5, H=4, Hkv=2, D=64, dense. All carved
// from one arena with a gap after each region larger than any tensor, so that a pointer placed inside one
// region overlaps that region and nothing else whatever the heap does (separate vectors may sit back to back).
struct Fixture {
  static constexpr int B = 2, Sq = 3, Sk = 5, H = 4, Hkv = 2, D = 64;
  static constexpr std::size_t kQ = B * Sq * H * D, kRegion = 2 * kQ + 64;  // elements; kQ >= the kv size
  std::vector<std::uint16_t> arena = std::vector<std::uint16_t>(10 * kRegion);
  std::uint16_t* region(int i) { return arena.data() + i * kRegion; }
  std::uint16_t *q = region(0), *k = region(1), *v = region(2), *out = region(3), *dout = region(4), *dq = region(5),
                *dk = region(6), *dv = region(7);
  float* lse = reinterpret_cast<float*>(region(8));
  AttentionBackwardArgs valid() {
    AttentionBackwardArgs a;
    a.batch = B, a.seqlen_q = Sq, a.seqlen_k = Sk, a.heads = H, a.heads_kv = Hkv, a.head_dim = D;
    a.q = q, a.k = k, a.v = v, a.out = out, a.dout = dout, a.lse = lse;
    a.dq = dq, a.dk = dk, a.dv = dv;
    a.q_strides = a.out_strides = a.dout_strides = a.dq_strides = AttentionStrides::dense(Sq, H, D);
    a.k_strides = a.v_strides = a.dk_strides = a.dv_strides = AttentionStrides::dense(Sk, Hkv, D);
    return a;
  }
};

TEST(AttentionBackwardArgs, ValidArgumentsPassAndForwardViewMatches) {
  Fixture f;
  auto a = f.valid();
  EXPECT_NO_THROW(parallax::validate(a));
  a.deterministic = true;
  a.causal = true;
  a.softmax_scale = 0.3f;
  EXPECT_NO_THROW(parallax::validate(a));
  const auto fwd = a.forward();
  EXPECT_EQ(fwd.q, a.q);
  EXPECT_EQ(fwd.out, a.out);
  EXPECT_EQ(fwd.lse, a.lse);
  EXPECT_TRUE(fwd.causal);
  EXPECT_FLOAT_EQ(fwd.scale(), 0.3f);
  EXPECT_FLOAT_EQ(a.scale(), 0.3f);
  a.softmax_scale.reset();
  EXPECT_FLOAT_EQ(a.scale(), 1.f / 8.f);
}

TEST(AttentionBackwardArgs, ForwardRulesApply) {
  Fixture f;
  auto a = f.valid();
  a.head_dim = 96;
  expect_throws(a, "head_dim", "must be one of 64, 128");
  a = f.valid(), a.heads_kv = 3;
  expect_throws(a, "heads_kv", "must divide heads");
  a = f.valid(), a.softmax_scale = -1.f;
  expect_throws(a, "softmax_scale", "must be finite and > 0");
  a = f.valid(), a.out = nullptr;
  expect_throws(a, "out", "non-null");
  a = f.valid(), a.seqlen_k = 0;
  expect_throws(a, "seqlen_k", "must be >= 1");
}

TEST(AttentionBackwardArgs, LseIsRequired) {
  Fixture f;
  auto a = f.valid();
  a.lse = nullptr;
  expect_throws(a, "lse", "is required by the backward");
}

TEST(AttentionBackwardArgs, NewPointersMustBeNonNullAndAligned) {
  Fixture f;
  const auto odd = [](void* p) { return static_cast<char*>(p) + 1; };
  auto a = f.valid();
  a.dout = nullptr;
  expect_throws(a, "dout", "non-null");
  a = f.valid(), a.dq = nullptr;
  expect_throws(a, "dq", "non-null");
  a = f.valid(), a.dk = nullptr;
  expect_throws(a, "dk", "non-null");
  a = f.valid(), a.dv = nullptr;
  expect_throws(a, "dv", "non-null");
  a = f.valid(), a.dout = odd(f.dout);
  expect_throws(a, "dout", "element size (2 bytes)");
  a = f.valid(), a.dq = odd(f.dq);
  expect_throws(a, "dq", "element size (2 bytes)");
  a = f.valid(), a.dk = odd(f.dk);
  expect_throws(a, "dk", "element size (2 bytes)");
  a = f.valid(), a.dv = odd(f.dv);
  expect_throws(a, "dv", "element size (2 bytes)");
}

TEST(AttentionBackwardArgs, StridesOfNewTensors) {
  Fixture f;
  auto a = f.valid();
  a.dout_strides.seq = -8;
  expect_throws(a, "dout_strides", "strides must be >= 0");
  a = f.valid(), a.dq_strides.head = 32;
  expect_throws(a, "dq_strides", "head stride must be >= head_dim (dq is written");
  a = f.valid(), a.dk_strides.seq = 0;
  expect_throws(a, "dk_strides", "seq stride must be >= head_dim (dk is written");
  a = f.valid(), a.dv_strides.batch = 1;
  expect_throws(a, "dv_strides", "batch stride must be >= head_dim (dv is written");
  // dout is only read: a broadcast (stride 0) is legal, as for q / k / v.
  a = f.valid(), a.dout_strides.batch = 0;
  EXPECT_NO_THROW(parallax::validate(a));
  // The forward's rule on out is unchanged (same message as the forward's).
  a = f.valid(), a.out_strides.head = 8;
  expect_throws(a, "out_strides", "head stride must be >= head_dim (out is written");
}

TEST(AttentionBackwardArgs, OutputsMustNotOverlapInputsOrEachOther) {
  Fixture f;
  auto a = f.valid();
  a.dq = f.q + 8;
  expect_throws(a, "dq", "must not overlap q (dq is written while q is read)");
  a = f.valid(), a.dq = f.dout;
  expect_throws(a, "dq", "must not overlap dout");
  a = f.valid(), a.dk = f.k;
  expect_throws(a, "dk", "must not overlap k");
  a = f.valid(), a.dv = f.out;
  expect_throws(a, "dv", "must not overlap out");
  a = f.valid(), a.dv = f.lse;
  expect_throws(a, "dv", "must not overlap lse");
  a = f.valid(), a.dk = f.dq;
  expect_throws(a, "dk", "must not overlap dq (both are written)");
  a = f.valid(), a.dv = f.dk + 64;
  expect_throws(a, "dv", "must not overlap dk (both are written)");
}

TEST(AttentionBackwardArgs, KernelNamesAndValidationBeforeTheDevice) {
  EXPECT_EQ(parallax::attention_backward_kernel_names(),
            (std::vector<std::string_view>{"auto", "reference", "mma", "wgmma"}));
  Fixture f;
  for (const char* kernel : {"tiled", "2"})
    expect_invalid([&] { parallax::attention_backward(f.valid(), nullptr, kernel); }, "kernel",
                   "has no backward; valid for the backward: auto, reference, mma, wgmma");
  expect_invalid([&] { parallax::attention_backward(f.valid(), nullptr, "flash9"); }, "kernel",
                 "unknown attention kernel 'flash9'");
  auto a = f.valid();
  a.lse = nullptr;
  for (const char* kernel : {"auto", "reference", "mma", "wgmma", "4"})
    expect_invalid([&] { parallax::attention_backward(a, nullptr, kernel); }, "lse", "is required");
}

// Backward level 4 reads q/k/v/dout through TMA tensor maps: layouts TMA cannot describe are an InvalidArgument
// for an explicit "wgmma" request, raised before the device is touched, and "auto" never picks it for them.
TEST(AttentionBackwardArgs, WgmmaNeedsTmaDescribableLayouts) {
  Fixture f;
  auto a = f.valid();
  EXPECT_TRUE(parallax::detail::attention_backward_tma_compatible(a));
  // Broadcast dout over heads (head stride 0): legal for every level, but TMA strides must be > 0.
  a.dout_strides.head = 0;
  EXPECT_NO_THROW(parallax::validate(a));
  EXPECT_FALSE(parallax::detail::attention_backward_tma_compatible(a));
  expect_invalid([&] { parallax::attention_backward(a, nullptr, "wgmma"); }, "q_strides", "dout");
  expect_invalid([&] { parallax::attention_backward(a, nullptr, "4"); }, "q_strides", "no broadcasting");
  // The same for k (a kv head broadcast over the sequence is not a TMA layout either).
  a = f.valid(), a.k_strides.seq = 0;
  EXPECT_FALSE(parallax::detail::attention_backward_tma_compatible(a));
  expect_invalid([&] { parallax::attention_backward(a, nullptr, "wgmma"); }, "q_strides", "must be > 0");
  // 16-byte rule first (any of the eight tensors), with the message level 3 gives.
  a = f.valid(), a.dv_strides.seq += 4;
  EXPECT_FALSE(parallax::detail::attention_backward_tma_compatible(a));
  expect_invalid([&] { parallax::attention_backward(a, nullptr, "wgmma"); }, "q", "16-byte aligned");
}

TEST(AttentionBackwardArgs, AutoPicksWgmmaOnlyOnHopperWithTmaLayouts) {
  using parallax::detail::choose_attention_backward_kernel;
  Fixture f;
  auto a = f.valid();
  EXPECT_EQ(choose_attention_backward_kernel(a, 9, 0), AttentionKernel::kWgmma);
  EXPECT_EQ(choose_attention_backward_kernel(a, 8, 0), AttentionKernel::kMma);
  EXPECT_EQ(choose_attention_backward_kernel(a, 8, 9), AttentionKernel::kMma);
  EXPECT_EQ(choose_attention_backward_kernel(a, 10, 0), AttentionKernel::kMma) << "sm_90a code runs on 9.0 only";
  EXPECT_EQ(choose_attention_backward_kernel(a, 7, 5), AttentionKernel::kReference);
  a.dout_strides.head = 0;  // not a TMA layout, still 16-byte vectors: level 3
  EXPECT_EQ(choose_attention_backward_kernel(a, 9, 0), AttentionKernel::kMma);
  a = f.valid(), a.q_strides.seq += 2;  // not even 16-byte vectors: level 1
  EXPECT_EQ(choose_attention_backward_kernel(a, 9, 0), AttentionKernel::kReference);
  a = f.valid(), a.batch = 70000;  // grid z / TMA coordinate limit of level 4
  EXPECT_EQ(choose_attention_backward_kernel(a, 9, 0), AttentionKernel::kMma);
}

TEST(AttentionBackwardFlops, TwoAndAHalfTimesTheForward) {
  EXPECT_DOUBLE_EQ(parallax::attention_backward_flops(2, 16, 2048, 2048, 128, false),
                   2.5 * 4.0 * 2 * 16 * 2048.0 * 2048 * 128);
  EXPECT_DOUBLE_EQ(parallax::attention_backward_flops(1, 8, 1000, 300, 64, true),
                   2.5 * parallax::attention_flops(1, 8, 1000, 300, 64, true));
  EXPECT_DOUBLE_EQ(parallax::attention_backward_flops(1, 8, 512, 512, 64, true),
                   parallax::attention_backward_flops(1, 8, 512, 512, 64, false) / 2);
}

// ---- float64 reference gradients ----------------------------------------------------------------------

TEST(AttentionBackwardReference, SingleKeyGivesZeroDqDkAndSummedDv) {
  // One key: P = 1 whatever the scores, so out = v, dS = 0 (dq = dk = 0) and dv = sum over rows of dout.
  AttentionShape s{.batch = 1, .seqlen_q = 3, .seqlen_k = 1, .heads = 1, .heads_kv = 1, .head_dim = 2};
  const std::vector<double> q{1, 2, -1, 0.5, 3, 3}, k{0.7, -0.2}, v{5, -4}, dout{1, 2, 3, 4, 5, 6};
  const auto g = parallax::testing::attention_backward_reference(s, q, Strides4::dense(3, 1, 2), k,
                                                                 Strides4::dense(1, 1, 2), v, Strides4::dense(1, 1, 2),
                                                                 dout, Strides4::dense(3, 1, 2));
  for (double x : g.dq) EXPECT_NEAR(x, 0.0, 1e-15);
  for (double x : g.dk) EXPECT_NEAR(x, 0.0, 1e-15);
  EXPECT_DOUBLE_EQ(g.dv[0], 1 + 3 + 5);
  EXPECT_DOUBLE_EQ(g.dv[1], 2 + 4 + 6);
}

TEST(AttentionBackwardReference, TwoKeysByHand) {
  // D = 1, scale 1, q = 1, k = {0, ln 3}: P = {1/4, 3/4}; v = {1, 5}: out = 4; dout = 1:
  // dv = P = {1/4, 3/4}; dP = v = {1, 5}; Delta = 4; dS = {-3/4, 3/4}; dq = sum dS k = 3/4 ln 3; dk = dS q.
  AttentionShape s{.batch = 1, .seqlen_q = 1, .seqlen_k = 2, .heads = 1, .heads_kv = 1, .head_dim = 1, .scale = 1};
  const std::vector<double> q{1}, k{0, std::log(3.0)}, v{1, 5}, dout{1};
  const auto g = parallax::testing::attention_backward_reference(s, q, Strides4::dense(1, 1, 1), k,
                                                                 Strides4::dense(2, 1, 1), v, Strides4::dense(2, 1, 1),
                                                                 dout, Strides4::dense(1, 1, 1));
  EXPECT_NEAR(g.dv[0], 0.25, 1e-15);
  EXPECT_NEAR(g.dv[1], 0.75, 1e-15);
  EXPECT_NEAR(g.dk[0], -0.75, 1e-15);
  EXPECT_NEAR(g.dk[1], 0.75, 1e-15);
  EXPECT_NEAR(g.dq[0], 0.75 * std::log(3.0), 1e-15);
}

// L = sum(out * dout); the analytic gradients must match central differences of the float64 forward.
void check_finite_differences(const AttentionShape& s) {
  std::mt19937_64 rng(1234);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const int D = s.head_dim;
  const auto qs = Strides4::dense(s.seqlen_q, s.heads, D), ks = Strides4::dense(s.seqlen_k, s.heads_kv, D);
  std::vector<double> q(static_cast<std::size_t>(s.batch) * s.seqlen_q * s.heads * D), dout(q.size());
  std::vector<double> k(static_cast<std::size_t>(s.batch) * s.seqlen_k * s.heads_kv * D), v(k.size());
  for (auto* t : {&q, &dout, &k, &v})
    for (double& x : *t) x = u(rng);
  const auto loss = [&] {
    const auto r = parallax::testing::attention_reference(s, q, qs, k, ks, v, ks);
    double l = 0;
    for (std::size_t i = 0; i < r.out.size(); ++i) l += r.out[i] * dout[i];
    return l;
  };
  const auto g = parallax::testing::attention_backward_reference(s, q, qs, k, ks, v, ks, dout, qs);
  const double h = 1e-6;
  const auto check = [&](std::vector<double>& x, const std::vector<double>& grad, const char* name) {
    double max_grad = 0;
    for (double gi : grad) max_grad = std::max(max_grad, std::abs(gi));
    ASSERT_GT(max_grad, 1e-3) << name << ": the case must have non-trivial gradients";
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double x0 = x[i];
      x[i] = x0 + h;
      const double lp = loss();
      x[i] = x0 - h;
      const double lm = loss();
      x[i] = x0;
      EXPECT_NEAR(grad[i], (lp - lm) / (2 * h), 1e-7) << name << "[" << i << "]";
    }
  };
  check(q, g.dq, "dq");
  check(k, g.dk, "dk");
  check(v, g.dv, "dv");
}

TEST(AttentionBackwardReference, MatchesFiniteDifferencesGqaCausal) {
  check_finite_differences({.batch = 2, .seqlen_q = 3, .seqlen_k = 5, .heads = 4, .heads_kv = 2, .head_dim = 3,
                            .causal = true});
}
TEST(AttentionBackwardReference, MatchesFiniteDifferencesFullyMaskedRowsAndScale) {
  // Sq > Sk causal: the first Sq - Sk rows see nothing and must contribute nothing.
  check_finite_differences({.batch = 1, .seqlen_q = 5, .seqlen_k = 2, .heads = 2, .heads_kv = 1, .head_dim = 4,
                            .causal = true, .scale = 0.7});
}
TEST(AttentionBackwardReference, MatchesFiniteDifferencesNonCausal) {
  check_finite_differences({.batch = 1, .seqlen_q = 4, .seqlen_k = 3, .heads = 3, .heads_kv = 3, .head_dim = 5});
}

// The C ABI converts its struct and calls the same validation: statuses and messages, no GPU needed.
TEST(AttentionBackwardCApi, ValidatesTheStructAndTheArguments) {
  Fixture f;
  parallax_attention_backward_args_t c{};
  c.struct_size = sizeof c;
  c.dtype = PARALLAX_DTYPE_BF16;
  c.batch = Fixture::B, c.seqlen_q = Fixture::Sq, c.seqlen_k = Fixture::Sk, c.heads = Fixture::H;
  c.heads_kv = Fixture::Hkv, c.head_dim = 96;
  c.q = f.q, c.k = f.k, c.v = f.v, c.out = f.out, c.dout = f.dout;
  c.lse = f.lse, c.dq = f.dq, c.dk = f.dk, c.dv = f.dv;
  const auto dense = [](std::int64_t* s, int S, int H, int D) {
    s[0] = std::int64_t{S} * H * D, s[1] = std::int64_t{H} * D, s[2] = D;
  };
  for (std::int64_t* s : {c.q_strides, c.out_strides, c.dout_strides, c.dq_strides}) dense(s, Fixture::Sq, Fixture::H, 64);
  for (std::int64_t* s : {c.k_strides, c.v_strides, c.dk_strides, c.dv_strides}) dense(s, Fixture::Sk, Fixture::Hkv, 64);
  EXPECT_EQ(parallax_attention_backward(&c, "mma", nullptr), PARALLAX_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(parallax_last_error()).find("'head_dim': must be one of 64, 128 (got head_dim=96)"),
            std::string::npos)
      << parallax_last_error();
  c.head_dim = 64;
  c.lse = nullptr;
  EXPECT_EQ(parallax_attention_backward(&c, nullptr, nullptr), PARALLAX_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(parallax_last_error()).find("'lse': is required"), std::string::npos) << parallax_last_error();
  c.lse = f.lse;
  c.dv = f.dk;
  EXPECT_EQ(parallax_attention_backward(&c, "auto", nullptr), PARALLAX_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(parallax_last_error()).find("'dv': must not overlap dk"), std::string::npos)
      << parallax_last_error();
  c.dv = f.dv;
  c.seqlen_q = std::int64_t{1} << 40;
  EXPECT_EQ(parallax_attention_backward(&c, nullptr, nullptr), PARALLAX_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(parallax_last_error()).find("'seqlen_q': must fit in 32 bits"), std::string::npos);
  c.seqlen_q = Fixture::Sq;
  EXPECT_EQ(parallax_attention_backward(&c, "tiled", nullptr), PARALLAX_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(parallax_last_error()).find("has no backward"), std::string::npos) << parallax_last_error();
  c.reserved = 1;
  EXPECT_EQ(parallax_attention_backward(&c, nullptr, nullptr), PARALLAX_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(parallax_last_error()).find("'args->reserved'"), std::string::npos) << parallax_last_error();
  c.reserved = 0;
  c.struct_size = 8;
  EXPECT_EQ(parallax_attention_backward(&c, nullptr, nullptr), PARALLAX_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(parallax_last_error()).find("'args->struct_size'"), std::string::npos)
      << parallax_last_error();
  EXPECT_EQ(parallax_attention_backward(nullptr, nullptr, nullptr), PARALLAX_ERROR_INVALID_ARGUMENT);
}

}  // namespace
