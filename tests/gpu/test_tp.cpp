// GPU tests of issue 7: NCCL communicator and tensor-parallel linear layers against the single-GPU math.
//
//   Comm1Gpu / TpColumn1Gpu / TpRow1Gpu / TpMlp1Gpu   need one GPU
//   Comm2Gpu / Tp2Gpu                     need two GPUs (skip with a message otherwise); run them on the 2-GPU
//                                         machine with --gtest_filter='*2Gpu*'
//
// Inputs are fresh random bf16 values every run (seed printed; PARALLAX_TEST_SEED replays). The reference is
// float64 on the CPU from the same bf16 inputs. Outputs are poisoned (NaN) first, so an unwritten element
// fails. Tolerances: bf16 outputs carry a 2^-8 relative rounding, and the all-reduced dX adds one bf16
// rounding per partial; per element |out - ref| <= 0.02 |ref| + 0.02 rms(ref), and ||out-ref||/||ref|| < 1e-2.
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/tp_reference.hpp"
#include "parallax/comm.hpp"
#include "parallax/tp.hpp"
#include "tp/tp_kernels.hpp"

namespace {

using bf16 = __nv_bfloat16;
using parallax::Communicator;
using parallax::testing::expect_close;
using parallax::testing::HostMatrix;
using parallax::testing::matmul;
using parallax::testing::random_matrix;
using parallax::testing::upload;

// One communicator clique per test (NCCL init costs ~1 s), reused across its cases.
using Comms = std::vector<std::unique_ptr<Communicator>>;

std::uint64_t test_seed() {
  static const std::uint64_t seed = [] {
    const char* env = std::getenv("PARALLAX_TEST_SEED");
    const std::uint64_t s = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    std::printf("[tp tests] seed %llu (PARALLAX_TEST_SEED=%llu replays)\n", static_cast<unsigned long long>(s),
                static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

struct Case {
  std::int64_t t, k, n;
  int chunks;
  bool overlap;
};

std::string describe(const Case& c, int ranks, std::uint64_t seed) {
  return "[ranks " + std::to_string(ranks) + ", t " + std::to_string(c.t) + ", k " + std::to_string(c.k) + ", n " +
         std::to_string(c.n) + ", chunks " + std::to_string(c.chunks) + ", overlap " + (c.overlap ? "on" : "off") +
         ", seed " + std::to_string(seed) + "]";
}

// Column-parallel forward + backward (with db) on `ranks` GPUs against float64. `calls` > 1 repeats the
// forward with fresh inputs each time (exercises the copy-engine epochs / workspace reuse).
// compute_streams / schedule / gemm: the Options of the same names (the defaults are the library's).
void check_column(int ranks, const Case& c,
                  parallax::tp::Transport transport = parallax::tp::Transport::kAuto, int calls = 1,
                  int compute_streams = 2,
                  parallax::tp::ChunkSchedule schedule = parallax::tp::ChunkSchedule::kUniform,
                  const std::string& gemm = "cublas", Comms* shared = nullptr) {
  const std::uint64_t seed = test_seed() ^ (c.t * 1000003 + c.k * 1009 + c.n + ranks * 7 + c.chunks * 131 +
                                            static_cast<int>(transport) * 17 + calls + compute_streams * 4099 +
                                            static_cast<int>(schedule) * 8191);
  const std::string ctx = describe(c, ranks, seed) + " transport " +
                          std::string(parallax::tp::transport_name(transport)) + ", compute streams " +
                          std::to_string(compute_streams) + ", " +
                          std::string(parallax::tp::chunk_schedule_name(schedule)) + " chunks, gemm " + gemm;
  std::mt19937_64 rng(seed);
  const auto x = random_matrix(c.t * c.k, rng), w = random_matrix(c.k * c.n, rng), dy = random_matrix(c.t * c.n, rng);
  std::vector<float> bias(c.n);
  for (auto& b : bias) b = std::uniform_real_distribution<float>(-1.f, 1.f)(rng);
  auto y_ref = matmul(c.t, c.n, c.k, [&](auto i, auto p) { return x.d[i * c.k + p]; },
                      [&](auto p, auto j) { return w.d[p * c.n + j]; });
  for (std::int64_t i = 0; i < c.t; ++i)
    for (std::int64_t j = 0; j < c.n; ++j) y_ref[i * c.n + j] += bias[j];
  const auto dx_ref = matmul(c.t, c.k, c.n, [&](auto i, auto p) { return dy.d[i * c.n + p]; },
                             [&](auto p, auto j) { return w.d[j * c.n + p]; });
  const auto dw_ref = matmul(c.k, c.n, c.t, [&](auto i, auto p) { return x.d[p * c.k + i]; },
                             [&](auto p, auto j) { return dy.d[p * c.n + j]; });
  std::vector<double> db_ref(c.n, 0.0);
  for (std::int64_t i = 0; i < c.t; ++i)
    for (std::int64_t j = 0; j < c.n; ++j) db_ref[j] += dy.d[i * c.n + j];

  // `shared`: the caller's clique of `ranks` communicators (saves an NCCL init per case).
  Comms owned = shared ? Comms{} : Communicator::create_local(ranks);
  Comms& comms = shared ? *shared : owned;
  parallax::tp::Options opt;
  opt.chunks = c.chunks;
  opt.overlap = c.overlap;
  opt.gemm = gemm;
  opt.transport = transport;
  opt.compute_streams = compute_streams;
  opt.chunk_schedule = schedule;
  std::mutex mutex;
  parallax::run_local_ranks(comms, [&](Communicator& comm) {
    parallax::tp::ColumnParallelLinear layer(comm, c.k, c.n, opt);
    const auto s = layer.shard();
    std::vector<bf16> w_shard(c.k * s.size);
    for (std::int64_t p = 0; p < c.k; ++p)
      for (std::int64_t j = 0; j < s.size; ++j) w_shard[p * s.size + j] = w.h[p * c.n + s.offset + j];
    std::vector<float> b_shard(bias.begin() + s.offset, bias.begin() + s.offset + s.size);
    auto d_x = upload(x.h), d_w = upload(w_shard), d_dy = upload(dy.h);
    auto d_b = upload(b_shard);
    parallax::DeviceBuffer<bf16> d_y(c.t * c.n), d_dx(c.t * c.k);
    parallax::DeviceBuffer<float> d_dw(std::max<std::int64_t>(1, c.k * s.size)), d_db(std::max<std::int64_t>(1, s.size));
    parallax::Stream stream;
    // Earlier calls on the negated input (their Y is -XW + b) into a different Y: a stale workspace chunk or
    // a flag satisfied by an old epoch would leak their values into the checked call.
    if (calls > 1) {
      std::vector<bf16> neg(x.h.size());
      for (std::size_t i = 0; i < neg.size(); ++i) neg[i] = __float2bfloat16(-__bfloat162float(x.h[i]));
      auto d_neg = upload(neg);
      parallax::DeviceBuffer<bf16> d_y0(c.t * c.n);
      for (int call = 0; call + 1 < calls; ++call) {
        d_y0.fill_bytes(0xFF);
        layer.forward(d_neg.data(), c.t, d_w.data(), s.size ? d_b.data() : nullptr, d_y0.data(), stream);
      }
      comm.wait(stream, "column forward warm-up calls");
    }
    d_y.fill_bytes(0xFF);
    d_dx.fill_bytes(0xFF);
    d_dw.fill_bytes(0xFF);
    d_db.fill_bytes(0xFF);
    layer.forward(d_x.data(), c.t, d_w.data(), s.size ? d_b.data() : nullptr, d_y.data(), stream);
    layer.backward(d_x.data(), d_dy.data(), c.t, d_w.data(), d_dx.data(), d_dw.data(), stream, d_db.data());
    comm.wait(stream, "column forward/backward");
    const auto y = d_y.download(), dx = d_dx.download();
    const auto dw = d_dw.download(), db = d_db.download();
    std::lock_guard lock(mutex);
    const std::string rctx = ctx + " rank " + std::to_string(comm.rank()) + " used " +
                             std::string(parallax::tp::transport_name(layer.transport_in_use()));
    if (ranks > 1 && transport != parallax::tp::Transport::kAuto)
      EXPECT_EQ(layer.transport_in_use(), transport) << rctx;
    expect_close("Y", y, c.n, y_ref, c.n, c.t, c.n, 0, rctx);
    if (s.size > 0) expect_close("db shard", db, s.size, db_ref, c.n, 1, s.size, s.offset, rctx);
    expect_close("dX", dx, c.k, dx_ref, c.k, c.t, c.k, 0, rctx);
    if (s.size > 0) expect_close("dW shard", dw, s.size, dw_ref, c.n, c.k, s.size, s.offset, rctx);
  });
}

// Row-parallel forward + backward on `ranks` GPUs against float64.
void check_row(int ranks, const Case& c, int compute_streams = 2,
               parallax::tp::ChunkSchedule schedule = parallax::tp::ChunkSchedule::kUniform, Comms* shared = nullptr) {
  const std::uint64_t seed = test_seed() ^ (c.t * 7919 + c.k * 104729 + c.n * 13 + ranks + c.chunks * 31 +
                                            compute_streams * 4099 + static_cast<int>(schedule) * 8191);
  const std::string ctx = describe(c, ranks, seed) + " compute streams " + std::to_string(compute_streams) + ", " +
                          std::string(parallax::tp::chunk_schedule_name(schedule)) + " chunks";
  std::mt19937_64 rng(seed);
  const auto x = random_matrix(c.t * c.k, rng), w = random_matrix(c.k * c.n, rng), dy = random_matrix(c.t * c.n, rng);
  std::vector<float> bias(c.n);
  for (auto& b : bias) b = std::uniform_real_distribution<float>(-1.f, 1.f)(rng);
  auto y_ref = matmul(c.t, c.n, c.k, [&](auto i, auto p) { return x.d[i * c.k + p]; },
                      [&](auto p, auto j) { return w.d[p * c.n + j]; });
  for (std::int64_t i = 0; i < c.t; ++i)
    for (std::int64_t j = 0; j < c.n; ++j) y_ref[i * c.n + j] += bias[j];
  const auto dx_ref = matmul(c.t, c.k, c.n, [&](auto i, auto p) { return dy.d[i * c.n + p]; },
                             [&](auto p, auto j) { return w.d[j * c.n + p]; });
  const auto dw_ref = matmul(c.k, c.n, c.t, [&](auto i, auto p) { return x.d[p * c.k + i]; },
                             [&](auto p, auto j) { return dy.d[p * c.n + j]; });
  // `shared`: the caller's clique of `ranks` communicators (saves an NCCL init per case).
  Comms owned = shared ? Comms{} : Communicator::create_local(ranks);
  Comms& comms = shared ? *shared : owned;
  parallax::tp::Options opt;
  opt.chunks = c.chunks;
  opt.overlap = c.overlap;
  opt.gemm = "cublas";
  opt.compute_streams = compute_streams;
  opt.chunk_schedule = schedule;
  std::mutex mutex;
  parallax::run_local_ranks(comms, [&](Communicator& comm) {
    parallax::tp::RowParallelLinear layer(comm, c.k, c.n, opt);
    const auto s = layer.shard();
    std::vector<bf16> x_shard(c.t * s.size), w_shard(s.size * c.n);
    for (std::int64_t i = 0; i < c.t; ++i)
      for (std::int64_t p = 0; p < s.size; ++p) x_shard[i * s.size + p] = x.h[i * c.k + s.offset + p];
    for (std::int64_t p = 0; p < s.size; ++p)
      for (std::int64_t j = 0; j < c.n; ++j) w_shard[p * c.n + j] = w.h[(s.offset + p) * c.n + j];
    auto d_x = upload(x_shard), d_w = upload(w_shard), d_dy = upload(dy.h);
    auto d_b = upload(bias);
    parallax::DeviceBuffer<bf16> d_y(c.t * c.n), d_dx(std::max<std::int64_t>(1, c.t * s.size));
    parallax::DeviceBuffer<float> d_dw(std::max<std::int64_t>(1, s.size * c.n)), d_db(c.n);
    d_y.fill_bytes(0xFF);
    d_dx.fill_bytes(0xFF);
    d_dw.fill_bytes(0xFF);
    d_db.fill_bytes(0xFF);
    parallax::Stream stream;
    layer.forward(d_x.data(), c.t, d_w.data(), d_b.data(), d_y.data(), stream);
    layer.backward(d_x.data(), d_dy.data(), c.t, d_w.data(), d_dx.data(), d_dw.data(), stream, d_db.data());
    comm.wait(stream, "row forward/backward");
    const auto y = d_y.download(), dx = d_dx.download();
    const auto dw = d_dw.download(), db = d_db.download();
    std::vector<double> db_ref(c.n, 0.0);
    for (std::int64_t i = 0; i < c.t; ++i)
      for (std::int64_t j = 0; j < c.n; ++j) db_ref[j] += dy.d[i * c.n + j];
    std::lock_guard lock(mutex);
    const std::string rctx = ctx + " rank " + std::to_string(comm.rank());
    expect_close("Y", y, c.n, y_ref, c.n, c.t, c.n, 0, rctx);
    expect_close("db (full, every rank)", db, c.n, db_ref, c.n, 1, c.n, 0, rctx);
    if (s.size > 0) {
      expect_close("dX shard", dx, s.size, dx_ref, c.k, c.t, s.size, s.offset, rctx);
      std::vector<double> dw_rows(dw_ref.begin() + s.offset * c.n, dw_ref.begin() + (s.offset + s.size) * c.n);
      expect_close("dW shard", dw, c.n, dw_rows, c.n, s.size, c.n, 0, rctx);
    }
  });
}

const Case kCases[] = {
    {1, 1, 1, 1, true},      {7, 17, 33, 3, true},     {17, 127, 129, 4, false}, {129, 64, 1000, 4, true},
    {127, 129, 17, 2, false}, {1000, 33, 64, 7, true},
};

// ---- TensorParallelMLP ------------------------------------------------------------------------------------
// Y = gelu(X W1 + b1) W2 + b2 and its backward, float64 on the CPU from the same bf16 inputs (gelu and gelu'
// in the tanh form, tp_kernels.hpp's host mirrors). Tolerances as above: the device rounds H (saved path),
// A, dA, dH to bf16 once each and all-reduces Y / dX in bf16.
struct MlpCase {
  std::int64_t t, k, hidden, n;
  int chunks;
  bool overlap;
};

std::string describe(const MlpCase& c, int ranks, bool save_h, const std::string& gemm, std::uint64_t seed) {
  return "[ranks " + std::to_string(ranks) + ", t " + std::to_string(c.t) + ", k " + std::to_string(c.k) +
         ", hidden " + std::to_string(c.hidden) + ", n " + std::to_string(c.n) + ", chunks " +
         std::to_string(c.chunks) + ", overlap " + (c.overlap ? "on" : "off") + ", H " +
         (save_h ? "saved" : "recomputed") + ", gemm " + gemm + ", seed " + std::to_string(seed) + "]";
}

struct MlpProblem {
  HostMatrix x, w1, w2, dy;
  std::vector<float> b1, b2;
  std::vector<double> y, dx, dw1, dw2, db1, db2;  // references
};

MlpProblem make_mlp_problem(const MlpCase& c, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  MlpProblem p;
  p.x = random_matrix(c.t * c.k, rng);
  p.w1 = random_matrix(c.k * c.hidden, rng);
  p.w2 = random_matrix(c.hidden * c.n, rng);
  p.dy = random_matrix(c.t * c.n, rng);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  p.b1.resize(c.hidden);
  p.b2.resize(c.n);
  for (auto& b : p.b1) b = u(rng);
  for (auto& b : p.b2) b = u(rng);
  using parallax::tp::detail::gelu_derivative_reference;
  using parallax::tp::detail::gelu_reference;
  // The layer keeps its intermediates in bf16 (H, A, dA, dH: [t, hidden] workspaces), so the reference
  // rounds them at the same points; the rest (products, sums) stays float64. Without that, tiny problems
  // with cancelling sums (db1 over 9 rows, t = k = hidden = 1) differed by 2-7% from an all-float64 chain
  // on some seeds: bf16 storage, not an error of the layer.
  auto bf16_round = [](double v) { return static_cast<double>(__bfloat162float(__float2bfloat16(static_cast<float>(v)))); };
  auto h = matmul(c.t, c.hidden, c.k, [&](auto i, auto q) { return p.x.d[i * c.k + q]; },
                  [&](auto q, auto j) { return p.w1.d[q * c.hidden + j]; });
  std::vector<double> a(h.size());
  for (std::int64_t i = 0; i < c.t; ++i)
    for (std::int64_t j = 0; j < c.hidden; ++j) {
      h[i * c.hidden + j] = bf16_round(h[i * c.hidden + j] + p.b1[j]);
      a[i * c.hidden + j] = bf16_round(gelu_reference(h[i * c.hidden + j]));
    }
  p.y = matmul(c.t, c.n, c.hidden, [&](auto i, auto q) { return a[i * c.hidden + q]; },
               [&](auto q, auto j) { return p.w2.d[q * c.n + j]; });
  for (std::int64_t i = 0; i < c.t; ++i)
    for (std::int64_t j = 0; j < c.n; ++j) p.y[i * c.n + j] += p.b2[j];
  auto dh = matmul(c.t, c.hidden, c.n, [&](auto i, auto q) { return p.dy.d[i * c.n + q]; },
                   [&](auto q, auto j) { return p.w2.d[j * c.n + q]; });  // dA = dY W2ᵀ
  for (std::size_t i = 0; i < dh.size(); ++i) dh[i] = bf16_round(bf16_round(dh[i]) * gelu_derivative_reference(h[i]));
  p.dx = matmul(c.t, c.k, c.hidden, [&](auto i, auto q) { return dh[i * c.hidden + q]; },
                [&](auto q, auto j) { return p.w1.d[j * c.hidden + q]; });  // dH W1ᵀ
  p.dw1 = matmul(c.k, c.hidden, c.t, [&](auto i, auto q) { return p.x.d[q * c.k + i]; },
                 [&](auto q, auto j) { return dh[q * c.hidden + j]; });  // Xᵀ dH
  p.dw2 = matmul(c.hidden, c.n, c.t, [&](auto i, auto q) { return a[q * c.hidden + i]; },
                 [&](auto q, auto j) { return p.dy.d[q * c.n + j]; });  // Aᵀ dY
  p.db1.assign(c.hidden, 0.0);
  p.db2.assign(c.n, 0.0);
  for (std::int64_t i = 0; i < c.t; ++i) {
    for (std::int64_t j = 0; j < c.hidden; ++j) p.db1[j] += dh[i * c.hidden + j];
    for (std::int64_t j = 0; j < c.n; ++j) p.db2[j] += p.dy.d[i * c.n + j];
  }
  return p;
}

// One forward (+ backward) of `layer` on this rank's shards of `p`, every output poisoned first and checked
// against the references. save_h: the training forward keeps H and the backward uses it; otherwise the
// forward fuses the GELU and the backward recomputes H.
void run_and_check_mlp(parallax::tp::TensorParallelMLP& layer, Communicator& comm, const MlpCase& c,
                       const MlpProblem& p, bool save_h, std::mutex& mutex, const std::string& ctx) {
  const auto s = layer.shard();
  std::vector<bf16> w1_shard(c.k * s.size), w2_shard(s.size * c.n);
  for (std::int64_t q = 0; q < c.k; ++q)
    for (std::int64_t j = 0; j < s.size; ++j) w1_shard[q * s.size + j] = p.w1.h[q * c.hidden + s.offset + j];
  for (std::int64_t q = 0; q < s.size; ++q)
    for (std::int64_t j = 0; j < c.n; ++j) w2_shard[q * c.n + j] = p.w2.h[(s.offset + q) * c.n + j];
  std::vector<float> b1_shard(p.b1.begin() + s.offset, p.b1.begin() + s.offset + s.size);
  auto d_x = upload(p.x.h), d_w1 = upload(w1_shard), d_w2 = upload(w2_shard), d_dy = upload(p.dy.h);
  auto d_b1 = upload(b1_shard), d_b2 = upload(p.b2);
  const std::size_t shard_h = std::max<std::int64_t>(1, c.t * s.size);
  parallax::DeviceBuffer<bf16> d_y(c.t * c.n), d_dx(c.t * c.k), d_h(shard_h);
  parallax::DeviceBuffer<float> d_dw1(std::max<std::int64_t>(1, c.k * s.size)),
      d_dw2(std::max<std::int64_t>(1, s.size * c.n)), d_db1(std::max<std::int64_t>(1, s.size)), d_db2(c.n);
  for (auto* b : {&d_y, &d_dx, &d_h}) b->fill_bytes(0xFF);
  for (auto* b : {&d_dw1, &d_dw2, &d_db1, &d_db2}) b->fill_bytes(0xFF);
  parallax::Stream stream;
  const float* b1 = s.size ? d_b1.data() : nullptr;
  layer.forward(d_x.data(), c.t, d_w1.data(), b1, d_w2.data(), d_b2.data(), d_y.data(), stream,
                save_h ? d_h.data() : nullptr);
  layer.backward(d_x.data(), d_dy.data(), c.t, d_w1.data(), b1, d_w2.data(), save_h ? d_h.data() : nullptr,
                 d_dx.data(), d_dw1.data(), d_dw2.data(), stream, d_db1.data(), d_db2.data());
  comm.wait(stream, "MLP forward/backward");
  const auto y = d_y.download(), dx = d_dx.download();
  const auto dw1 = d_dw1.download(), dw2 = d_dw2.download(), db1 = d_db1.download(), db2 = d_db2.download();
  std::lock_guard lock(mutex);
  const std::string rctx = ctx + " rank " + std::to_string(comm.rank()) + " owns hidden [" +
                           std::to_string(s.offset) + ", " + std::to_string(s.offset + s.size) + ")";
  expect_close("Y", y, c.n, p.y, c.n, c.t, c.n, 0, rctx);
  expect_close("dX", dx, c.k, p.dx, c.k, c.t, c.k, 0, rctx);
  expect_close("db2 (full, every rank)", db2, c.n, p.db2, c.n, 1, c.n, 0, rctx);
  if (s.size > 0) {
    expect_close("dW1 shard", dw1, s.size, p.dw1, c.hidden, c.k, s.size, s.offset, rctx);
    std::vector<double> dw2_rows(p.dw2.begin() + s.offset * c.n, p.dw2.begin() + (s.offset + s.size) * c.n);
    expect_close("dW2 shard", dw2, c.n, dw2_rows, c.n, s.size, c.n, 0, rctx);
    expect_close("db1 shard", db1, s.size, p.db1, c.hidden, 1, s.size, s.offset, rctx);
  }
}


void check_mlp(Comms& comms, const MlpCase& c, bool save_h, const std::string& gemm = "cublas",
               int compute_streams = 2,
               parallax::tp::ChunkSchedule schedule = parallax::tp::ChunkSchedule::kUniform) {
  const int ranks = static_cast<int>(comms.size());
  const std::uint64_t seed = test_seed() ^ (c.t * 7001 + c.k * 613 + c.hidden * 37 + c.n * 5 + ranks * 3 +
                                            c.chunks * 211 + (save_h ? 1 : 0) + (c.overlap ? 2 : 0) +
                                            compute_streams * 4099 + static_cast<int>(schedule) * 8191);
  const std::string ctx = describe(c, ranks, save_h, gemm, seed) + " nccl max_ctas " +
                          std::to_string(comms[0]->config().max_ctas) + ", compute streams " +
                          std::to_string(compute_streams) + ", " +
                          std::string(parallax::tp::chunk_schedule_name(schedule)) + " chunks";
  const MlpProblem p = make_mlp_problem(c, seed);
  parallax::tp::Options opt;
  opt.chunks = c.chunks;
  opt.overlap = c.overlap;
  opt.gemm = gemm;
  opt.compute_streams = compute_streams;
  opt.chunk_schedule = schedule;
  std::mutex mutex;
  parallax::run_local_ranks(comms, [&](Communicator& comm) {
    parallax::tp::TensorParallelMLP layer(comm, c.k, c.hidden, c.n, opt);
    run_and_check_mlp(layer, comm, c, p, save_h, mutex, ctx);
  });
}

// Odd sizes throughout; hidden 1 and 3 make uneven splits where a rank owns one unit or none (2 ranks).
const MlpCase kMlpCases[] = {
    {1, 1, 1, 1, 1, true},     {7, 17, 33, 9, 3, true},     {17, 127, 129, 31, 4, false},
    {129, 64, 1000, 48, 4, true}, {127, 129, 3, 17, 2, false}, {1000, 33, 64, 40, 7, true},
    {9, 16, 1, 8, 2, true},
};

class Comm1Gpu : public parallax::testing::GpuTest {};
class TpMlp1Gpu : public parallax::testing::GpuTest {};
class TpColumn1Gpu : public parallax::testing::GpuTest {};
class TpRow1Gpu : public parallax::testing::GpuTest {};

class MultiGpu : public parallax::testing::GpuTest {
 protected:
  void SetUp() override {
    parallax::testing::GpuTest::SetUp();
    if (IsSkipped()) return;
    if (parallax::device_count() < 2)
      GTEST_SKIP() << "needs 2 GPUs, " << parallax::device_count() << " visible: run on the 2-GPU machine";
  }
};
class Comm2Gpu : public MultiGpu {};
class Tp2Gpu : public MultiGpu {};

TEST_F(Comm1Gpu, AllReduceOnOneRankIsACopy) {
  auto comms = Communicator::create_local(1);
  auto& c = *comms[0];
  std::vector<float> h(1000);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<float>(i % 13) - 6.5f;
  auto send = upload(h);
  parallax::DeviceBuffer<float> recv(h.size());
  recv.fill_bytes(0xFF);
  c.all_reduce(send.data(), recv.data(), h.size(), parallax::DType::kF32);
  c.wait(nullptr, "all-reduce");
  EXPECT_EQ(recv.download(), h);
}

TEST_F(TpColumn1Gpu, MatchesSingleGpuMath) {
  for (const Case& c : kCases) check_column(1, c);
}
TEST_F(TpRow1Gpu, MatchesSingleGpuMath) {
  for (const Case& c : kCases) check_row(1, c);
}

TEST_F(Tp2Gpu, ColumnDivisibleAndUnevenOverlappedAndSequential) {
  for (const Case& c : kCases) {
    check_column(2, c);
    Case other = c;
    other.overlap = !c.overlap;
    check_column(2, other);
  }
}

// Both transports of the column forward explicitly (auto is what the test above ran), overlapped and
// sequential, with repeated calls so the copy-engine epochs and workspace reuse are exercised; t grows
// between cases, which regrows the workspace.
TEST_F(Tp2Gpu, ColumnBothTransportsRepeatedCalls) {
  using parallax::tp::Transport;
  for (Transport tr : {Transport::kNccl, Transport::kCopyEngine})
    for (const Case& c : kCases) {
      check_column(2, c, tr, 3);
      Case other = c;
      other.overlap = !c.overlap;
      check_column(2, other, tr, 1);
    }
}

TEST_F(Tp2Gpu, CopyEngineGatherSurvivesGrowingTokens) {
  // One layer, t growing across calls: the workspace is reallocated and re-exchanged mid-life.
  using parallax::tp::Transport;
  auto comms = Communicator::create_local(2);
  const std::int64_t k = 40, n = 75;  // uneven n
  std::mutex mutex;
  parallax::run_local_ranks(comms, [&](Communicator& comm) {
    parallax::tp::Options opt;
    opt.transport = Transport::kCopyEngine;
    opt.gemm = "cublas";
    opt.chunks = 3;
    parallax::tp::ColumnParallelLinear layer(comm, k, n, opt);
    const auto s = layer.shard();
    parallax::Stream stream;
    for (std::int64_t t : {5, 300, 301, 17, 1000}) {
      std::mt19937_64 rng(test_seed() + t);
      const auto x = random_matrix(t * k, rng), w = random_matrix(k * n, rng);  // same on both ranks
      std::vector<bf16> w_shard(k * s.size);
      for (std::int64_t p = 0; p < k; ++p)
        for (std::int64_t j = 0; j < s.size; ++j) w_shard[p * s.size + j] = w.h[p * n + s.offset + j];
      auto d_x = upload(x.h), d_w = upload(w_shard);
      parallax::DeviceBuffer<bf16> d_y(t * n);
      d_y.fill_bytes(0xFF);
      layer.forward(d_x.data(), t, d_w.data(), nullptr, d_y.data(), stream);
      comm.wait(stream, "forward");
      const auto y = d_y.download();
      const auto y_ref = matmul(t, n, k, [&](auto i, auto p) { return x.d[i * k + p]; },
                                [&](auto p, auto j) { return w.d[p * n + j]; });
      std::lock_guard lock(mutex);
      EXPECT_EQ(layer.transport_in_use(), Transport::kCopyEngine);
      expect_close("Y", y, n, y_ref, n, t, n, 0, "growing t=" + std::to_string(t) + " rank " + std::to_string(comm.rank()));
    }
  });
}

TEST_F(Tp2Gpu, RowDivisibleAndUnevenOverlappedAndSequential) {
  for (const Case& c : kCases) {
    if (c.k < 2) continue;  // rank 0 must own rows to add the bias (k >= ranks); checked in its own test
    check_row(2, c);
    Case other = c;
    other.overlap = !c.overlap;
    check_row(2, other);
  }
}

TEST_F(TpMlp1Gpu, MatchesFloat64SavedAndRecomputedH) {
  auto comms = Communicator::create_local(1);
  for (const MlpCase& c : kMlpCases)
    for (bool save_h : {true, false}) check_mlp(comms, c, save_h);
}

// The fused GELU epilogue through parallax's own kernels (auto picks the Hopper levels for the aligned
// shape, level 10 / repacking for the odd ones; "mma" is level 10 everywhere).
TEST_F(TpMlp1Gpu, ParallaxGemmKernelsFuseTheGelu) {
  const MlpCase cases[] = {{256, 256, 512, 128, 2, true}, {129, 64, 1000, 48, 4, true}, {17, 127, 129, 31, 3, false}};
  auto comms = Communicator::create_local(1);
  for (const MlpCase& c : cases)
    for (const char* gemm : {"auto", "mma"})
      for (bool save_h : {true, false}) check_mlp(comms, c, save_h, gemm);
}

TEST_F(TpMlp1Gpu, RejectsBadArgumentsBeforeTouchingTheDevice) {
  auto comms = Communicator::create_local(1);
  auto& comm = *comms[0];
  auto expect_invalid = [](auto fn, const std::string& arg) {
    try {
      fn();
      ADD_FAILURE() << "expected InvalidArgument(" << arg << ")";
    } catch (const parallax::InvalidArgument& e) {
      EXPECT_EQ(e.argument(), arg) << e.what();
    }
  };
  using parallax::tp::TensorParallelMLP;
  expect_invalid([&] { TensorParallelMLP(comm, 8, 0, 8); }, "hidden");
  expect_invalid([&] { TensorParallelMLP(comm, 0, 8, 8); }, "k");
  expect_invalid([&] { TensorParallelMLP(comm, 8, 8, 0); }, "n");
  parallax::tp::Options bad;
  bad.chunks = 0;
  expect_invalid([&] { TensorParallelMLP(comm, 8, 8, 8, bad); }, "chunks");
  TensorParallelMLP layer(comm, 8, 8, 8);
  parallax::DeviceBuffer<bf16> x(64), w1(64), w2(64), y(64), dy(64), dx(64);
  parallax::DeviceBuffer<float> dw1(64), dw2(64);
  parallax::Stream stream;
  expect_invalid([&] { layer.forward(nullptr, 8, w1.data(), nullptr, w2.data(), nullptr, y.data(), stream); }, "x");
  expect_invalid([&] { layer.forward(x.data(), 0, w1.data(), nullptr, w2.data(), nullptr, y.data(), stream); }, "t");
  expect_invalid([&] { layer.forward(x.data(), 8, nullptr, nullptr, w2.data(), nullptr, y.data(), stream); }, "w1_shard");
  expect_invalid([&] { layer.forward(x.data(), 8, w1.data(), nullptr, nullptr, nullptr, y.data(), stream); }, "w2_shard");
  expect_invalid([&] {
    layer.backward(x.data(), dy.data(), 8, w1.data(), nullptr, w2.data(), nullptr, dx.data(), nullptr, dw2.data(), stream);
  }, "dw1_shard");
  expect_invalid([&] {
    layer.backward(x.data(), nullptr, 8, w1.data(), nullptr, w2.data(), nullptr, dx.data(), dw1.data(), dw2.data(), stream);
  }, "dy");
}

TEST_F(Tp2Gpu, MlpDivisibleAndUnevenOverlappedAndSequential) {
  auto comms = Communicator::create_local(2);
  for (const MlpCase& c : kMlpCases)
    for (bool save_h : {true, false}) {
      check_mlp(comms, c, save_h);
      MlpCase other = c;
      other.overlap = !c.overlap;
      check_mlp(comms, other, save_h);
    }
}

// parallax's GEMMs with the SM cap active: NCCL bounded to 8 blocks, gemm_sms auto -> SMs - 8 for every
// GEMM that overlaps an all-reduce (the persistent level 13 launches a smaller grid).
TEST_F(Tp2Gpu, MlpParallaxGemmWithSmCapMatchesFloat64) {
  parallax::CommConfig config;
  config.max_ctas = 8;
  const MlpCase cases[] = {{256, 256, 512, 128, 2, true}, {300, 64, 257, 96, 3, true}, {300, 64, 257, 96, 3, false}};
  auto comms = Communicator::create_local(2, config);
  for (const MlpCase& c : cases)
    for (bool save_h : {true, false}) check_mlp(comms, c, save_h, "auto");
}

// One layer, t changing across calls (the workspaces regrow mid-life), H saved and recomputed alternately.
TEST_F(Tp2Gpu, MlpWorkspaceSurvivesChangingTokens) {
  auto comms = Communicator::create_local(2);
  const std::int64_t k = 40, hidden = 75, n = 24;  // uneven hidden
  parallax::tp::Options opt;
  opt.gemm = "cublas";
  opt.chunks = 3;
  std::mutex mutex;
  parallax::run_local_ranks(comms, [&](Communicator& comm) {
    parallax::tp::TensorParallelMLP layer(comm, k, hidden, n, opt);
    int call = 0;
    for (std::int64_t t : {5, 300, 301, 17, 1000}) {
      const MlpCase c{t, k, hidden, n, opt.chunks, true};
      const bool save_h = call++ % 2 == 0;
      const std::uint64_t seed = test_seed() + static_cast<std::uint64_t>(t);  // the same on both ranks
      run_and_check_mlp(layer, comm, c, make_mlp_problem(c, seed), save_h, mutex,
                        describe(c, 2, save_h, "cublas", seed) + " (reused layer)");
    }
  });
}

TEST_F(Tp2Gpu, MlpMismatchedHiddenFailsOnEveryRankWithoutHanging) {
  auto comms = Communicator::create_local(2);
  std::vector<std::string> errors(2);
  parallax::run_local_ranks(comms, [&](Communicator& comm) {
    const std::int64_t hidden = comm.rank() == 0 ? 64 : 65;  // the bug being caught
    parallax::tp::TensorParallelMLP layer(comm, 16, hidden, 8, {});
    parallax::DeviceBuffer<bf16> x(8 * 16), w1(16 * 64), w2(64 * 8), y(8 * 8);
    parallax::Stream stream;
    try {
      layer.forward(x.data(), 8, w1.data(), nullptr, w2.data(), nullptr, y.data(), stream);
      comm.wait(stream, "forward");
    } catch (const parallax::InvalidArgument& e) {
      errors[comm.rank()] = e.what();
    }
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("differs across ranks"), std::string::npos) << "rank " << r << ": '" << errors[r] << "'";
    EXPECT_NE(errors[r].find("rank 0 has [8, 16, 64, 8"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("rank 1 has [8, 16, 65, 8"), std::string::npos) << errors[r];
  }
}

TEST_F(Tp2Gpu, MismatchedShapesFailOnEveryRankWithoutHanging) {
  auto comms = Communicator::create_local(2);
  std::vector<std::string> errors(2);
  parallax::run_local_ranks(comms, [&](Communicator& comm) {
    const std::int64_t t = comm.rank() == 0 ? 8 : 9;  // the bug being caught
    parallax::tp::ColumnParallelLinear layer(comm, 16, 32, {});
    parallax::DeviceBuffer<bf16> x(t * 16), w(16 * 16), y(t * 32);
    parallax::Stream stream;
    try {
      layer.forward(x.data(), t, w.data(), nullptr, y.data(), stream);
      comm.wait(stream, "forward");
    } catch (const parallax::InvalidArgument& e) {
      errors[comm.rank()] = e.what();
    }
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("differs across ranks"), std::string::npos) << "rank " << r << ": '" << errors[r] << "'";
    EXPECT_NE(errors[r].find("rank 0 has [8, 16, 32"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("rank 1 has [9, 16, 32"), std::string::npos) << errors[r];
  }
}

// Options::compute_streams and Options::chunk_schedule on the column forward, both transports: one stream (the
// old pipeline), two (the default: chunk c on stream c % 2) and three; uniform and tapered chunks. The cases
// with t >= 128 x chunks cut the tapered chunks at 128-row multiples, the others at single rows. Repeated
// calls (fresh Y each, earlier calls on -X) catch a push gated by the wrong stream's event: it would copy a
// chunk of Y before its GEMM wrote it (stale values from the earlier call or the NaN poison).
TEST_F(Tp2Gpu, ColumnComputeStreamsAndChunkSchedules) {
  using parallax::tp::ChunkSchedule;
  using parallax::tp::Transport;
  const Case cases[] = {{7, 17, 33, 3, true}, {600, 40, 75, 4, true}, {1000, 33, 64, 7, true}, {129, 64, 1000, 4, true}};
  auto comms = Communicator::create_local(2);
  for (Transport tr : {Transport::kCopyEngine, Transport::kNccl})
    for (ChunkSchedule sched : {ChunkSchedule::kUniform, ChunkSchedule::kTapered})
      for (int streams : {1, 2, 3})
        for (const Case& c : cases) check_column(2, c, tr, 2, streams, sched, "cublas", &comms);
  // Sequential baseline with the new options set: they must not change it (everything stays on one stream).
  for (ChunkSchedule sched : {ChunkSchedule::kUniform, ChunkSchedule::kTapered})
    check_column(2, {600, 40, 75, 4, false}, Transport::kCopyEngine, 2, 2, sched, "cublas", &comms);
}

// parallax's own GEMMs (auto: the persistent Hopper level on aligned shapes) on two concurrent compute
// streams: two persistent grids share the GPU during the hand-over from one chunk to the next.
TEST_F(Tp2Gpu, ColumnParallaxGemmOnTwoComputeStreams) {
  using parallax::tp::ChunkSchedule;
  using parallax::tp::Transport;
  const Case cases[] = {{1024, 256, 1024, 4, true}, {2048, 128, 512, 8, true}, {1000, 96, 200, 5, true}};
  auto comms = Communicator::create_local(2);
  for (ChunkSchedule sched : {ChunkSchedule::kUniform, ChunkSchedule::kTapered}) {
    for (const Case& c : cases) check_column(2, c, Transport::kCopyEngine, 2, 2, sched, "auto", &comms);
    check_column(2, cases[0], Transport::kNccl, 2, 2, sched, "auto", &comms);
  }
}

TEST_F(Tp2Gpu, RowAndMlpComputeStreamsAndChunkSchedules) {
  using parallax::tp::ChunkSchedule;
  auto comms = Communicator::create_local(2);
  for (ChunkSchedule sched : {ChunkSchedule::kUniform, ChunkSchedule::kTapered})
    for (int streams : {1, 2, 3}) {
      check_row(2, {600, 40, 75, 4, true}, streams, sched, &comms);
      check_row(2, {129, 64, 33, 3, true}, streams, sched, &comms);
    }
  for (ChunkSchedule sched : {ChunkSchedule::kUniform, ChunkSchedule::kTapered})
    for (int streams : {1, 2, 3})
      for (bool save_h : {true, false}) {
        check_mlp(comms, {600, 64, 96, 40, 4, true}, save_h, "cublas", streams, sched);
        check_mlp(comms, {129, 33, 75, 17, 3, true}, save_h, "cublas", streams, sched);
      }
  // The persistent GEMM (aligned shape) under the fused GELU epilogue, two streams.
  for (ChunkSchedule sched : {ChunkSchedule::kUniform, ChunkSchedule::kTapered})
    for (bool save_h : {true, false}) check_mlp(comms, {1024, 256, 512, 256, 4, true}, save_h, "auto", 2, sched);
}

// Ranks that disagree on the chunk schedule would cut different rows (the copy-engine receiver would unpack
// rows that have not landed): the shape exchange names it on every rank instead.
TEST_F(Tp2Gpu, MismatchedChunkScheduleFailsOnEveryRank) {
  auto comms = Communicator::create_local(2);
  std::vector<std::string> errors(2);
  parallax::run_local_ranks(comms, [&](Communicator& comm) {
    parallax::tp::Options opt;
    opt.chunk_schedule = comm.rank() == 0 ? parallax::tp::ChunkSchedule::kUniform
                                          : parallax::tp::ChunkSchedule::kTapered;
    parallax::tp::ColumnParallelLinear layer(comm, 16, 32, opt);
    parallax::DeviceBuffer<bf16> x(8 * 16), w(16 * 16), y(8 * 32);
    parallax::Stream stream;
    try {
      layer.forward(x.data(), 8, w.data(), nullptr, y.data(), stream);
      comm.wait(stream, "forward");
    } catch (const parallax::InvalidArgument& e) {
      errors[comm.rank()] = e.what();
    }
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("chunk schedule"), std::string::npos) << "rank " << r << ": '" << errors[r] << "'";
    EXPECT_NE(errors[r].find("rank 0 has [8, 16, 32, 4, 0]"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("rank 1 has [8, 16, 32, 4, 1]"), std::string::npos) << errors[r];
  }
}

TEST_F(Comm2Gpu, AllCollectivesAreExact) {
  auto comms = Communicator::create_local(2);
  std::mutex mutex;
  parallax::run_local_ranks(comms, [&](Communicator& c) {
    const std::size_t n = 4097;  // odd on purpose
    std::vector<float> h(2 * n);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<float>((c.rank() + 1) * (i % 11 + 1));
    auto send = upload(h);
    parallax::DeviceBuffer<float> ar(2 * n), ag(2 * n), rs(n), bc(2 * n);
    for (auto* b : {&ar, &ag, &rs, &bc}) b->fill_bytes(0xFF);
    c.all_reduce(send.data(), ar.data(), 2 * n, parallax::DType::kF32);
    c.all_gather(send.data(), ag.data(), n, parallax::DType::kF32);
    c.reduce_scatter(send.data(), rs.data(), n, parallax::DType::kF32);
    c.broadcast(send.data(), bc.data(), 2 * n, parallax::DType::kF32, 1);
    c.wait(nullptr, "collectives");
    const auto har = ar.download(), hag = ag.download(), hrs = rs.download(), hbc = bc.download();
    std::lock_guard lock(mutex);
    for (std::size_t i = 0; i < 2 * n; ++i) {
      ASSERT_EQ(har[i], 3.f * (i % 11 + 1)) << "all-reduce rank " << c.rank() << " index " << i;
      ASSERT_EQ(hag[i], static_cast<float>((i / n + 1) * (i % n % 11 + 1))) << "all-gather index " << i;
      ASSERT_EQ(hbc[i], static_cast<float>(2 * (i % 11 + 1))) << "broadcast index " << i;
    }
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(hrs[i], 3.f * ((c.rank() * n + i) % 11 + 1)) << "reduce-scatter rank " << c.rank() << " index " << i;
  });
}

TEST_F(Comm2Gpu, AMissingPeerTimesOutAndAbortsInsteadOfHanging) {
  // Opt-in: on the 4xH200 machine a run of the Tp/Comm suites did not finish within its 200 s limit (which
  // test stalled is not known yet). This test (a collective that never completes, then ncclCommAbort and
  // frees) is the prime suspect: it hangs if the abort does not stop the stuck kernel. Run it alone, under a
  // time limit, until it is cleared.
  const char* opt_in = std::getenv("PARALLAX_TEST_ABORT");
  if (opt_in == nullptr || std::string(opt_in) != "1")
    GTEST_SKIP() << "set PARALLAX_TEST_ABORT=1 to run (may hang the process if ncclCommAbort cannot stop the kernel)";
  auto comms = Communicator::create_local(2);
  std::string error;
  parallax::run_local_ranks(comms, [&](Communicator& c) {
    if (c.rank() == 1) return;  // never joins the all-reduce
    parallax::DeviceBuffer<float> buf(1024);
    buf.fill_bytes(0);
    c.all_reduce(buf.data(), buf.data(), 1024, parallax::DType::kF32);
    try {
      c.wait(nullptr, "lonely all-reduce", std::chrono::milliseconds(2000));
    } catch (const parallax::Error& e) {
      error = e.what();
    }
  });
  comms[1]->abort();
  EXPECT_NE(error.find("lonely all-reduce"), std::string::npos) << error;
  EXPECT_NE(error.find("timed out"), std::string::npos) << error;
  EXPECT_TRUE(comms[0]->aborted());
}

}  // namespace
