// `parallax report`: the whole study in one command. Exposed here so tests can parse command lines, inspect
// the plan, run sections against stand-in executables and find the report script, all without a GPU.
//
//   parallax report [--quick] [--out DIR] [--gpus N] measure everything on this machine, then write the report
//   parallax report [--quick] [--gpus N] --dry-run   print the plan (commands, time budgets) and run nothing
//   parallax report --from results.json [--out DIR] rebuild report.md and the plots from an earlier run
//   both: [--python EXE] [--no-plots] [--budget-scale F] [--json] [--json-out FILE]
//
// How a run works, and why:
//   * each section (roofs, FP32 ladder, tensor-core GEMM, attention forward/backward, collectives, tensor
//     parallelism) is this same executable's own subcommand, spawned with --json-out into DIR/parts/ and its
//     output captured in DIR/logs/<section>.log. Spawning keeps the report decoupled from the subcommands (a
//     subcommand crashing becomes a "failed" section with its message instead of taking the report down) and
//     gives every section a fresh CUDA context and a time limit
//   * every section has an explicit time budget, which is also its hard limit: the budgets of a plan add up to
//     less than the promised wall time (--quick < 2 min, full < 15 min; a CPU test checks the sums), so a
//     slow or hung section costs its own numbers, never the report
//   * before running, each planned command line is parsed by this build's own CLI: a section whose options
//     this build does not have (e.g. `attention --backward` before issue 6 lands, `tp --layer mlp`) is
//     skipped with that reason instead of failing
//   * the orchestrator knows what each section measures (TP scaling mode and layer, attention direction) and
//     adds those as shape keys to records that lack them, so results.json is self-describing
//   * the parts are merged (results::merge) into DIR/results.json, whose context records every section's
//     outcome ("report.section.<name>": "ok", "partial: ...", "failed: ...", "skipped: ...")
//   * DIR/report.md and DIR/*.png come from scripts/report.py, which reads only results.json; so `--from`
//     rebuilds the same report on any machine, GPU or not
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "parallax/results.hpp"
#include "table.hpp"

namespace parallax::cli {

struct ReportOptions {
  OutputOptions output;  // --json prints the merged results document on stdout
  bool quick = false;    // --quick: fewer sizes and repetitions (target < 2 min on one H100)
  std::string out_dir = "parallax-report";
  std::string from;                // --from FILE: no measuring, report on an existing results.json
  std::string python = "python3";  // interpreter that runs scripts/report.py
  bool plots = true;               // --no-plots: report.md only
  bool dry_run = false;            // --dry-run: print the plan with its budgets, run nothing
  int gpus = 0;                    // --gpus N: multi-GPU sections use N GPUs (0: every visible GPU)
  double budget_scale = 1.0;       // every section's time limit is its budget times this (slower GPUs)

  std::string command_line() const;
};

CLI::App* register_report(CLI::App& root, Action& action, std::shared_ptr<ReportOptions> options);
int run_report(const ReportOptions& options);

// One section of the study: which subcommand produces it, or why it is skipped on this machine.
struct ReportSection {
  std::string name;               // also the merge label and the context key: "roofs", "sgemm_ladder", ...
  std::string title;              // progress and summary text
  std::vector<std::string> args;  // the subcommand and its options, without --json-out
  std::string skip_reason;        // non-empty: not run here (e.g. collectives on one GPU)
  double budget_s = 60;           // expected worst case on one H100 / H200 host; also the section's time limit
  results::Fields tags;           // shape keys added to this section's records that lack them ("scaling", ...)
};

// The study for this machine: every section, in report order. gpu_count decides whether the multi-GPU
// sections run (they need two GPUs or more) and over which GPU counts TP scales (2, 4, ... and gpu_count);
// quick picks the reduced sweeps.
std::vector<ReportSection> plan_report(bool quick, int gpu_count);

// Seconds allowed for scripts/report.py (tables and plots) after the sections.
double report_script_budget(bool quick);
// The whole run's budget: every section that will run, plus the report script.
double plan_budget(const std::vector<ReportSection>& plan, bool quick);
// The promise of issue 8: --quick < 2 minutes, the full study < 15 minutes (seconds).
inline constexpr double kQuickLimitS = 120, kFullLimitS = 900;

// Why this build cannot run the section's command line ("" when it can): the arguments are parsed by this
// executable's own CLI (nothing runs). Used to skip sections whose subcommand or options have not landed.
std::string unsupported_reason(const ReportSection& section);
// Applies unsupported_reason to every section not already skipped.
void skip_unsupported(std::vector<ReportSection>& plan);

// The plan as text: one line per section with its budget and command (or why it is skipped), and the total.
std::string describe_plan(const std::vector<ReportSection>& plan, bool quick, int gpu_count);

// What became of one spawned section.
struct SectionOutcome {
  enum class State { kOk, kPartial, kFailed, kSkipped };
  State state = State::kFailed;
  std::string message;         // "" for ok; why, for the rest
  std::string json_path;       // the part's results file (valid when state is kOk or kPartial)
  int exit_code = -1;          // of the subcommand; -1 when it did not exit normally or was not run
  double seconds = 0;
  // "ok", "partial: ...", "failed: ...", "skipped: ..." (the value of context "report.section.<name>").
  std::string summary() const;
};

// Runs `executable args... --json-out <parts_dir>/<name>.json` with stdout and stderr sent to
// <logs_dir>/<name>.log, stopping it after timeout_s (the caller passes budget_s x --budget-scale). Never throws for what the child does: a missing
// executable, a non-zero exit without a results file, a timeout or an unreadable results file are kFailed
// (message: the exit status and the log's last line); a non-zero exit WITH a valid results file is kPartial
// (a measuring command exits 1 when some rows failed their check, and those rows are worth reporting).
// `tick` is called about every 200 ms while the child runs (progress display).
SectionOutcome run_section(const ReportSection& section, const std::string& executable, const std::string& parts_dir,
                           const std::string& logs_dir, double timeout_s, const std::function<void()>& tick = {});

// Every section of `plan` run with `executable` (run_section, limit budget_s x options.budget_scale), each
// part's records given the section's tags, the parts merged into <out_dir>/results.json with the run's
// context ("report.section.<name>", "report.seconds.<name>", "report.budget.<name>", "report.quick",
// "report.gpus", "report.torch"). Throws parallax::Error when no section produced results (listing each one's fate) or the
// parts cannot be merged. The report script is not run here.
struct ReportRun {
  results::Document document;
  std::vector<std::pair<std::string, SectionOutcome>> outcomes;  // per section, in plan order
  std::string results_path;
};
ReportRun run_sections(const ReportOptions& options, const std::vector<ReportSection>& plan,
                       const std::string& executable, int gpus, const std::string& torch);

// Where scripts/report.py is: $PARALLAX_SCRIPTS_DIR, <exe dir>/../share/parallax/scripts, <exe dir>/../scripts,
// <exe dir>/../../scripts, then the source tree this binary was built from. Throws parallax::Error listing
// every place it looked.
std::string find_report_script(const std::string& executable_dir);
// Adds each tag to every record of `doc` whose shape lacks that key (what the section measured, when the
// producer did not write it into the record).
void tag_records(results::Document& doc, const results::Fields& tags);
// The same search for any file under scripts/ ("attention_peers.py"): PARALLAX_SCRIPTS_DIR, the install
// prefix, next to the build, the source tree the binary was built from. Throws Error listing where it looked.
std::string find_script(const std::string& executable_dir, const std::string& file);

// The path of the running executable (/proc/self/exe).
std::string self_executable();

}  // namespace parallax::cli
