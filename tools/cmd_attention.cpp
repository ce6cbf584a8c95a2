// `parallax attention`: the attention ladder (forward, or with --backward the backward) timed and checked
// against level 1, with torch peers.
//
// Configurations (FlashAttention's benchmark convention): for each head dim D in {64, 128}, H = 2048 / D
// heads and sequence lengths S 512 .. 16384 with B * S = 16384 tokens, plus B4 H16 S1024 D64; causal off/on.
// TFLOP/s = 4 B H S S D / time, halved when causal (parallax::attention_flops). Each kernel's output is
// compared with the level-1 reference on the same inputs (max abs error, mean relative error over elements
// with |ref| > 1e-3). Timing: bench::time_gpu (warm-up, median); the q/k/v/out set of every configuration
// is 4 * 16384 * 2048 * 2 bytes = 256 MiB, far above L2, so no rotation is needed.
// Peers: `--peers FILE` reads the parallax.results/1 JSON written by scripts/attention_peers.py on the same
// GPU (records suite "attention", names "torch-flash" / "torch-cudnn") and adds "x torch" ratio columns
// (peer ms / our ms: above 1 = faster than the peer).
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "cmd_report.hpp"
#include "parallax/attention.hpp"
#include "parallax/bench.hpp"
#include "parallax/core.hpp"
#include "parallax/random.hpp"
#include "parallax/results.hpp"
#include "table.hpp"

namespace parallax::cli {
namespace {

struct AttentionOptions {
  std::vector<std::string> kernels{"tiled", "mma"};  // --backward: "mma" (+ "wgmma" on sm_90) unless given
  bool kernels_given = false;
  bool backward = false;
  std::string deterministic = "both";  // --backward: off, on or both
  std::string dtype = "bf16";
  std::vector<int> head_dims{64, 128};
  std::string causal = "both";
  bool quick = false;
  std::string peers_file;
  bool torch_peers = false;  // run scripts/attention_peers.py first (skipped with a note when it cannot run)
  int repetitions = 20, warmup = 3;
  OutputOptions output;
};

struct Config {
  int B, S, H, D;
  bool causal;
  std::string label() const {
    return fmt::format("B{} H{} S{} D{}{}", B, H, S, D, causal ? " causal" : "");
  }
  results::Fields fields(const std::string& dtype) const {
    return {{"batch", std::int64_t{B}}, {"seqlen", std::int64_t{S}}, {"heads", std::int64_t{H}},
            {"head_dim", std::int64_t{D}}, {"causal", causal}, {"dtype", dtype}};
  }
};

std::vector<Config> configs(const AttentionOptions& o) {
  std::vector<Config> out;
  std::vector<bool> causal_modes;
  if (o.causal != "on") causal_modes.push_back(false);
  if (o.causal != "off") causal_modes.push_back(true);
  const std::vector<int> lengths = o.quick ? std::vector<int>{512, 2048} : std::vector<int>{512, 1024, 2048, 4096, 8192, 16384};
  for (int D : o.head_dims)
    for (bool c : causal_modes)
      for (int S : lengths) out.push_back({16384 / S, S, 2048 / D, D, c});
  if (std::find(o.head_dims.begin(), o.head_dims.end(), 64) != o.head_dims.end())
    for (bool c : causal_modes) out.push_back({4, 1024, 16, 64, c});
  return out;
}

double decode16(bool bf16, std::uint16_t h) {
  if (bf16) {
    const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
  const unsigned e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  const double v = e == 0 ? std::ldexp(double(m), -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(double(m | 0x400u), int(e) - 25);
  return (h & 0x8000u) ? -v : v;
}

// Peer records keyed by name and shape (fields equal as text).
const results::Record* find_peer(const std::vector<results::Record>& peers, std::string_view name,
                                 const results::Fields& shape, std::string_view suite = "attention") {
  for (const auto& r : peers) {
    if (r.suite != suite || r.name != name || r.status == results::Status::kFailed) continue;
    bool same = true;
    for (const auto& [key, value] : shape) {
      const results::Scalar* v = results::find(r.shape, key);
      same = same && v && results::to_string(*v) == results::to_string(value);
    }
    if (same) return &r;
  }
  return nullptr;
}

// One table row for a measured record (forward or backward share the columns): time, TFLOP/s, the two error
// columns, its check, and the torch peers' time over ours in the same run ("-" where a peer is missing).
void add_measured_row(Table& table, const std::string& config, const std::string& name, const results::Record& r,
                      const std::vector<results::Record>& peers, const results::Fields& shape, std::string_view suite) {
  const auto ratio = [&](std::string_view peer) -> std::string {
    const results::Record* p = find_peer(peers, peer, shape, suite);
    if (!p || r.status == results::Status::kFailed || r.median_ms <= 0) return std::string(kNoValue);
    return fmt::format("{:.2f}x", p->median_ms / r.median_ms);
  };
  if (r.status == results::Status::kFailed) {
    table.add_row({config, name, "-", "-", "-", "-", "FAILED: " + r.failure, "-", "-"});
    return;
  }
  table.add_row({config, name, fmt::format("{:.3f}", r.median_ms), fmt::format("{:.1f}", r.gflops / 1e3),
                 fmt::format("{:.2e}", r.errors.at(0).value), fmt::format("{:.2e}", r.errors.at(1).value),
                 r.status == results::Status::kOk ? "ok" : "WRONG: " + r.failure, ratio("torch-flash"),
                 ratio("torch-cudnn")});
}

// --backward: dq, dk, dv of every configuration, checked against the backward level 1 ("reference") on the
// same inputs and timed. out and lse come from the forward ("auto") once per configuration and are inputs of
// every backward call. Records: suite "attention_backward" (the report's section), names "<kernel>" and
// "<kernel>-det" (the deterministic mode), the forward's shape fields; FLOPs = 2.5 x the forward's
// (attention_backward_flops). Peers: scripts/attention_peers.py --backward, same suite, "torch-flash" /
// "torch-cudnn".
// Errors are over the three gradients together; the check normalizes the max abs error by max |reference|
// (gradients are not bounded by 1 like the forward's output).
int run_attention_backward(const AttentionOptions& o, const DeviceInfo& device, const std::vector<results::Record>& peers,
                           const std::string& peers_note) {
  const std::string kSuite = "attention_backward";
  const bool bf16 = o.dtype == "bf16";
  const DType dtype = bf16 ? DType::kBF16 : DType::kF16;
  const double tolerance = bf16 ? 3e-2 : 8e-3;  // max abs err / max |ref| (P and dS rounded to 16 bits inside)
  std::vector<bool> det_modes;
  if (o.deterministic != "on") det_modes.push_back(false);
  if (o.deterministic != "off") det_modes.push_back(true);
  std::vector<std::string> kernels = o.kernels_given ? o.kernels : std::vector<std::string>{"mma"};
  if (!o.kernels_given && device.cc_major == 9 && device.cc_minor == 0) kernels.push_back("wgmma");
  const std::vector<Config> cfgs = configs(o);
  results::Document doc = results::make_document(device);
  doc.context = {{"dtype", o.dtype},
                 {"direction", std::string("backward")},
                 {"repetitions", std::int64_t{o.repetitions}},
                 {"warmup", std::int64_t{o.warmup}},
                 {"tolerance_max_abs_over_max_ref", tolerance},
                 {"reference", std::string("backward level 1 'reference' kernel")},
                 {"flops", std::string("2.5 x forward (attention_backward_flops)")}};
  if (!peers_note.empty()) doc.context.emplace_back("peers", peers_note);
  if (o.output.prints_table())
    fmt::print("parallax attention --backward on {} ({}), parallax {} ({}), {}\n", device.name, device.arch(),
               parallax::version(), parallax::git_sha(), o.dtype);

  Table table({{"config"}, {"kernel"}, {"ms", Align::kRight}, {"TFLOP/s", Align::kRight}, {"max abs err", Align::kRight},
               {"mean rel err", Align::kRight}, {"check"}, {"x torch-flash", Align::kRight}, {"x torch-cudnn", Align::kRight}});
  Progress progress(static_cast<int>(cfgs.size() * kernels.size() * det_modes.size()));
  int step = 0;
  bench::Options bo;
  bo.repetitions = o.repetitions;
  bo.warmup = o.warmup;
  for (const Config& c : cfgs) {
    const std::size_t n = static_cast<std::size_t>(c.B) * c.S * c.H * c.D;
    DeviceBuffer<std::uint16_t> q(n), k(n), v(n), out(n), dout(n), dq(n), dk(n), dv(n), rq(n), rk(n), rv(n);
    DeviceBuffer<float> lse(static_cast<std::size_t>(c.B) * c.H * c.S);
    const std::uint64_t seed = fresh_seed();
    std::uint64_t salt = 1;
    for (auto* buf : {&q, &k, &v, &dout}) {
      if (bf16) fill_uniform(reinterpret_cast<__nv_bfloat16*>(buf->data()), n, seed + salt++);
      else fill_uniform(reinterpret_cast<__half*>(buf->data()), n, seed + salt++);
    }
    const AttentionStrides dense = AttentionStrides::dense(c.S, c.H, c.D);
    AttentionArgs f;
    f.batch = c.B, f.seqlen_q = f.seqlen_k = c.S, f.heads = f.heads_kv = c.H, f.head_dim = c.D;
    f.dtype = dtype, f.causal = c.causal;
    f.q = q.data(), f.k = k.data(), f.v = v.data(), f.out = out.data(), f.lse = lse.data();
    f.q_strides = f.k_strides = f.v_strides = f.out_strides = dense;
    attention_forward(f, nullptr, AttentionKernel::kAuto);
    AttentionBackwardArgs a;
    a.batch = c.B, a.seqlen_q = a.seqlen_k = c.S, a.heads = a.heads_kv = c.H, a.head_dim = c.D;
    a.dtype = dtype, a.causal = c.causal;
    a.q = q.data(), a.k = k.data(), a.v = v.data(), a.out = out.data(), a.dout = dout.data(), a.lse = lse.data();
    a.q_strides = a.k_strides = a.v_strides = a.out_strides = a.dout_strides = dense;
    a.dq_strides = a.dk_strides = a.dv_strides = dense;
    a.dq = rq.data(), a.dk = rk.data(), a.dv = rv.data();
    attention_backward(a, nullptr, AttentionKernel::kReference);
    const std::vector<std::uint16_t> ref[3] = {rq.download(), rk.download(), rv.download()};
    double max_ref = 0;
    for (const auto& t : ref)
      for (std::uint16_t h : t) max_ref = std::max(max_ref, std::abs(decode16(bf16, h)));
    a.dq = dq.data(), a.dk = dk.data(), a.dv = dv.data();
    const results::Fields shape = c.fields(o.dtype);
    bench::Work work;
    work.flops = attention_backward_flops(c.B, c.H, c.S, c.S, c.D, c.causal);
    work.bytes = 8.0 * n * 2;  // q, k, v, out, dout read; dq, dk, dv written (fp32 workspace not counted)
    for (const std::string& kernel : kernels)
      for (bool det : det_modes) {
        const std::string name = kernel + (det ? "-det" : "");
        progress.update(step++, c.label() + " " + name);
        a.deterministic = det;
        results::Record r;
        try {
          for (auto* buf : {&dq, &dk, &dv}) buf->fill_bytes(0xFF);
          attention_backward(a, nullptr, kernel);
          const std::vector<std::uint16_t> got[3] = {dq.download(), dk.download(), dv.download()};
          double max_abs = 0, sum_rel = 0;
          std::size_t counted = 0, unwritten = 0;
          for (int t = 0; t < 3; ++t)
            for (std::size_t i = 0; i < n; ++i) {
              const double g = decode16(bf16, got[t][i]), e = decode16(bf16, ref[t][i]);
              if (!std::isfinite(g)) { ++unwritten; continue; }
              max_abs = std::max(max_abs, std::abs(g - e));
              if (std::abs(e) > 1e-3 * max_ref) sum_rel += std::abs(g - e) / std::abs(e), ++counted;
            }
          const bench::Timing t =
              bench::time_gpu([&](cudaStream_t s, int) { attention_backward(a, s, kernel); }, 1, bo, nullptr);
          r = results::make_record(kSuite, name, shape, o.dtype, t, work);
          r.add_error("max_abs_err_vs_reference", max_abs);
          r.add_error("mean_rel_err_vs_reference", counted ? sum_rel / counted : 0.0);
          if (unwritten) r.mark_incorrect(std::to_string(unwritten) + " gradient elements never written");
          if (max_abs > tolerance * max_ref)
            r.mark_incorrect(fmt::format("max abs err {:.3g} > {:.3g} x max |ref| {:.3g}", max_abs, tolerance, max_ref));
        } catch (const InvalidArgument&) {
          throw;
        } catch (const Error& e) {
          r = results::failed_record(kSuite, name, shape, o.dtype, e.what());
        }
        add_measured_row(table, c.label(), name, r, peers, shape, kSuite);
        doc.records.push_back(std::move(r));
      }
  }
  progress.finish();
  for (const auto& p : peers)
    if (p.suite == kSuite) doc.records.push_back(p);
  if (o.output.prints_table()) table.print();
  emit_json(o.output, doc);
  const auto bad = std::count_if(doc.records.begin(), doc.records.end(), [](const results::Record& r) {
    return r.status == results::Status::kIncorrect;
  });
  return bad > 0 ? 1 : 0;
}

int run_attention(const AttentionOptions& o) {
  const DeviceInfo device = device_info();
  const bool bf16 = o.dtype == "bf16";
  const DType dtype = bf16 ? DType::kBF16 : DType::kF16;
  const double tolerance = bf16 ? 2e-2 : 5e-3;  // max abs error vs level 1 (|out| <= 1; two roundings)
  std::vector<results::Record> peers;
  std::string peers_file = o.peers_file;
  std::string peers_note;
  if (o.torch_peers && peers_file.empty()) {
    // torch's SDPA backends in the same run, through the script (its own CUDA context, before ours works).
    try {
      const std::string script = find_script(std::filesystem::path(self_executable()).parent_path().string(),
                                             "attention_peers.py");
      const std::string out = (std::filesystem::temp_directory_path() /
                               ("parallax-attention-peers-" + std::to_string(::getpid()) + ".json")).string();
      std::string command = "python3 '" + script + "' --out '" + out + "' --dtype " + o.dtype +
                            (o.quick ? " --quick" : "") + (o.backward ? " --backward" : "") + " 1>&2";
      const int status = std::system(command.c_str());
      if (status == 0) peers_file = out;
      else peers_note = "torch peers not measured: `" + command + "` exited with status " + std::to_string(status);
    } catch (const std::exception& e) {
      peers_note = std::string("torch peers not measured: ") + e.what();
    }
    if (!peers_note.empty()) fmt::print(stderr, "parallax attention: {}\n", peers_note);
  }
  if (!peers_file.empty()) {
    std::ifstream in(peers_file);
    if (!in) throw Error("cannot read --peers file '" + peers_file + "'");
    std::stringstream text;
    text << in.rdbuf();
    peers = results::parse(text.str()).records;
  }
  if (o.backward) return run_attention_backward(o, device, peers, peers_note);
  const std::vector<Config> cfgs = configs(o);
  results::Document doc = results::make_document(device);
  doc.context = {{"dtype", o.dtype}, {"repetitions", std::int64_t{o.repetitions}}, {"warmup", std::int64_t{o.warmup}},
                 {"tolerance_max_abs", tolerance}, {"reference", std::string("level 1 'reference' kernel")}};
  if (!peers_note.empty()) doc.context.emplace_back("peers", peers_note);
  if (o.output.prints_table())
    fmt::print("parallax attention on {} ({}), parallax {} ({}), {}\n", device.name, device.arch(), parallax::version(),
               parallax::git_sha(), o.dtype);

  Table table({{"config"}, {"kernel"}, {"ms", Align::kRight}, {"TFLOP/s", Align::kRight}, {"max abs err", Align::kRight},
               {"mean rel err", Align::kRight}, {"check"}, {"x torch-flash", Align::kRight}, {"x torch-cudnn", Align::kRight}});
  Progress progress(static_cast<int>(cfgs.size() * o.kernels.size()));
  int step = 0;
  bench::Options bo;
  bo.repetitions = o.repetitions;
  bo.warmup = o.warmup;
  for (const Config& c : cfgs) {
    const std::size_t n = static_cast<std::size_t>(c.B) * c.S * c.H * c.D;
    DeviceBuffer<std::uint16_t> q(n), k(n), v(n), out(n), ref(n);
    const std::uint64_t seed = fresh_seed();
    for (auto* buf : {&q, &k, &v}) {
      const std::uint64_t s = seed + static_cast<std::uint64_t>(buf == &q ? 1 : buf == &k ? 2 : 3);
      if (bf16) fill_uniform(reinterpret_cast<__nv_bfloat16*>(buf->data()), n, s);
      else fill_uniform(reinterpret_cast<__half*>(buf->data()), n, s);
    }
    AttentionArgs a;
    a.batch = c.B, a.seqlen_q = a.seqlen_k = c.S, a.heads = a.heads_kv = c.H, a.head_dim = c.D;
    a.dtype = dtype, a.causal = c.causal;
    a.q = q.data(), a.k = k.data(), a.v = v.data();
    a.q_strides = a.k_strides = a.v_strides = a.out_strides = AttentionStrides::dense(c.S, c.H, c.D);
    a.out = ref.data();
    attention_forward(a, nullptr, AttentionKernel::kReference);
    const auto ref_host = ref.download();
    a.out = out.data();
    const results::Fields shape = c.fields(o.dtype);
    bench::Work work;
    work.flops = attention_flops(c.B, c.H, c.S, c.S, c.D, c.causal);
    work.bytes = 4.0 * n * 2;
    for (const std::string& kernel : o.kernels) {
      progress.update(step++, c.label() + " " + kernel);
      results::Record r;
      try {
        out.fill_bytes(0xFF);
        attention_forward(a, nullptr, kernel);
        const auto got = out.download();
        double max_abs = 0, sum_rel = 0;
        std::size_t counted = 0, unwritten = 0;
        for (std::size_t i = 0; i < n; ++i) {
          const double g = decode16(bf16, got[i]), e = decode16(bf16, ref_host[i]);
          if (!std::isfinite(g)) { ++unwritten; continue; }
          max_abs = std::max(max_abs, std::abs(g - e));
          if (std::abs(e) > 1e-3) sum_rel += std::abs(g - e) / std::abs(e), ++counted;
        }
        const bench::Timing t = bench::time_gpu([&](cudaStream_t s, int) { attention_forward(a, s, kernel); }, 1, bo, nullptr);
        r = results::make_record("attention", kernel, shape, o.dtype, t, work);
        r.add_error("max_abs_err_vs_reference", max_abs);
        r.add_error("mean_rel_err_vs_reference", counted ? sum_rel / counted : 0.0);
        if (unwritten) r.mark_incorrect(std::to_string(unwritten) + " output elements never written");
        if (max_abs > tolerance) r.mark_incorrect(fmt::format("max abs err {:.3g} > {:.3g}", max_abs, tolerance));
      } catch (const InvalidArgument&) {
        throw;
      } catch (const Error& e) {
        r = results::failed_record("attention", kernel, shape, o.dtype, e.what());
      }
      add_measured_row(table, c.label(), kernel, r, peers, shape, "attention");
      doc.records.push_back(std::move(r));
    }
  }
  progress.finish();
  for (const auto& p : peers)
    if (p.suite == "attention") doc.records.push_back(p);  // peers travel with the run they are compared to
  if (o.output.prints_table()) table.print();
  emit_json(o.output, doc);
  const auto bad = std::count_if(doc.records.begin(), doc.records.end(), [](const results::Record& r) {
    return r.status == results::Status::kIncorrect;
  });
  return bad > 0 ? 1 : 0;
}

}  // namespace

void add_attention(CLI::App& root, Action& action) {
  auto options = std::make_shared<AttentionOptions>();
  AttentionOptions& o = *options;
  CLI::App* cmd = root.add_subcommand("attention", "FlashAttention forward ladder vs level 1, with torch peers");
  cmd->footer("Examples:\n  parallax attention --quick\n  parallax attention --kernel mma,wgmma --head-dim 128 --causal on\n"
              "  parallax attention --backward --kernel mma,wgmma --torch-peers --head-dim 128\n"
              "  python scripts/attention_peers.py --out peers.json && parallax attention --peers peers.json");
  add_output_options(*cmd, o.output);
  auto* kernel_opt = cmd->add_option("--kernel", o.kernels,
                                     "Kernels, comma-separated (reference, tiled, mma, wgmma, auto; --backward: "
                                     "reference, mma, wgmma, auto; default mma, plus wgmma on sm_90)")
      ->delimiter(',')
      ->check([](const std::string& s) {
        try {
          (void)parse_attention_kernel(s);
          return std::string();
        } catch (const InvalidArgument& e) {
          return std::string(e.what());
        }
      });
  cmd->add_flag("--backward", o.backward,
                "Time the backward (dq, dk, dv; FLOPs 2.5x the forward) instead of the forward; suite "
                "'attention_backward', records '<kernel>' / '<kernel>-det' (deterministic)");
  cmd->add_option("--deterministic", o.deterministic, "--backward: deterministic mode on, off or both")
      ->check(CLI::IsMember({"on", "off", "both"}))
      ->capture_default_str();
  cmd->add_option("--dtype", o.dtype, "bf16 or fp16")->check(CLI::IsMember({"bf16", "fp16"}))->capture_default_str();
  cmd->add_option("--head-dim", o.head_dims, "Head dims, comma-separated (64, 128)")
      ->delimiter(',')
      ->check(CLI::IsMember({64, 128}));
  cmd->add_option("--causal", o.causal, "on, off or both")->check(CLI::IsMember({"on", "off", "both"}))->capture_default_str();
  cmd->add_flag("--quick", o.quick, "Only S 512 and 2048 (plus B4 H16 S1024 D64)");
  auto* peers_opt =
      cmd->add_option("--peers", o.peers_file, "parallax.results/1 JSON from scripts/attention_peers.py")->type_name("FILE");
  cmd->add_flag("--torch-peers", o.torch_peers,
                "Run scripts/attention_peers.py (torch SDPA flash + cuDNN) first and compare with it")
      ->excludes(peers_opt);
  cmd->add_option("--reps", o.repetitions, "Timed runs (median)")->check(CLI::Range(1, 10000))->capture_default_str();
  cmd->add_option("--warmup", o.warmup, "Untimed runs")->check(CLI::Range(0, 10000))->capture_default_str();
  cmd->callback([options, kernel_opt, &action] {
    options->kernels_given = kernel_opt->count() > 0;
    if (options->backward && options->kernels_given)
      for (const std::string& k : options->kernels) {
        const AttentionKernel parsed = parse_attention_kernel(k);
        if (parsed == AttentionKernel::kTiled)
          throw CLI::ValidationError("--kernel",
                                     "kernel '" + k + "' has no backward (valid: reference, mma, wgmma, auto)");
      }
    action = [options] { return run_attention(*options); };
  });
}

}  // namespace parallax::cli
