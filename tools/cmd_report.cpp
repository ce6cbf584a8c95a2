// `parallax report`: see cmd_report.hpp for what a run does and why sections are spawned subcommands.
#include "cmd_report.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "parallax/core.hpp"
#include "parallax/results.hpp"
#include "table.hpp"

extern char** environ;

namespace parallax::cli {

namespace fs = std::filesystem;

// ------------------------------------------------------------------------------------------------ options

std::string ReportOptions::command_line() const {
  std::string s = "parallax report";
  if (!from.empty()) s += " --from " + from;
  if (quick) s += " --quick";
  if (gpus > 0) s += " --gpus " + std::to_string(gpus);
  s += " --out " + out_dir;
  if (!plots) s += " --no-plots";
  if (budget_scale != 1.0) s += fmt::format(" --budget-scale {}", budget_scale);
  return s;
}

CLI::App* register_report(CLI::App& root, Action& action, std::shared_ptr<ReportOptions> options) {
  CLI::App* cmd = root.add_subcommand(
      "report", "The whole study in one command: measure every section, write results.json, report.md and plots");
  cmd->footer(
      "Examples:\n"
      "  parallax report                         # full study (< 15 min on one H100)\n"
      "  parallax report --quick --out quick     # reduced sweeps (< 2 min on one H100)\n"
      "  parallax report --dry-run --gpus 2      # the plan: every command and its time budget, nothing run\n"
      "  parallax report --from results.json     # rebuild report.md and plots from a results file, no GPU needed");
  ReportOptions& o = *options;
  add_output_options(*cmd, o.output);
  CLI::Option* quick = cmd->add_flag("--quick", o.quick, "Reduced sizes and repetitions (trends, not peaks)");
  cmd->add_option("--out", o.out_dir, "Directory for results.json, report.md, the plots, parts/ and logs/")
      ->capture_default_str();
  CLI::Option* from = cmd->add_option("--from", o.from, "Report on this results.json instead of measuring (any machine)")
                          ->check(CLI::ExistingFile)
                          ->excludes(quick);
  CLI::Option* dry = cmd->add_flag("--dry-run,--plan", o.dry_run,
                                   "Print the plan (each section's command and time budget) and run nothing");
  dry->excludes(from);
  cmd->add_option("--gpus", o.gpus, "GPUs for the multi-GPU sections (default: every visible GPU; with --dry-run: "
                                    "plan for this many)")
      ->check(CLI::Range(1, 64))
      ->excludes(from);
  cmd->add_option("--python", o.python, "Python 3 interpreter for scripts/report.py (needs matplotlib for plots)")
      ->capture_default_str();
  cmd->add_flag("!--no-plots", o.plots, "Write report.md only");
  cmd->add_option("--budget-scale", o.budget_scale,
                  "Multiply every section's time limit (its budget) by this, e.g. 2 on a GPU slower than an H100")
      ->check(CLI::Range(0.1, 100.0))
      ->capture_default_str();
  cmd->callback([&action, options] {
    if (options->out_dir.empty()) throw CLI::ValidationError("--out", "must not be empty");
    action = [options] { return run_report(*options); };
  });
  return cmd;
}

void add_report(CLI::App& root, Action& action) { register_report(root, action, std::make_shared<ReportOptions>()); }

// ------------------------------------------------------------------------------------------------ plan
//
// Budgets. Each is the section's hard time limit on one H100 / H200 host, set from measured runs with room to
// spare (device-check on an H100: `info` 1.5 s, the full FP32 ladder 37 s), and the sums are the promise of
// issue 8: --quick < 120 s, full < 900 s, whatever the GPU count (ReportPlan.BudgetsAddUpToThePromise). A
// section that outgrows its budget is stopped and reported as failed with the limit named: raise its budget
// here (and lower another) or pass --budget-scale on slower GPUs. The TP study shares one pool among its runs,
// so more GPUs mean more, shorter runs rather than a longer report.

namespace {

constexpr double kTpPoolQuickS = 12, kTpPoolFullS = 200;

// The GPU counts TP scales over: 2, 4, 8, ... below gpu_count, then gpu_count itself.
std::vector<int> tp_gpu_counts(int gpu_count) {
  std::vector<int> out;
  for (int g = 2; g < gpu_count; g *= 2) out.push_back(g);
  if (gpu_count >= 2) out.push_back(gpu_count);
  return out;
}

}  // namespace

std::vector<ReportSection> plan_report(bool quick, int gpu_count) {
  std::vector<ReportSection> plan;
  auto add = [&plan](std::string name, std::string title, std::vector<std::string> args, double budget,
                     results::Fields tags = {}, std::string skip = "") {
    ReportSection s;
    s.name = std::move(name);
    s.title = std::move(title);
    s.args = std::move(args);
    s.budget_s = budget;
    s.tags = std::move(tags);
    s.skip_reason = std::move(skip);
    plan.push_back(std::move(s));
  };
  auto with_quick = [quick](std::vector<std::string> args) {
    if (quick) args.push_back("--quick");
    return args;
  };
  // Roofs first: every later "% of roof" refers to them, and the merged document takes its device from them.
  add("roofs", "device roofs (copy GB/s, cuBLAS SGEMM/BF16)", {"info", "--gemm-size", quick ? "4096" : "8192"},
      quick ? 4 : 15);
  // The ladder: quick keeps one small and one large size and caps each measurement at a second (the naive
  // level alone takes ~0.3 s a run at 4096^3); full is the size set of the committed results.
  if (quick)
    add("sgemm_ladder", "FP32 ladder vs cuBLAS",
        {"gemm", "--ladder", "--sizes", "1024,4096", "--reps", "10", "--warmup", "2", "--budget-ms", "1000"}, 10);
  else
    add("sgemm_ladder", "FP32 ladder vs cuBLAS", {"gemm", "--ladder", "--sizes", "1000,1024,2048,4096,8192"}, 90);
  // Tensor-core GEMM: the same `gemm --ladder` as FP32, with the BF16 dtype (levels 9+ against cublasGemmEx).
  // Full: issue 4's study (squares 1024..8192, LLM shapes, transposes, odd shapes); quick: two squares.
  add("gemm", "tensor-core GEMM vs cuBLAS",
      quick ? std::vector<std::string>{"gemm", "--ladder", "--dtype", "bf16", "--shapes", "2048,4096", "--reps", "10"}
            : std::vector<std::string>{"gemm", "--ladder", "--dtype", "bf16", "--reps", "20"},
      quick ? 10 : 170);
  // Attention forward and backward, torch SDPA's flash and cuDNN backends in the same run when torch imports
  // (the subcommand runs scripts/attention_peers.py itself and notes why when it cannot).
  add("attention", "attention forward (vs torch SDPA when importable)",
      with_quick({"attention", "--kernel", "tiled,mma,wgmma", "--torch-peers"}), quick ? 25 : 120,
      {{"direction", std::string("forward")}});
  add("attention_backward", "attention backward (vs torch SDPA when importable)",
      with_quick({"attention", "--backward", "--kernel", "mma,wgmma", "--torch-peers"}), quick ? 45 : 200,
      {{"direction", std::string("backward")}});

  // Multi-GPU: collectives over every GPU, then TP strong and weak scaling over 2, 4, ..., N GPUs.
  const std::string one_gpu = fmt::format("needs 2 or more GPUs, {} visible", gpu_count);
  const std::string gpus = std::to_string(gpu_count);
  add("comm", "collectives (NCCL)",
      {"comm", "--gpus", gpus, "--op", "all", "--min-bytes", "1048576", "--max-bytes",
       quick ? "268435456" : "1073741824"},
      quick ? 8 : 40, {}, gpu_count >= 2 ? "" : one_gpu);
  if (gpu_count < 2) {
    add("tp", "tensor parallelism, strong and weak scaling", {"tp"}, 0, {}, one_gpu);
    return plan;
  }
  // Strong scaling: the whole layer (T 8192, K 8192, N 28672, issue 7's shape) split over g GPUs, every layer
  // kind, overlap on and off. Weak scaling: each GPU keeps that shard, overlap on. Quick: the column layer on
  // all GPUs only. The "mlp" layer is skipped by this build's CLI check until it exists.
  struct TpRun {
    std::string scaling, layer;
    int gpus;
  };
  std::vector<TpRun> runs;
  const std::vector<int> counts = quick ? std::vector<int>{gpu_count} : tp_gpu_counts(gpu_count);
  for (const char* layer : {"column", "row", "mlp"}) {
    if (quick && std::string(layer) != "column") continue;
    for (int g : counts) runs.push_back({"strong", layer, g});
  }
  for (const char* layer : {"column", "row"}) {
    if (quick && std::string(layer) != "column") continue;
    for (int g : counts) runs.push_back({"weak", layer, g});
  }
  const double each = (quick ? kTpPoolQuickS : kTpPoolFullS) / static_cast<double>(runs.size());
  for (const TpRun& r : runs) {
    std::vector<std::string> args{"tp", "--gpus", std::to_string(r.gpus), "--layer", r.layer, "--scaling",
                                  r.scaling, "--t", "8192", "--k", "8192", "--n", "28672"};
    args.insert(args.end(), {"--overlap", r.scaling == "strong" && !quick ? "both" : "on"});
    if (quick) args.insert(args.end(), {"--iters", "5", "--warmup", "2"});
    add(fmt::format("tp_{}_{}_g{}", r.scaling, r.layer, r.gpus),
        fmt::format("tensor parallelism, {} scaling, {} layer, {} GPUs", r.scaling, r.layer, r.gpus), std::move(args),
        each, {{"scaling", r.scaling}, {"layer", r.layer}});
  }
  return plan;
}

double report_script_budget(bool quick) { return quick ? 5 : 20; }

double plan_budget(const std::vector<ReportSection>& plan, bool quick) {
  double total = report_script_budget(quick);
  for (const auto& s : plan)
    if (s.skip_reason.empty()) total += s.budget_s;
  return total;
}

std::string unsupported_reason(const ReportSection& section) {
  if (section.args.empty()) return "no command";
  Action action;
  auto app = make_app(action);
  std::vector<std::string> args = section.args;
  args.insert(args.end(), {"--json-out", "probe.json"});
  std::reverse(args.begin(), args.end());  // CLI11's vector parse takes arguments back to front
  try {
    app->parse(args);
  } catch (const CLI::ParseError& e) {
    std::string command = "parallax";
    for (const auto& a : section.args) command += " " + a;
    return fmt::format("this build does not support `{}` ({})", command, e.what());
  } catch (const std::exception& e) {  // a subcommand's own option check; still "cannot run here"
    std::string command = "parallax";
    for (const auto& a : section.args) command += " " + a;
    return fmt::format("this build rejects `{}` ({})", command, e.what());
  }
  return "";
}

void skip_unsupported(std::vector<ReportSection>& plan) {
  for (auto& s : plan)
    if (s.skip_reason.empty()) s.skip_reason = unsupported_reason(s);
}

std::string describe_plan(const std::vector<ReportSection>& plan, bool quick, int gpu_count) {
  std::string out = fmt::format("parallax report{} plan for {} GPU{} (each budget is the section's time limit):\n",
                                quick ? " --quick" : "", gpu_count, gpu_count == 1 ? "" : "s");
  for (const auto& s : plan) {
    if (!s.skip_reason.empty()) {
      out += fmt::format("  {:<24} {:>6}  skipped: {}\n", s.name, "-", s.skip_reason);
      continue;
    }
    std::string command = "parallax";
    for (const auto& a : s.args) command += " " + a;
    out += fmt::format("  {:<24} {:>5.0f}s  {} --json-out OUT/parts/{}.json\n", s.name, s.budget_s, command, s.name);
  }
  out += fmt::format("  {:<24} {:>5.0f}s  {} scripts/report.py --from OUT/results.json --out OUT\n", "report.md + plots",
                     report_script_budget(quick), "python3");
  const double total = plan_budget(plan, quick);
  out += fmt::format("total budget {:.0f} s ({:.1f} min); the promise: {} < {:.0f} min\n", total, total / 60,
                     quick ? "--quick" : "the full study", (quick ? kQuickLimitS : kFullLimitS) / 60);
  return out;
}

// ------------------------------------------------------------------------------------------------ running

std::string SectionOutcome::summary() const {
  switch (state) {
    case State::kOk: return "ok";
    case State::kPartial: return "partial: " + message;
    case State::kFailed: return "failed: " + message;
    case State::kSkipped: return "skipped: " + message;
  }
  return "failed: " + message;
}

namespace {

// The last non-empty line of a log (what a failing command said last), trimmed to one table cell.
std::string last_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    // A progress bar redraws with '\r': keep what follows the last one.
    if (const auto cr = line.rfind('\r'); cr != std::string::npos) line = line.substr(cr + 1);
    if (line.find_first_not_of(" \t") != std::string::npos) last = line;
  }
  if (last.size() > 300) last = last.substr(0, 297) + "...";
  return last;
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return fmt::format("exit {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {}", WTERMSIG(status));
  return "stopped";
}

std::vector<char*> c_argv(std::vector<std::string>& args) {
  std::vector<char*> out;
  for (auto& a : args) out.push_back(a.data());
  out.push_back(nullptr);
  return out;
}

// Waits for `pid`, stopping it after limit_s: SIGTERM first (the child's destructors may release the GPU
// cleanly), SIGKILL if it lingers 5 s. Returns the wait status (-1 when lost) and whether the limit hit.
std::pair<int, bool> wait_with_limit(pid_t pid, double limit_s, const std::function<void()>& tick) {
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return {status, false};
    if (done < 0) return {-1, false};
    if (elapsed() > limit_s) {
      kill(pid, SIGTERM);
      for (int i = 0; i < 50 && waitpid(pid, &status, WNOHANG) == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (kill(pid, 0) == 0 && waitpid(pid, &status, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
      }
      return {status, true};
    }
    if (tick) tick();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace

SectionOutcome run_section(const ReportSection& section, const std::string& executable, const std::string& parts_dir,
                           const std::string& logs_dir, double timeout_s, const std::function<void()>& tick) {
  SectionOutcome outcome;
  if (!section.skip_reason.empty()) {
    outcome.state = SectionOutcome::State::kSkipped;
    outcome.message = section.skip_reason;
    return outcome;
  }
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  outcome.json_path = (fs::path(parts_dir) / (section.name + ".json")).string();
  const std::string log_path = (fs::path(logs_dir) / (section.name + ".log")).string();
  std::error_code ignored;
  fs::remove(outcome.json_path, ignored);  // a stale part from an earlier run must not pass as this one's

  std::vector<std::string> args{executable};
  args.insert(args.end(), section.args.begin(), section.args.end());
  args.insert(args.end(), {"--json-out", outcome.json_path});
  std::vector<char*> argv = c_argv(args);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  const int spawn_error = posix_spawn(&pid, executable.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawn_error != 0) {
    outcome.message = fmt::format("could not start '{}': {}", executable, std::strerror(spawn_error));
    outcome.seconds = elapsed();
    return outcome;
  }

  const auto [status, timed_out] = wait_with_limit(pid, timeout_s, tick);
  outcome.seconds = elapsed();
  outcome.exit_code = status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  const std::string said = last_line(log_path);
  const std::string log_hint = "log " + log_path;

  if (timed_out) {
    outcome.message = fmt::format("stopped after the {:.0f} s section limit (its budget x --budget-scale; {})",
                                  timeout_s, log_hint);
    return outcome;
  }
  if (!fs::exists(outcome.json_path)) {
    outcome.message = fmt::format("{}, no results written: {} ({})", status >= 0 ? describe_exit(status) : "lost",
                                  said.empty() ? "no output" : said, log_hint);
    return outcome;
  }
  try {
    const results::Document part = results::read_file(outcome.json_path);
    if (outcome.exit_code == 0) {
      outcome.state = SectionOutcome::State::kOk;
      return outcome;
    }
    std::size_t bad = 0;
    for (const auto& r : part.records) bad += r.status != results::Status::kOk;
    outcome.state = SectionOutcome::State::kPartial;
    outcome.message = fmt::format("{}, {} of {} records not ok ({})", describe_exit(status), bad, part.records.size(),
                                  log_hint);
  } catch (const std::exception& e) {
    outcome.state = SectionOutcome::State::kFailed;
    outcome.message = fmt::format("{}, unreadable results: {}", describe_exit(status), e.what());
  }
  return outcome;
}

// ------------------------------------------------------------------------------------------------ the script

std::string self_executable() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot find the running executable (/proc/self/exe): " + ec.message());
  return p.string();
}

std::string find_script(const std::string& executable_dir, const std::string& file) {
  std::vector<fs::path> candidates;
  if (const char* dir = std::getenv("PARALLAX_SCRIPTS_DIR"); dir != nullptr && *dir != '\0')
    candidates.emplace_back(fs::path(dir) / file);
  const fs::path exe(executable_dir);
  candidates.push_back(exe / ".." / "share" / "parallax" / "scripts" / file);  // installed
  candidates.push_back(exe / ".." / "scripts" / file);
  candidates.push_back(exe / ".." / ".." / "scripts" / file);  // build/tools/parallax in a checkout
#ifdef PARALLAX_SOURCE_DIR
  candidates.push_back(fs::path(PARALLAX_SOURCE_DIR) / "scripts" / file);  // the tree this was built from
#endif
  std::string looked;
  for (const auto& c : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(c, ec)) return fs::weakly_canonical(c, ec).string();
    looked += "\n  " + c.lexically_normal().string();
  }
  throw Error("cannot find scripts/" + file + "; looked in:" + looked +
              "\nset PARALLAX_SCRIPTS_DIR to the directory holding " + file);
}

std::string find_report_script(const std::string& executable_dir) { return find_script(executable_dir, "report.py"); }

void tag_records(results::Document& doc, const results::Fields& tags) {
  for (auto& r : doc.records)
    for (const auto& [key, value] : tags)
      if (results::find(r.shape, key) == nullptr) r.shape.emplace_back(key, value);
}

namespace {

// Runs the report script on `results_path`; its stdout goes to our stderr (stdout stays for tables / JSON).
void run_script(const ReportOptions& o, const std::string& results_path) {
  const std::string script = find_report_script(fs::path(self_executable()).parent_path().string());
  std::vector<std::string> args{o.python, script, "--from", results_path, "--out", o.out_dir};
  if (!o.plots) args.push_back("--no-plots");
  std::vector<char*> argv = c_argv(args);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, o.python.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0)
    throw Error(fmt::format("cannot run '{}' ({}): report.md and the plots are written by {} (Python 3; matplotlib "
                            "for the plots); install it or pass --python, then run `parallax report --from {}`",
                            o.python, std::strerror(err), script, results_path));
  // Plots of a big results file take seconds; the limit only guards against a wedged interpreter.
  const double limit = std::max(60.0, 4 * report_script_budget(o.quick)) * o.budget_scale;
  const auto [status, timed_out] = wait_with_limit(pid, limit, {});
  if (timed_out) throw Error(fmt::format("{} {} did not finish within {:.0f} s and was stopped", o.python, script, limit));
  if (status < 0) throw Error("lost the report script process");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error(fmt::format("{} {} failed ({}); see its message above", o.python, script, describe_exit(status)));
}

int report_from(const ReportOptions& o) {
  // Validate in C++ first: the error names the offending field (results::SchemaError) before Python starts.
  const results::Document doc = results::read_file(o.from);
  fs::create_directories(o.out_dir);
  run_script(o, o.from);
  if (o.output.prints_table())
    fmt::print("report on {} ({} records, {}): {}\n", o.from, doc.records.size(), doc.device.name,
               (fs::path(o.out_dir) / "report.md").string());
  emit_json(o.output, doc);
  return 0;
}

// Is torch importable by the interpreter the report uses? ("2.5.1" or a reason.) The attention section's own
// torch peers decide for themselves; this is recorded so the report can say why they are absent.
std::string torch_status(const std::string& python) {
  std::vector<std::string> args{python, "-c", "import torch; print(torch.__version__)"};
  std::vector<char*> argv = c_argv(args);
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return "unknown (pipe failed)";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, python.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  std::string out;
  if (err == 0) {
    char buf[256];
    ssize_t n;
    while ((n = read(pipe_fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  }
  close(pipe_fds[0]);
  if (err != 0) return "not importable (" + python + " cannot be run)";
  int status = 0;
  waitpid(pid, &status, 0);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || out.empty()) return "not importable";
  return "torch " + out;
}

}  // namespace

ReportRun run_sections(const ReportOptions& o, const std::vector<ReportSection>& plan, const std::string& executable,
                       int gpus, const std::string& torch) {
  const fs::path out(o.out_dir), parts = out / "parts", logs = out / "logs";
  fs::create_directories(parts);
  fs::create_directories(logs);

  ReportRun run;
  Progress progress(static_cast<int>(plan.size()));
  std::vector<results::Part> merged_parts;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    const ReportSection& s = plan[i];
    const std::string what = s.title;
    progress.update(static_cast<int>(i), what);
    SectionOutcome r = run_section(s, executable, parts.string(), logs.string(), s.budget_s * o.budget_scale,
                                   [&] { progress.update(static_cast<int>(i), what); });
    if (r.state == SectionOutcome::State::kOk || r.state == SectionOutcome::State::kPartial) {
      try {
        results::Document part = results::read_file(r.json_path);
        tag_records(part, s.tags);
        merged_parts.push_back({s.name, std::move(part)});
      } catch (const std::exception& e) {
        r.state = SectionOutcome::State::kFailed;
        r.message = e.what();
      }
    }
    if (progress.mode() != Progress::Mode::kTerminal)  // a log gets one line per section
      fmt::print(stderr, "section {}/{} {}: {} ({:.0f} s)\n", i + 1, plan.size(), s.name, r.summary(), r.seconds);
    run.outcomes.emplace_back(s.name, std::move(r));
  }
  progress.update(static_cast<int>(plan.size()), "writing the report");
  progress.finish();

  // Without any part there is no device to describe; say what happened to each section.
  if (merged_parts.empty()) {
    std::string why;
    for (const auto& [name, r] : run.outcomes) why += "\n  " + name + ": " + r.summary();
    throw Error("no section produced results; nothing to report:" + why);
  }
  try {
    run.document = results::merge(merged_parts);
  } catch (const InvalidArgument& e) {
    throw Error(std::string("cannot merge the sections: ") + e.what());  // a device mismatch is not a usage error
  }
  results::Document& doc = run.document;
  doc.command = o.command_line();
  doc.context.emplace_back("report.quick", o.quick);
  doc.context.emplace_back("report.gpus", static_cast<std::int64_t>(gpus));
  doc.context.emplace_back("report.torch", torch);
  for (std::size_t i = 0; i < run.outcomes.size(); ++i) {
    const auto& [name, r] = run.outcomes[i];
    doc.context.emplace_back("report.section." + name, r.summary());
    doc.context.emplace_back("report.seconds." + name, r.seconds);
    if (plan[i].skip_reason.empty()) doc.context.emplace_back("report.budget." + name, plan[i].budget_s * o.budget_scale);
  }
  run.results_path = (out / "results.json").string();
  results::write_file(doc, run.results_path);
  return run;
}

int run_report(const ReportOptions& o) {
  if (!o.from.empty()) return report_from(o);
  const int visible = parallax::has_gpu() ? parallax::device_count() : 0;
  if (o.dry_run) {
    // The plan only: works on any machine (without a GPU it plans for --gpus, default 1).
    const int gpus = o.gpus > 0 ? o.gpus : std::max(visible, 1);
    std::vector<ReportSection> plan = plan_report(o.quick, gpus);
    skip_unsupported(plan);
    fmt::print("{}", describe_plan(plan, o.quick, gpus));
    return 0;
  }
  if (visible == 0)
    throw Error("no CUDA GPU visible: `parallax report` measures on this machine's GPUs (check the NVIDIA driver and "
                "CUDA_VISIBLE_DEVICES); to rebuild a report from an earlier run's results.json on any machine, use "
                "`parallax report --from results.json`; to see what a run would do, `parallax report --dry-run`");
  if (o.gpus > visible)
    throw InvalidArgument("--gpus", fmt::format("at most the {} visible GPU{} (got {})", visible,
                                                visible == 1 ? "" : "s", o.gpus));
  refuse_tf32_override("report");
  const int gpus = o.gpus > 0 ? o.gpus : visible;
  std::vector<ReportSection> plan = plan_report(o.quick, gpus);
  skip_unsupported(plan);
  const std::string torch = torch_status(o.python);
  fmt::print(stderr, "parallax report: {} sections on {} GPU{} ({}), budget {:.0f} s, writing to {}\n", plan.size(),
             gpus, gpus == 1 ? "" : "s", torch, plan_budget(plan, o.quick) * o.budget_scale, o.out_dir);

  const ReportRun run = run_sections(o, plan, self_executable(), gpus, torch);
  run_script(o, run.results_path);

  if (o.output.prints_table()) {
    Table t({{"section"}, {"status", Align::kLeft}, {"seconds", Align::kRight}, {"budget", Align::kRight}});
    for (std::size_t i = 0; i < run.outcomes.size(); ++i) {
      const auto& [name, r] = run.outcomes[i];
      t.add_row({name, r.summary(), fixed(r.seconds, 1),
                 plan[i].skip_reason.empty() ? fixed(plan[i].budget_s * o.budget_scale, 0) : std::string("-")});
    }
    fmt::print("parallax report on {} ({} GPU{})\n\n", run.document.device.name, gpus, gpus == 1 ? "" : "s");
    t.print();
    fmt::print("\nresults: {}\nreport:  {}\n", run.results_path, (fs::path(o.out_dir) / "report.md").string());
  }
  emit_json(o.output, run.document);
  // Failed sections are reported, not fatal: the report is the deliverable, and it says what is missing.
  return 0;
}

}  // namespace parallax::cli
