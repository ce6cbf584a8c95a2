// GPU tests of the FP32 ladder: every level, many shapes, against a float64 CPU reference (or cuBLAS for the
// largest shapes).
//
// Each run draws fresh random inputs (the seed is printed with any failure; PARALLAX_TEST_SEED=<seed>
// replays it) and checks, per case:
//   * every element of C was written (the output starts poisoned with NaN bytes, 0xFF),
//   * nothing outside the m x n window of C changed (the padding columns n..ldc-1 between rows, and guard
//     zones before and after the matrix, compared bit for bit),
//   * padding of A and B is never used (it holds NaN, which would poison the result),
//   * beta == 0 never reads C (C is NaN then),
//   * the result is within the FP32 error bound of the reference (see error_factor()).
//
// PARALLAX_TEST_QUICK=1 (used under compute-sanitizer, which slows kernels 10-50x) skips the *Large* tests;
// --gtest_filter=-*Large* does the same.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "common/gpu_test.hpp"
#include "parallax/core.hpp"
#include "parallax/random.hpp"
#include "parallax/reference.hpp"
#include "parallax/sgemm.hpp"

namespace {

using parallax::DeviceBuffer;
using parallax::SgemmArgs;
using parallax::SgemmLevel;

bool quick_mode() {
  const char* env = std::getenv("PARALLAX_TEST_QUICK");
  return env != nullptr && *env != '\0' && std::string(env) != "0";
}

// One seed per process (fresh every run unless PARALLAX_TEST_SEED replays one); each matrix derives its own.
std::uint64_t process_seed() {
  static const std::uint64_t seed = [] {
    if (const char* env = std::getenv("PARALLAX_TEST_SEED")) return static_cast<std::uint64_t>(std::strtoull(env, nullptr, 0));
    return parallax::fresh_seed();
  }();
  return seed;
}

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
// The values of a matrix depend only on (process seed, m, n, k, which operand): cases that differ only in
// leading dimensions, pointer offsets or level share inputs, and so share the (cached) CPU reference.
std::uint64_t matrix_seed(int m, int n, int k, char which) {
  return mix(process_seed() ^ mix((static_cast<std::uint64_t>(m) << 42) ^ (static_cast<std::uint64_t>(n) << 21) ^
                                  static_cast<std::uint64_t>(k) ^ (static_cast<std::uint64_t>(which) << 56)));
}

enum class Reference { kCpuF64, kCublas };

struct Case {
  int m, n, k;
  float alpha = 1.f;
  float beta = 0.f;
  int lda_pad = 0, ldb_pad = 0, ldc_pad = 0;  // leading dimension = row length + pad
  int a_offset = 0, b_offset = 0, c_offset = 0;  // in floats, from a 256-byte aligned allocation
  Reference reference = Reference::kCpuF64;

  int lda() const { return k + lda_pad; }
  int ldb() const { return n + ldb_pad; }
  int ldc() const { return n + ldc_pad; }
  std::string label() const {
    std::string s = "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                    " alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta) +
                    " lda=" + std::to_string(lda()) + " ldb=" + std::to_string(ldb()) + " ldc=" + std::to_string(ldc());
    if (a_offset || b_offset || c_offset)
      s += " offsets(a,b,c)=" + std::to_string(a_offset) + "," + std::to_string(b_offset) + "," +
           std::to_string(c_offset);
    s += reference == Reference::kCublas ? " ref=cuBLAS" : " ref=CPU-f64";
    return s;
  }
};

Case shape(int m, int n, int k) { return Case{m, n, k}; }

// A row-major matrix in its own allocation: [offset floats][rows x ld][guard floats]. Everything starts as
// 0xFF bytes (NaN); the rows x cols window then gets random values (unless left poisoned, for C with
// beta == 0). `dense` is the host copy of the window (leading dimension cols).
constexpr int kGuard = 67;
struct TestMatrix {
  DeviceBuffer<float> storage;
  float* data = nullptr;
  std::vector<float> dense;
};
TestMatrix make_matrix(int rows, int cols, int ld, int offset, std::uint64_t seed, bool fill) {
  TestMatrix mat;
  mat.storage = DeviceBuffer<float>(static_cast<std::size_t>(offset) + static_cast<std::size_t>(rows) * ld + kGuard);
  mat.storage.fill_bytes(0xFF);
  mat.data = mat.storage.data() + offset;
  if (fill) {
    DeviceBuffer<float> window(static_cast<std::size_t>(rows) * cols);
    parallax::fill_uniform(window.data(), window.size(), seed, -1.f, 1.f);
    PX_CUDA_CHECK(cudaMemcpy2D(mat.data, static_cast<std::size_t>(ld) * sizeof(float), window.data(),
                               static_cast<std::size_t>(cols) * sizeof(float), static_cast<std::size_t>(cols) * sizeof(float),
                               static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice));
    mat.dense = window.download();
  }
  return mat;
}

// FP32 error model behind the tolerances (u = 2^-24, the unit roundoff).
//
// Every level accumulates the k products of an element in FP32, one FMA (one rounding) per step: step t
// perturbs the running sum s_t by delta_t with |delta_t| <= u * |s_t| <= u * sum_p |a_ip * b_pj|. Scaled by
// alpha and with the epilogue's own roundings (alpha*acc, + beta*c), every perturbation of out_ij is bounded
// by u * mag_ij, where mag_ij = |alpha| * sum_p |a_ip| |b_pj| + |beta| |c_ij| (the same GEMM on absolute
// values, computed by the float64 reference too). Worst case the k + 2 perturbations add up (Higham:
// (k + 2) * u * mag_ij, 6e-5 * mag at k = 1000). They do not in practice: for random inputs the roundings are
// independent and of either sign, so (Hoeffding) their sum exceeds 8 * sqrt(k) * u * mag_ij with probability
// below 2 * exp(-32) ~ 3e-14 per element. The per-element bound used against the float64 reference is
//     |out_ij - ref_ij| <= (8 * sqrt(k) + 8) * u * mag_ij        (1.5e-5 * mag_ij at k = 1024)
// which a correct kernel meets, while a lost k slice, a wrong or unwritten element misses it by orders of
// magnitude. Scaling by mag_ij rather than |ref_ij| keeps it valid where the dot product cancels to ~0, and
// a norm-wise check ||out - ref|| / ||ref|| would not be for outputs of a few elements.
//
// Against cuBLAS (the largest shapes, no float64 reference) the check is norm-wise: with |s_t| ~ sigma *
// sqrt(t) (sigma = 1/3, the spread of one product of U[-1,1) entries) the error of one element has spread
// ~ u * sigma * sqrt(sum_t t / 3) = u * sigma * k / sqrt(6), against |C| ~ sigma * sqrt(k): a relative
// (Frobenius) error of ~0.4 * u * sqrt(k) per side, ~0.6 * u * sqrt(k) between two independent FP32
// results. The bound (8 * sqrt(k) + 8) * u leaves a 13x margin, and with >= 10^5 elements per cuBLAS case
// the norm averages out single-element cancellation. The float64 reference is exact to ~1e-16: negligible.
constexpr double kUnitRoundoff = 5.9604644775390625e-08;  // 2^-24
double error_factor(int k) { return kUnitRoundoff * (8.0 * std::sqrt(static_cast<double>(k)) + 8.0); }
// Loose per-element bound for cuBLAS cases (entries in [-1, 1), so mag_ij <= |alpha| * k + |beta|; both
// sides carry an error): catches a wrong or unwritten element, which the norm alone could average away.
double cublas_element_tolerance(const Case& c) {
  const double alpha = std::abs(static_cast<double>(c.alpha)), beta = std::abs(static_cast<double>(c.beta));
  return 2.0 * error_factor(c.k) * (alpha * c.k + beta);
}

struct CpuReference {
  std::vector<double> value;  // alpha * A * B + beta * C
  std::vector<double> mag;    // |alpha| * |A| * |B| + |beta| * |C|
};
// Cached: computed once per process per (shape, alpha, beta), shared by every level and layout variant.
const CpuReference& cpu_reference(const Case& c, const TestMatrix& a, const TestMatrix& b, const TestMatrix& c_in) {
  static std::map<std::tuple<int, int, int, float, float>, std::unique_ptr<CpuReference>> cache;
  auto& slot = cache[{c.m, c.n, c.k, c.alpha, c.beta}];
  if (!slot) {
    auto abs_of = [](const std::vector<float>& v) {
      std::vector<float> out(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) out[i] = std::abs(v[i]);
      return out;
    };
    slot = std::make_unique<CpuReference>();
    slot->value = parallax::gemm_reference_f64(c.m, c.n, c.k, c.alpha, a.dense, c.k, b.dense, c.n, c.beta,
                                               c_in.dense, c.n);
    slot->mag = parallax::gemm_reference_f64(c.m, c.n, c.k, std::abs(c.alpha), abs_of(a.dense), c.k,
                                             abs_of(b.dense), c.n, std::abs(c.beta), abs_of(c_in.dense), c.n);
  }
  return *slot;
}

std::string seed_note() {
  return "seed=" + std::to_string(process_seed()) + " (replay: PARALLAX_TEST_SEED=" +
         std::to_string(process_seed()) + ")";
}

// Runs one case on one level and checks everything listed at the top of the file. Returns false if the
// level threw (e.g. "not implemented"): the caller then stops, one failure is enough to say so.
bool run_case(SgemmLevel level, const Case& c) {
  SCOPED_TRACE(std::string(parallax::sgemm_level_name(level)) + " " + c.label() + " " + seed_note());
  const bool read_c = c.beta != 0.f;
  const TestMatrix a = make_matrix(c.m, c.k, c.lda(), c.a_offset, matrix_seed(c.m, c.n, c.k, 'A'), true);
  const TestMatrix b = make_matrix(c.k, c.n, c.ldb(), c.b_offset, matrix_seed(c.m, c.n, c.k, 'B'), true);
  TestMatrix out = make_matrix(c.m, c.n, c.ldc(), c.c_offset, matrix_seed(c.m, c.n, c.k, 'C'), read_c);
  const std::vector<float> before = out.storage.download();

  SgemmArgs args;
  args.m = c.m;
  args.n = c.n;
  args.k = c.k;
  args.alpha = c.alpha;
  args.a = a.data;
  args.lda = c.lda();
  args.b = b.data;
  args.ldb = c.ldb();
  args.beta = c.beta;
  args.c = out.data;
  args.ldc = c.ldc();
  try {
    parallax::sgemm(level, args);
    PX_CUDA_CHECK(cudaDeviceSynchronize());
  } catch (const std::exception& e) {
    ADD_FAILURE() << "sgemm threw: " << e.what();
    return false;
  }
  const std::vector<float> after = out.storage.download();

  // Outside the m x n window: bit-for-bit unchanged. Inside: collect the result.
  std::vector<float> result(static_cast<std::size_t>(c.m) * c.n);
  std::size_t clobbered = 0, first_clobbered = 0;
  for (std::size_t i = 0; i < after.size(); ++i) {
    const bool in_window = i >= static_cast<std::size_t>(c.c_offset) &&
                           (i - c.c_offset) / c.ldc() < static_cast<std::size_t>(c.m) &&
                           (i - c.c_offset) % c.ldc() < static_cast<std::size_t>(c.n);
    if (in_window) {
      const std::size_t row = (i - c.c_offset) / c.ldc(), col = (i - c.c_offset) % c.ldc();
      result[row * c.n + col] = after[i];
    } else if (std::memcmp(&after[i], &before[i], sizeof(float)) != 0) {
      if (clobbered++ == 0) first_clobbered = i;
    }
  }
  EXPECT_EQ(clobbered, 0u) << "wrote outside the m x n window of C (padding or guard), first at storage index "
                           << first_clobbered << " (c_offset " << c.c_offset << ", ldc " << c.ldc() << ")";

  const auto where = [&](std::size_t i) {
    return "row " + std::to_string(i / c.n) + ", col " + std::to_string(i % c.n);
  };
  if (c.reference == Reference::kCpuF64) {
    const CpuReference& ref = cpu_reference(c, a, b, out);
    const auto cmp = parallax::testing::compare<float>(result, ref.value);
    EXPECT_EQ(cmp.non_finite, 0u) << "non-finite output (unwritten, C read with beta == 0, or padding used), "
                                  << "first at " << where(cmp.first_bad);
    const double factor = error_factor(c.k);
    std::size_t violations = 0, worst = 0;
    double worst_ratio = 0;
    for (std::size_t i = 0; i < result.size(); ++i) {
      if (!std::isfinite(result[i])) continue;  // counted above
      const double err = std::abs(static_cast<double>(result[i]) - ref.value[i]);
      const double bound = factor * ref.mag[i];
      if (err > bound) ++violations;
      const double ratio = bound > 0 ? err / bound : (err > 0 ? INFINITY : 0);
      if (ratio > worst_ratio) worst_ratio = ratio, worst = i;
    }
    EXPECT_EQ(violations, 0u) << "elements outside (8 sqrt(k) + 8) u |alpha||A||B| + |beta||C|; worst at "
                              << where(worst) << ": out " << result[worst] << ", ref " << ref.value[worst]
                              << ", error / bound " << worst_ratio << " (relative error ||out-ref||/||ref|| "
                              << cmp.relative_error << ")";
  } else {
    TestMatrix peer = make_matrix(c.m, c.n, c.ldc(), c.c_offset, matrix_seed(c.m, c.n, c.k, 'C'), read_c);
    args.c = peer.data;
    parallax::sgemm_cublas(args);
    PX_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> peer_out = peer.storage.download();
    std::vector<double> ref(result.size());
    for (int i = 0; i < c.m; ++i)
      for (int j = 0; j < c.n; ++j)
        ref[static_cast<std::size_t>(i) * c.n + j] = peer_out[c.c_offset + static_cast<std::size_t>(i) * c.ldc() + j];
    const auto cmp = parallax::testing::compare<float>(result, ref);
    EXPECT_EQ(cmp.non_finite, 0u) << "non-finite output (unwritten, C read with beta == 0, or padding used), "
                                  << "first at " << where(cmp.first_bad);
    EXPECT_LE(cmp.relative_error, error_factor(c.k)) << "relative error ||out - cuBLAS|| / ||cuBLAS||";
    EXPECT_LE(cmp.max_abs_error, cublas_element_tolerance(c)) << "max |out - cuBLAS| over elements";
  }
  return true;
}

class SgemmLadderTest : public parallax::testing::GpuTestWithParam<SgemmLevel> {
 protected:
  void run_all(const std::vector<Case>& cases) {
    for (const Case& c : cases)
      if (!run_case(GetParam(), c)) return;
  }
  void skip_if_quick() {
    if (quick_mode()) GTEST_SKIP() << "PARALLAX_TEST_QUICK set: large shapes skipped";
  }
};

// Shapes from {1, 7, 31, 127, 128, 129, 1000, 1024}: every tile edge case (smaller than a tile, exactly a
// tile, one past it), non-square, and m, n, k all different. alpha = 1, beta = 0 (C poisoned).
TEST_P(SgemmLadderTest, Shapes) {
  run_all({shape(1, 1, 1), shape(1, 1, 7), shape(7, 7, 7), shape(1, 1024, 7), shape(1024, 1, 7),
           shape(7, 1, 1024), shape(31, 31, 31), shape(31, 127, 129), shape(127, 129, 128), shape(128, 128, 128),
           shape(129, 129, 129), shape(129, 31, 1000), shape(1000, 7, 31), shape(7, 1000, 129), shape(128, 1, 129),
           shape(1, 129, 128), shape(127, 1024, 1), shape(129, 128, 127)});
}

// alpha/beta variants; beta == 0 always runs on a NaN-poisoned C, proving C is not read.
TEST_P(SgemmLadderTest, AlphaBeta) {
  std::vector<Case> cases;
  for (const Case& s : {shape(7, 31, 129), shape(129, 127, 128), shape(31, 1000, 7), shape(128, 128, 1)}) {
    for (const auto& [alpha, beta] : std::vector<std::pair<float, float>>{
             {1.f, 0.f}, {-0.7f, 1.3f}, {2.f, 0.f}, {0.5f, -1.f}, {0.f, 1.f}, {-0.7f, 0.f}}) {
      Case c = s;
      c.alpha = alpha;
      c.beta = beta;
      cases.push_back(c);
    }
  }
  run_all(cases);
}

// Leading dimensions larger than the row length, both multiples of 4 (vector paths stay legal) and not.
TEST_P(SgemmLadderTest, LeadingDimensions) {
  std::vector<Case> cases;
  for (const Case& s : {shape(31, 127, 129), shape(129, 129, 129), shape(7, 1000, 31), shape(128, 128, 128),
                        shape(1, 7, 1000)}) {
    auto round4 = [](int x) { return (x + 3) / 4 * 4 - x; };  // pad to the next multiple of 4
    const int pads[][3] = {{5, 3, 7},                                          // none a multiple of 4
                           {round4(s.k) + 4, round4(s.n) + 4, round4(s.n) + 4},  // all multiples of 4
                           {1, 1, 1},
                           {64, 0, 33}};
    for (const auto& pad : pads) {
      for (float beta : {0.f, 1.3f}) {
        Case c = s;
        c.lda_pad = pad[0];
        c.ldb_pad = pad[1];
        c.ldc_pad = pad[2];
        c.alpha = -0.7f;
        c.beta = beta;
        cases.push_back(c);
      }
    }
  }
  run_all(cases);
}

// Pointers that are 4-byte but not 16-byte aligned (a = base + 1 float, ...): vectorized levels must fall
// back to scalar accesses. With leading dimensions multiple of 4 and not.
TEST_P(SgemmLadderTest, MisalignedPointers) {
  std::vector<Case> cases;
  for (const Case& s : {shape(129, 129, 129), shape(128, 128, 128), shape(31, 127, 129), shape(1000, 7, 31)}) {
    const int offsets[][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 2, 3}, {3, 3, 3}, {4, 8, 12}};
    for (const auto& off : offsets) {
      for (int ld_mode = 0; ld_mode < 2; ++ld_mode) {
        Case c = s;
        c.a_offset = off[0];
        c.b_offset = off[1];
        c.c_offset = off[2];
        // ld_mode 0: leading dimensions rounded up to multiples of 4; 1: row length + 1.
        c.lda_pad = ld_mode == 0 ? (4 - s.k % 4) % 4 : 1;
        c.ldb_pad = ld_mode == 0 ? (4 - s.n % 4) % 4 : 1;
        c.ldc_pad = ld_mode == 0 ? (4 - s.n % 4) % 4 : 1;
        c.beta = (off[2] % 2 == 1) ? 1.3f : 0.f;
        cases.push_back(c);
      }
    }
  }
  run_all(cases);
}

// Large shapes: 1000^3 against the float64 reference (computed once, shared by all levels), 1024^3 and a
// few others against cuBLAS.
TEST_P(SgemmLadderTest, LargeShapes) {
  skip_if_quick();
  Case big = shape(1000, 1000, 1000);
  Case square = shape(1024, 1024, 1024);
  square.reference = Reference::kCublas;
  Case square_ab = square;
  square_ab.alpha = -0.7f;
  square_ab.beta = 1.3f;
  square_ab.lda_pad = 4;
  square_ab.ldb_pad = 5;
  square_ab.ldc_pad = 3;
  Case wide = shape(129, 1000, 1024);
  wide.reference = Reference::kCublas;
  wide.beta = 0.5f;
  Case thin_k = shape(1000, 1024, 129);
  thin_k.alpha = 2.f;
  run_all({big, square, square_ab, wide, thin_k, shape(1024, 1000, 7)});
}

// Levels 5 and 6 switch from 64x64 to 128x128 tiles once the big tiles fill every SM (>= 132 blocks on an
// H100): the big-tile path needs edges in every dimension too. Small k keeps it cheap enough for the
// sanitizer runs, so this one also runs under PARALLAX_TEST_QUICK.
TEST_P(SgemmLadderTest, BigTilePathWithEdges) {
  Case edges = shape(1665, 1409, 37);  // 14 x 12 = 168 tiles of 128x128, partial tiles in m, n and k
  edges.reference = Reference::kCublas;
  Case edges_ab = edges;
  edges_ab.alpha = -0.7f;
  edges_ab.beta = 1.3f;
  edges_ab.lda_pad = 3;
  edges_ab.ldb_pad = 1;
  edges_ab.ldc_pad = 2;
  run_all({edges, edges_ab});
}

// More tiles along one dimension than gridDim.y allows (65535): the launch must still cover all of C.
TEST_P(SgemmLadderTest, LargeGridTallAndWide) {
  skip_if_quick();
  // 65535 tiles of 128 rows (the largest block tile of levels 1-6) plus one more row, and the same in n.
  constexpr int kLong = 65535 * 128 + 1;
  run_all({shape(kLong, 3, 2), shape(2, kLong, 3)});
}

INSTANTIATE_TEST_SUITE_P(Ladder, SgemmLadderTest, ::testing::ValuesIn(parallax::all_sgemm_levels()),
                         [](const ::testing::TestParamInfo<SgemmLevel>& info) {
                           return std::string(parallax::sgemm_level_name(info.param));
                         });

}  // namespace
