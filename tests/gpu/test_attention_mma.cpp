// Level-3/4-specific GPU tests of the FA2-style ("mma") and FA3-style ("wgmma", sm_90 only) kernels, against the float64 CPU reference in
// tests/common/attention_reference.hpp computed from the exact 16-bit inputs the GPU read.
//
// The cases aim at the kernel's own edges (tile sizes: 128 query rows per CTA, 64 keys per tile for D 128 and
// 128 for D 64): Sk smaller than a key tile, Sq / Sk one off a tile boundary, causal with Sq != Sk (rows with no
// visible key: out 0, LSE -inf), GQA / MQA (Hkv 1), padded strides (the padding holds NaN: a read of it
// poisons the result), batch > 1, a custom softmax scale. Every run draws fresh inputs; the seed is in every
// failure message and PARALLAX_TEST_SEED=<seed> replays it.
//
// Tolerance per element of out (|q|, |k| <= 2, |v| <= 1): the kernel rounds P to the input type before P V,
// a relative error u_in = 2^-9 (bf16) / 2^-12 (f16) per probability, so |dO| <= u_in * sum_j p_j |v_j| <= u_in;
// the output is then rounded once more (u_out |ref|, same unit). Scores, softmax and accumulation are fp32
// (~1e-6 relative). Bound used: 2 u_in + 2 u_in |ref| + 1e-5. LSE is fp32 end to end: 1e-4 (1 + |ref|).
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
using parallax::AttentionStrides;
using parallax::DeviceBuffer;
using parallax::DType;
using parallax::testing::AttentionShape;
using parallax::testing::Strides4;

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
// Exact widening of the 16-bit patterns (poison 0xFFFF decodes to NaN).
double from_bits(DType t, std::uint16_t bits) {
  if (t == DType::kBF16) {
    const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
  const unsigned exp = (bits >> 10) & 0x1Fu, mant = bits & 0x3FFu;
  double v;
  if (exp == 0) v = std::ldexp(static_cast<double>(mant), -24);  // subnormal
  else if (exp == 31) v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else v = std::ldexp(static_cast<double>(mant | 0x400u), static_cast<int>(exp) - 25);
  return (bits & 0x8000u) ? -v : v;
}

// A [B, S, H, D] tensor with strides (multiples of 8 elements, as level 3 requires), held as 16-bit patterns
// on the host and on the device. Elements outside the [B, S, H, D] window are kPoison.
struct Tensor4 {
  DType type;
  int B, S, H, D;
  Strides4 st;
  std::vector<std::uint16_t> host;
  DeviceBuffer<std::uint16_t> dev;

  Tensor4(DType t, int b, int s, int h, int d, int pad_head, int pad_seq)
      : type(t), B(b), S(s), H(h), D(d) {
    st.head = d + pad_head;
    st.seq = static_cast<std::int64_t>(h) * st.head + pad_seq;
    st.batch = static_cast<std::int64_t>(s) * st.seq;
    host.assign(static_cast<std::size_t>(st.batch) * b, kPoison);
    dev = DeviceBuffer<std::uint16_t>(host.size());
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
  std::vector<double> widened() const {  // the whole buffer as doubles (poison becomes NaN, never read)
    std::vector<double> out(host.size());
    for (std::size_t i = 0; i < host.size(); ++i) out[i] = from_bits(type, host[i]);
    return out;
  }
};

struct Case {
  int batch, seqlen_q, seqlen_k, heads, heads_kv;
  bool causal;
  int pad_head = 0, pad_seq = 0;  // extra elements (multiples of 8) in the strides
  float scale = 0;                // 0: default 1 / sqrt(D)
  bool kv_batch_broadcast = false;  // k and v hold one batch entry, read by all (batch stride 0)
};

std::string describe(const Case& c, DType t, int d) {
  std::ostringstream os;
  os << (t == DType::kBF16 ? "bf16" : "f16") << " B=" << c.batch << " Sq=" << c.seqlen_q << " Sk=" << c.seqlen_k
     << " H=" << c.heads << " Hkv=" << c.heads_kv << " D=" << d << (c.causal ? " causal" : " non-causal")
     << " pad_head=" << c.pad_head << " pad_seq=" << c.pad_seq;
  if (c.scale > 0) os << " scale=" << c.scale;
  os << " " << seed_note();
  return os.str();
}

void run_case(const Case& c, DType type, int head_dim, int case_index, const char* kernel) {
  const std::string what = std::string(kernel) + " " + describe(c, type, head_dim);
  SCOPED_TRACE(what);
  std::mt19937_64 rng(process_seed() ^ (0x9E3779B97F4A7C15ull * (case_index + 1)) ^
                      (static_cast<std::uint64_t>(head_dim) << 40) ^ (type == DType::kBF16 ? 1ull : 2ull));

  Tensor4 q(type, c.batch, c.seqlen_q, c.heads, head_dim, c.pad_head, c.pad_seq);
  const int kv_batch = c.kv_batch_broadcast ? 1 : c.batch;
  Tensor4 k(type, kv_batch, c.seqlen_k, c.heads_kv, head_dim, c.pad_head, c.pad_seq);
  Tensor4 v(type, kv_batch, c.seqlen_k, c.heads_kv, head_dim, c.pad_head, c.pad_seq);
  if (c.kv_batch_broadcast) k.st.batch = v.st.batch = 0;
  Tensor4 out(type, c.batch, c.seqlen_q, c.heads, head_dim, c.pad_head, c.pad_seq);
  q.fill_random(rng, 2.0f);
  k.fill_random(rng, 2.0f);
  v.fill_random(rng, 1.0f);
  out.dev.upload(out.host);  // all poison
  const std::size_t lse_count = static_cast<std::size_t>(c.batch) * c.heads * c.seqlen_q;
  DeviceBuffer<float> lse(lse_count);
  lse.fill_bytes(0xFF);

  AttentionArgs a;
  a.batch = c.batch;
  a.seqlen_q = c.seqlen_q;
  a.seqlen_k = c.seqlen_k;
  a.heads = c.heads;
  a.heads_kv = c.heads_kv;
  a.head_dim = head_dim;
  a.dtype = type;
  a.q = q.dev.data();
  a.q_strides = q.strides();
  a.k = k.dev.data();
  a.k_strides = k.strides();
  a.v = v.dev.data();
  a.v_strides = v.strides();
  a.out = out.dev.data();
  a.out_strides = out.strides();
  a.lse = lse.data();
  if (c.scale > 0) a.softmax_scale = c.scale;
  a.causal = c.causal;
  parallax::attention_forward(a, nullptr, kernel);
  PX_CUDA_CHECK(cudaDeviceSynchronize());

  AttentionShape shape{c.batch, c.seqlen_q, c.seqlen_k, c.heads, c.heads_kv, head_dim, c.causal, c.scale};
  const auto ref = parallax::testing::attention_reference(shape, q.widened(), q.st, k.widened(), k.st, v.widened(), v.st);

  const std::vector<std::uint16_t> got_bits = out.dev.download();
  const std::vector<float> got_lse = lse.download();
  const double u_in = type == DType::kBF16 ? std::ldexp(1.0, -9) : std::ldexp(1.0, -12);

  // Every element of the output window written and within tolerance; padding untouched.
  std::vector<bool> in_window(got_bits.size(), false);
  double diff2 = 0, ref2 = 0;
  int reported = 0;
  for (int b = 0; b < c.batch; ++b)
    for (int i = 0; i < c.seqlen_q; ++i)
      for (int h = 0; h < c.heads; ++h)
        for (int d = 0; d < head_dim; ++d) {
          const std::size_t idx = out.at(b, i, h, d);
          in_window[idx] = true;
          const double r = ref.out[((static_cast<std::size_t>(b) * c.seqlen_q + i) * c.heads + h) * head_dim + d];
          const double o = from_bits(type, got_bits[idx]);
          const double tol = 2 * u_in + 2 * u_in * std::abs(r) + 1e-5;
          const bool ok = std::isfinite(o) && std::abs(o - r) <= tol;
          if (std::isfinite(o)) {
            diff2 += (o - r) * (o - r);
            ref2 += r * r;
          }
          if (!ok && reported++ < 5)
            ADD_FAILURE() << "out[b=" << b << ", i=" << i << ", h=" << h << ", d=" << d << "] = " << o
                          << " (bits 0x" << std::hex << got_bits[idx] << std::dec << "), expected " << r
                          << " +- " << tol << (std::isfinite(o) ? "" : " (never written or NaN)");
        }
  EXPECT_EQ(reported, 0) << reported << " bad output elements";
  const double rel = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  EXPECT_LE(rel, type == DType::kBF16 ? 1e-2 : 2e-3) << "relative L2 error of out";
  std::size_t padding_written = 0, first_padding = 0;
  for (std::size_t i = 0; i < got_bits.size(); ++i)
    if (!in_window[i] && got_bits[i] != kPoison && padding_written++ == 0) first_padding = i;
  EXPECT_EQ(padding_written, 0u) << "elements outside the output window were written; first at element "
                                 << first_padding;

  int lse_bad = 0;
  for (std::size_t i = 0; i < lse_count; ++i) {
    const double r = ref.lse[i];
    const double g = got_lse[i];
    const bool ok = std::isinf(r) ? (std::isinf(g) && g < 0) : (std::isfinite(g) && std::abs(g - r) <= 1e-4 * (1 + std::abs(r)));
    if (!ok && lse_bad++ < 5) {
      const std::size_t row = i % c.seqlen_q, bh = i / c.seqlen_q;
      ADD_FAILURE() << "lse[b=" << bh / c.heads << ", h=" << bh % c.heads << ", i=" << row << "] = " << g
                    << ", expected " << r;
    }
  }
  EXPECT_EQ(lse_bad, 0) << lse_bad << " bad LSE values";
}

struct Config {
  DType type;
  int head_dim;
  const char* kernel;  // "mma" (level 3) or "wgmma" (level 4, sm_90 only)
};
std::string config_name(const ::testing::TestParamInfo<Config>& info) {
  return std::string(info.param.type == DType::kBF16 ? "bf16" : "f16") + "_d" + std::to_string(info.param.head_dim);
}

class AttentionMmaTest : public parallax::testing::GpuTestWithParam<Config> {
 protected:
  void SetUp() override {
    parallax::testing::GpuTestWithParam<Config>::SetUp();
    if (IsSkipped()) return;
    const auto& info = parallax::device_info();
    if (std::string(GetParam().kernel) == "wgmma" && !(info.cc_major == 9 && info.cc_minor == 0))
      GTEST_SKIP() << "kernel 'wgmma' needs an sm_90 GPU";
  }
};

void run_all(const std::vector<Case>& cases, const Config& cfg) {
  for (std::size_t i = 0; i < cases.size(); ++i)
    run_case(cases[i], cfg.type, cfg.head_dim, static_cast<int>(i), cfg.kernel);
}

// Shapes around the tile sizes (128 query rows; 64 / 128 keys) and the smallest ones.
TEST_P(AttentionMmaTest, TileEdges) {
  run_all({{1, 1, 1, 1, 1, false},
           {1, 7, 5, 2, 2, false},     // Sk smaller than a key tile, Sq smaller than a warp's 16 rows
           {1, 17, 63, 1, 1, false},
           {1, 127, 65, 1, 1, false},  // one off the tile boundaries
           {1, 128, 64, 1, 1, false},  // exactly one tile each
           {1, 129, 129, 1, 1, false},
           {2, 256, 192, 2, 2, false}, // several key tiles, batch > 1
           {1, 1000, 1000, 1, 1, false}},
          GetParam());
}

// Causal aligned bottom-right with Sq != Sk, including rows that see no key at all (Sq > Sk).
TEST_P(AttentionMmaTest, CausalShapes) {
  run_all({{1, 1, 1, 1, 1, true},
           {1, 7, 5, 1, 1, true},      // Sq > Sk: rows 0, 1 see nothing
           {1, 129, 17, 2, 2, true},   // most rows fully masked; whole CTAs with no visible key
           {1, 17, 1000, 1, 1, true},  // Sk >> Sq: diagonal deep in the key range
           {1, 127, 129, 1, 1, true},
           {1, 256, 256, 1, 1, true},  // diagonal tiles aligned with the blocks
           {2, 1000, 1000, 2, 1, true}},
          GetParam());
}

// GQA / MQA, padded strides (NaN in the padding), custom scale.
TEST_P(AttentionMmaTest, HeadsStridesScale) {
  run_all({{1, 33, 77, 4, 1, false},            // MQA
           {2, 65, 130, 6, 2, true},            // GQA, group 3
           {1, 100, 100, 3, 3, false, 8, 16},   // head and seq padding
           {2, 31, 200, 4, 2, true, 16, 8},     // GQA + padding + causal
           {1, 64, 300, 2, 2, false, 0, 0, 0.5f}},
          GetParam());
}

// Level 4's own edges: 128 keys per tile (a 2- or 3-stage ring that wraps), 64 query rows per consumer
// warpgroup (with a causal shift, one warpgroup can see nothing of a tile the other needs), TMA zero-fill.
TEST_P(AttentionMmaTest, KeyTileRingAndWarpgroupEdges) {
  run_all({{1, 64, 128, 1, 1, false},     // one consumer warpgroup's rows, exactly one key tile
           {1, 65, 129, 1, 1, false},     // second warpgroup has one row; second key tile has one key
           {1, 128, 192, 2, 2, true},     // causal shift 64: warpgroup 0 sees nothing of the second tile
           {1, 192, 128, 2, 2, true},     // shift -64: the first 64 rows see nothing (a whole warpgroup)
           {1, 300, 1100, 2, 1, true},    // 9 key tiles: the ring wraps several times, causal
           {3, 257, 1031, 2, 2, false},   // ragged everything, batch 3
           {1, 2, 4097, 1, 1, false}},    // decode-like: 33 key tiles for 2 rows
          GetParam());
}

// k / v broadcast over the batch (batch stride 0): TMA cannot describe it, so an explicit "wgmma" request is an
// InvalidArgument and "auto" must fall back to level 3 and still be right; level 3 itself handles it.
TEST_P(AttentionMmaTest, KvBroadcastAcrossBatch) {
  const Config cfg = GetParam();
  Case c{3, 100, 200, 4, 2, true};
  c.kv_batch_broadcast = true;
  if (std::string(cfg.kernel) == "wgmma") {
    Tensor4 q(cfg.type, 3, 100, 4, cfg.head_dim, 0, 0), kv(cfg.type, 1, 200, 2, cfg.head_dim, 0, 0),
        out(cfg.type, 3, 100, 4, cfg.head_dim, 0, 0);
    AttentionArgs a;
    a.batch = 3, a.seqlen_q = 100, a.seqlen_k = 200, a.heads = 4, a.heads_kv = 2, a.head_dim = cfg.head_dim;
    a.dtype = cfg.type;
    a.q = q.dev.data(), a.k = kv.dev.data(), a.v = kv.dev.data(), a.out = out.dev.data();
    a.q_strides = a.out_strides = q.strides();
    a.k_strides = a.v_strides = {0, kv.st.seq, kv.st.head};
    try {
      parallax::attention_forward(a, nullptr, "wgmma");
      ADD_FAILURE() << "explicit 'wgmma' accepted a batch stride of 0";
    } catch (const parallax::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("TMA"), std::string::npos) << e.what();
    }
    run_case(c, cfg.type, cfg.head_dim, 0, "auto");
  } else {
    run_case(c, cfg.type, cfg.head_dim, 0, cfg.kernel);
  }
}

INSTANTIATE_TEST_SUITE_P(Level3, AttentionMmaTest,
                         ::testing::Values(Config{DType::kBF16, 64, "mma"}, Config{DType::kBF16, 128, "mma"},
                                           Config{DType::kF16, 64, "mma"}, Config{DType::kF16, 128, "mma"}),
                         config_name);
INSTANTIATE_TEST_SUITE_P(Level4, AttentionMmaTest,
                         ::testing::Values(Config{DType::kBF16, 64, "wgmma"}, Config{DType::kBF16, 128, "wgmma"},
                                           Config{DType::kF16, 64, "wgmma"}, Config{DType::kF16, 128, "wgmma"}),
                         config_name);

}  // namespace
