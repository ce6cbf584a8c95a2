// CPU tests of issue 7's host logic: split planning, bandwidth arithmetic, launcher environment parsing,
// argument validation of the comm / tp APIs and CLI (no GPU needed).
#include <gtest/gtest.h>

#include <set>

#include <map>
#include <numeric>
#include <string>

#include "cli.hpp"
#include "common/expect_invalid.hpp"
#include "parallax/comm.hpp"
#include "parallax/tp.hpp"
#include "tp/compute_streams.hpp"
#include "tp/tp_kernels.hpp"

namespace {

using parallax::Collective;
using parallax::testing::expect_invalid;

TEST(SplitPlan, EvenSplit) {
  const auto s = parallax::plan_split(28672, 2);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].offset, 0);
  EXPECT_EQ(s[0].size, 14336);
  EXPECT_EQ(s[1].offset, 14336);
  EXPECT_EQ(s[1].size, 14336);
  EXPECT_EQ(parallax::max_split(28672, 2), 14336);
}

TEST(SplitPlan, UnevenSplitsGiveTheRemainderToTheFirstRanks) {
  const auto s = parallax::plan_split(10, 4);  // 3 3 2 2
  ASSERT_EQ(s.size(), 4u);
  const std::int64_t sizes[] = {3, 3, 2, 2}, offsets[] = {0, 3, 6, 8};
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(s[r].size, sizes[r]) << "rank " << r;
    EXPECT_EQ(s[r].offset, offsets[r]) << "rank " << r;
  }
  EXPECT_EQ(parallax::max_split(10, 4), 3);
}

TEST(SplitPlan, CoversEveryItemExactlyOnceForManyShapes) {
  for (std::int64_t total : {0, 1, 7, 17, 127, 129, 1000, 4095, 28673})
    for (int parts : {1, 2, 3, 4, 7, 8}) {
      const auto s = parallax::plan_split(total, parts);
      ASSERT_EQ(static_cast<int>(s.size()), parts);
      std::int64_t next = 0, lo = total, hi = 0;
      for (const auto& p : s) {
        EXPECT_EQ(p.offset, next) << total << "/" << parts;
        next += p.size;
        lo = std::min(lo, p.size);
        hi = std::max(hi, p.size);
      }
      EXPECT_EQ(next, total) << total << "/" << parts;
      EXPECT_LE(hi - lo, 1) << total << "/" << parts;
      EXPECT_EQ(hi, parallax::max_split(total, parts)) << total << "/" << parts;
    }
}

TEST(SplitPlan, MoreRanksThanItemsLeavesSomeEmpty) {
  const auto s = parallax::plan_split(1, 3);
  EXPECT_EQ(s[0].size, 1);
  EXPECT_EQ(s[1].size, 0);
  EXPECT_EQ(s[2].size, 0);
  EXPECT_EQ(s[2].offset, 1);
}

TEST(SplitPlan, RejectsBadArguments) {
  expect_invalid([] { parallax::plan_split(-1, 2); }, "total", ">= 0");
  expect_invalid([] { parallax::plan_split(4, 0); }, "parts", ">= 1");
  expect_invalid([] { parallax::max_split(4, 0); }, "parts", ">= 1");
}

TEST(TpRowChunks, ClampsToRowsAndCovers) {
  const auto c = parallax::tp::plan_row_chunks(5, 8);
  EXPECT_EQ(c.size(), 5u);
  const auto d = parallax::tp::plan_row_chunks(8192, 4);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[3].offset, 6144);
  EXPECT_EQ(d[3].size, 2048);
  expect_invalid([] { parallax::tp::plan_row_chunks(8, 0); }, "chunks", ">= 1");
}

// The invariants every chunk plan must keep (the layers and the copy-engine gather index rows by them):
// min(chunks, t) chunks, in order, contiguous from row 0, each >= 1 row, covering exactly t rows.
void expect_valid_plan(const std::vector<parallax::Split>& plan, std::int64_t t, int chunks, const std::string& ctx) {
  ASSERT_EQ(plan.size(), static_cast<std::size_t>(std::min<std::int64_t>(chunks, t))) << ctx;
  std::int64_t next = 0;
  for (const auto& c : plan) {
    EXPECT_EQ(c.offset, next) << ctx;
    EXPECT_GE(c.size, 1) << ctx;
    next = c.offset + c.size;
  }
  EXPECT_EQ(next, t) << ctx;
}

TEST(TpRowChunks, UniformIsThePlanSplitOfTheRows) {
  for (std::int64_t t : {1, 2, 7, 129, 8192})
    for (int chunks : {1, 3, 4, 8}) {
      const auto plan = parallax::tp::plan_row_chunks(t, chunks, parallax::tp::ChunkSchedule::kUniform);
      const auto split = parallax::plan_split(t, static_cast<int>(std::min<std::int64_t>(chunks, t)));
      ASSERT_EQ(plan.size(), split.size());
      for (std::size_t i = 0; i < plan.size(); ++i) {
        EXPECT_EQ(plan[i].offset, split[i].offset);
        EXPECT_EQ(plan[i].size, split[i].size);
      }
    }
}

// Every (t, chunks, align) in a dense range, tiny t included: the invariants above, sizes non-increasing
// (first chunk the largest, last the smallest), and the cuts at multiples of `align` whenever t holds at
// least one `align`-row unit per chunk.
TEST(TpRowChunks, TaperedCoversInOrderNonIncreasingAndAligned) {
  using parallax::tp::ChunkSchedule;
  for (std::int64_t align : {1, 7, 128})
    for (std::int64_t t = 1; t <= 700; ++t)
      for (int chunks = 1; chunks <= 12; ++chunks) {
        const std::string ctx = "t " + std::to_string(t) + " chunks " + std::to_string(chunks) + " align " +
                                std::to_string(align);
        const auto plan = parallax::tp::plan_row_chunks(t, chunks, ChunkSchedule::kTapered, align);
        expect_valid_plan(plan, t, chunks, ctx);
        for (std::size_t i = 1; i < plan.size(); ++i) ASSERT_LE(plan[i].size, plan[i - 1].size) << ctx;
        const bool aligned = (t + align - 1) / align >= static_cast<std::int64_t>(plan.size());
        if (aligned)
          for (std::size_t i = 1; i < plan.size(); ++i) ASSERT_EQ(plan[i].offset % align, 0) << ctx;
      }
}

TEST(TpRowChunks, TaperedAtTheBarShapeShrinksTheLastChunk) {
  using parallax::tp::ChunkSchedule;
  // t 8192 = 64 units of 128 rows; one unit each, the 60 spare by weights 4:3:2:1 -> 24, 18, 12, 6.
  const auto plan = parallax::tp::plan_row_chunks(8192, 4, ChunkSchedule::kTapered);
  ASSERT_EQ(plan.size(), 4u);
  const std::int64_t expected[] = {25 * 128, 19 * 128, 13 * 128, 7 * 128};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(plan[i].size, expected[i]) << "chunk " << i;
  // The exposed tail is the last chunk's communication: 896 rows instead of uniform's 2048.
  EXPECT_LT(plan.back().size * 2, parallax::tp::plan_row_chunks(8192, 4).back().size);
  // An unaligned t: the last chunk gives back the rows its last unit has beyond t.
  const auto odd = parallax::tp::plan_row_chunks(8193, 4, ChunkSchedule::kTapered);
  expect_valid_plan(odd, 8193, 4, "t 8193");
  for (std::size_t i = 1; i < odd.size(); ++i) EXPECT_EQ(odd[i].offset % 128, 0);
  // Fewer 128-row units than chunks: single-row cuts, still non-increasing.
  const auto small = parallax::tp::plan_row_chunks(300, 4, ChunkSchedule::kTapered);
  expect_valid_plan(small, 300, 4, "t 300");
  EXPECT_GT(small.front().size, small.back().size);
}

TEST(TpRowChunks, TinyTokenCounts) {
  using parallax::tp::ChunkSchedule;
  for (ChunkSchedule s : {ChunkSchedule::kUniform, ChunkSchedule::kTapered}) {
    const auto one = parallax::tp::plan_row_chunks(1, 8, s);
    ASSERT_EQ(one.size(), 1u);
    EXPECT_EQ(one[0].offset, 0);
    EXPECT_EQ(one[0].size, 1);
    const auto three = parallax::tp::plan_row_chunks(3, 8, s);
    ASSERT_EQ(three.size(), 3u);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(three[i].size, 1);
  }
}

TEST(TpRowChunks, RejectsBadArguments) {
  using parallax::tp::ChunkSchedule;
  expect_invalid([] { parallax::tp::plan_row_chunks(0, 4); }, "t", ">= 1");
  expect_invalid([] { parallax::tp::plan_row_chunks(8, 4, ChunkSchedule::kTapered, 0); }, "align", ">= 1");
  expect_invalid([] { parallax::tp::plan_row_chunks(8, 4, static_cast<ChunkSchedule>(5)); }, "chunk_schedule",
                 "enumerator");
}

TEST(TpChunkSchedule, NamesRoundTripAndUnknownIsRejected) {
  using parallax::tp::ChunkSchedule;
  for (ChunkSchedule s : {ChunkSchedule::kUniform, ChunkSchedule::kTapered})
    EXPECT_EQ(parallax::tp::parse_chunk_schedule(parallax::tp::chunk_schedule_name(s)), s);
  expect_invalid([] { parallax::tp::parse_chunk_schedule("geometric"); }, "chunk_schedule", "valid: uniform, tapered");
}

TEST(TpOptions, ComputeStreamsAndChunkScheduleValidation) {
  parallax::tp::Options o;
  EXPECT_EQ(o.compute_streams, 2);  // the default overlaps consecutive chunks' GEMM tails
  EXPECT_EQ(o.chunk_schedule, parallax::tp::ChunkSchedule::kUniform);
  for (int s : {1, 2, 8}) {
    o.compute_streams = s;
    EXPECT_NO_THROW(parallax::tp::validate(o)) << s;
  }
  for (int s : {0, -1, 9}) {
    o.compute_streams = s;
    expect_invalid([&] { parallax::tp::validate(o); }, "compute_streams", "[1, 8]");
  }
  o.compute_streams = 2;
  o.chunk_schedule = static_cast<parallax::tp::ChunkSchedule>(2);
  expect_invalid([&] { parallax::tp::validate(o); }, "chunk_schedule", "enumerator");
  o.chunk_schedule = parallax::tp::ChunkSchedule::kTapered;
  EXPECT_NO_THROW(parallax::tp::validate(o));
}

// The chunk -> stream mapping without a device: with one stream every chunk runs on the caller's stream and
// fork/join enqueue nothing (no CUDA call is made, so this runs on CPU-only machines); a bad count is
// rejected before anything is created.
TEST(TpComputeStreams, OneStreamIsTheCallersAndBadCountsAreRejected) {
  parallax::tp::detail::ComputeStreams streams;
  auto* caller = reinterpret_cast<cudaStream_t>(0x1234);  // never dereferenced: count 1 makes no CUDA call
  streams.fork(caller, 1);
  EXPECT_EQ(streams.count(), 1);
  for (std::size_t c = 0; c < 9; ++c) EXPECT_EQ(streams.at(c), caller);
  streams.join();
  expect_invalid([&] { streams.fork(caller, 0); }, "compute_streams", ">= 1");
}

TEST(BusBandwidth, FactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(parallax::bus_bandwidth_factor(Collective::kAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(parallax::bus_bandwidth_factor(Collective::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(parallax::bus_bandwidth_factor(Collective::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(parallax::bus_bandwidth_factor(Collective::kReduceScatter, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(parallax::bus_bandwidth_factor(Collective::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(parallax::bus_bandwidth_factor(Collective::kReduce, 8), 1.0);
  EXPECT_DOUBLE_EQ(parallax::bus_bandwidth_factor(Collective::kAllReduce, 1), 0.0);
}

TEST(BusBandwidth, Arithmetic) {
  // 1 GiB all-reduce in 6.6 ms on 2 ranks: algbw 162.7 GB/s, busbw x1.
  const std::size_t gib = std::size_t{1} << 30;
  EXPECT_NEAR(parallax::algorithm_bandwidth_gbs(gib, 6.6e-3), 162.69, 0.01);
  EXPECT_NEAR(parallax::bus_bandwidth_gbs(Collective::kAllReduce, 2, gib, 6.6e-3), 162.69, 0.01);
  EXPECT_NEAR(parallax::bus_bandwidth_gbs(Collective::kAllReduce, 4, gib, 6.6e-3), 162.69 * 1.5, 0.02);
  expect_invalid([] { parallax::algorithm_bandwidth_gbs(1, 0.0); }, "seconds", "> 0");
  expect_invalid([] { parallax::bus_bandwidth_factor(Collective::kAllReduce, 0); }, "nranks", ">= 1");
}

TEST(Collectives, NamesRoundTripAndUnknownIsRejected) {
  for (Collective op : parallax::all_collectives())
    EXPECT_EQ(parallax::parse_collective(parallax::collective_name(op)), op);
  expect_invalid([] { parallax::parse_collective("allreduce"); }, "op", "valid: broadcast");
}

parallax::EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(LaunchEnv, NoneSet) { EXPECT_FALSE(parallax::parse_launch_env(env_of({})).has_value()); }

TEST(LaunchEnv, OpenMpi) {
  const auto e = parallax::parse_launch_env(env_of({{"OMPI_COMM_WORLD_RANK", "3"},
                                                    {"OMPI_COMM_WORLD_SIZE", "4"},
                                                    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(e->world_size, 4);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->source, "OpenMPI");
}

TEST(LaunchEnv, OpenMpiWinsOverTorchrun) {
  const auto e = parallax::parse_launch_env(env_of({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                                                    {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"RANK", "5"},
                                                    {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "5"}}));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->source, "OpenMPI");
  EXPECT_EQ(e->world_size, 2);
}

TEST(LaunchEnv, TorchrunAndMpich) {
  auto t = parallax::parse_launch_env(env_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}}));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->source, "torchrun");
  auto m = parallax::parse_launch_env(env_of({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "0"}}));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->source, "MPICH");
  EXPECT_EQ(m->local_rank, 0);
}

TEST(LaunchEnv, MalformedValuesNameTheVariable) {
  expect_invalid([] { parallax::parse_launch_env(env_of({{"OMPI_COMM_WORLD_RANK", "x"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                                                          {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}})); },
                 "env", "OMPI_COMM_WORLD_RANK='x' is not an integer");
  expect_invalid([] { parallax::parse_launch_env(env_of({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                                                          {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}})); },
                 "env", "must be < OMPI_COMM_WORLD_SIZE=2");
  expect_invalid([] { parallax::parse_launch_env(env_of({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}})); },
                 "env", "OMPI_COMM_WORLD_LOCAL_RANK is not set");
  expect_invalid([] { parallax::parse_launch_env(env_of({{"RANK", "-1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}})); },
                 "env", "RANK=-1 must be >= 0");
  expect_invalid([] { parallax::parse_launch_env(env_of({{"RANK", "1"}, {"WORLD_SIZE", "0"}, {"LOCAL_RANK", "0"}})); },
                 "env", "WORLD_SIZE=0 must be >= 1");
}

TEST(Nvls, SetToZeroUnlessAlreadySet) {
  ::unsetenv("NCCL_NVLS_ENABLE");
  EXPECT_EQ(parallax::ensure_nvls_disabled(), "0");
  ::setenv("NCCL_NVLS_ENABLE", "1", 1);
  EXPECT_EQ(parallax::ensure_nvls_disabled(), "1");  // an explicit choice is respected
  ::setenv("NCCL_NVLS_ENABLE", "0", 1);
}

TEST(NcclTypes, Mapping) {
  EXPECT_EQ(parallax::nccl_type(parallax::DType::kBF16), ncclBfloat16);
  EXPECT_EQ(parallax::nccl_type(parallax::DType::kF32), ncclFloat32);
  EXPECT_EQ(parallax::nccl_type(parallax::DType::kF16), ncclFloat16);
}

TEST(TpOptions, Validation) {
  parallax::tp::Options o;
  EXPECT_NO_THROW(parallax::tp::validate(o));
  o.chunks = 0;
  expect_invalid([&] { parallax::tp::validate(o); }, "chunks", "[1, 1024]");
  o.chunks = 2;
  o.gemm = "fastest";
  expect_invalid([&] { parallax::tp::validate(o); }, "kernel", "valid");
}

// ---- CLI parsing (nothing runs) ----
int parse(std::vector<std::string> args) {
  parallax::cli::Action action;
  auto app = parallax::cli::make_app(action);
  std::vector<const char*> argv{"parallax"};
  for (auto& a : args) argv.push_back(a.c_str());
  try {
    app->parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return 2;
  }
  return action ? 0 : 1;
}

TEST(CommCli, AcceptsDocumentedOptions) {
  EXPECT_EQ(parse({"comm", "--op", "all-reduce", "--min-bytes", "1024", "--max-bytes", "1073741824", "--gpus", "2"}), 0);
  EXPECT_EQ(parse({"comm", "--op", "all", "--json"}), 0);
}

TEST(CommCli, RejectsBadOptions) {
  EXPECT_EQ(parse({"comm", "--op", "allreduce"}), 2);
  EXPECT_EQ(parse({"comm", "--min-bytes", "2"}), 2);
  EXPECT_EQ(parse({"comm", "--gpus", "0"}), 2);
}

TEST(TpCli, AcceptsDocumentedOptions) {
  EXPECT_EQ(parse({"tp", "--gpus", "2", "--t", "8192", "--k", "8192", "--n", "28672", "--layer", "column",
                   "--overlap", "on", "--chunks", "4", "--scaling", "strong", "--gemm", "cublas", "--json"}), 0);
  EXPECT_EQ(parse({"tp", "--layer", "row", "--overlap", "both", "--scaling", "weak", "--gemm", "auto"}), 0);
}

TEST(TpCli, AcceptsTransportAndSmOptions) {
  EXPECT_EQ(parse({"tp", "--transport", "copy-engine", "--gemm-sms", "116", "--nccl-max-ctas", "16"}), 0);
  EXPECT_EQ(parse({"tp", "--transport", "nccl", "--gemm-sms", "-1"}), 0);
  EXPECT_EQ(parse({"tp", "--transport", "auto", "--gemm-sms", "0", "--nccl-max-ctas", "0"}), 0);
}

TEST(TpCli, AcceptsComputeStreamsAndChunkSchedule) {
  EXPECT_EQ(parse({"tp", "--compute-streams", "1", "--chunk-schedule", "uniform"}), 0);
  EXPECT_EQ(parse({"tp", "--compute-streams", "8", "--chunk-schedule", "tapered", "--layer", "mlp"}), 0);
  EXPECT_EQ(parse({"tp", "--compute-streams", "2", "--chunk-schedule", "tapered", "--transport", "copy-engine",
                   "--chunks", "8"}), 0);
}

TEST(TpCli, RejectsBadComputeStreamsAndChunkSchedule) {
  EXPECT_EQ(parse({"tp", "--compute-streams", "0"}), 2);
  EXPECT_EQ(parse({"tp", "--compute-streams", "9"}), 2);
  EXPECT_EQ(parse({"tp", "--chunk-schedule", "geometric"}), 2);
  EXPECT_EQ(parse({"tp", "--chunk-schedule", "Tapered"}), 2);
}

TEST(TpCli, RejectsBadTransportAndSmOptions) {
  EXPECT_EQ(parse({"tp", "--transport", "carrier-pigeon"}), 2);
  EXPECT_EQ(parse({"tp", "--gemm-sms", "-2"}), 2);
  EXPECT_EQ(parse({"tp", "--nccl-max-ctas", "65"}), 2);
}

TEST(TpTransport, NamesRoundTripAndUnknownIsRejected) {
  using parallax::tp::Transport;
  for (Transport t : {Transport::kNccl, Transport::kCopyEngine, Transport::kAuto})
    EXPECT_EQ(parallax::tp::parse_transport(parallax::tp::transport_name(t)), t);
  try {
    parallax::tp::parse_transport("ce");
    FAIL() << "expected InvalidArgument";
  } catch (const parallax::InvalidArgument& e) {
    EXPECT_EQ(e.argument(), "transport");
    EXPECT_NE(std::string(e.what()).find("copy-engine"), std::string::npos) << e.what();
  }
}

TEST(TpOptions, TransportAndGemmSmsValidation) {
  parallax::tp::Options o;
  o.gemm_sms = -2;
  EXPECT_THROW(parallax::tp::validate(o), parallax::InvalidArgument);
  o.gemm_sms = 0;
  o.transport = static_cast<parallax::tp::Transport>(7);
  EXPECT_THROW(parallax::tp::validate(o), parallax::InvalidArgument);
  o.transport = parallax::tp::Transport::kCopyEngine;
  EXPECT_NO_THROW(parallax::tp::validate(o));
}

TEST(TpGemmSms, AutoLeavesTheCommunicatorsCtasOnlyWhenNcclOverlaps) {
  using parallax::tp::resolve_gemm_sms;
  EXPECT_EQ(resolve_gemm_sms(-1, 132, 16, true), 116);  // leave NCCL its 16 blocks
  EXPECT_EQ(resolve_gemm_sms(-1, 132, 16, false), 0);   // nothing overlaps (copy engines / sequential)
  EXPECT_EQ(resolve_gemm_sms(-1, 132, 0, true), 0);     // NCCL unbounded: capping would not help it
  EXPECT_EQ(resolve_gemm_sms(-1, 132, 120, true), 66);  // never below half the GPU
  EXPECT_EQ(resolve_gemm_sms(0, 132, 16, true), 0);     // explicit "all"
  EXPECT_EQ(resolve_gemm_sms(100, 132, 16, false), 100);
  EXPECT_EQ(resolve_gemm_sms(500, 132, 16, false), 132);
  EXPECT_THROW(resolve_gemm_sms(-3, 132, 16, true), parallax::InvalidArgument);
}

TEST(CommConfig, Validation) {
  parallax::CommConfig c;
  EXPECT_NO_THROW(parallax::validate(c));
  c.max_ctas = 16;
  c.min_ctas = 4;
  EXPECT_NO_THROW(parallax::validate(c));
  c.min_ctas = 32;
  EXPECT_THROW(parallax::validate(c), parallax::InvalidArgument);
  c = {};
  c.max_ctas = 65;
  EXPECT_THROW(parallax::validate(c), parallax::InvalidArgument);
  c.max_ctas = -1;
  EXPECT_THROW(parallax::validate(c), parallax::InvalidArgument);
}

TEST(SignalPad, SlotsAreDistinctAndInRange) {
  for (int ranks : {1, 2, 3, 8})
    for (int chunks : {1, 4, 7}) {
      parallax::tp::SignalPadLayout l{ranks, chunks};
      std::set<std::size_t> seen;
      for (int src = 0; src < ranks; ++src) {
        seen.insert(l.ready(src));
        for (int c = 0; c < chunks; ++c) seen.insert(l.data(c, src));
      }
      EXPECT_EQ(seen.size(), l.slots()) << ranks << " ranks, " << chunks << " chunks";
      EXPECT_LT(*seen.rbegin(), l.slots());
      EXPECT_THROW(l.data(chunks, 0), parallax::InvalidArgument);
      EXPECT_THROW(l.ready(ranks), parallax::InvalidArgument);
    }
}

TEST(SignalPad, EpochsSkipZeroAndCompareCyclically) {
  using parallax::tp::epoch_reached;
  using parallax::tp::next_epoch;
  EXPECT_EQ(next_epoch(0), 1u);
  EXPECT_EQ(next_epoch(41), 42u);
  EXPECT_EQ(next_epoch(0xFFFFFFFFu), 1u);  // 0 means "never written" and is never a live epoch
  EXPECT_TRUE(epoch_reached(5, 5));
  EXPECT_TRUE(epoch_reached(6, 5));       // a peer already one call ahead
  EXPECT_FALSE(epoch_reached(4, 5));      // the previous call's flag does not satisfy this call
  EXPECT_FALSE(epoch_reached(0, 1));      // a fresh pad satisfies nothing
  EXPECT_TRUE(epoch_reached(1, 0xFFFFFFFFu));   // across the wrap: 1 comes after 2^32 - 1
  EXPECT_FALSE(epoch_reached(0xFFFFFFFFu, 1));
}

// The protocol of the copy-engine gather simulated on the host: P ranks, C chunks, several calls; flags
// are written and checked exactly as the streams would (waits become asserts on the pad values), with the
// ranks' steps interleaved in a fixed adversarial order (every rank finishes call E's pushes before anyone
// unpacks). Checks no wait is satisfied by a stale epoch and every wait is satisfiable.
TEST(SignalPad, HostSimulationOfTheProtocol) {
  const int P = 3, C = 4;
  parallax::tp::SignalPadLayout l{P, C};
  std::vector<std::vector<std::uint32_t>> pad(P, std::vector<std::uint32_t>(l.slots(), 0));
  std::vector<std::uint32_t> epoch(P, 0);
  for (int call = 0; call < 5; ++call) {
    for (int r = 0; r < P; ++r) {  // begin(): announce "my workspace is free for this epoch"
      epoch[r] = parallax::tp::next_epoch(epoch[r]);
      for (int q = 0; q < P; ++q)
        if (q != r) pad[q][l.ready(r)] = epoch[r];
    }
    for (int r = 0; r < P; ++r)
      for (int c = 0; c < C; ++c)
        for (int q = 0; q < P; ++q) {
          if (q == r) continue;
          if (c == 0) ASSERT_TRUE(parallax::tp::epoch_reached(pad[r][l.ready(q)], epoch[r]));
          pad[q][l.data(c, r)] = epoch[r];  // after the copy
        }
    for (int r = 0; r < P; ++r)
      for (int c = 0; c < C; ++c)
        for (int q = 0; q < P; ++q)
          if (q != r) ASSERT_TRUE(parallax::tp::epoch_reached(pad[r][l.data(c, q)], epoch[r]));
    // Before the next call's announcements, no data flag may already satisfy the NEXT epoch.
    for (int r = 0; r < P; ++r)
      for (int c = 0; c < C; ++c)
        for (int q = 0; q < P; ++q)
          if (q != r) ASSERT_FALSE(parallax::tp::epoch_reached(pad[r][l.data(c, q)], epoch[r] + 1));
  }
}

TEST(TpCli, AcceptsTheMlpLayer) {
  EXPECT_EQ(parse({"tp", "--gpus", "2", "--layer", "mlp", "--t", "8192", "--k", "8192", "--n", "28672", "--overlap",
                   "both", "--chunks", "4", "--json"}), 0);
  EXPECT_EQ(parse({"tp", "--layer", "mlp", "--scaling", "weak", "--gemm", "wgmma-persistent", "--gemm-sms", "-1",
                   "--nccl-max-ctas", "16"}), 0);
  EXPECT_EQ(parse({"tp", "--layer", "MLP"}), 2);  // names are lower-case, like the other layers
}

// The host mirrors of the MLP's GELU (the GPU tests' reference): gelu' is the derivative of gelu (central
// differences), the tanh form's landmarks hold, and it differs from the erf form (it is the one gemm.hpp uses).
TEST(TpGelu, HostReferenceDerivativeMatchesFiniteDifferences) {
  using parallax::tp::detail::gelu_derivative_reference;
  using parallax::tp::detail::gelu_reference;
  EXPECT_EQ(gelu_reference(0.0), 0.0);
  EXPECT_DOUBLE_EQ(gelu_derivative_reference(0.0), 0.5);
  EXPECT_NEAR(gelu_reference(10.0), 10.0, 1e-12);
  EXPECT_NEAR(gelu_reference(-10.0), 0.0, 1e-12);
  // tanh form at x = 1: 0.5 (1 + tanh(sqrt(2/pi) 1.044715)) = 0.841192 (erf form: 0.841345).
  EXPECT_NEAR(gelu_reference(1.0), 0.8411920, 1e-6);
  for (double x = -6.0; x <= 6.0; x += 0.37) {
    const double h = 1e-5;
    const double fd = (gelu_reference(x + h) - gelu_reference(x - h)) / (2 * h);
    EXPECT_NEAR(gelu_derivative_reference(x), fd, 1e-8) << "x = " << x;
  }
}

TEST(TpCli, RejectsBadOptions) {
  EXPECT_EQ(parse({"tp", "--layer", "diagonal"}), 2);
  EXPECT_EQ(parse({"tp", "--overlap", "maybe"}), 2);
  EXPECT_EQ(parse({"tp", "--chunks", "0"}), 2);
  EXPECT_EQ(parse({"tp", "--gemm", "fastest"}), 2);
  EXPECT_EQ(parse({"tp", "--scaling", "linear"}), 2);
}

}  // namespace

namespace {
// Run by CTest under `mpirun -np 2` (test `mpi_launch_env`): the real launcher's variables parse to a
// consistent rank / size / local rank. Skips when not launched by OpenMPI.
TEST(LaunchEnvUnderMpirun, MatchesTheLauncher) {
  if (!std::getenv("OMPI_COMM_WORLD_RANK")) GTEST_SKIP() << "not launched by OpenMPI's mpirun";
  const auto e = parallax::parse_launch_env();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->source, "OpenMPI");
  EXPECT_EQ(e->world_size, std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE")));
  EXPECT_EQ(e->rank, std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")));
  EXPECT_GE(e->local_rank, 0);
  EXPECT_LE(e->local_rank, e->rank);
}
}  // namespace
