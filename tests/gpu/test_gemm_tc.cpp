// GPU tests of the tensor-core GEMM (level 9 "wmma") and its cuBLAS peer against a float64 CPU reference
// computed from the very bf16 / fp16 values the GPU read (the inputs are downloaded and widened exactly).
//
// Each run draws fresh random inputs (PARALLAX_TEST_SEED=<seed> replays one; the seed is in every failure
// message). Per case:
//   * all four op(A), op(B) combinations, mixed shapes from {1, 8, 17, 127, 129, 1000}, padded leading
//     dimensions (padding of A and B holds NaN: reading it would poison the result),
//   * beta in {0, 1.5}: with beta == 0 the output window starts NaN-poisoned (0xFF bytes) and must never be
//     read; every element must come back finite (= written),
//   * output types f32, bf16, f16; the bytes outside the m x n window (row padding up to ldc, guard zones
//     before and after) must be bit-for-bit unchanged,
//   * bias + GELU / SiLU epilogues: D = act(alpha * op(A) op(B) + beta * C + bias).
//
// Tolerance (per element, see tolerance()): the products of two bf16/fp16 values are exact in fp32, so the
// error has three sources:
//   1. fp32 accumulation over k terms, bounded by a multiple of 2^-22 (1 + sqrt(k)) times the sum of the
//      magnitudes T = |alpha| sum_p |a_ip b_pj| + |beta c_ij| + |bias_j| (random rounding errors grow like
//      sqrt(k); the factor 4 over the unit roundoff leaves room for truncating tensor-core adders and
//      cuBLAS's split-K order); the activations' slope is <= 1.13, hence 1.2 T.
//   2. the activation evaluated in fp32 (tanhf / expf): a few fp32 ulps of the pre-activation, 2^-22 |x|.
//   3. the one rounding to the output type: half an ulp, 2^-9 |ref| for bf16 and 2^-12 |ref| for f16 (the
//      bound below takes 2x: 2^-8 and 2^-11), 2^-23 for f32. Below the smallest normal number the spacing is
//      fixed instead of relative: f16 subnormals are 2^-24 apart (results near 6e-6 appear with k = 1), so the
//      bound adds that spacing (2^-133 for bf16, 2^-149 for f32: negligible, kept for uniformity).
// For bf16 / f16 outputs term 3 dominates; for f32 outputs term 1 does.
//
// PARALLAX_TEST_QUICK=1 skips the *Large* test (4095-sized problems, checked against cuBLAS instead of the
// CPU); --gtest_filter=-*Large* does the same.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"
#include "parallax/core.hpp"
#include "parallax/gemm.hpp"
#include "parallax/random.hpp"

namespace {

using parallax::DeviceBuffer;
using parallax::DType;
using parallax::Epilogue;
using parallax::GemmArgs;
using parallax::Op;

bool quick_mode() {
  const char* env = std::getenv("PARALLAX_TEST_QUICK");
  return env != nullptr && *env != '\0' && std::string(env) != "0";
}

// What tma_compatible() in gemm_dispatch.cpp checks (16-byte aligned base, 16-byte multiple row stride).
bool tma_describable(const void* p, std::int64_t ld) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0 && (ld * 2) % 16 == 0;
}

bool device_is_sm90() {
  int device = 0, major = 0;
  PX_CUDA_CHECK(cudaGetDevice(&device));
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major == 9;
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
  return "seed=" + std::to_string(process_seed()) + " (replay: PARALLAX_TEST_SEED=" + std::to_string(process_seed()) + ")";
}
std::uint64_t mix(std::uint64_t x) {  // splitmix64 finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
std::uint64_t seed_for(std::uint64_t a, std::uint64_t b = 0, std::uint64_t c = 0) {
  return mix(process_seed() ^ mix(a ^ mix(b ^ mix(c))));
}

// ---- host-side decoding of 16-bit floats (exact widening) ----
float bf16_bits_to_float(std::uint16_t bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
float half_bits_to_float(std::uint16_t h) {
  const unsigned exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(mant), -24);                     // subnormal
  else if (exp == 31) v = mant ? std::nanf("") : INFINITY;                          // inf / NaN
  else v = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);  // normal
  return (h & 0x8000u) ? -v : v;
}
double decode(DType t, const unsigned char* p) {
  if (t == DType::kF32) {
    float f;
    std::memcpy(&f, p, sizeof f);
    return f;
  }
  std::uint16_t bits;
  std::memcpy(&bits, p, sizeof bits);
  return t == DType::kBF16 ? bf16_bits_to_float(bits) : half_bits_to_float(bits);
}

// A rows x cols row-major matrix of type t with leading dimension ld, in a byte buffer with guard zones
// before and after. Everything starts as 0xFF bytes (NaN in f32, f16 and bf16); the window gets values
// uniform in [-1, 1) when `fill`.
constexpr std::size_t kGuard = 256;
struct DevMatrix {
  DType type;
  int rows, cols;
  std::int64_t ld;
  DeviceBuffer<unsigned char> buf;
  int shift = 0;  // elements between the 256-byte aligned window start and element (0, 0): misaligned bases
  int elem() const { return parallax::dtype_size(type); }
  void* data() { return buf.data() + kGuard + static_cast<std::size_t>(shift) * elem(); }
  const void* data() const { return buf.data() + kGuard + static_cast<std::size_t>(shift) * elem(); }
  std::size_t offset(int r, int c) const {
    return kGuard + static_cast<std::size_t>(shift) * elem() + (static_cast<std::size_t>(r) * static_cast<std::size_t>(ld) + static_cast<std::size_t>(c)) * elem();
  }
};

// `shift` (< 16 elements) moves the base pointer off its 256-byte alignment (eats into the trailing guard).
DevMatrix make_matrix(DType t, int rows, int cols, std::int64_t ld, std::uint64_t seed, bool fill, int shift = 0) {
  const int elem = parallax::dtype_size(t);
  DevMatrix m{t, rows, cols, ld,
              DeviceBuffer<unsigned char>(2 * kGuard + static_cast<std::size_t>(rows) * static_cast<std::size_t>(ld) * elem),
              shift};
  m.buf.fill_bytes(0xFF);
  if (fill) {
    const std::size_t count = static_cast<std::size_t>(rows) * cols;
    DeviceBuffer<unsigned char> dense(count * elem);
    switch (t) {
      case DType::kF32: parallax::fill_uniform(reinterpret_cast<float*>(dense.data()), count, seed); break;
      case DType::kF16: parallax::fill_uniform(reinterpret_cast<__half*>(dense.data()), count, seed); break;
      case DType::kBF16: parallax::fill_uniform(reinterpret_cast<__nv_bfloat16*>(dense.data()), count, seed); break;
    }
    PX_CUDA_CHECK(cudaMemcpy2D(m.data(), static_cast<std::size_t>(ld) * elem, dense.data(),
                               static_cast<std::size_t>(cols) * elem, static_cast<std::size_t>(cols) * elem, rows,
                               cudaMemcpyDeviceToDevice));
  }
  PX_CUDA_CHECK(cudaDeviceSynchronize());
  return m;
}

// The stored matrix as doubles, dense (ld = cols).
std::vector<double> to_host_dense(const DevMatrix& m) {
  const std::vector<unsigned char> bytes = m.buf.download();
  std::vector<double> out(static_cast<std::size_t>(m.rows) * m.cols);
  for (int r = 0; r < m.rows; ++r)
    for (int c = 0; c < m.cols; ++c) out[static_cast<std::size_t>(r) * m.cols + c] = decode(m.type, bytes.data() + m.offset(r, c));
  return out;
}

// op(A) op(B) and sum |op(A)_ip op(B)_pj| in float64, from the exact inputs.
struct Product {
  std::vector<double> p, abs_sum;
};
Product reference_product(int m, int n, int k, Op op_a, const DevMatrix& a, Op op_b, const DevMatrix& b) {
  const std::vector<double> as = to_host_dense(a), bs = to_host_dense(b);
  // Dense op(A) (m x k) and op(B) (k x n).
  std::vector<double> oa(static_cast<std::size_t>(m) * k), ob(static_cast<std::size_t>(k) * n);
  for (int i = 0; i < m; ++i)
    for (int p = 0; p < k; ++p)
      oa[static_cast<std::size_t>(i) * k + p] = op_a == Op::kN ? as[static_cast<std::size_t>(i) * k + p] : as[static_cast<std::size_t>(p) * m + i];
  for (int p = 0; p < k; ++p)
    for (int j = 0; j < n; ++j)
      ob[static_cast<std::size_t>(p) * n + j] = op_b == Op::kN ? bs[static_cast<std::size_t>(p) * n + j] : bs[static_cast<std::size_t>(j) * k + p];
  Product r{std::vector<double>(static_cast<std::size_t>(m) * n, 0.0), std::vector<double>(static_cast<std::size_t>(m) * n, 0.0)};
  for (int i = 0; i < m; ++i)
    for (int p = 0; p < k; ++p) {
      const double x = oa[static_cast<std::size_t>(i) * k + p];
      double* row = r.p.data() + static_cast<std::size_t>(i) * n;
      double* arow = r.abs_sum.data() + static_cast<std::size_t>(i) * n;
      const double* brow = ob.data() + static_cast<std::size_t>(p) * n;
      for (int j = 0; j < n; ++j) {
        row[j] += x * brow[j];
        arow[j] += std::abs(x * brow[j]);
      }
    }
  return r;
}

double activate(double x, Epilogue e) {
  switch (e) {
    case Epilogue::kGelu: return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case Epilogue::kSilu: return x / (1.0 + std::exp(-x));
    default: return x;
  }
}

double output_unit(DType t) {
  switch (t) {
    case DType::kBF16: return std::ldexp(1.0, -8);
    case DType::kF16: return std::ldexp(1.0, -11);
    default: return std::ldexp(1.0, -23);
  }
}

// Distance between adjacent subnormal numbers of the output type (the absolute rounding floor).
double output_subnormal_spacing(DType t) {
  switch (t) {
    case DType::kBF16: return std::ldexp(1.0, -133);
    case DType::kF16: return std::ldexp(1.0, -24);
    default: return std::ldexp(1.0, -149);
  }
}

// See the header comment.
double tolerance(DType out, int k, double ref, double pre_act, double magnitude_sum) {
  const double acc = std::ldexp(1.0, -22) * (1.0 + std::sqrt(static_cast<double>(k)));
  return output_unit(out) * std::abs(ref) + output_subnormal_spacing(out) + std::ldexp(1.0, -22) * std::abs(pre_act) +
         1.2 * acc * magnitude_sum;
}

struct Case {
  int m, n, k;
  Op op_a = Op::kN, op_b = Op::kN;
  DType in = DType::kBF16, out = DType::kF32;
  float alpha = 1.f, beta = 0.f;
  bool bias = false;
  Epilogue epilogue = Epilogue::kNone;
  int pad = 0;  // added to every leading dimension
  int shift = 0;              // every base pointer (A, B, C) moved by this many elements
  bool ld_mult8 = false;      // round every leading dimension up to a multiple of 8 (after adding pad)
  std::int64_t ld_for(int cols) const {
    const std::int64_t ld = cols + pad;
    return ld_mult8 ? (ld + 7) / 8 * 8 : ld;
  }
  std::string label() const {
    return "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) + " op=" +
           std::string(parallax::op_name(op_a)) + std::string(parallax::op_name(op_b)) + " in=" +
           std::string(parallax::dtype_name(in)) + " out=" + std::string(parallax::dtype_name(out)) +
           " alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta) + " bias=" + (bias ? "yes" : "no") +
           " act=" + std::string(parallax::epilogue_name(epilogue)) + " pad=" + std::to_string(pad) +
           " shift=" + std::to_string(shift) + " ld_mult8=" + (ld_mult8 ? "yes" : "no");
  }
};

// Inputs of one (shape, ops, input type, pad) and their float64 product, shared by the cases that differ
// only in output type, alpha, beta, epilogue or kernel.
struct Inputs {
  DevMatrix a, b;
  Product ref;
};
Inputs make_inputs(const Case& c) {
  const int a_rows = c.op_a == Op::kN ? c.m : c.k, a_cols = c.op_a == Op::kN ? c.k : c.m;
  const int b_rows = c.op_b == Op::kN ? c.k : c.n, b_cols = c.op_b == Op::kN ? c.n : c.k;
  const std::uint64_t shape = (static_cast<std::uint64_t>(c.m) << 42) ^ (static_cast<std::uint64_t>(c.n) << 21) ^ c.k;
  const std::uint64_t variant = static_cast<std::uint64_t>(c.op_a) * 4 + static_cast<std::uint64_t>(c.op_b) * 2 +
                                static_cast<std::uint64_t>(c.in) * 16;
  DevMatrix a = make_matrix(c.in, a_rows, a_cols, c.ld_for(a_cols), seed_for(shape, variant, 'A'), true, c.shift);
  DevMatrix b = make_matrix(c.in, b_rows, b_cols, c.ld_for(b_cols), seed_for(shape, variant, 'B'), true, c.shift);
  Product ref = reference_product(c.m, c.n, c.k, c.op_a, a, c.op_b, b);
  return {std::move(a), std::move(b), std::move(ref)};
}

// Runs `kernel` on case `c` with inputs `in`, checks every output element and the untouched bytes.
void run_and_check(const std::string& kernel, const Case& c, const Inputs& in) {
  SCOPED_TRACE(kernel + " " + c.label() + " " + seed_note());
  const std::uint64_t cs = seed_for((static_cast<std::uint64_t>(c.m) << 42) ^ (static_cast<std::uint64_t>(c.n) << 21) ^ c.k,
                                    static_cast<std::uint64_t>(c.out), 'C');
  DevMatrix out = make_matrix(c.out, c.m, c.n, c.ld_for(c.n), cs, /*fill=*/c.beta != 0.f, c.shift);
  if (kernel.rfind("wgmma", 0) == 0 && c.ld_mult8 && c.shift == 0) {
    ASSERT_TRUE(tma_describable(in.a.data(), in.a.ld) && tma_describable(in.b.data(), in.b.ld))
        << "test bug: this case would run the level-10 fallback instead of the TMA kernel";
  }
  DeviceBuffer<float> bias(static_cast<std::size_t>(c.n));
  if (c.bias) parallax::fill_uniform(bias.data(), bias.size(), seed_for(c.n, 'b'), -1.f, 1.f);
  const std::vector<float> bias_host = c.bias ? bias.download() : std::vector<float>{};
  const std::vector<unsigned char> before = out.buf.download();

  GemmArgs p;
  p.m = c.m;
  p.n = c.n;
  p.k = c.k;
  p.op_a = c.op_a;
  p.op_b = c.op_b;
  p.a_type = p.b_type = c.in;
  p.c_type = c.out;
  p.a = in.a.data();
  p.lda = in.a.ld;
  p.b = in.b.data();
  p.ldb = in.b.ld;
  p.c = out.data();
  p.ldc = out.ld;
  p.alpha = c.alpha;
  p.beta = c.beta;
  p.bias = c.bias ? bias.data() : nullptr;
  p.epilogue = c.epilogue;
  parallax::Stream stream;
  ASSERT_NO_THROW(parallax::gemm(p, stream, kernel));
  stream.synchronize();
  const std::vector<unsigned char> after = out.buf.download();

  // Outside the window: bit for bit unchanged (guards and row padding).
  std::vector<bool> in_window(after.size(), false);
  for (int r = 0; r < c.m; ++r)
    for (std::size_t byte = out.offset(r, 0); byte < out.offset(r, c.n); ++byte) in_window[byte] = true;
  std::size_t clobbered = 0;
  for (std::size_t i = 0; i < after.size(); ++i)
    if (!in_window[i] && after[i] != before[i]) ++clobbered;
  EXPECT_EQ(clobbered, 0u) << "bytes outside the m x n window of C changed";

  // Inside: every element written (finite) and within tolerance of the float64 reference.
  std::size_t non_finite = 0, bad = 0;
  double worst = 0;
  std::string first_bad;
  for (int i = 0; i < c.m; ++i)
    for (int j = 0; j < c.n; ++j) {
      const std::size_t e = static_cast<std::size_t>(i) * c.n + j;
      const double got = decode(c.out, after.data() + out.offset(i, j));
      double pre = c.alpha * in.ref.p[e];
      double mag = std::abs(c.alpha) * in.ref.abs_sum[e];
      if (c.beta != 0.f) {
        const double old = decode(c.out, before.data() + out.offset(i, j));
        pre += c.beta * old;
        mag += std::abs(c.beta * old);
      }
      if (c.bias) {
        pre += bias_host[static_cast<std::size_t>(j)];
        mag += std::abs(bias_host[static_cast<std::size_t>(j)]);
      }
      const double ref = activate(pre, c.epilogue);
      if (!std::isfinite(got)) {
        if (non_finite++ == 0 && first_bad.empty())
          first_bad = "(" + std::to_string(i) + "," + std::to_string(j) + ") not written (non-finite)";
        continue;
      }
      const double tol = tolerance(c.out, c.k, ref, pre, mag);
      const double err = std::abs(got - ref);
      worst = std::max(worst, err / std::max(tol, 1e-300));
      if (err > tol && bad++ == 0 && first_bad.empty())
        first_bad = "(" + std::to_string(i) + "," + std::to_string(j) + ") got " + std::to_string(got) + " want " +
                    std::to_string(ref) + " tol " + std::to_string(tol);
    }
  EXPECT_EQ(non_finite, 0u) << first_bad;
  EXPECT_EQ(bad, 0u) << first_bad << " (worst err/tol " << worst << ")";
}

const std::vector<std::string> kKernels{"wmma", "mma", "cublas"};
// The sm_90a levels, run on TMA-describable operands (Case::ld_mult8) by the *Wgmma* tests below, including
// the experimental ones (level 14: 2-CTA clusters with B multicast, non-persistent and persistent).
const std::vector<std::string> kTmaKernels{"wgmma", "wgmma-ws", "wgmma-persistent", "wgmma-cluster",
                                           "wgmma-persistent-cluster"};
constexpr Op kOps[2] = {Op::kN, Op::kT};
constexpr DType kInputs[2] = {DType::kBF16, DType::kF16};
constexpr DType kOutputs[3] = {DType::kF32, DType::kBF16, DType::kF16};

struct Shape {
  int m, n, k, pad;
};
// Mixed sizes from {1, 8, 17, 127, 129, 1000}: every size in every role, edge tiles in m, n and k, a k
// shorter than one 16-wide fragment, and m*n*k kept small enough for the float64 reference.
const std::vector<Shape> kShapes{
    {1, 1, 1, 0},     {8, 17, 129, 3},   {17, 8, 1000, 0},  {127, 129, 17, 5}, {129, 127, 8, 8},
    {1000, 17, 127, 1}, {17, 1000, 129, 0}, {129, 1000, 1, 7}, {1, 129, 1000, 2}, {127, 1000, 127, 0},
};

class GemmTc : public parallax::testing::GpuTest {};

TEST_F(GemmTc, AllTransposesShapesBetasAndOutputTypes) {
  for (DType in_type : kInputs)
    for (const Shape& s : kShapes)
      for (Op op_a : kOps)
        for (Op op_b : kOps) {
          Case base{s.m, s.n, s.k, op_a, op_b, in_type};
          base.pad = s.pad;
          const Inputs in = make_inputs(base);
          for (DType out : kOutputs)
            for (float beta : {0.f, 1.5f}) {
              Case c = base;
              c.out = out;
              c.beta = beta;
              c.alpha = (s.m + s.n) % 2 == 0 ? 1.f : -0.75f;
              for (const auto& kernel : kKernels) run_and_check(kernel, c, in);
            }
        }
}

TEST_F(GemmTc, BiasAndActivations) {
  const std::vector<Shape> shapes{{129, 127, 129, 3}, {17, 1000, 8, 0}, {1000, 129, 127, 1}};
  for (DType in_type : kInputs)
    for (const Shape& s : shapes)
      for (Op op_a : kOps)
        for (Op op_b : kOps) {
          Case base{s.m, s.n, s.k, op_a, op_b, in_type};
          base.pad = s.pad;
          const Inputs in = make_inputs(base);
          struct Variant {
            bool bias;
            Epilogue act;
          };
          for (Variant v : {Variant{true, Epilogue::kNone}, Variant{true, Epilogue::kGelu},
                            Variant{true, Epilogue::kSilu}, Variant{false, Epilogue::kGelu}})
            for (DType out : kOutputs)
              for (float beta : {0.f, 1.5f}) {
                Case c = base;
                c.out = out;
                c.beta = beta;
                c.bias = v.bias;
                c.epilogue = v.act;
                for (const auto& kernel : kKernels) run_and_check(kernel, c, in);
              }
        }
}

// Level 10 (mma) picks, per operand, a 16-byte cp.async path (base 16-byte aligned, ld % 8 == 0) or an
// element-wise path (anything else), and a 128x128 or 64x64 block tile (64x64 when 128x128 tiles would
// leave SMs idle: fewer tiles than SMs). The shared matrix above mostly has odd leading dimensions; this
// test forces each path: ld rounded to a multiple of 8 with aligned bases (fast path, partial 16-byte chunks
// at the k / m / n edges), bases shifted by one element (slow path, and misaligned C for the paired
// epilogue stores), k values that are not multiples of the 32-wide k-tile (1, 17, 33, 72, 1000), and a
// 2048 x 2048 output (256 big tiles: the 128x128 configuration on any GPU with <= 256 SMs) besides the
// small shapes (64x64 configuration).
TEST_F(GemmTc, MmaAlignedAndUnalignedPathsBothTileConfigs) {
  struct MmaShape {
    int m, n, k;
    bool big;  // only bf16 / f32-out variants (the float64 reference is the cost)
  };
  const std::vector<MmaShape> shapes{{1, 1, 1, false},       {7, 17, 33, false},    {127, 129, 17, false},
                                     {129, 127, 1000, false}, {64, 64, 32, false},  {1000, 7, 72, false},
                                     {2048, 2048, 72, true}};
  struct Layout {
    int pad, shift;
    bool mult8;
  };
  // {0, 0, true}: fast path; {8, 0, true}: fast path with padded rows; {0, 1, false}: odd base and whatever
  // ld the shape gives; {1, 0, false}: aligned base, ld = cols + 1.
  const std::vector<Layout> layouts{{0, 0, true}, {8, 0, true}, {0, 1, false}, {1, 0, false}};
  for (const MmaShape& s : shapes)
    for (const Layout& l : layouts)
      for (DType in_type : kInputs) {
        if (s.big && in_type != DType::kBF16) continue;
        for (Op op_a : kOps)
          for (Op op_b : kOps) {
            Case base{s.m, s.n, s.k, op_a, op_b, in_type};
            base.pad = l.pad;
            base.shift = l.shift;
            base.ld_mult8 = l.mult8;
            const Inputs in = make_inputs(base);
            for (DType out : kOutputs) {
              if (s.big && out == DType::kF16) continue;
              for (float beta : {0.f, 1.5f}) {
                Case c = base;
                c.out = out;
                c.beta = beta;
                c.alpha = beta == 0.f ? 1.f : -0.75f;
                c.bias = beta != 0.f;
                c.epilogue = out == DType::kBF16 ? Epilogue::kGelu : Epilogue::kNone;
                run_and_check("mma", c, in);
              }
            }
          }
      }
}

TEST_F(GemmTc, AutoRunsTheTensorCoreLevel) {
  Case c{129, 127, 129, Op::kT, Op::kN, DType::kBF16, DType::kBF16};
  c.beta = 1.5f;
  const Inputs in = make_inputs(c);
  run_and_check("auto", c, in);
}

// 4095-sized problems (odd edge tiles everywhere), too big for the float64 reference: wmma and mma against cuBLAS,
// both with f32 output. The bound is twice the accumulation term of tolerance() for both.
TEST_F(GemmTc, LargeAgainstCublas) {
  if (quick_mode()) GTEST_SKIP() << "PARALLAX_TEST_QUICK set";
  // 4095 / 1005 leading dimensions: level 10 runs its element-wise (unaligned) path; 2048: its cp.async path.
  const std::vector<Shape> shapes{{4095, 1000, 4095, 0}, {1000, 4095, 129, 5}, {4095, 4095, 1000, 0},
                                  {2048, 2048, 4096, 0}};
  for (const Shape& s : shapes)
    for (Op op_a : kOps)
      for (Op op_b : kOps) {
        Case c{s.m, s.n, s.k, op_a, op_b, DType::kBF16, DType::kF32};
        c.pad = s.pad;
        SCOPED_TRACE(c.label() + " " + seed_note());
        const int a_rows = op_a == Op::kN ? c.m : c.k, a_cols = op_a == Op::kN ? c.k : c.m;
        const int b_rows = op_b == Op::kN ? c.k : c.n, b_cols = op_b == Op::kN ? c.n : c.k;
        DevMatrix a = make_matrix(c.in, a_rows, a_cols, a_cols + c.pad, seed_for(s.m, s.k, 'A'), true);
        DevMatrix b = make_matrix(c.in, b_rows, b_cols, b_cols + c.pad, seed_for(s.k, s.n, 'B'), true);
        DevMatrix d2 = make_matrix(DType::kF32, c.m, c.n, c.n + c.pad, 0, false);
        GemmArgs p;
        p.m = c.m;
        p.n = c.n;
        p.k = c.k;
        p.op_a = op_a;
        p.op_b = op_b;
        p.a_type = p.b_type = c.in;
        p.c_type = DType::kF32;
        p.a = a.data();
        p.lda = a.ld;
        p.b = b.data();
        p.ldb = b.ld;
        p.ldc = d2.ld;
        p.c = d2.data();
        parallax::gemm(p, nullptr, "cublas");
        PX_CUDA_CHECK(cudaDeviceSynchronize());
        const auto y = d2.buf.download();
        // On Hopper the TMA levels repack the unaligned operands of these (>= 2 GFLOP) products into aligned
        // copies (gemm_with_repacked_operands) instead of running level 10: that path is checked here.
        std::vector<const char*> kernels{"wmma", "mma", "auto"};
        if (parallax::device_info().cc_major == 9) kernels.insert(kernels.end(), {"wgmma", "wgmma-persistent"});
        for (const char* kernel : kernels) {
        SCOPED_TRACE(kernel);
        DevMatrix d1 = make_matrix(DType::kF32, c.m, c.n, c.n + c.pad, 0, false);
        p.c = d1.data();
        parallax::gemm(p, nullptr, kernel);
        PX_CUDA_CHECK(cudaDeviceSynchronize());
        const auto x = d1.buf.download();
        double diff2 = 0, ref2 = 0;
        std::size_t non_finite = 0;
        for (int i = 0; i < c.m; ++i)
          for (int j = 0; j < c.n; ++j) {
            const double u = decode(DType::kF32, x.data() + d1.offset(i, j));
            const double v = decode(DType::kF32, y.data() + d2.offset(i, j));
            if (!std::isfinite(u) || !std::isfinite(v)) {
              ++non_finite;
              continue;
            }
            diff2 += (u - v) * (u - v);
            ref2 += v * v;
          }
        EXPECT_EQ(non_finite, 0u);
        // Relative Frobenius difference: each side ~2^-24 sqrt(k) in the worst random case; 2^-20 sqrt(k)
        // leaves a 16x margin.
        const double rel = std::sqrt(diff2 / std::max(ref2, 1e-300));
        EXPECT_LE(rel, std::ldexp(1.0, -20) * std::sqrt(static_cast<double>(c.k))) << kernel << " vs cublas";
        }
      }
}

// ---- sm_90a levels 11-13 (wgmma + TMA) ----
// The same matrix as above on operands TMA can describe (leading dimensions rounded up to multiples of 8,
// 16-byte aligned bases), so the TMA kernels themselves run; the unaligned cases go to the level-10 fallback,
// which the tests above cover through "auto" / "mma". Extra shapes: n = 8 (a sliver of one 64-wide TMA box),
// tiles straddling the 128 / 256 tile edges, k = 1 and k spanning many more k-tiles than pipeline stages.
const std::vector<Shape> kWgmmaShapes{
    {1, 1, 1, 0},      {8, 17, 129, 3},    {17, 8, 1000, 0},  {127, 129, 17, 5},   {129, 127, 8, 8},
    {1000, 17, 127, 1}, {17, 1000, 129, 0}, {129, 1000, 1, 7}, {1, 129, 1000, 2},  {127, 1000, 127, 0},
    {1, 8, 64, 0},     {200, 300, 65, 0},  {257, 513, 640, 0}, {128, 256, 64, 0}, {300, 8, 1, 9},
};

class GemmTcWgmma : public parallax::testing::GpuTest {
 protected:
  void SetUp() override {
    parallax::testing::GpuTest::SetUp();
    if (IsSkipped()) return;
    if (!device_is_sm90()) GTEST_SKIP() << "the wgmma levels need an sm_90 GPU";
  }
};

TEST_F(GemmTcWgmma, AllTransposesShapesBetasAndOutputTypes) {
  for (DType in_type : kInputs)
    for (const Shape& s : kWgmmaShapes)
      for (Op op_a : kOps)
        for (Op op_b : kOps) {
          Case base{s.m, s.n, s.k, op_a, op_b, in_type};
          base.pad = s.pad;
          base.ld_mult8 = true;
          const Inputs in = make_inputs(base);
          for (DType out : kOutputs)
            for (float beta : {0.f, 1.5f}) {
              Case c = base;
              c.out = out;
              c.beta = beta;
              c.alpha = (s.m + s.n) % 2 == 0 ? 1.f : -0.75f;
              for (const auto& kernel : kTmaKernels) run_and_check(kernel, c, in);
            }
        }
}

TEST_F(GemmTcWgmma, BiasAndActivations) {
  const std::vector<Shape> shapes{{129, 127, 129, 3}, {17, 1000, 8, 0}, {1000, 129, 127, 1}, {200, 300, 65, 0}};
  for (DType in_type : kInputs)
    for (const Shape& s : shapes)
      for (Op op_a : kOps)
        for (Op op_b : kOps) {
          Case base{s.m, s.n, s.k, op_a, op_b, in_type};
          base.pad = s.pad;
          base.ld_mult8 = true;
          const Inputs in = make_inputs(base);
          struct Variant {
            bool bias;
            Epilogue act;
          };
          for (Variant v : {Variant{true, Epilogue::kNone}, Variant{true, Epilogue::kGelu},
                            Variant{true, Epilogue::kSilu}, Variant{false, Epilogue::kGelu}})
            for (DType out : kOutputs)
              for (float beta : {0.f, 1.5f}) {
                Case c = base;
                c.out = out;
                c.beta = beta;
                c.bias = v.bias;
                c.epilogue = v.act;
                for (const auto& kernel : kTmaKernels) run_and_check(kernel, c, in);
              }
        }
}

// The persistent level with more tiles than SMs (144 tiles of 128 x 256 > 132 SMs: blocks walk several tiles
// and the pipeline phases carry over between tiles), checked element by element against float64.
TEST_F(GemmTcWgmma, PersistentMoreTilesThanSms) {
  for (Op op_a : kOps)
    for (Op op_b : kOps) {
      Case c{2047, 2300, 72, op_a, op_b, DType::kBF16, DType::kBF16};
      c.ld_mult8 = true;
      c.beta = 1.5f;
      c.bias = true;
      const Inputs in = make_inputs(c);
      for (const auto& kernel : kTmaKernels) run_and_check(kernel, c, in);
    }
}

// The TMA-store epilogue (wgmma_common.cuh, store_tile_tma: beta = 0, no bias, no activation, C 16-byte
// aligned with ldc and n * sizeof(out) multiples of 16 bytes): partial tiles in m and n (TMA must skip rows
// >= m and columns >= n, and nothing beyond column n may change: padded ldc), one 8-column sliver, k = 1, and
// 2047 x 2304 (16 x 9 = 144 tiles of 128 x 256 > 132 SMs), so persistent blocks reuse their two store buffers
// across tiles while earlier stores may still be draining. Both output widths: 64 16-bit / 32 fp32 columns per
// store box.
TEST_F(GemmTcWgmma, TmaStoreEpilogueEdgesAndWalks) {
  const std::vector<Shape> shapes{{2047, 2304, 72, 8}, {1, 8, 64, 0}, {129, 264, 129, 3}, {1000, 136, 127, 16},
                                  {300, 520, 1, 0},   {257, 512, 640, 1}};
  for (const Shape& s : shapes)
    for (Op op_a : kOps)
      for (Op op_b : kOps) {
        Case base{s.m, s.n, s.k, op_a, op_b, DType::kBF16};
        base.pad = s.pad;
        base.ld_mult8 = true;
        const Inputs in = make_inputs(base);
        for (DType out : kOutputs) {
          Case c = base;
          c.out = out;
          c.alpha = s.m % 2 == 1 ? -0.75f : 1.f;
          for (const auto& kernel : kTmaKernels) run_and_check(kernel, c, in);
        }
      }
}

// Level 14 (clusters of two CTAs stacked along M, each multicasting half of the B tile to both):
//  * an odd number of 128-row tile rows, so the last pair's second CTA lies wholly below m: it must still
//    load and multicast its half of B (its peer waits for those bytes) and store nothing;
//  * more tile pairs than clusters that fit at once (3900 x 2300: 16 x 9 = 144 pairs > ~66 resident pairs on
//    an H100), so the persistent variant walks several pairs per cluster and the stage phases (and the
//    cross-CTA empty-barrier counts) carry over between pairs;
//  * k spanning many more k-tiles than stages (1000 / 64 -> 16), and k = 1;
//  * N edges that cut a multicast share in half (n = 2300 = 8 x 256 + 252: the last tile's second 128-column
//    share is partly outside; n = 100: the second share is wholly outside, zero-filled).
TEST_F(GemmTcWgmma, ClusterPairsOddTileRowsAndWalks) {
  struct ClusterShape {
    int m, n, k;
  };
  const std::vector<ClusterShape> shapes{{1100, 2300, 72}, {3900, 2300, 72}, {385, 100, 1000}, {129, 257, 1}};
  for (const ClusterShape& s : shapes)
    for (Op op_a : kOps)
      for (Op op_b : kOps) {
        Case c{s.m, s.n, s.k, op_a, op_b, DType::kBF16, DType::kF32};
        c.ld_mult8 = true;
        c.beta = 1.5f;
        c.bias = s.m % 2 == 1;
        c.epilogue = s.m == 385 ? Epilogue::kSilu : Epilogue::kNone;
        const Inputs in = make_inputs(c);
        for (const char* kernel : {"wgmma-cluster", "wgmma-persistent-cluster"}) run_and_check(kernel, c, in);
      }
}

// 4095-sized problems with leading dimensions padded to 4096 (TMA-describable, edge tiles in m, n and k),
// against cuBLAS with f32 output; the same bound as LargeAgainstCublas.
TEST_F(GemmTcWgmma, LargeAgainstCublas) {
  if (quick_mode()) GTEST_SKIP() << "PARALLAX_TEST_QUICK set";
  const std::vector<Shape> shapes{{4095, 1000, 4095, 1}, {1000, 4095, 129, 5}, {4095, 4095, 1000, 1}};
  for (const Shape& s : shapes)
    for (Op op_a : kOps)
      for (Op op_b : kOps) {
        Case c{s.m, s.n, s.k, op_a, op_b, DType::kBF16, DType::kF32};
        c.pad = s.pad;
        c.ld_mult8 = true;
        const int a_rows = op_a == Op::kN ? c.m : c.k, a_cols = op_a == Op::kN ? c.k : c.m;
        const int b_rows = op_b == Op::kN ? c.k : c.n, b_cols = op_b == Op::kN ? c.n : c.k;
        DevMatrix a = make_matrix(c.in, a_rows, a_cols, c.ld_for(a_cols), seed_for(s.m, s.k, 'A'), true);
        DevMatrix b = make_matrix(c.in, b_rows, b_cols, c.ld_for(b_cols), seed_for(s.k, s.n, 'B'), true);
        DevMatrix ref = make_matrix(DType::kF32, c.m, c.n, c.n + c.pad, 0, false);
        GemmArgs p;
        p.m = c.m;
        p.n = c.n;
        p.k = c.k;
        p.op_a = op_a;
        p.op_b = op_b;
        p.a_type = p.b_type = c.in;
        p.c_type = DType::kF32;
        p.a = a.data();
        p.lda = a.ld;
        p.b = b.data();
        p.ldb = b.ld;
        p.ldc = ref.ld;
        p.c = ref.data();
        parallax::gemm(p, nullptr, "cublas");
        PX_CUDA_CHECK(cudaDeviceSynchronize());
        const auto y = ref.buf.download();
        for (const auto& kernel : kTmaKernels) {
          SCOPED_TRACE(kernel + " " + c.label() + " " + seed_note());
          ASSERT_TRUE(tma_describable(a.data(), a.ld) && tma_describable(b.data(), b.ld));
          DevMatrix d = make_matrix(DType::kF32, c.m, c.n, c.n + c.pad, 0, false);  // NaN-poisoned
          p.c = d.data();
          ASSERT_NO_THROW(parallax::gemm(p, nullptr, kernel));
          PX_CUDA_CHECK(cudaDeviceSynchronize());
          const auto x = d.buf.download();
          double diff2 = 0, ref2 = 0;
          std::size_t non_finite = 0;
          std::string first_bad;
          for (int i = 0; i < c.m; ++i)
            for (int j = 0; j < c.n; ++j) {
              const double u = decode(DType::kF32, x.data() + d.offset(i, j));
              const double v = decode(DType::kF32, y.data() + ref.offset(i, j));
              if (!std::isfinite(u) || !std::isfinite(v)) {
                if (non_finite++ == 0) first_bad = "(" + std::to_string(i) + "," + std::to_string(j) + ") non-finite";
                continue;
              }
              diff2 += (u - v) * (u - v);
              ref2 += v * v;
            }
          EXPECT_EQ(non_finite, 0u) << first_bad;
          const double rel = std::sqrt(diff2 / std::max(ref2, 1e-300));
          EXPECT_LE(rel, std::ldexp(1.0, -20) * std::sqrt(static_cast<double>(c.k))) << kernel << " vs cublas";
        }
      }
}

}  // namespace
