// CPU tests of the attention forward's host side: every rule of validate() and its message, kernel names and
// parsing, the FLOP convention, the causal-limit arithmetic of the float64 reference, and the reference itself
// on hand-checkable cases. Pointers below are host memory and are never dereferenced by validate().
#include <gtest/gtest.h>

#include "common/attention_reference.hpp"
#include "common/expect_invalid.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "parallax/attention.hpp"
#include "parallax/core.hpp"
#include "parallax/parallax.h"

namespace {

using parallax::AttentionArgs;
using parallax::AttentionKernel;
using parallax::AttentionStrides;
using parallax::DType;
using parallax::testing::expect_invalid;

void expect_validate_throws(const AttentionArgs& a, const std::string& argument, const std::string& fragment) {
  expect_invalid([&] { parallax::validate(a); }, argument, fragment);
}

// Disjoint host regions standing in for device buffers: B=2, Sq=3, Sk=5, H=4, Hkv=2, D=64, dense.
struct Fixture {
  static constexpr int B = 2, Sq = 3, Sk = 5, H = 4, Hkv = 2, D = 64;
  std::vector<std::uint16_t> q = std::vector<std::uint16_t>(B * Sq * H * D + 64);
  std::vector<std::uint16_t> k = std::vector<std::uint16_t>(B * Sk * Hkv * D + 64);
  std::vector<std::uint16_t> v = std::vector<std::uint16_t>(B * Sk * Hkv * D + 64);
  std::vector<std::uint16_t> out = std::vector<std::uint16_t>(B * Sq * H * D + 64);
  std::vector<float> lse = std::vector<float>(B * H * Sq + 16);
  AttentionArgs valid() {
    AttentionArgs a;
    a.batch = B, a.seqlen_q = Sq, a.seqlen_k = Sk, a.heads = H, a.heads_kv = Hkv, a.head_dim = D;
    a.q = q.data(), a.k = k.data(), a.v = v.data(), a.out = out.data(), a.lse = lse.data();
    a.q_strides = AttentionStrides::dense(Sq, H, D);
    a.k_strides = a.v_strides = AttentionStrides::dense(Sk, Hkv, D);
    a.out_strides = AttentionStrides::dense(Sq, H, D);
    return a;
  }
};

TEST(AttentionArgs, ValidArgumentsPass) {
  Fixture f;
  EXPECT_NO_THROW(parallax::validate(f.valid()));
  auto a = f.valid();
  a.lse = nullptr;  // lse is optional
  EXPECT_NO_THROW(parallax::validate(a));
  a.softmax_scale = 0.5f;
  EXPECT_NO_THROW(parallax::validate(a));
  a.dtype = DType::kF16;
  EXPECT_NO_THROW(parallax::validate(a));
}

TEST(AttentionArgs, DimensionsMustBePositive) {
  Fixture f;
  for (auto [field, name] : {std::pair{&AttentionArgs::batch, "batch"}, {&AttentionArgs::seqlen_q, "seqlen_q"},
                             {&AttentionArgs::seqlen_k, "seqlen_k"}, {&AttentionArgs::heads, "heads"},
                             {&AttentionArgs::heads_kv, "heads_kv"}}) {
    for (int bad : {0, -3}) {
      auto a = f.valid();
      a.*field = bad;
      expect_validate_throws(a, name, "must be >= 1 (got " + std::string(name) + "=" + std::to_string(bad) + ")");
    }
  }
}

TEST(AttentionArgs, HeadsMustBeAMultipleOfKvHeads) {
  Fixture f;
  auto a = f.valid();
  a.heads_kv = 3;
  expect_validate_throws(a, "heads_kv", "must divide heads");
  a.heads_kv = 1;  // MQA
  EXPECT_NO_THROW(parallax::validate(a));
}

TEST(AttentionArgs, HeadDimMustBeSupportedAndTheMessageListsThem) {
  EXPECT_EQ(parallax::supported_head_dims(), (std::vector<int>{64, 128}));
  Fixture f;
  for (int bad : {0, 32, 96, 256}) {
    auto a = f.valid();
    a.head_dim = bad;
    expect_validate_throws(a, "head_dim", "must be one of 64, 128 (got head_dim=" + std::to_string(bad) + ")");
  }
}

TEST(AttentionArgs, DtypeMustBe16Bit) {
  Fixture f;
  auto a = f.valid();
  a.dtype = DType::kF32;
  expect_validate_throws(a, "dtype", "must be bf16 or f16 (got f32)");
  a.dtype = static_cast<DType>(7);
  expect_validate_throws(a, "dtype", "(got 7)");
}

TEST(AttentionArgs, PointersMustBeNonNullAndAligned) {
  Fixture f;
  auto a = f.valid();
  a.q = nullptr;
  expect_validate_throws(a, "q", "non-null");
  a = f.valid(), a.k = nullptr;
  expect_validate_throws(a, "k", "non-null");
  a = f.valid(), a.v = nullptr;
  expect_validate_throws(a, "v", "non-null");
  a = f.valid(), a.out = nullptr;
  expect_validate_throws(a, "out", "non-null");
  const auto odd = [](const void* p) { return static_cast<const char*>(p) + 1; };
  a = f.valid(), a.q = odd(f.q.data());
  expect_validate_throws(a, "q", "element size (2 bytes)");
  a = f.valid(), a.k = odd(f.k.data());
  expect_validate_throws(a, "k", "element size (2 bytes)");
  a = f.valid(), a.v = odd(f.v.data());
  expect_validate_throws(a, "v", "element size (2 bytes)");
  a = f.valid(), a.out = const_cast<char*>(odd(f.out.data()));
  expect_validate_throws(a, "out", "element size (2 bytes)");
  a = f.valid(), a.lse = reinterpret_cast<float*>(const_cast<char*>(odd(f.lse.data())));
  expect_validate_throws(a, "lse", "aligned to 4 bytes");
}

TEST(AttentionArgs, SoftmaxScaleMustBeFinitePositive) {
  Fixture f;
  for (float bad : {0.f, -1.f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    auto a = f.valid();
    a.softmax_scale = bad;
    expect_validate_throws(a, "softmax_scale", "must be finite and > 0");
  }
  auto a = f.valid();
  EXPECT_FLOAT_EQ(a.scale(), 1.f / 8.f);  // 1 / sqrt(64)
  a.softmax_scale = 0.25f;
  EXPECT_FLOAT_EQ(a.scale(), 0.25f);
}

TEST(AttentionArgs, StridesMustBeNonNegativeAndOutMustNotAlias) {
  Fixture f;
  auto a = f.valid();
  a.k_strides.seq = -1;
  expect_validate_throws(a, "k_strides", "strides must be >= 0");
  a = f.valid();
  a.out_strides.head = 32;
  expect_validate_throws(a, "out_strides", "head stride must be >= head_dim");
  a = f.valid();
  a.out_strides.seq = 0;
  expect_validate_throws(a, "out_strides", "seq stride must be >= head_dim");
  a = f.valid();
  a.out_strides.batch = 1;
  expect_validate_throws(a, "out_strides", "batch stride must be >= head_dim");
  // Broadcast inputs (stride 0) are legal: they are only read.
  a = f.valid();
  a.k_strides.batch = 0;
  EXPECT_NO_THROW(parallax::validate(a));
}

TEST(AttentionArgs, OutAndLseMustNotOverlapInputs) {
  Fixture f;
  auto a = f.valid();
  a.out = const_cast<std::uint16_t*>(f.q.data()) + 64;
  expect_validate_throws(a, "out", "must not overlap q");
  a = f.valid(), a.out = f.k.data();
  expect_validate_throws(a, "out", "must not overlap k");
  a = f.valid(), a.out = f.v.data() + 8;
  expect_validate_throws(a, "out", "must not overlap v");
  a = f.valid(), a.lse = reinterpret_cast<float*>(f.out.data());
  expect_validate_throws(a, "lse", "must not overlap out");
  a = f.valid(), a.lse = reinterpret_cast<float*>(f.q.data());
  expect_validate_throws(a, "lse", "must not overlap q");
}

TEST(AttentionArgs, ForwardValidatesBeforeTouchingTheDevice) {
  Fixture f;
  auto a = f.valid();
  a.head_dim = 96;
  for (const char* kernel : {"auto", "reference", "tiled", "mma", "wgmma"})
    expect_invalid([&] { parallax::attention_forward(a, nullptr, kernel); }, "head_dim", "must be one of 64, 128");
  expect_invalid([&] { parallax::attention_forward(f.valid(), nullptr, "flash9"); }, "kernel",
                 "unknown attention kernel 'flash9'");
  expect_invalid([&] { parallax::attention_forward(f.valid(), nullptr, static_cast<AttentionKernel>(42)); }, "kernel",
                 "unknown AttentionKernel value 42");
}

// Level 4 reads q/k/v through TMA tensor maps, which cannot express a zero stride along a dimension longer than
// 1 (broadcasting); an explicit "wgmma" request on such a layout is an InvalidArgument raised before any device
// call ("auto" falls back to level 3 there, which a GPU test covers).
TEST(AttentionKernels, WgmmaRejectsLayoutsTmaCannotDescribe) {
  Fixture f;
  auto a = f.valid();
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(f.k.data()) % 16, 0u) << "host buffers stand in for 16-byte aligned ones";
  a.k_strides.batch = 0;  // the same keys for both batch entries
  expect_invalid([&] { parallax::attention_forward(a, nullptr, "wgmma"); }, "q_strides", "TMA");
  a = f.valid();
  a.v_strides.head = 0;  // every kv head reads the same values
  expect_invalid([&] { parallax::attention_forward(a, nullptr, "wgmma"); }, "q_strides", "must be > 0");
  a = f.valid();
  a.q_strides.seq = 0;
  expect_invalid([&] { parallax::attention_forward(a, nullptr, "wgmma"); }, "q_strides", "no broadcasting");
  // The 16-byte rule of levels 3-4 comes first and keeps its own message.
  a = f.valid();
  a.k_strides.seq += 4;
  expect_invalid([&] { parallax::attention_forward(a, nullptr, "wgmma"); }, "q", "16-byte aligned");
}

TEST(AttentionKernels, NamesAndParsing) {
  const auto names = parallax::attention_kernel_names();
  ASSERT_EQ(names.size(), 5u);
  EXPECT_EQ(names[0], "auto");
  for (auto name : names) EXPECT_EQ(parallax::attention_kernel_name(parallax::parse_attention_kernel(name)), name);
  EXPECT_EQ(parallax::parse_attention_kernel("1"), AttentionKernel::kReference);
  EXPECT_EQ(parallax::parse_attention_kernel("2"), AttentionKernel::kTiled);
  EXPECT_EQ(parallax::parse_attention_kernel("3"), AttentionKernel::kMma);
  EXPECT_EQ(parallax::parse_attention_kernel("4"), AttentionKernel::kWgmma);
  expect_invalid([] { parallax::parse_attention_kernel("0"); }, "kernel", "valid: auto, reference, tiled, mma, wgmma");
  expect_invalid([] { parallax::parse_attention_kernel("5"); }, "kernel", "level number 1..4");
}

TEST(AttentionFlops, FourBHSqSkDHalvedWhenCausal) {
  EXPECT_DOUBLE_EQ(parallax::attention_flops(1, 1, 1, 1, 64, false), 256.0);
  EXPECT_DOUBLE_EQ(parallax::attention_flops(4, 16, 1024, 1024, 64, false), 4.0 * 4 * 16 * 1024 * 1024 * 64);
  EXPECT_DOUBLE_EQ(parallax::attention_flops(4, 16, 1024, 1024, 64, true), 2.0 * 4 * 16 * 1024 * 1024 * 64);
  // No 32-bit overflow: B*H*S*S*D = 1 * 16 * 16384^2 * 128 > 2^39.
  EXPECT_DOUBLE_EQ(parallax::attention_flops(1, 16, 16384, 16384, 128, false), 4.0 * 16 * 16384.0 * 16384 * 128);
}

TEST(AttentionReference, CausalLimitIsBottomRightAligned) {
  using parallax::testing::visible_keys;
  EXPECT_EQ(visible_keys(0, 4, 4, false), 4);
  EXPECT_EQ(visible_keys(0, 4, 4, true), 1);    // square: the diagonal
  EXPECT_EQ(visible_keys(3, 4, 4, true), 4);
  EXPECT_EQ(visible_keys(0, 2, 5, true), 4);    // Sq < Sk: row 0 sees keys 0..3
  EXPECT_EQ(visible_keys(1, 2, 5, true), 5);
  EXPECT_EQ(visible_keys(0, 5, 2, true), 0);    // Sq > Sk: the first Sq - Sk rows see nothing
  EXPECT_EQ(visible_keys(2, 5, 2, true), 0);
  EXPECT_EQ(visible_keys(3, 5, 2, true), 1);
  EXPECT_EQ(visible_keys(4, 5, 2, true), 2);
}

TEST(AttentionReference, HandCheckedValues) {
  using namespace parallax::testing;
  // One head, D = 64 (only dims 0 and 1 nonzero), two keys: scores q.k * scale.
  AttentionShape s{1, 2, 2, 1, 1, 64, false, 1.0};
  const auto st = Strides4::dense(2, 1, 64);
  std::vector<double> q(128, 0.0), k(128, 0.0), v(128, 0.0);
  q[0] = 1.0;           // row 0: scores (1, 0)
  q[64 + 1] = 2.0;      // row 1: scores (0, 2)
  k[0] = 1.0;           // key 0 = e0
  k[64 + 1] = 1.0;      // key 1 = e1
  v[0] = 10.0, v[64 + 0] = 20.0;  // output column 0: 10 p0 + 20 p1
  auto r = attention_reference(s, q, st, k, st, v, st);
  const double p1_row0 = 1.0 / (1.0 + std::exp(1.0));
  EXPECT_NEAR(r.out[0], 10.0 * (1 - p1_row0) + 20.0 * p1_row0, 1e-12);
  EXPECT_NEAR(r.lse[0], std::log(std::exp(1.0) + 1.0), 1e-12);
  const double p1_row1 = std::exp(2.0) / (1.0 + std::exp(2.0));
  EXPECT_NEAR(r.out[64], 10.0 * (1 - p1_row1) + 20.0 * p1_row1, 1e-12);
  // Causal, Sq = Sk: row 0 sees key 0 only -> out = v0 exactly, lse = score 1.
  s.causal = true;
  r = attention_reference(s, q, st, k, st, v, st);
  EXPECT_DOUBLE_EQ(r.out[0], 10.0);
  EXPECT_DOUBLE_EQ(r.lse[0], 1.0);
  // Causal with Sq = 2 > Sk = 1: row 0 fully masked -> out 0, lse -inf.
  AttentionShape s2{1, 2, 1, 1, 1, 64, true, 1.0};
  r = attention_reference(s2, q, st, k, Strides4::dense(1, 1, 64), v, Strides4::dense(1, 1, 64));
  EXPECT_EQ(r.out[0], 0.0);
  EXPECT_TRUE(std::isinf(r.lse[0]) && r.lse[0] < 0);
  EXPECT_DOUBLE_EQ(r.out[64], 10.0);  // row 1 sees key 0 only
}

// The C ABI converts its struct and calls the same validation: statuses and messages, no GPU needed.
TEST(AttentionCApi, ValidatesTheStructAndTheArguments) {
  Fixture f;
  parallax_attention_args_t c{};
  c.struct_size = sizeof c;
  c.dtype = PARALLAX_DTYPE_BF16;
  c.batch = Fixture::B, c.seqlen_q = Fixture::Sq, c.seqlen_k = Fixture::Sk, c.heads = Fixture::H;
  c.heads_kv = Fixture::Hkv, c.head_dim = 96;
  c.q = f.q.data(), c.k = f.k.data(), c.v = f.v.data(), c.out = f.out.data();
  const auto dense = [](std::int64_t* s, int S, int H, int D) { s[0] = std::int64_t{S} * H * D, s[1] = std::int64_t{H} * D, s[2] = D; };
  dense(c.q_strides, Fixture::Sq, Fixture::H, 64), dense(c.out_strides, Fixture::Sq, Fixture::H, 64);
  dense(c.k_strides, Fixture::Sk, Fixture::Hkv, 64), dense(c.v_strides, Fixture::Sk, Fixture::Hkv, 64);
  EXPECT_EQ(parallax_attention_forward(&c, "tiled", nullptr), PARALLAX_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(parallax_last_error()).find("'head_dim': must be one of 64, 128 (got head_dim=96)"), std::string::npos)
      << parallax_last_error();
  c.head_dim = 64;
  c.seqlen_k = std::int64_t{1} << 40;
  EXPECT_EQ(parallax_attention_forward(&c, nullptr, nullptr), PARALLAX_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(parallax_last_error()).find("'seqlen_k': must fit in 32 bits"), std::string::npos) << parallax_last_error();
  c.seqlen_k = Fixture::Sk;
  c.softmax_scale = -1.f;  // 0 means default; anything else is validated
  EXPECT_EQ(parallax_attention_forward(&c, "auto", nullptr), PARALLAX_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(parallax_last_error()).find("'softmax_scale'"), std::string::npos) << parallax_last_error();
  c.softmax_scale = 0.f;
  EXPECT_EQ(parallax_attention_forward(&c, "nope", nullptr), PARALLAX_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(parallax_last_error()).find("unknown attention kernel 'nope'"), std::string::npos);
  c.struct_size = 8;
  EXPECT_EQ(parallax_attention_forward(&c, nullptr, nullptr), PARALLAX_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(parallax_last_error()).find("'args->struct_size'"), std::string::npos) << parallax_last_error();
  EXPECT_EQ(parallax_attention_forward(nullptr, nullptr, nullptr), PARALLAX_ERROR_INVALID_ARGUMENT);
}

}  // namespace
