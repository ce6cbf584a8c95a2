// GPU tests of the attention forward levels against a float64 CPU reference (small shapes, computed from the
// very bf16 / fp16 values the GPU read) and, for the large matrix, against level 1 "reference" on the GPU
// (itself checked against float64 in the small tests first).
//
// Each run draws fresh random inputs (PARALLAX_TEST_SEED=<seed> replays; the seed is in every message).
// q is uniform in [-2, 2) so the softmax is far from uniform; k, v in [-1, 1). Every output and LSE element
// starts NaN-poisoned (0xFF bytes) and must come back finite (= written), except LSE of fully masked rows,
// which must be -inf. Covered: causal on/off (bottom-right aligned, Sq != Sk both ways, fully masked rows),
// GQA (H 32 / Hkv 8) and MQA (Hkv 1), odd lengths (1, 17, 100, 1000, 4097), q/k/v as slices of one packed
// [B, S, 3, H, D] tensor, padded head strides with out in [B, H, S, D] order, bf16 and f16, D 64 and 128.
//
// Tolerances (outputs are weighted averages of |v| <= 1, so |out| <= 1): the inputs are exact in fp32, the
// fp32 softmax and accumulation contribute ~1e-6, the final rounding to bf16 / f16 2^-9 / 2^-12 |out|.
//   per element: |out - ref| <= atol + rtol |ref|; bf16 atol 4e-3 rtol 2^-7, f16 atol 1e-3 rtol 2^-9
//   (twice that against the GPU reference, whose output is rounded too); LSE: 1e-3 + 1e-4 |lse| (fp32 both).
//   norm: ||out - ref|| / ||ref|| <= 1e-2 (bf16), 2e-3 (f16).
// A kernel that is still a placeholder ("not implemented yet") is SKIPPED with that reason.
// PARALLAX_TEST_QUICK=1 shrinks the large matrix and drops 4097 (for compute-sanitizer runs).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common/attention_reference.hpp"
#include "common/gpu_test.hpp"
#include "parallax/attention.hpp"
#include "parallax/core.hpp"
#include "parallax/random.hpp"

namespace {

using parallax::AttentionArgs;
using parallax::AttentionStrides;
using parallax::DeviceBuffer;
using parallax::DType;
namespace pt = parallax::testing;

bool quick_mode() {
  const char* env = std::getenv("PARALLAX_TEST_QUICK");
  return env != nullptr && *env != '\0' && std::string(env) != "0";
}
std::uint64_t process_seed() {
  static const std::uint64_t seed = [] {
    if (const char* env = std::getenv("PARALLAX_TEST_SEED")) return static_cast<std::uint64_t>(std::strtoull(env, nullptr, 0));
    return parallax::fresh_seed();
  }();
  return seed;
}
std::string seed_note() {
  return "seed=" + std::to_string(process_seed()) + " (replay: PARALLAX_TEST_SEED=" + std::to_string(process_seed()) + ")";
}
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double decode(DType t, std::uint16_t h) {
  if (t == DType::kBF16) {
    const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
  const unsigned exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
  double v;
  if (exp == 0) v = std::ldexp(static_cast<double>(mant), -24);
  else if (exp == 31) v = mant ? std::nan("") : INFINITY;
  else v = std::ldexp(static_cast<double>(mant | 0x400u), static_cast<int>(exp) - 25);
  return (h & 0x8000u) ? -v : v;
}

enum class Layout { kDense, kPackedQkv, kPaddedHeads };
const char* layout_name(Layout l) {
  return l == Layout::kDense ? "dense" : l == Layout::kPackedQkv ? "packed-qkv" : "padded-heads/out-BHSD";
}

struct Case {
  int B, Sq, Sk, H, Hkv, D;
  bool causal;
  DType dtype = DType::kBF16;
  Layout layout = Layout::kDense;
  std::string describe() const {
    return "B=" + std::to_string(B) + " Sq=" + std::to_string(Sq) + " Sk=" + std::to_string(Sk) + " H=" +
           std::to_string(H) + " Hkv=" + std::to_string(Hkv) + " D=" + std::to_string(D) +
           (causal ? " causal" : " non-causal") + " " + (dtype == DType::kBF16 ? "bf16" : "f16") + " " +
           layout_name(layout);
  }
};

// Device tensors of one case (16-bit elements as raw uint16 storage) and their host copies in double.
struct Problem {
  Case c;
  DeviceBuffer<std::uint16_t> qkv_storage, q_buf, k_buf, v_buf, out_buf;
  DeviceBuffer<float> lse_buf;
  AttentionArgs args;
  std::vector<double> q, k, v;  // whole buffers, decoded
  pt::Strides4 qs, ks, vs;

  static void fill(DeviceBuffer<std::uint16_t>& buf, DType t, std::uint64_t seed, float lo, float hi) {
    if (t == DType::kBF16)
      parallax::fill_uniform(reinterpret_cast<__nv_bfloat16*>(buf.data()), buf.size(), seed, lo, hi);
    else
      parallax::fill_uniform(reinterpret_cast<__half*>(buf.data()), buf.size(), seed, lo, hi);
  }
  static std::vector<double> decoded(const DeviceBuffer<std::uint16_t>& buf, DType t) {
    const auto raw = buf.download();
    std::vector<double> d(raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i) d[i] = decode(t, raw[i]);
    return d;
  }

  explicit Problem(const Case& cs, std::uint64_t seed, bool keep_host = true) : c(cs) {
    const std::size_t B = c.B, Sq = c.Sq, Sk = c.Sk, H = c.H, Hkv = c.Hkv, D = c.D;
    args.batch = c.B, args.seqlen_q = c.Sq, args.seqlen_k = c.Sk, args.heads = c.H, args.heads_kv = c.Hkv;
    args.head_dim = c.D, args.dtype = c.dtype, args.causal = c.causal;
    const auto to_px = [](pt::Strides4 s) { return AttentionStrides{s.batch, s.seq, s.head}; };
    out_buf = DeviceBuffer<std::uint16_t>(B * Sq * H * D);
    args.out_strides = AttentionStrides::dense(c.Sq, c.H, c.D);
    if (c.layout == Layout::kPackedQkv) {  // [B, S, 3, H, D]: needs Sq == Sk and H == Hkv
      qkv_storage = DeviceBuffer<std::uint16_t>(B * Sq * 3 * H * D);
      fill(qkv_storage, c.dtype, seed, -1.f, 1.f);
      const std::int64_t seq = 3 * H * D;
      qs = ks = vs = pt::Strides4{static_cast<std::int64_t>(Sq) * seq, seq, static_cast<std::int64_t>(D)};
      args.q = qkv_storage.data();
      args.k = qkv_storage.data() + H * D;
      args.v = qkv_storage.data() + 2 * H * D;
      if (keep_host) {
        q = decoded(qkv_storage, c.dtype);
        k = std::vector<double>(q.begin() + H * D, q.end());
        v = std::vector<double>(q.begin() + 2 * H * D, q.end());
      }
    } else {
      const std::int64_t pad = c.layout == Layout::kPaddedHeads ? 8 : 0;
      const auto strides = [&](std::size_t S, std::size_t heads) {
        const std::int64_t head = static_cast<std::int64_t>(D) + pad;
        return pt::Strides4{static_cast<std::int64_t>(S * heads) * head, static_cast<std::int64_t>(heads) * head, head};
      };
      qs = strides(Sq, H), ks = vs = strides(Sk, Hkv);
      q_buf = DeviceBuffer<std::uint16_t>(B * qs.batch);
      k_buf = DeviceBuffer<std::uint16_t>(B * ks.batch);
      v_buf = DeviceBuffer<std::uint16_t>(B * vs.batch);
      fill(q_buf, c.dtype, mix(seed ^ 1), -2.f, 2.f);
      fill(k_buf, c.dtype, mix(seed ^ 2), -1.f, 1.f);
      fill(v_buf, c.dtype, mix(seed ^ 3), -1.f, 1.f);
      args.q = q_buf.data(), args.k = k_buf.data(), args.v = v_buf.data();
      if (c.layout == Layout::kPaddedHeads)  // out in [B, H, S, D] order
        args.out_strides = AttentionStrides{static_cast<std::int64_t>(H * Sq * D), static_cast<std::int64_t>(D),
                                            static_cast<std::int64_t>(Sq * D)};
      if (keep_host) q = decoded(q_buf, c.dtype), k = decoded(k_buf, c.dtype), v = decoded(v_buf, c.dtype);
    }
    args.q_strides = to_px(qs), args.k_strides = to_px(ks), args.v_strides = to_px(vs);
    lse_buf = DeviceBuffer<float>(B * H * Sq);
    args.out = out_buf.data();
    args.lse = lse_buf.data();
  }

  // Output downloaded into dense [B, Sq, H, D] order (whatever out_strides were), plus LSE.
  struct Result {
    std::vector<double> out;
    std::vector<float> lse;
  };
  Result run(std::string_view kernel) {
    out_buf.fill_bytes(0xFF);
    lse_buf.fill_bytes(0xFF);
    parallax::attention_forward(args, nullptr, kernel);
    PX_CUDA_CHECK(cudaDeviceSynchronize());
    Result r;
    const auto raw = out_buf.download();
    r.out.resize(raw.size());
    const auto& os = args.out_strides;
    std::size_t at = 0;
    for (int b = 0; b < c.B; ++b)
      for (int i = 0; i < c.Sq; ++i)
        for (int h = 0; h < c.H; ++h)
          for (int d = 0; d < c.D; ++d) r.out[at++] = decode(c.dtype, raw[b * os.batch + i * os.seq + h * os.head + d]);
    r.lse = lse_buf.download();
    return r;
  }

  pt::AttentionReference cpu_reference() const {
    pt::AttentionShape s{c.B, c.Sq, c.Sk, c.H, c.Hkv, c.D, c.causal, 0.0};
    return pt::attention_reference(s, q, qs, k, ks, v, vs);
  }
};

// True when `kernel` is a placeholder; the caller skips.
bool not_implemented(const parallax::Error& e) { return std::string(e.what()).find("not implemented") != std::string::npos; }

// Level 4 ("wgmma") is sm_90a code: it runs on compute capability 9.0 only (elsewhere it throws by contract,
// covered by the dispatch rules; "auto" then uses level 3).
bool kernel_unavailable_here(const std::string& kernel) {
  if (kernel != "wgmma") return false;
  const auto& info = parallax::device_info();
  return !(info.cc_major == 9 && info.cc_minor == 0);
}
#define SKIP_IF_UNAVAILABLE(kernel) \
  if (kernel_unavailable_here(kernel)) GTEST_SKIP() << "kernel '" << (kernel) << "' needs an sm_90 GPU"

// Compares out / lse against a reference (double out in dense order, lse as double); `loose` doubles the
// per-element tolerance (reference itself rounded to bf16 / f16).
void check(const Case& c, std::string_view kernel, const Problem::Result& got, const std::vector<double>& ref_out,
           const std::vector<double>& ref_lse, bool loose) {
  const bool bf16 = c.dtype == DType::kBF16;
  const double scale = loose ? 2.0 : 1.0;
  const double atol = scale * (bf16 ? 4e-3 : 1e-3), rtol = scale * (bf16 ? 1.0 / 128 : 1.0 / 512);
  const double norm_limit = bf16 ? 1e-2 : 2e-3;
  const std::string where = std::string(kernel) + " " + c.describe() + " " + seed_note();
  double diff2 = 0, ref2 = 0, max_abs = 0, sum_rel = 0;
  std::size_t bad = 0, counted = 0;
  for (std::size_t idx = 0; idx < ref_out.size(); ++idx) {
    const double o = got.out[idx], r = ref_out[idx];
    const std::size_t d = idx % c.D, h = (idx / c.D) % c.H, i = (idx / c.D / c.H) % c.Sq, b = idx / c.D / c.H / c.Sq;
    if (!std::isfinite(o) || std::abs(o - r) > atol + rtol * std::abs(r)) {
      if (bad++ < 3)
        ADD_FAILURE() << where << ": out[b=" << b << ", i=" << i << ", h=" << h << ", d=" << d << "] expected " << r
                      << " got " << o << (std::isfinite(o) ? "" : " (never written: still poisoned)");
      continue;
    }
    diff2 += (o - r) * (o - r), ref2 += r * r;
    max_abs = std::max(max_abs, std::abs(o - r));
    if (std::abs(r) > 1e-3) sum_rel += std::abs(o - r) / std::abs(r), ++counted;
  }
  EXPECT_EQ(bad, 0u) << where << ": " << bad << " of " << ref_out.size() << " output elements out of tolerance";
  const double rel = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  EXPECT_LE(rel, norm_limit) << where << ": ||out - ref|| / ||ref||";
  std::size_t bad_lse = 0;
  for (std::size_t idx = 0; idx < ref_lse.size(); ++idx) {
    const double o = got.lse[idx], r = ref_lse[idx];
    const bool ok = std::isinf(r) ? (std::isinf(o) && o < 0) : (std::isfinite(o) && std::abs(o - r) <= 1e-3 + 1e-4 * std::abs(r));
    if (!ok && bad_lse++ < 3)
      ADD_FAILURE() << where << ": lse[b=" << idx / c.Sq / c.H << ", h=" << (idx / c.Sq) % c.H << ", i=" << idx % c.Sq
                    << "] expected " << r << " got " << o;
  }
  EXPECT_EQ(bad_lse, 0u) << where << ": LSE elements out of tolerance";
  std::printf("[ attention ] %-9s %-70s max_abs_err %.3e mean_rel_err %.3e norm_rel_err %.3e\n",
              std::string(kernel).c_str(), c.describe().c_str(), max_abs, counted ? sum_rel / counted : 0.0, rel);
}

// ---------------------------------------------------------------------------------------------------------
// Small shapes vs float64 on the CPU, for every kernel (the GPU reference "reference" included).

std::vector<Case> small_cases() {
  std::vector<Case> cs;
  for (DType t : {DType::kBF16, DType::kF16})
    for (int D : {64, 128})
      for (bool causal : {false, true}) {
        cs.push_back({2, 128, 128, 4, 4, D, causal, t});
        cs.push_back({1, 1, 1, 2, 1, D, causal, t});
        cs.push_back({1, 17, 17, 2, 2, D, causal, t});
        cs.push_back({1, 100, 37, 4, 2, D, causal, t});     // Sq > Sk: causal rows 0..62 fully masked
        cs.push_back({2, 37, 100, 4, 1, D, causal, t});     // Sq < Sk, MQA
        cs.push_back({1, 129, 129, 32, 8, D, causal, t});   // GQA 4:1
        cs.push_back({1, 64, 64, 32, 1, D, causal, t});     // MQA 32:1
        cs.push_back({2, 65, 65, 4, 4, D, causal, t, Layout::kPackedQkv});
        cs.push_back({2, 33, 70, 4, 2, D, causal, t, Layout::kPaddedHeads});
      }
  for (bool causal : {false, true}) {
    cs.push_back({1, 1000, 1000, 2, 1, 64, causal, DType::kBF16});
    cs.push_back({1, 1, 1000, 2, 2, 128, causal, DType::kF16});   // decode-like: one query, many keys
    cs.push_back({1, 1000, 1, 2, 2, 64, causal, DType::kBF16});   // one key: causal keeps only the last row
  }
  return cs;
}

class AttentionSmall : public pt::GpuTestWithParam<const char*> {};

TEST_P(AttentionSmall, MatchesFloat64Reference) {
  const std::string kernel = GetParam();
  SKIP_IF_UNAVAILABLE(kernel);
  std::uint64_t n = 0;
  for (const Case& c : small_cases()) {
    Problem p(c, mix(process_seed() ^ ++n));
    Problem::Result got;
    try {
      got = p.run(kernel);
    } catch (const parallax::Error& e) {
      if (not_implemented(e)) GTEST_SKIP() << "kernel '" << kernel << "': " << e.what();
      if (kernel != "tiled" && kernel != "reference" && std::string(e.what()).find("16-byte") != std::string::npos)
        continue;  // vector kernels reject unaligned layouts by contract (covered by the CPU tests)
      if (kernel == "wgmma" && std::string(e.what()).find("TMA") != std::string::npos)
        continue;  // level 4 rejects layouts TMA cannot describe by contract (covered by the CPU tests)
      throw;
    }
    const auto ref = p.cpu_reference();
    check(c, kernel, got, ref.out, ref.lse, false);
    if (HasFailure()) return;  // one failing case is enough to debug from; keep the log short
  }
}

// Fully masked rows: causal with Sq > Sk; out exactly 0 and lse exactly -inf.
TEST_P(AttentionSmall, FullyMaskedRowsAreZeroWithMinusInfLse) {
  const std::string kernel = GetParam();
  SKIP_IF_UNAVAILABLE(kernel);
  const Case c{2, 50, 10, 4, 2, 64, true, DType::kBF16};
  Problem p(c, mix(process_seed() ^ 0xABCDu));
  Problem::Result got;
  try {
    got = p.run(kernel);
  } catch (const parallax::Error& e) {
    if (not_implemented(e)) GTEST_SKIP() << "kernel '" << kernel << "': " << e.what();
    throw;
  }
  for (int b = 0; b < c.B; ++b)
    for (int h = 0; h < c.H; ++h)
      for (int i = 0; i < c.Sq - c.Sk; ++i) {
        const float l = got.lse[(static_cast<std::size_t>(b) * c.H + h) * c.Sq + i];
        ASSERT_TRUE(std::isinf(l) && l < 0) << kernel << " " << c.describe() << " lse[b=" << b << ",h=" << h << ",i=" << i << "]=" << l;
        for (int d = 0; d < c.D; ++d) {
          const double o = got.out[((static_cast<std::size_t>(b) * c.Sq + i) * c.H + h) * c.D + d];
          ASSERT_EQ(o, 0.0) << kernel << " " << c.describe() << " out[b=" << b << ",i=" << i << ",h=" << h << ",d=" << d << "]";
        }
      }
}

INSTANTIATE_TEST_SUITE_P(Kernels, AttentionSmall, ::testing::Values("reference", "tiled", "mma", "wgmma", "auto"),
                         [](const auto& info) { return std::string(info.param); });

// ---------------------------------------------------------------------------------------------------------
// The validation matrix vs the level-1 GPU reference: B {1,2,4,8} x H {8,16,32} x S {512,1024,2048} x
// D {64,128} x causal (bf16; f16 on B = 2), plus 4097 odd lengths (Sq = Sk and Sq != Sk).

std::vector<Case> large_cases() {
  std::vector<Case> cs;
  if (quick_mode()) {
    cs.push_back({1, 512, 512, 8, 8, 64, true, DType::kBF16});
    cs.push_back({2, 1024, 1024, 16, 16, 128, false, DType::kF16});
    return cs;
  }
  for (int B : {1, 2, 4, 8})
    for (int H : {8, 16, 32})
      for (int S : {512, 1024, 2048})
        for (int D : {64, 128})
          for (bool causal : {false, true}) {
            cs.push_back({B, S, S, H, H, D, causal, DType::kBF16});
            if (B == 2) cs.push_back({B, S, S, H, H, D, causal, DType::kF16});
          }
  for (bool causal : {false, true}) {
    cs.push_back({1, 4097, 4097, 32, 8, 128, causal, DType::kBF16});
    cs.push_back({1, 4097, 1000, 16, 1, 64, causal, DType::kF16});
    cs.push_back({2, 1000, 4097, 8, 8, 64, causal, DType::kBF16});
  }
  return cs;
}

class AttentionLarge : public pt::GpuTestWithParam<const char*> {};

TEST_P(AttentionLarge, MatchesGpuReference) {
  const std::string kernel = GetParam();
  SKIP_IF_UNAVAILABLE(kernel);
  std::uint64_t n = 1000;
  for (const Case& c : large_cases()) {
    Problem p(c, mix(process_seed() ^ ++n), /*keep_host=*/false);
    Problem::Result got;
    try {
      got = p.run(kernel);
    } catch (const parallax::Error& e) {
      if (not_implemented(e)) GTEST_SKIP() << "kernel '" << kernel << "': " << e.what();
      throw;
    }
    const auto ref = p.run("reference");
    std::vector<double> ref_lse(ref.lse.begin(), ref.lse.end());
    check(c, kernel, got, ref.out, ref_lse, true);
    if (HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, AttentionLarge, ::testing::Values("tiled", "mma", "wgmma"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
