// `parallax tp --gpus N [--t T --k K --n N] [--layer column|row|mlp] [--overlap on|off|both] [--chunks C]
//              [--chunk-schedule uniform|tapered] [--compute-streams S] [--scaling strong|weak] [--gemm NAME]
//              [--transport nccl|copy-engine|auto] [--gemm-sms S] [--nccl-max-ctas C] [--iters I] [--json]`
//
// Times the tensor-parallel linear layers of parallax/tp.hpp (forward and backward, bf16, fp32 accumulate)
// on N GPUs of this process (one thread per GPU) against the 1-GPU computation, and splits the step into
// phases:
//   total          the TP step on rank 0's stream (median over --iters, CUDA events; no host sync inside)
//   GEMM           the same rank's GEMMs alone (its shard, one chunk, nothing communicated)
//   comm           the same collectives alone (same counts, no GEMM)
//   exposed comm   total - GEMM: the communication the overlap did not hide (plus scatter copies)
//   comm share     exposed / total
//   1-GPU          strong scaling: the whole layer's GEMMs on GPU 0; weak scaling: one shard's worth
//                  (n or k multiplied by N across the ranks, so each GPU keeps the --n / --k given)
//   speedup        1-GPU / total;  efficiency = speedup / N (strong) or 1-GPU / total (weak)
//   overlap bound  (GEMM + comm) / max(GEMM, comm): the best overlapped-vs-sequential ratio physics allows
//                  (perfect overlap hides the shorter of the two); printed for the backward bar.
// --layer mlp times tp::TensorParallelMLP with the transformer block's shape: X [t, k] -> hidden n -> Y [t, k]
// (so the bar's --k 8192 --n 28672 is a Llama-70B-sized MLP). Its forward is the fused-GELU (inference) form;
// its backward is given the pre-activation H saved by an untimed training forward. Its "GEMM" phase is the
// rank's whole computation without communication (the same layer over this rank's hidden units on a
// one-rank communicator, one chunk: GEMMs plus the elementwise GELU passes), its "comm" the all-reduce of
// [t, k] alone, and its 1-GPU reference the whole MLP on GPU 0 through the same class. Weak scaling grows the
// hidden width (n x N).
// --transport picks the column forward's gather (tp::Transport); --gemm-sms caps the GEMMs' SMs
// (tp::Options::gemm_sms; -1 = auto) and --nccl-max-ctas bounds NCCL's blocks (CommConfig::max_ctas), the
// pair that lets an NCCL all-reduce really run next to a persistent GEMM. --compute-streams spreads the
// overlapped forwards' row chunks over that many streams (tp::Options::compute_streams; 1 = every chunk's GEMM
// on one stream) and --chunk-schedule picks the row chunk sizes (tp::ChunkSchedule); both land in the JSON
// records' extras (compute_streams, chunk_schedule).
#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cli.hpp"
#include "parallax/comm.hpp"
#include "parallax/core.hpp"
#include "parallax/gemm.hpp"
#include "parallax/random.hpp"
#include "parallax/results.hpp"
#include "parallax/tp.hpp"
#include "table.hpp"

namespace parallax::cli {

namespace {

struct TpOptions {
  int gpus = 0;
  std::int64_t t = 8192, k = 8192, n = 28672;
  std::string layer = "column";
  std::string overlap = "both";
  int chunks = 4;
  std::string chunk_schedule = "uniform";
  int compute_streams = 2;
  std::string scaling = "strong";
  std::string gemm = "auto";
  std::string transport = "auto";
  int gemm_sms = -1;
  int nccl_max_ctas = 0;
  int iters = 10;
  int warmup = 3;
  OutputOptions output;
};

using bf16 = __nv_bfloat16;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A median with the spread it came from (the results schema wants min <= median <= max). Reads as the median.
struct Timed {
  double median = 0, min = 0, max = 0;
  Timed() = default;
  explicit Timed(double one) : median(one), min(one), max(one) {}
  operator double() const { return median; }  // NOLINT(google-explicit-constructor): arithmetic on phases
};

// Times fn() on `stream` (all ranks run it; the caller keeps rank 0's number).
Timed time_on(cudaStream_t stream, int warmup, int iters, const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<Event> a(iters), b(iters);
  for (int i = 0; i < iters; ++i) {
    a[i].record(stream);
    fn();
    b[i].record(stream);
  }
  PX_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> ms(iters);
  for (int i = 0; i < iters; ++i) ms[i] = b[i].elapsed_since(a[i]);
  Timed t;
  t.median = median(ms);
  t.min = *std::min_element(ms.begin(), ms.end());
  t.max = *std::max_element(ms.begin(), ms.end());
  return t;
}

GemmArgs bf16_gemm(std::int64_t m, std::int64_t n, std::int64_t k, Op op_a, const void* a, std::int64_t lda, Op op_b,
                   const void* b, std::int64_t ldb, DType c_type, void* c, std::int64_t ldc) {
  GemmArgs g;
  g.m = static_cast<int>(m);
  g.n = static_cast<int>(n);
  g.k = static_cast<int>(k);
  g.op_a = op_a;
  g.op_b = op_b;
  g.c_type = c_type;
  g.a = a;
  g.lda = lda;
  g.b = b;
  g.ldb = ldb;
  g.c = c;
  g.ldc = ldc;
  return g;
}

struct Phase {
  Timed total;
  double gemm = 0, comm = 0;
};

// One rank's measurement of forward and backward for one overlap setting.
struct RankResult {
  Phase forward, backward;
  std::string transport = "nccl";  // the column forward's gather as used
};

RankResult measure_rank(Communicator& comm, const TpOptions& o, std::int64_t n_total, std::int64_t k_total,
                        bool overlap) {
  const bool column = o.layer == "column";
  const bool mlp = o.layer == "mlp";
  tp::Options opt;
  opt.chunks = o.chunks;
  opt.overlap = overlap;
  opt.gemm = o.gemm;
  opt.transport = tp::parse_transport(o.transport);
  opt.gemm_sms = o.gemm_sms;
  opt.compute_streams = o.compute_streams;
  opt.chunk_schedule = tp::parse_chunk_schedule(o.chunk_schedule);
  // The shape exchange synchronizes the host; the ranks here were built from one set of options, so the
  // timed step runs without it (the tests cover the check).
  opt.check_shapes = false;
  const std::int64_t t = o.t;
  Stream stream;
  RankResult res;
  const std::uint64_t seed = 1234 + comm.rank();
  if (mlp) {
    // k_total: model width (input and output), n_total: hidden width (split).
    tp::TensorParallelMLP layer(comm, k_total, n_total, k_total, opt);
    const std::int64_t hr = layer.shard().size;
    const std::size_t shard_elems = static_cast<std::size_t>(std::max<std::int64_t>(1, k_total * hr));
    DeviceBuffer<bf16> x(t * k_total), w1(shard_elems), w2(shard_elems), h(std::max<std::int64_t>(1, t * hr)),
        y(t * k_total), dy(t * k_total), dx(t * k_total);
    DeviceBuffer<float> dw1(shard_elems), dw2(shard_elems);
    fill_uniform(x.data(), x.size(), seed);
    fill_uniform(w1.data(), w1.size(), seed + 100);
    fill_uniform(w2.data(), w2.size(), seed + 150);
    fill_uniform(dy.data(), dy.size(), seed + 200);
    res.forward.total = time_on(stream, o.warmup, o.iters, [&] {
      layer.forward(x.data(), t, w1.data(), nullptr, w2.data(), nullptr, y.data(), stream);
    });
    layer.forward(x.data(), t, w1.data(), nullptr, w2.data(), nullptr, y.data(), stream, h.data());  // saves H
    res.backward.total = time_on(stream, o.warmup, o.iters, [&] {
      layer.backward(x.data(), dy.data(), t, w1.data(), nullptr, w2.data(), h.data(), dx.data(), dw1.data(),
                     dw2.data(), stream);
    });
    comm.wait(stream, "tp mlp timing");
    if (hr > 0) {
      // The rank's computation alone: the same class over its own hidden units on a one-rank communicator.
      Communicator solo(Communicator::make_unique_id(), 0, 1, comm.device());
      tp::Options solo_opt = opt;
      solo_opt.chunks = 1;
      solo_opt.overlap = false;
      tp::TensorParallelMLP local(solo, k_total, hr, k_total, solo_opt);
      res.forward.gemm = time_on(stream, o.warmup, o.iters, [&] {
        local.forward(x.data(), t, w1.data(), nullptr, w2.data(), nullptr, y.data(), stream);
      });
      res.backward.gemm = time_on(stream, o.warmup, o.iters, [&] {
        local.backward(x.data(), dy.data(), t, w1.data(), nullptr, w2.data(), h.data(), dx.data(), dw1.data(),
                       dw2.data(), stream);
      });
    }
    if (comm.size() > 1) {
      res.forward.comm = time_on(stream, o.warmup, o.iters, [&] {
        comm.all_reduce(y.data(), y.data(), t * k_total, DType::kBF16, stream);
      });
      res.backward.comm = time_on(stream, o.warmup, o.iters, [&] {
        comm.all_reduce(dx.data(), dx.data(), t * k_total, DType::kBF16, stream);
      });
    }
  } else if (column) {
    tp::ColumnParallelLinear layer(comm, k_total, n_total, opt);
    const std::int64_t nr = layer.shard().size;
    DeviceBuffer<bf16> x(t * k_total), w(std::max<std::int64_t>(1, k_total * nr)), y(t * n_total),
        dy(t * n_total), dx(t * k_total);
    DeviceBuffer<float> dw(std::max<std::int64_t>(1, k_total * nr));
    fill_uniform(x.data(), x.size(), seed);
    fill_uniform(w.data(), w.size(), seed + 100);
    fill_uniform(dy.data(), dy.size(), seed + 200);
    res.forward.total = time_on(stream, o.warmup, o.iters, [&] { layer.forward(x.data(), t, w.data(), nullptr, y.data(), stream); });
    res.transport = std::string(tp::transport_name(layer.transport_in_use()));
    res.backward.total = time_on(stream, o.warmup, o.iters, [&] {
      layer.backward(x.data(), dy.data(), t, w.data(), dx.data(), dw.data(), stream);
    });
    comm.wait(stream, "tp column timing");
    if (nr > 0) {
      res.forward.gemm = time_on(stream, o.warmup, o.iters, [&] {
        gemm(bf16_gemm(t, nr, k_total, Op::kN, x.data(), k_total, Op::kN, w.data(), nr, DType::kBF16, y.data(), n_total),
             stream, o.gemm);
      });
      res.backward.gemm = time_on(stream, o.warmup, o.iters, [&] {
        gemm(bf16_gemm(t, k_total, nr, Op::kN, dy.data(), n_total, Op::kT, w.data(), nr, DType::kBF16, dx.data(), k_total),
             stream, o.gemm);
        gemm(bf16_gemm(k_total, nr, t, Op::kT, x.data(), k_total, Op::kN, dy.data(), n_total, DType::kF32, dw.data(), nr),
             stream, o.gemm);
      });
    }
    if (comm.size() > 1) {
      const std::int64_t padded = max_split(n_total, comm.size());
      DeviceBuffer<bf16> gathered(t * padded * comm.size());
      res.forward.comm = time_on(stream, o.warmup, o.iters, [&] {
        comm.all_gather(y.data(), gathered.data(), t * padded, DType::kBF16, stream);
      });
      res.backward.comm = time_on(stream, o.warmup, o.iters, [&] {
        comm.all_reduce(dx.data(), dx.data(), t * k_total, DType::kBF16, stream);
      });
    }
  } else {
    tp::RowParallelLinear layer(comm, k_total, n_total, opt);
    const std::int64_t kr = std::max<std::int64_t>(1, layer.shard().size);
    DeviceBuffer<bf16> x(t * kr), w(kr * n_total), y(t * n_total), dy(t * n_total), dx(t * kr);
    DeviceBuffer<float> dw(kr * n_total);
    fill_uniform(x.data(), x.size(), seed);
    fill_uniform(w.data(), w.size(), seed + 100);
    fill_uniform(dy.data(), dy.size(), seed + 200);
    res.forward.total = time_on(stream, o.warmup, o.iters, [&] { layer.forward(x.data(), t, w.data(), nullptr, y.data(), stream); });
    res.backward.total = time_on(stream, o.warmup, o.iters, [&] {
      layer.backward(x.data(), dy.data(), t, w.data(), dx.data(), dw.data(), stream);
    });
    comm.wait(stream, "tp row timing");
    res.forward.gemm = time_on(stream, o.warmup, o.iters, [&] {
      gemm(bf16_gemm(t, n_total, kr, Op::kN, x.data(), kr, Op::kN, w.data(), n_total, DType::kBF16, y.data(), n_total),
           stream, o.gemm);
    });
    res.backward.gemm = res.backward.total;  // no communication in the row-parallel backward
    if (comm.size() > 1)
      res.forward.comm = time_on(stream, o.warmup, o.iters, [&] {
        comm.all_reduce(y.data(), y.data(), t * n_total, DType::kBF16, stream);
      });
  }
  return res;
}

// The whole layer's GEMMs on one GPU (device 0): forward X W, backward dY Wᵀ and Xᵀ dY.
Phase single_gpu(const TpOptions& o, std::int64_t k, std::int64_t n, Phase* backward) {
  PX_CUDA_CHECK(cudaSetDevice(0));
  Stream stream;
  const std::int64_t t = o.t;
  DeviceBuffer<bf16> x(t * k), w(k * n), y(t * n), dx(t * k);
  DeviceBuffer<float> dw(k * n);
  fill_uniform(x.data(), x.size(), 1);
  fill_uniform(w.data(), w.size(), 2);
  fill_uniform(y.data(), y.size(), 3);
  Phase f;
  f.gemm = f.total = time_on(stream, o.warmup, o.iters, [&] {
    gemm(bf16_gemm(t, n, k, Op::kN, x.data(), k, Op::kN, w.data(), n, DType::kBF16, y.data(), n), stream, o.gemm);
  });
  backward->gemm = backward->total = time_on(stream, o.warmup, o.iters, [&] {
    gemm(bf16_gemm(t, k, n, Op::kN, y.data(), n, Op::kT, w.data(), n, DType::kBF16, dx.data(), k), stream, o.gemm);
    gemm(bf16_gemm(k, n, t, Op::kT, x.data(), k, Op::kN, y.data(), n, DType::kF32, dw.data(), n), stream, o.gemm);
  });
  return f;
}

// The whole MLP (k -> hidden -> k) on GPU 0 through TensorParallelMLP on a one-rank communicator: the same
// forward (fused GELU) and backward (saved H) the TP runs time, so the ratio compares like with like.
Phase single_gpu_mlp(const TpOptions& o, std::int64_t k, std::int64_t hidden, Phase* backward) {
  PX_CUDA_CHECK(cudaSetDevice(0));
  Communicator solo(Communicator::make_unique_id(), 0, 1, 0);
  tp::Options opt;
  opt.chunks = 1;
  opt.overlap = false;
  opt.gemm = o.gemm;
  opt.gemm_sms = 0;
  opt.check_shapes = false;
  tp::TensorParallelMLP layer(solo, k, hidden, k, opt);
  Stream stream;
  const std::int64_t t = o.t;
  DeviceBuffer<bf16> x(t * k), w1(k * hidden), w2(hidden * k), h(t * hidden), y(t * k), dy(t * k), dx(t * k);
  DeviceBuffer<float> dw1(k * hidden), dw2(hidden * k);
  fill_uniform(x.data(), x.size(), 1);
  fill_uniform(w1.data(), w1.size(), 2);
  fill_uniform(w2.data(), w2.size(), 3);
  fill_uniform(dy.data(), dy.size(), 4);
  Phase f;
  f.gemm = f.total = time_on(stream, o.warmup, o.iters, [&] {
    layer.forward(x.data(), t, w1.data(), nullptr, w2.data(), nullptr, y.data(), stream);
  });
  layer.forward(x.data(), t, w1.data(), nullptr, w2.data(), nullptr, y.data(), stream, h.data());
  backward->gemm = backward->total = time_on(stream, o.warmup, o.iters, [&] {
    layer.backward(x.data(), dy.data(), t, w1.data(), nullptr, w2.data(), h.data(), dx.data(), dw1.data(),
                   dw2.data(), stream);
  });
  PX_CUDA_CHECK(cudaStreamSynchronize(stream));
  return f;
}

int run_tp(const TpOptions& o) {
  require_gpu("tp");
  (void)parse_gemm_kernel(o.gemm);
  const int P = o.gpus > 0 ? o.gpus : device_count();
  const bool mlp = o.layer == "mlp";
  const bool column = o.layer == "column";
  const bool weak = o.scaling == "weak";
  // Weak scaling keeps each GPU's shard at the given size: the split dimension grows with P (n for the
  // column layer and for the MLP's hidden width, k for the row layer).
  const bool split_n = column || mlp;
  const std::int64_t n_total = split_n && weak ? o.n * P : o.n;
  const std::int64_t k_total = !split_n && weak ? o.k * P : o.k;
  fmt::print(stderr, "tp: 1-GPU reference ...\n");
  Phase ref_backward;
  const std::int64_t ref_n = weak && split_n ? o.n : n_total;
  const std::int64_t ref_k = weak && !split_n ? o.k : k_total;
  const Phase ref_forward =
      mlp ? single_gpu_mlp(o, ref_k, ref_n, &ref_backward) : single_gpu(o, ref_k, ref_n, &ref_backward);

  CommConfig config;
  config.max_ctas = o.nccl_max_ctas;
  auto comms = Communicator::create_local(P, config);
  std::vector<bool> settings;
  if (o.overlap != "off") settings.push_back(true);
  if (o.overlap != "on") settings.push_back(false);

  results::Document doc = results::make_document();
  doc.command = "parallax tp";
  doc.context.emplace_back("gpus", static_cast<std::int64_t>(P));
  doc.context.emplace_back("scaling", o.scaling);
  doc.context.emplace_back("layer", o.layer);
  Table table({{"pass"}, {"overlap"}, {"transport"}, {"GPUs"}, {"total ms"}, {"GEMM ms"}, {"comm ms"}, {"exposed comm ms"},
               {"comm share"}, {"1-GPU ms"}, {"speedup"}, {"efficiency"}});
  std::vector<std::pair<bool, RankResult>> all;
  for (bool overlap : settings) {
    fmt::print(stderr, "tp: {} layer on {} GPU(s), overlap {} ...\n", o.layer, P, overlap ? "on" : "off");
    RankResult rank0;
    run_local_ranks(comms, [&](Communicator& c) {
      RankResult r = measure_rank(c, o, n_total, k_total, overlap);
      if (c.rank() == 0) rank0 = r;
    });
    all.emplace_back(overlap, rank0);
    for (int pass = 0; pass < 2; ++pass) {
      const Phase& ph = pass == 0 ? rank0.forward : rank0.backward;
      const Phase& ref = pass == 0 ? ref_forward : ref_backward;
      const double exposed = std::max(0.0, ph.total - ph.gemm);
      const double speedup = ref.total / ph.total;
      const double eff = weak ? ref.total / ph.total : speedup / P;
      const std::string pass_name = pass == 0 ? "forward" : "backward";
      const std::string transport = pass == 0 && column ? rank0.transport : "nccl";
      table.add_row({pass_name, overlap ? "on" : "off", transport, std::to_string(P), milliseconds(ph.total),
                     milliseconds(ph.gemm), milliseconds(ph.comm), milliseconds(exposed),
                     percent(100.0 * exposed / ph.total), milliseconds(ref.total), fixed(speedup, 2) + "x",
                     percent(100.0 * eff)});
      results::Record rec;
      rec.suite = "tp";
      rec.name = fmt::format("{}-{}-overlap-{}", o.layer, pass_name, overlap ? "on" : "off");
      rec.shape = {{"t", o.t}, {"k", k_total}, {"n", n_total}, {"gpus", static_cast<std::int64_t>(P)},
                   {"chunks", static_cast<std::int64_t>(o.chunks)}};
      if (mlp) rec.shape.emplace_back("hidden", n_total);  // the MLP: k -> hidden (= n) -> k
      // scripts/report.py groups tp records by these shape keys (its table and scaling plots).
      rec.shape.emplace_back("layer", o.layer);
      rec.shape.emplace_back("pass", pass_name);
      rec.shape.emplace_back("overlap", overlap);
      rec.shape.emplace_back("scaling", o.scaling);
      rec.dtype = "bf16";
      rec.median_ms = ph.total.median;
      rec.min_ms = ph.total.min;
      rec.max_ms = ph.total.max;
      rec.repetitions = o.iters;
      rec.add_extra("gemm_ms", ph.gemm);
      rec.add_extra("comm_ms", ph.comm);
      rec.add_extra("exposed_comm_ms", exposed);
      rec.add_extra("single_gpu_ms", ref.total);
      rec.add_extra("speedup", speedup);
      rec.add_extra("efficiency", eff);
      rec.add_extra("gemm_kernel", o.gemm);
      rec.add_extra("transport", transport);
      rec.add_extra("gemm_sms", static_cast<std::int64_t>(o.gemm_sms));
      rec.add_extra("nccl_max_ctas", static_cast<std::int64_t>(o.nccl_max_ctas));
      // Forwards only spread their chunks over the streams when overlapped (tp::Options::compute_streams).
      rec.add_extra("compute_streams", static_cast<std::int64_t>(overlap && pass == 0 ? o.compute_streams : 1));
      rec.add_extra("chunk_schedule", o.chunk_schedule);
      if (ph.comm > 0) rec.add_extra("overlap_bound", (ph.gemm + ph.comm) / std::max(ph.gemm, ph.comm));
      doc.records.push_back(std::move(rec));
    }
  }
  if (o.output.prints_table()) {
    if (mlp)
      fmt::print("tensor-parallel MLP (k -> gelu(hidden) -> k), t={} k={} hidden={} bf16, {} scaling, {} chunk(s), "
                 "gemm {}; GEMM ms = compute without communication (GEMMs + GELU passes)\n",
                 o.t, k_total, n_total, o.scaling, o.chunks, o.gemm);
    else
      fmt::print("{}-parallel linear, t={} k={} n={} bf16, {} scaling, {} chunk(s), gemm {}\n", o.layer, o.t,
                 k_total, n_total, o.scaling, o.chunks, o.gemm);
    fmt::print("{} chunks; overlapped forwards run them on {} compute stream(s)\n\n", o.chunk_schedule,
               o.compute_streams);
    table.print();
    for (const auto& [overlap, r] : all)
      if (overlap && r.backward.comm > 0)
        fmt::print("\nbackward overlap bound (GEMM + comm) / max(GEMM, comm): {:.2f}x\n",
                   (r.backward.gemm + r.backward.comm) / std::max(r.backward.gemm, r.backward.comm));
    if (all.size() == 2)
      fmt::print("\nbackward sequential / overlapped: {:.2f}x   forward: {:.2f}x\n",
                 all[1].second.backward.total / all[0].second.backward.total,
                 all[1].second.forward.total / all[0].second.forward.total);
  }
  emit_json(o.output, doc);
  return 0;
}

}  // namespace

void add_tp(CLI::App& root, Action& action) {
  auto o = std::make_shared<TpOptions>();
  CLI::App* cmd = root.add_subcommand("tp", "Tensor-parallel linear layers: per-phase times, speedup vs 1 GPU");
  cmd->add_option("--gpus", o->gpus, "GPUs of this process, one thread each (default: all visible)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--t", o->t, "Tokens (rows of X)")->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  cmd->add_option("--k", o->k, "Input features")->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  cmd->add_option("--n", o->n, "Output features (--layer mlp: the hidden width; the output has k features)")->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  cmd->add_option("--layer", o->layer, "column | row | mlp (column -> GELU -> row, one all-reduce each way)")
      ->check(CLI::IsMember({"column", "row", "mlp"}));
  cmd->add_option("--overlap", o->overlap, "on | off | both")->check(CLI::IsMember({"on", "off", "both"}));
  cmd->add_option("--chunks", o->chunks, "Row chunks of the pipelined communication")->check(CLI::Range(1, 1024));
  cmd->add_option("--chunk-schedule", o->chunk_schedule,
                  "Row chunk sizes: uniform | tapered (large first chunk, small last: a shorter exposed tail)")
      ->check(CLI::IsMember({"uniform", "tapered"}));
  cmd->add_option("--compute-streams", o->compute_streams,
                  "Streams the overlapped forwards spread their chunk GEMMs over (1: one stream, each chunk's "
                  "GEMM tail drains before the next starts)")
      ->check(CLI::Range(1, 8));
  cmd->add_option("--scaling", o->scaling, "strong | weak")->check(CLI::IsMember({"strong", "weak"}));
  std::vector<std::string> kernels;
  for (auto name : gemm_kernel_names()) kernels.emplace_back(name);
  cmd->add_option("--gemm", o->gemm, "GEMM kernel (parallax::gemm_kernel_names())")->check(CLI::IsMember(kernels));
  cmd->add_option("--transport", o->transport, "Column forward gather: nccl | copy-engine | auto")
      ->check(CLI::IsMember({"nccl", "copy-engine", "auto"}));
  cmd->add_option("--gemm-sms", o->gemm_sms,
                  "SM cap of the layer's GEMMs: -1 auto (leave --nccl-max-ctas SMs to an overlapping NCCL "
                  "collective), 0 all, N")
      ->check(CLI::Range(-1, 4096));
  cmd->add_option("--nccl-max-ctas", o->nccl_max_ctas, "NCCL maxCTAs of the communicators (0: NCCL default)")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--iters", o->iters, "Timed iterations")->check(CLI::Range(1, 10000));
  cmd->add_option("--warmup", o->warmup, "Untimed iterations")->check(CLI::Range(0, 10000));
  add_output_options(*cmd, o->output);
  cmd->callback([o, &action] { action = [o] { return run_tp(*o); }; });
}

}  // namespace parallax::cli
