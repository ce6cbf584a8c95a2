// `parallax comm [--op OP|all] [--min-bytes B] [--max-bytes B] [--gpus N | under mpirun] [--iters I] [--json]`
//
// An nccl-tests-like table for the NCCL collectives through parallax::Communicator: per size, the median time
// (over --iters timed iterations after --warmup, measured with CUDA events on rank 0's comm stream), algbw =
// bytes / time and busbw = algbw * factor (comm.hpp documents the factors: all-reduce 2(n-1)/n, all-gather
// and reduce-scatter (n-1)/n, broadcast/reduce 1), and a correctness column from a separate checked run.
//
// Data: fp32, rank r's element i = (r + 1) * (i % 7 + 1), so every reduction is exact in fp32 and each
// gathered block names its rank. Buffers up to 64 MiB are checked completely; larger ones at 2^20 evenly
// spaced elements plus the first and last (the check is on the host).
//
// Launch: `parallax comm --gpus 2` (one process, one thread per GPU) or
// `mpirun -np 2 parallax comm` (one process per GPU; detected from OMPI_COMM_WORLD_* and friends; rank 0
// prints). NCCL_NVLS_ENABLE is set to 0 unless already set.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "cli.hpp"
#include "parallax/comm.hpp"
#include "parallax/core.hpp"
#include "parallax/results.hpp"
#include "table.hpp"

namespace parallax::cli {

namespace {

struct CommOptions {
  std::string op = "all";
  std::int64_t min_bytes = 1 << 20;
  std::int64_t max_bytes = std::int64_t{1} << 30;
  int gpus = 0;  // 0: every visible GPU (single-process mode)
  int iters = 20;
  int warmup = 5;
  OutputOptions output;
};

struct Measurement {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  bool correct = true;
  std::string problem;
};

float pattern(int rank, std::size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 7 + 1)); }

std::vector<std::size_t> check_indices(std::size_t count) {
  std::vector<std::size_t> idx;
  if (count * 4 <= (std::size_t{64} << 20)) {
    idx.resize(count);
    for (std::size_t i = 0; i < count; ++i) idx[i] = i;
    return idx;
  }
  const std::size_t samples = std::size_t{1} << 20;
  for (std::size_t s = 0; s < samples; ++s) idx.push_back(s * (count / samples));
  idx.push_back(count - 1);
  return idx;
}

// Runs on every rank (same sequence everywhere). Returns rank-local timing and correctness.
Measurement measure(Communicator& comm, Collective op, std::size_t bytes, int iters, int warmup) {
  const int P = comm.size(), r = comm.rank();
  // Element counts: per-rank block for all-gather (send) / reduce-scatter (recv); whole buffer otherwise.
  std::size_t total = std::max<std::size_t>(bytes / 4, static_cast<std::size_t>(P));
  total -= total % P;
  const std::size_t block = total / P;
  const std::size_t send_count = op == Collective::kAllGather ? block : total;
  const std::size_t recv_count = op == Collective::kReduceScatter ? block : total;
  DeviceBuffer<float> send(send_count), recv(recv_count);
  std::vector<float> host(send_count);
  for (std::size_t i = 0; i < send_count; ++i) host[i] = pattern(r, i);
  send.upload(host, comm.stream());
  const int root = 0;
  auto launch = [&] {
    switch (op) {
      case Collective::kBroadcast: comm.broadcast(send.data(), recv.data(), total, DType::kF32, root); break;
      case Collective::kReduce: comm.reduce(send.data(), recv.data(), total, DType::kF32, root); break;
      case Collective::kAllReduce: comm.all_reduce(send.data(), recv.data(), total, DType::kF32); break;
      case Collective::kAllGather: comm.all_gather(send.data(), recv.data(), block, DType::kF32); break;
      case Collective::kReduceScatter: comm.reduce_scatter(send.data(), recv.data(), block, DType::kF32); break;
    }
  };
  const std::string what = fmt::format("{} of {} bytes", collective_name(op), bytes);
  // Correctness run on poisoned output.
  recv.fill_bytes(0xFF, comm.stream());
  launch();
  comm.wait(comm.stream(), what);
  Measurement m;
  const bool has_output = !(op == Collective::kReduce && r != root);
  if (has_output) {
    const std::vector<float> out = recv.download(comm.stream());
    const double rank_sum = P * (P + 1) / 2.0;
    for (std::size_t i : check_indices(recv_count)) {
      double expected = 0;
      switch (op) {
        case Collective::kBroadcast: expected = pattern(root, i); break;
        case Collective::kReduce:
        case Collective::kAllReduce: expected = rank_sum * static_cast<double>(i % 7 + 1); break;
        case Collective::kAllGather: expected = pattern(static_cast<int>(i / block), i % block); break;
        case Collective::kReduceScatter:
          expected = rank_sum * static_cast<double>((r * block + i) % 7 + 1);
          break;
      }
      if (static_cast<double>(out[i]) != expected) {
        m.correct = false;
        m.problem = fmt::format("rank {} element {}: expected {} got {}", r, i, expected, out[i]);
        break;
      }
    }
  }
  for (int i = 0; i < warmup; ++i) launch();
  std::vector<Event> starts(iters), stops(iters);
  for (int i = 0; i < iters; ++i) {
    starts[i].record(comm.stream());
    launch();
    stops[i].record(comm.stream());
  }
  comm.wait(comm.stream(), what);
  std::vector<double> ms(iters);
  for (int i = 0; i < iters; ++i) ms[i] = stops[i].elapsed_since(starts[i]);
  std::sort(ms.begin(), ms.end());
  m.median_ms = ms[ms.size() / 2];
  m.min_ms = ms.front();
  m.max_ms = ms.back();
  return m;
}

std::vector<std::size_t> size_ladder(std::int64_t lo, std::int64_t hi) {
  std::vector<std::size_t> sizes;
  for (std::int64_t b = lo; b <= hi; b *= 2) sizes.push_back(static_cast<std::size_t>(b));
  return sizes;
}

int run_comm(const CommOptions& o) {
  require_gpu("comm");
  PX_REQUIRE(o.min_bytes >= 4, "--min-bytes", fmt::format("must be >= 4 (got {})", o.min_bytes));
  PX_REQUIRE(o.max_bytes >= o.min_bytes, "--max-bytes",
             fmt::format("must be >= --min-bytes (got {} < {})", o.max_bytes, o.min_bytes));
  PX_REQUIRE(o.iters >= 1, "--iters", "must be >= 1");
  PX_REQUIRE(o.warmup >= 0, "--warmup", "must be >= 0");
  std::vector<Collective> ops = o.op == "all" ? all_collectives() : std::vector<Collective>{parse_collective(o.op)};
  const auto sizes = size_ladder(o.min_bytes, o.max_bytes);
  ensure_nvls_disabled();

  const auto env = parse_launch_env();
  const bool under_mpi = env && env->world_size > 1;
  std::vector<std::unique_ptr<Communicator>> comms;
  if (under_mpi) {
    PX_REQUIRE(o.gpus == 0 || o.gpus == 1, "--gpus",
               fmt::format("is per process under a launcher ({} ranks from {}): leave it out", env->world_size,
                           env->source));
    comms.push_back(Communicator::from_mpi());
  } else {
    comms = Communicator::create_local(o.gpus > 0 ? o.gpus : device_count());
  }
  const int P = comms.front()->size();
  const bool leader = comms.front()->rank() == 0;

  struct Row {
    Collective op;
    std::size_t bytes;
    Measurement m;
  };
  std::vector<Row> rows;
  std::mutex mutex;
  const int steps = static_cast<int>(ops.size() * sizes.size());
  Progress progress(leader ? steps : 1);
  int step = 0;
  for (Collective op : ops)
    for (std::size_t bytes : sizes) {
      if (leader) progress.update(step++, fmt::format("{} {}", collective_name(op), bytes_iec(bytes)));
      Row row{op, bytes, {}};
      bool all_correct = true;
      std::string problem;
      run_local_ranks(comms, [&](Communicator& c) {
        const Measurement m = measure(c, op, bytes, o.iters, o.warmup);
        std::lock_guard lock(mutex);
        if (c.rank() == 0) row.m.median_ms = m.median_ms, row.m.min_ms = m.min_ms, row.m.max_ms = m.max_ms;
        if (!m.correct && all_correct) {
          all_correct = false;
          problem = m.problem;
        }
      });
      row.m.correct = all_correct;
      row.m.problem = problem;
      rows.push_back(row);
    }
  progress.finish();
  if (!leader) return 0;  // other MPI ranks print nothing

  results::Document doc = results::make_document();
  doc.command = "parallax comm";
  doc.context.emplace_back("ranks", static_cast<std::int64_t>(P));
  doc.context.emplace_back("bootstrap", std::string(under_mpi ? "mpirun (" + env->source + ")" : "threads"));
  if (const char* nvls = std::getenv("NCCL_NVLS_ENABLE")) doc.context.emplace_back("NCCL_NVLS_ENABLE", std::string(nvls));
  Table t({{"op"}, {"size"}, {"bytes"}, {"time ms"}, {"algbw GB/s"}, {"busbw GB/s"}, {"correct"}});
  bool ok = true;
  for (const Row& row : rows) {
    const double s = row.m.median_ms / 1e3;
    const double alg = algorithm_bandwidth_gbs(row.bytes, s);
    const double bus = bus_bandwidth_gbs(row.op, P, row.bytes, s);
    t.add_row({std::string(collective_name(row.op)), bytes_iec(row.bytes), std::to_string(row.bytes),
               milliseconds(row.m.median_ms), fixed(alg, 1), fixed(bus, 1), row.m.correct ? "yes" : "NO"});
    results::Record rec;
    rec.suite = "comm";
    rec.name = std::string(collective_name(row.op));
    rec.shape = {{"bytes", static_cast<std::int64_t>(row.bytes)}, {"ranks", static_cast<std::int64_t>(P)}};
    rec.dtype = "fp32";
    rec.median_ms = row.m.median_ms;
    rec.min_ms = row.m.min_ms;
    rec.max_ms = row.m.max_ms;
    rec.repetitions = o.iters;
    rec.bytes = static_cast<double>(row.bytes);
    rec.gbps = alg;
    rec.add_extra("algbw_gbs", alg);
    rec.add_extra("busbw_gbs", bus);
    rec.add_extra("busbw_factor", bus_bandwidth_factor(row.op, P));
    if (!row.m.correct) {
      rec.mark_incorrect(row.m.problem);
      ok = false;
    }
    doc.records.push_back(std::move(rec));
  }
  if (o.output.prints_table()) {
    fmt::print("NCCL collectives over {} rank(s), fp32, median of {} iterations (busbw factors: all-reduce "
               "2(n-1)/n, all-gather/reduce-scatter (n-1)/n, broadcast/reduce 1)\n\n", P, o.iters);
    t.print();
    for (const Row& row : rows)
      if (!row.m.correct) fmt::print("INCORRECT {} {}: {}\n", collective_name(row.op), row.bytes, row.m.problem);
  }
  emit_json(o.output, doc);
  return ok ? 0 : 1;
}

}  // namespace

void add_comm(CLI::App& root, Action& action) {
  auto options = std::make_shared<CommOptions>();
  CLI::App* cmd = root.add_subcommand("comm", "NCCL collective bandwidth table (like nccl-tests), checked results");
  cmd->add_option("--op", options->op, "broadcast | reduce | all-reduce | all-gather | reduce-scatter | all")
      ->check(CLI::IsMember({"broadcast", "reduce", "all-reduce", "all-gather", "reduce-scatter", "all"}));
  cmd->add_option("--min-bytes", options->min_bytes, "Smallest message (bytes, doubled up to --max-bytes)")
      ->check(CLI::Range(std::int64_t{4}, std::int64_t{1} << 36));
  cmd->add_option("--max-bytes", options->max_bytes, "Largest message (bytes)")
      ->check(CLI::Range(std::int64_t{4}, std::int64_t{1} << 36));
  cmd->add_option("--gpus", options->gpus, "GPUs driven by this process, one thread each (default: all visible; "
                                           "leave out under mpirun)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--iters", options->iters, "Timed iterations per size")->check(CLI::Range(1, 100000));
  cmd->add_option("--warmup", options->warmup, "Untimed iterations per size")->check(CLI::Range(0, 100000));
  add_output_options(*cmd, options->output);
  cmd->callback([options, &action] { action = [options] { return run_comm(*options); }; });
}

}  // namespace parallax::cli
