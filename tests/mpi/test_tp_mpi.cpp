// The column-parallel forward under `mpirun -np 2` (issue 7): one process per GPU, so the copy-engine gather
// goes through its CUDA IPC path (cudaIpcGetMemHandle / cudaIpcOpenMemHandle of the peer's workspace and
// signal pad; the ranks' pids differ, which is what selects that path in CopyEngineGather::prepare) instead
// of the one-process peer pointers the *2Gpu tests exercise. Every rank checks the full gathered Y against
//   * the single-GPU computation: the whole layer's GEMM Y = X W + b on this rank's own GPU (cuBLAS), and
//   * a float64 CPU reference from the same bf16 inputs,
// with the tolerances of tests/gpu/test_tp.cpp, outputs NaN-poisoned first.
//
// Run (the CTest test tp_mpi_2Gpu does exactly this; it is registered only when CMake found MPI):
//   build/tests/parallax_mpi_tests --probe-gpus 2 &&                      # exit 77 (skip) without 2 GPUs
//   mpirun -np 2 --oversubscribe build/tests/parallax_mpi_tests           # as root: --allow-run-as-root
// Inputs are random per run: rank 0's seed is shared through the communicator (PARALLAX_TEST_SEED replays).
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/tp_reference.hpp"
#include "parallax/comm.hpp"
#include "parallax/core.hpp"
#include "parallax/gemm.hpp"
#include "parallax/tp.hpp"

namespace {

using bf16 = __nv_bfloat16;
using parallax::Communicator;
using parallax::testing::expect_close;
using parallax::testing::matmul;
using parallax::testing::random_matrix;
using parallax::testing::upload;
using parallax::tp::ChunkSchedule;
using parallax::tp::Transport;

std::unique_ptr<Communicator> g_comm;  // made in main() under mpirun; null -> every test skips
std::string g_skip;                    // why there is no communicator

// The same seed on every rank: rank 0's (the inputs are replicated, as a data-parallel loader would give).
std::uint64_t shared_seed(std::uint64_t salt) {
  static const std::uint64_t base = [] {
    const char* env = std::getenv("PARALLAX_TEST_SEED");
    const std::int64_t mine = env ? std::strtoll(env, nullptr, 10)
                                  : static_cast<std::int64_t>(std::random_device{}() & 0x7fffffff);
    const std::int64_t v[] = {mine};
    const std::int64_t s = g_comm->exchange("test seed", v)[0];
    std::printf("[tp mpi tests] rank %d: seed %lld (PARALLAX_TEST_SEED=%lld replays)\n", g_comm->rank(),
                static_cast<long long>(s), static_cast<long long>(s));
    return static_cast<std::uint64_t>(s);
  }();
  return base ^ (salt * 0x9E3779B97F4A7C15ULL);
}

struct Case {
  std::int64_t t, k, n;
  int chunks;
  bool overlap;
  int compute_streams;
  ChunkSchedule schedule;
  std::string gemm;
};

std::string describe(const Case& c, Transport tr) {
  return "[rank " + std::to_string(g_comm->rank()) + " of " + std::to_string(g_comm->size()) + ", t " +
         std::to_string(c.t) + ", k " + std::to_string(c.k) + ", n " + std::to_string(c.n) + ", chunks " +
         std::to_string(c.chunks) + " " + std::string(parallax::tp::chunk_schedule_name(c.schedule)) +
         ", overlap " + (c.overlap ? "on" : "off") + ", compute streams " + std::to_string(c.compute_streams) +
         ", gemm " + c.gemm + ", transport " + std::string(parallax::tp::transport_name(tr)) + "]";
}

class TpMpi2Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!g_comm) GTEST_SKIP() << g_skip;
    if (g_comm->size() != 2) GTEST_SKIP() << "needs exactly 2 ranks (mpirun -np 2), got " << g_comm->size();
  }
};

// One layer, `calls` forwards with fresh inputs each (the copy-engine epochs advance, the workspace and pads
// are reused), every Y checked; `ts` lists t per call (growing t regrows and re-exchanges the IPC handles).
void check_column_forward(const Case& base, Transport tr, const std::vector<std::int64_t>& ts) {
  Communicator& comm = *g_comm;
  parallax::tp::Options opt;
  opt.chunks = base.chunks;
  opt.overlap = base.overlap;
  opt.gemm = base.gemm;
  opt.transport = tr;
  opt.compute_streams = base.compute_streams;
  opt.chunk_schedule = base.schedule;
  parallax::tp::ColumnParallelLinear layer(comm, base.k, base.n, opt);
  const parallax::Split s = layer.shard();
  parallax::Stream stream;
  int call = 0;
  for (std::int64_t t : ts) {
    Case c = base;
    c.t = t;
    const std::string ctx = describe(c, tr) + " call " + std::to_string(call);
    std::mt19937_64 rng(shared_seed(static_cast<std::uint64_t>(t * 7919 + base.k * 31 + base.n * 3 + call++ +
                                                               base.chunks * 101 + base.compute_streams * 1009 +
                                                               static_cast<int>(base.schedule) * 17 +
                                                               (base.overlap ? 5 : 0) + static_cast<int>(tr) * 257)));
    const auto x = random_matrix(t * c.k, rng), w = random_matrix(c.k * c.n, rng);
    std::vector<float> bias(c.n);
    for (auto& b : bias) b = std::uniform_real_distribution<float>(-1.f, 1.f)(rng);
    std::vector<bf16> w_shard(c.k * s.size);
    for (std::int64_t p = 0; p < c.k; ++p)
      for (std::int64_t j = 0; j < s.size; ++j) w_shard[p * s.size + j] = w.h[p * c.n + s.offset + j];
    std::vector<float> b_shard(bias.begin() + s.offset, bias.begin() + s.offset + s.size);
    auto d_x = upload(x.h), d_w = upload(w_shard), d_w_full = upload(w.h);
    auto d_b = upload(b_shard), d_b_full = upload(bias);
    parallax::DeviceBuffer<bf16> d_y(t * c.n), d_y1(t * c.n);
    d_y.fill_bytes(0xFF);
    d_y1.fill_bytes(0xFF);

    layer.forward(d_x.data(), t, d_w.data(), s.size ? d_b.data() : nullptr, d_y.data(), stream);
    // The single-GPU computation of the same layer on this rank's GPU: one GEMM over all n columns.
    parallax::GemmArgs g;
    g.m = static_cast<int>(t);
    g.n = static_cast<int>(c.n);
    g.k = static_cast<int>(c.k);
    g.a_type = g.b_type = g.c_type = parallax::DType::kBF16;
    g.a = d_x.data();
    g.lda = c.k;
    g.b = d_w_full.data();
    g.ldb = c.n;
    g.c = d_y1.data();
    g.ldc = c.n;
    g.bias = d_b_full.data();
    parallax::gemm(g, stream, "cublas");
    comm.wait(stream, "column forward under mpirun");
    const auto y = d_y.download(), y1 = d_y1.download();

    EXPECT_EQ(layer.transport_in_use(), tr) << ctx;
    std::vector<double> y1_d(y1.size());
    for (std::size_t i = 0; i < y1.size(); ++i) y1_d[i] = static_cast<double>(__bfloat162float(y1[i]));
    expect_close("Y vs the single-GPU GEMM", y, c.n, y1_d, c.n, t, c.n, 0, ctx);
    auto y_ref = matmul(t, c.n, c.k, [&](auto i, auto p) { return x.d[i * c.k + p]; },
                        [&](auto p, auto j) { return w.d[p * c.n + j]; });
    for (std::int64_t i = 0; i < t; ++i)
      for (std::int64_t j = 0; j < c.n; ++j) y_ref[i * c.n + j] += bias[j];
    expect_close("Y vs float64", y, c.n, y_ref, c.n, t, c.n, 0, ctx);
  }
}

// The IPC copy-engine path: overlapped and sequential, one / two compute streams, both chunk schedules,
// divisible and uneven n, three calls per layer.
TEST_F(TpMpi2Gpu, ColumnForwardCopyEngineMatchesSingleGpu) {
  for (ChunkSchedule sched : {ChunkSchedule::kUniform, ChunkSchedule::kTapered})
    for (int streams : {1, 2})
      for (bool overlap : {true, false}) {
        check_column_forward({0, 17, 33, 3, overlap, streams, sched, "cublas"}, Transport::kCopyEngine, {7, 7, 7});
        check_column_forward({0, 64, 1000, 4, overlap, streams, sched, "cublas"}, Transport::kCopyEngine,
                             {600, 600, 600});
      }
}

// parallax's own GEMM (auto: the persistent Hopper level on aligned shapes) on two compute streams.
TEST_F(TpMpi2Gpu, ColumnForwardCopyEngineParallaxGemm) {
  for (ChunkSchedule sched : {ChunkSchedule::kUniform, ChunkSchedule::kTapered})
    check_column_forward({0, 256, 1024, 4, true, 2, sched, "auto"}, Transport::kCopyEngine, {1024, 1024});
}

// t growing across calls on one layer: the workspace is reallocated and the IPC handles re-opened mid-life.
TEST_F(TpMpi2Gpu, ColumnForwardCopyEngineSurvivesGrowingTokens) {
  check_column_forward({0, 40, 75, 3, true, 2, ChunkSchedule::kTapered, "cublas"}, Transport::kCopyEngine,
                       {5, 300, 301, 17, 1000});
}

// The NCCL gather under mpirun too (the same layer, the other transport), for parity.
TEST_F(TpMpi2Gpu, ColumnForwardNcclMatchesSingleGpu) {
  for (int streams : {1, 2})
    check_column_forward({0, 64, 1000, 4, true, streams, ChunkSchedule::kTapered, "cublas"}, Transport::kNccl,
                         {600, 600});
}

}  // namespace

// --probe-gpus N: exit 0 when N GPUs are visible, 77 (CTest's skip code) otherwise, without MPI; the CTest
// driver runs it before mpirun so a machine without 2 GPUs reports the test as skipped, saying why.
// Otherwise: the suite, expected under `mpirun -np 2` (one GPU per rank by local rank).
int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--probe-gpus") == 0) {
      const int need = std::atoi(argv[i + 1]);
      const int have = parallax::has_gpu() ? parallax::device_count() : 0;
      if (have >= need) return 0;
      std::printf("tp mpi tests skipped: need %d GPUs, %d visible\n", need, have);
      return 77;
    }
  ::testing::InitGoogleTest(&argc, argv);
  if (!parallax::has_gpu()) {
    g_skip = "no CUDA GPU visible";
  } else if (!parallax::parse_launch_env().has_value()) {
    g_skip = "not launched by mpirun (run: mpirun -np 2 " + std::string(argv[0]) + ")";
  } else if (!parallax::mpi_available()) {
    g_skip = "this build has no MPI (the mpirun bootstrap is compiled out)";
  } else {
    g_comm = Communicator::from_mpi();
  }
  const int rc = RUN_ALL_TESTS();
  g_comm.reset();  // before MPI_Finalize (registered at exit by from_mpi)
  return rc;
}
