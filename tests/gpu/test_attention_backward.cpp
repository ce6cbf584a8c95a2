// GPU tests of the attention backward (issue 6): the "reference" (level 1), "mma" (level 3) and "wgmma" (level 4,
// compute capability 9.0 only: skipped elsewhere) backward kernels. Every mma case runs for wgmma too.
//
//   Float64: small and odd shapes (lengths 1, 17, 100, 1000; Sq != Sk; causal with fully masked rows; GQA and
//     MQA; padded strides whose padding holds NaN; custom scale) against the float64 CPU gradients of
//     tests/common/attention_reference.hpp, computed from scratch from the exact 16-bit q, k, v, dO the GPU
//     read. out and lse come from the forward's level 1 on the GPU, as a caller's would.
//   Matrix: mma / wgmma vs the reference level over B{1,2} x H{8,16} x S{512,1024,2048} x D{64,128} x causal (bf16),
//     plus GQA H32/Hkv8 and Hkv1 and Sq != Sk; PARALLAX_TEST_QUICK=1 shrinks it (compute-sanitizer runs).
//   Deterministic: two deterministic runs are bitwise identical (dq, dk, dv); default-mode dk / dv are too
//     (they never use atomics); deterministic and default agree within rounding.
//   Every output starts as NaN (0xFFFF) including the stride padding: an element never written, or written
//     outside its window, fails the test.
//
// Tolerances. The kernels round P and dS to the input type before the tensor-core products (relative u = 2^-9
// bf16, 2^-11 f16 per element) and use the forward's 16-bit out in Delta = dO . out; the outputs are rounded
// once more. Errors are therefore judged per tensor: relative L2 error <= 16 u (bf16 ~3e-2, f16 ~8e-3) and every
// element within 8 u max|ref| + 8 u |ref| of the reference. A wrong index, mask or scale gives O(1) errors.
// Fresh random inputs every run; the seed is in every failure message, PARALLAX_TEST_SEED=<seed> replays it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/attention_reference.hpp"
#include "common/gpu_test.hpp"
#include "parallax/attention.hpp"
#include "parallax/core.hpp"
#include "parallax/random.hpp"

namespace {

using parallax::AttentionArgs;
using parallax::AttentionBackwardArgs;
using parallax::AttentionStrides;
using parallax::DeviceBuffer;
using parallax::DType;
using parallax::testing::AttentionShape;
using parallax::testing::Strides4;

bool quick_mode() {
  const char* env = std::getenv("PARALLAX_TEST_QUICK");
  return env != nullptr && *env != '\0' && std::string(env) != "0";
}
std::uint64_t process_seed() {
  static const std::uint64_t seed = [] {
    if (const char* env = std::getenv("PARALLAX_TEST_SEED"))
      return static_cast<std::uint64_t>(std::strtoull(env, nullptr, 0));
    return parallax::fresh_seed();
  }();
  return seed;
}
std::string seed_note() {
  return "seed=" + std::to_string(process_seed()) + " (replay: PARALLAX_TEST_SEED=" + std::to_string(process_seed()) +
         ")";
}

constexpr std::uint16_t kPoison = 0xFFFF;  // NaN in both bf16 and f16

std::uint16_t to_bits(DType t, float x) {
  if (t == DType::kBF16) return static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(x)).x;
  return static_cast<__half_raw>(__float2half_rn(x)).x;
}
double from_bits(DType t, std::uint16_t bits) {
  if (t == DType::kBF16) {
    const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
  const unsigned exp = (bits >> 10) & 0x1Fu, mant = bits & 0x3FFu;
  double v;
  if (exp == 0) v = std::ldexp(static_cast<double>(mant), -24);
  else if (exp == 31) v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else v = std::ldexp(static_cast<double>(mant | 0x400u), static_cast<int>(exp) - 25);
  return (bits & 0x8000u) ? -v : v;
}
double unit(DType t) { return t == DType::kBF16 ? std::ldexp(1.0, -9) : std::ldexp(1.0, -11); }

// A [B, S, H, D] tensor with padded strides, as 16-bit patterns on host and device; padding is kPoison.
struct Tensor4 {
  DType type;
  int B, S, H, D;
  Strides4 st;
  std::vector<std::uint16_t> host;
  DeviceBuffer<std::uint16_t> dev;

  Tensor4(DType t, int b, int s, int h, int d, int pad_head, int pad_seq) : type(t), B(b), S(s), H(h), D(d) {
    st.head = d + pad_head;
    st.seq = static_cast<std::int64_t>(h) * st.head + pad_seq;
    st.batch = static_cast<std::int64_t>(s) * st.seq;
    host.assign(static_cast<std::size_t>(st.batch) * b, kPoison);
    dev = DeviceBuffer<std::uint16_t>(host.size());
    dev.upload(host);
  }
  std::size_t at(int b, int s, int h, int d) const { return static_cast<std::size_t>(st.at(b, s, h) + d); }
  AttentionStrides strides() const { return {st.batch, st.seq, st.head}; }
  void fill_random(std::mt19937_64& rng, float amplitude) {
    std::uniform_real_distribution<float> dist(-amplitude, amplitude);
    for (int b = 0; b < B; ++b)
      for (int s = 0; s < S; ++s)
        for (int h = 0; h < H; ++h)
          for (int d = 0; d < D; ++d) host[at(b, s, h, d)] = to_bits(type, dist(rng));
    dev.upload(host);
  }
  void poison() { dev.fill_bytes(0xFF); }
  std::vector<double> widened(const std::vector<std::uint16_t>& bits) const {
    std::vector<double> out(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) out[i] = from_bits(type, bits[i]);
    return out;
  }
  std::vector<double> widened() const { return widened(host); }
  // The window [B, S, H, D] of `bits` as dense doubles (the layout of the reference's outputs).
  std::vector<double> dense(const std::vector<std::uint16_t>& bits) const {
    std::vector<double> out(static_cast<std::size_t>(B) * S * H * D);
    std::size_t n = 0;
    for (int b = 0; b < B; ++b)
      for (int s = 0; s < S; ++s)
        for (int h = 0; h < H; ++h)
          for (int d = 0; d < D; ++d) out[n++] = from_bits(type, bits[at(b, s, h, d)]);
    return out;
  }
  // Elements outside the window that are no longer poison (written where nothing should be).
  std::size_t padding_written(const std::vector<std::uint16_t>& bits) const {
    std::vector<bool> in(bits.size(), false);
    for (int b = 0; b < B; ++b)
      for (int s = 0; s < S; ++s)
        for (int h = 0; h < H; ++h)
          for (int d = 0; d < D; ++d) in[at(b, s, h, d)] = true;
    std::size_t n = 0;
    for (std::size_t i = 0; i < bits.size(); ++i) n += !in[i] && bits[i] != kPoison;
    return n;
  }
};

struct Case {
  int batch, seqlen_q, seqlen_k, heads, heads_kv;
  bool causal;
  int pad_head = 0, pad_seq = 0;
  float scale = 0;
};

std::string describe(const Case& c, DType t, int d, const std::string& kernel, bool det) {
  std::ostringstream os;
  os << kernel << (det ? " deterministic " : " ") << (t == DType::kBF16 ? "bf16" : "f16") << " B=" << c.batch
     << " Sq=" << c.seqlen_q << " Sk=" << c.seqlen_k << " H=" << c.heads << " Hkv=" << c.heads_kv << " D=" << d
     << (c.causal ? " causal" : " non-causal") << " pad_head=" << c.pad_head << " pad_seq=" << c.pad_seq;
  if (c.scale > 0) os << " scale=" << c.scale;
  os << " " << seed_note();
  return os.str();
}

// Inputs, forward results (level 1) and poisoned gradient buffers of one case.
struct Problem {
  Case c;
  DType type;
  int D;
  Tensor4 q, k, v, out, dout, dq, dk, dv;
  DeviceBuffer<float> lse;

  Problem(const Case& cs, DType t, int d, std::uint64_t salt)
      : c(cs), type(t), D(d), q(t, cs.batch, cs.seqlen_q, cs.heads, d, cs.pad_head, cs.pad_seq),
        k(t, cs.batch, cs.seqlen_k, cs.heads_kv, d, cs.pad_head, cs.pad_seq),
        v(t, cs.batch, cs.seqlen_k, cs.heads_kv, d, cs.pad_head, cs.pad_seq),
        out(t, cs.batch, cs.seqlen_q, cs.heads, d, cs.pad_head, cs.pad_seq),
        dout(t, cs.batch, cs.seqlen_q, cs.heads, d, cs.pad_head, cs.pad_seq),
        dq(t, cs.batch, cs.seqlen_q, cs.heads, d, cs.pad_head, cs.pad_seq),
        dk(t, cs.batch, cs.seqlen_k, cs.heads_kv, d, cs.pad_head, cs.pad_seq),
        dv(t, cs.batch, cs.seqlen_k, cs.heads_kv, d, cs.pad_head, cs.pad_seq),
        lse(static_cast<std::size_t>(cs.batch) * cs.heads * cs.seqlen_q) {
    std::mt19937_64 rng(process_seed() ^ (0x9E3779B97F4A7C15ull * (salt + 1)) ^ (static_cast<std::uint64_t>(d) << 40) ^
                        (t == DType::kBF16 ? 1ull : 2ull));
    q.fill_random(rng, 2.0f);
    k.fill_random(rng, 2.0f);
    v.fill_random(rng, 1.0f);
    dout.fill_random(rng, 1.0f);
    AttentionArgs f;
    f.batch = c.batch, f.seqlen_q = c.seqlen_q, f.seqlen_k = c.seqlen_k, f.heads = c.heads, f.heads_kv = c.heads_kv;
    f.head_dim = d, f.dtype = t, f.causal = c.causal;
    f.q = q.dev.data(), f.q_strides = q.strides();
    f.k = k.dev.data(), f.k_strides = k.strides();
    f.v = v.dev.data(), f.v_strides = v.strides();
    f.out = out.dev.data(), f.out_strides = out.strides();
    f.lse = lse.data();
    if (c.scale > 0) f.softmax_scale = c.scale;
    parallax::attention_forward(f, nullptr, "reference");
    PX_CUDA_CHECK(cudaDeviceSynchronize());
  }

  AttentionBackwardArgs args(bool deterministic) {
    AttentionBackwardArgs a;
    a.batch = c.batch, a.seqlen_q = c.seqlen_q, a.seqlen_k = c.seqlen_k, a.heads = c.heads, a.heads_kv = c.heads_kv;
    a.head_dim = D, a.dtype = type, a.causal = c.causal, a.deterministic = deterministic;
    a.q = q.dev.data(), a.q_strides = q.strides();
    a.k = k.dev.data(), a.k_strides = k.strides();
    a.v = v.dev.data(), a.v_strides = v.strides();
    a.out = out.dev.data(), a.out_strides = out.strides();
    a.dout = dout.dev.data(), a.dout_strides = dout.strides();
    a.lse = lse.data();
    a.dq = dq.dev.data(), a.dq_strides = dq.strides();
    a.dk = dk.dev.data(), a.dk_strides = dk.strides();
    a.dv = dv.dev.data(), a.dv_strides = dv.strides();
    if (c.scale > 0) a.softmax_scale = c.scale;
    return a;
  }

  struct Result {
    std::vector<std::uint16_t> dq, dk, dv;
  };
  Result run(const std::string& kernel, bool deterministic) {
    dq.poison(), dk.poison(), dv.poison();
    parallax::attention_backward(args(deterministic), nullptr, kernel);
    PX_CUDA_CHECK(cudaDeviceSynchronize());
    return {dq.dev.download(), dk.dev.download(), dv.dev.download()};
  }
  AttentionShape shape() const { return {c.batch, c.seqlen_q, c.seqlen_k, c.heads, c.heads_kv, D, c.causal, c.scale}; }
};

// One gradient tensor against a reference (dense doubles): every element finite and within the bound, the
// relative L2 error within its bound, and the stride padding untouched.
void expect_close(const char* name, const Tensor4& t, const std::vector<std::uint16_t>& bits,
                  const std::vector<double>& ref, double u) {
  const std::vector<double> got = t.dense(bits);
  double max_ref = 0;
  for (double r : ref) max_ref = std::max(max_ref, std::abs(r));
  double diff2 = 0, ref2 = 0;
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double tol = 8 * u * max_ref + 8 * u * std::abs(ref[i]) + 1e-6;
    const bool finite = std::isfinite(got[i]);
    if (finite) {
      diff2 += (got[i] - ref[i]) * (got[i] - ref[i]);
      ref2 += ref[i] * ref[i];
    }
    if ((!finite || std::abs(got[i] - ref[i]) > tol) && bad++ < 5) {
      const int d = static_cast<int>(i % t.D), h = static_cast<int>(i / t.D % t.H),
                s = static_cast<int>(i / t.D / t.H % t.S), b = static_cast<int>(i / t.D / t.H / t.S);
      ADD_FAILURE() << name << "[b=" << b << ", s=" << s << ", h=" << h << ", d=" << d << "] = " << got[i]
                    << ", expected " << ref[i] << " +- " << tol << (finite ? "" : " (never written or NaN)");
    }
  }
  EXPECT_EQ(bad, 0) << bad << " bad elements of " << name;
  const double rel = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  EXPECT_LE(rel, 16 * u) << "relative L2 error of " << name << " (max |ref| = " << max_ref << ")";
  EXPECT_EQ(t.padding_written(bits), 0u) << name << ": elements outside its window were written";
}

struct Config {
  DType type;
  int head_dim;
  const char* kernel;
};
std::string config_name(const ::testing::TestParamInfo<Config>& info) {
  return std::string(info.param.kernel) + "_" + (info.param.type == DType::kBF16 ? "bf16" : "f16") + "_d" +
         std::to_string(info.param.head_dim);
}

bool is_hopper() {
  const auto& info = parallax::device_info();
  return info.cc_major == 9 && info.cc_minor == 0;
}

class AttentionBackwardFloat64 : public parallax::testing::GpuTestWithParam<Config> {
 protected:
  void SetUp() override {
    parallax::testing::GpuTestWithParam<Config>::SetUp();
    if (IsSkipped()) return;
    if (std::string(GetParam().kernel) == "wgmma" && !is_hopper()) GTEST_SKIP() << "kernel 'wgmma' needs an sm_90 GPU";
  }
};

void run_vs_float64(const std::vector<Case>& cases, const Config& cfg) {
  for (std::size_t n = 0; n < cases.size(); ++n) {
    const Case& c = cases[n];
    // PARALLAX_TEST_QUICK (compute-sanitizer runs): only the short cases.
    if (quick_mode() && std::max(c.seqlen_q, c.seqlen_k) > 300) continue;
    SCOPED_TRACE(describe(c, cfg.type, cfg.head_dim, cfg.kernel, false));
    Problem p(c, cfg.type, cfg.head_dim, n);
    const auto ref = parallax::testing::attention_backward_reference(p.shape(), p.q.widened(), p.q.st, p.k.widened(),
                                                                     p.k.st, p.v.widened(), p.v.st, p.dout.widened(),
                                                                     p.dout.st);
    for (bool det : {false, true}) {
      if (det && std::string(cfg.kernel) == "reference") continue;  // level 1 has no separate deterministic path
      SCOPED_TRACE(det ? "deterministic" : "default mode");
      const auto got = p.run(cfg.kernel, det);
      const double u = unit(cfg.type);
      expect_close("dq", p.dq, got.dq, ref.dq, u);
      expect_close("dk", p.dk, got.dk, ref.dk, u);
      expect_close("dv", p.dv, got.dv, ref.dv, u);
    }
  }
}

// Edges of the mma tiles (64 keys per CTA, 64 query rows per step) and of the wgmma ones (128 keys per CTA,
// 64 query rows per step), the smallest shapes, odd lengths.
TEST_P(AttentionBackwardFloat64, OddLengthsAndTileEdges) {
  run_vs_float64({{1, 1, 1, 1, 1, false},
                  {1, 17, 17, 2, 2, false},
                  {1, 100, 100, 1, 1, false},
                  {1, 63, 65, 1, 1, false},
                  {1, 64, 64, 1, 1, false},
                  {2, 129, 200, 2, 2, false},
                  {1, 127, 127, 1, 1, false},
                  {1, 128, 129, 1, 1, false},
                  {1, 65, 257, 1, 1, false},
                  {1, 1000, 1000, 1, 1, false}},
                 GetParam());
}

// Causal aligned bottom-right, Sq != Sk both ways (Sq > Sk: rows with no visible key get dq = 0).
TEST_P(AttentionBackwardFloat64, CausalShapes) {
  run_vs_float64({{1, 1, 1, 1, 1, true},
                  {1, 7, 5, 1, 1, true},
                  {1, 129, 17, 2, 2, true},
                  {1, 17, 1000, 1, 1, true},
                  {1, 100, 130, 1, 1, true},
                  {1, 200, 129, 1, 1, true},
                  {1, 64, 255, 1, 1, true},
                  {2, 1000, 1000, 2, 1, true}},
                 GetParam());
}

// GQA / MQA (dk, dv summed over the group), padded strides with NaN padding, custom scale.
TEST_P(AttentionBackwardFloat64, HeadsStridesScale) {
  run_vs_float64({{1, 33, 77, 4, 1, false},
                  {2, 65, 130, 6, 2, true},
                  {1, 100, 100, 3, 3, false, 8, 16},
                  {2, 31, 200, 4, 2, true, 16, 8},
                  {1, 64, 300, 2, 2, false, 0, 0, 0.5f}},
                 GetParam());
}

INSTANTIATE_TEST_SUITE_P(Backward, AttentionBackwardFloat64,
                         ::testing::Values(Config{DType::kBF16, 64, "reference"}, Config{DType::kBF16, 128, "reference"},
                                           Config{DType::kF16, 128, "reference"}, Config{DType::kBF16, 64, "mma"},
                                           Config{DType::kBF16, 128, "mma"}, Config{DType::kF16, 64, "mma"},
                                           Config{DType::kF16, 128, "mma"}, Config{DType::kBF16, 64, "wgmma"},
                                           Config{DType::kBF16, 128, "wgmma"}, Config{DType::kF16, 64, "wgmma"},
                                           Config{DType::kF16, 128, "wgmma"}),
                         config_name);

// The level-3 suite, run for level 4 too (instances Level3 / Level4; the wgmma ones skip off compute
// capability 9.0).
class AttentionBackwardMma : public parallax::testing::GpuTestWithParam<const char*> {
 protected:
  void SetUp() override {
    parallax::testing::GpuTestWithParam<const char*>::SetUp();
    if (IsSkipped()) return;
    if (std::string(GetParam()) == "wgmma" && !is_hopper()) GTEST_SKIP() << "kernel 'wgmma' needs an sm_90 GPU";
  }
};

// mma / wgmma (both modes) vs the reference level on the GPU, over the matrix.
void run_vs_reference(const char* kernel, const Case& c, DType type, int d, std::uint64_t salt) {
  Problem p(c, type, d, salt);
  const auto ref_bits = p.run("reference", false);
  const std::vector<double> ref_dq = p.dq.dense(ref_bits.dq), ref_dk = p.dk.dense(ref_bits.dk),
                            ref_dv = p.dv.dense(ref_bits.dv);
  for (bool det : {false, true}) {
    SCOPED_TRACE(describe(c, type, d, kernel, det));
    const auto got = p.run(kernel, det);
    // The reference level's own output rounding adds one u: the bound stays 16 u in L2.
    const double u = unit(type);
    expect_close("dq", p.dq, got.dq, ref_dq, u);
    expect_close("dk", p.dk, got.dk, ref_dk, u);
    expect_close("dv", p.dv, got.dv, ref_dv, u);
  }
}

TEST_P(AttentionBackwardMma, MatrixVsReferenceLevel) {
  std::vector<int> batches{1, 2}, heads{8, 16}, seqs{512, 1024, 2048}, dims{64, 128};
  if (quick_mode()) batches = {1}, heads = {8}, seqs = {512};
  std::uint64_t salt = 100;
  for (int b : batches)
    for (int h : heads)
      for (int s : seqs)
        for (int d : dims)
          for (bool causal : {false, true})
            run_vs_reference(GetParam(), {b, s, s, h, h, causal}, DType::kBF16, d, salt++);
}

TEST_P(AttentionBackwardMma, GqaAndUnequalLengthsVsReferenceLevel) {
  const int s = quick_mode() ? 256 : 1024;
  std::uint64_t salt = 200;
  for (int d : {64, 128})
    for (bool causal : {false, true}) {
      run_vs_reference(GetParam(), {1, s, s, 32, 8, causal}, DType::kBF16, d, salt++);
      run_vs_reference(GetParam(), {2, s, s + 300, 32, 1, causal}, DType::kF16, d, salt++);
      run_vs_reference(GetParam(), {1, s + 300, s, 8, 2, causal}, DType::kBF16, d, salt++);
    }
}

TEST_P(AttentionBackwardMma, DeterministicIsBitwiseReproducible) {
  const char* kernel = GetParam();
  std::uint64_t salt = 300;
  for (int d : {64, 128})
    for (bool causal : {false, true}) {
      const Case c{2, 1000, 1100, 8, 2, causal};
      SCOPED_TRACE(describe(c, DType::kBF16, d, kernel, true));
      Problem p(c, DType::kBF16, d, salt++);
      const auto a = p.run(kernel, true);
      const auto b = p.run(kernel, true);
      EXPECT_EQ(a.dq, b.dq) << "deterministic dq differs between two runs";
      EXPECT_EQ(a.dk, b.dk) << "deterministic dk differs between two runs";
      EXPECT_EQ(a.dv, b.dv) << "deterministic dv differs between two runs";
      // dk / dv never use atomics: identical in the default mode too, and to the deterministic mode.
      const auto c1 = p.run(kernel, false);
      EXPECT_EQ(c1.dk, a.dk) << "default-mode dk differs from deterministic dk";
      EXPECT_EQ(c1.dv, a.dv) << "default-mode dv differs from deterministic dv";
      // dq: same math in a different order of additions.
      expect_close("dq (default vs deterministic)", p.dq, c1.dq, p.dq.dense(a.dq), unit(DType::kBF16));
    }
}

// The ordering of the dq additions under load: a grid of many waves (B4 H16 S2048: 1024 CTAs of 128 keys for
// wgmma), where the order in which CTAs finish varies from run to run; three runs must agree bit for bit.
TEST_P(AttentionBackwardMma, DeterministicIsBitwiseReproducibleAtScale) {
  if (quick_mode()) GTEST_SKIP() << "PARALLAX_TEST_QUICK: the large grid is skipped";
  const char* kernel = GetParam();
  std::uint64_t salt = 350;
  for (bool causal : {false, true}) {
    const Case c{4, 2048, 2048, 16, 16, causal};
    SCOPED_TRACE(describe(c, DType::kBF16, 128, kernel, true));
    Problem p(c, DType::kBF16, 128, salt++);
    const auto a = p.run(kernel, true);
    for (int run = 0; run < 2; ++run) {
      const auto b = p.run(kernel, true);
      EXPECT_EQ(a.dq, b.dq) << "deterministic dq differs between runs";
      EXPECT_EQ(a.dk, b.dk) << "deterministic dk differs between runs";
      EXPECT_EQ(a.dv, b.dv) << "deterministic dv differs between runs";
    }
  }
}

TEST_P(AttentionBackwardMma, UnalignedLayoutsFallBackOrAreRejected) {
  // Padding of 4 elements breaks the 16-byte rule of levels 3-4: "auto" runs level 1, "mma" / "wgmma" is an
  // InvalidArgument.
  const Case c{1, 70, 90, 2, 1, true, 4, 0};
  SCOPED_TRACE(describe(c, DType::kBF16, 64, "auto", false));
  Problem p(c, DType::kBF16, 64, 400);
  const auto got = p.run("auto", false);
  const auto ref = parallax::testing::attention_backward_reference(p.shape(), p.q.widened(), p.q.st, p.k.widened(),
                                                                   p.k.st, p.v.widened(), p.v.st, p.dout.widened(),
                                                                   p.dout.st);
  expect_close("dq", p.dq, got.dq, ref.dq, unit(DType::kBF16));
  expect_close("dk", p.dk, got.dk, ref.dk, unit(DType::kBF16));
  expect_close("dv", p.dv, got.dv, ref.dv, unit(DType::kBF16));
  try {
    parallax::attention_backward(p.args(false), nullptr, GetParam());
    ADD_FAILURE() << "kernel '" << GetParam() << "' accepted a layout it cannot load with 16-byte vectors";
  } catch (const parallax::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("16-byte aligned"), std::string::npos) << e.what();
  }
}

// Level-4 specifics (run for the Level3 instance too: the shapes are edges of its tiles as well).
// Long query walks per CTA: the Q / dO ring (2 stages for D 128, 3 for D 64) wraps many times, D 64 alternates
// the dQ consumer over an odd number of steps, GQA walks several heads per CTA; key counts that leave the
// second consumer of the last CTA empty (Sk % 128 in 1..64) or partial.
TEST_P(AttentionBackwardMma, RingWrapAndConsumerEdgesVsReferenceLevel) {
  const int s = quick_mode() ? 200 : 777;
  std::uint64_t salt = 500;
  for (int d : {64, 128})
    for (bool causal : {false, true}) {
      run_vs_reference(GetParam(), {1, s, 64 + 1, 4, 1, causal}, DType::kBF16, d, salt++);
      run_vs_reference(GetParam(), {2, s, 128 + 64, 6, 3, causal}, DType::kF16, d, salt++);
      run_vs_reference(GetParam(), {1, 3 * 64, s, 2, 2, causal}, DType::kBF16, d, salt++);
    }
}

// On compute capability 9.0 "auto" runs level 4 for TMA-describable layouts: bitwise the same as an explicit
// "wgmma" in deterministic mode.
TEST_P(AttentionBackwardMma, AutoPicksThisLevelWhereExpected) {
  const std::string kernel = GetParam();
  if (kernel == "mma" && is_hopper()) GTEST_SKIP() << "'auto' runs wgmma on this device";
  const Case c{1, 300, 333, 4, 2, true};
  SCOPED_TRACE(describe(c, DType::kBF16, 128, "auto", true));
  Problem p(c, DType::kBF16, 128, 600);
  const auto a = p.run("auto", true);
  const auto b = p.run(kernel, true);
  EXPECT_EQ(a.dq, b.dq) << "'auto' did not run '" << kernel << "'";
  EXPECT_EQ(a.dk, b.dk);
  EXPECT_EQ(a.dv, b.dv);
}

INSTANTIATE_TEST_SUITE_P(Level3, AttentionBackwardMma, ::testing::Values("mma"));
INSTANTIATE_TEST_SUITE_P(Level4, AttentionBackwardMma, ::testing::Values("wgmma"));

}  // namespace
