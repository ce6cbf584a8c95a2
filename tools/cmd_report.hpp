// `parallax report`: the whole study in one command. Exposed here so tests can parse command lines, inspect
// the plan, run sections against stand-in executables and find the report script, all without a GPU.
//
//   parallax report [--quick] [--out DIR]          measure everything on this machine, then write the report
//   parallax report --from results.json [--out DIR] rebuild report.md and the plots from an earlier run
//   both: [--python EXE] [--no-plots] [--section-timeout S] [--json] [--json-out FILE]
//
// How a run works, and why:
//   * each section (roofs, FP32 ladder, tensor-core GEMM, attention forward/backward, collectives, tensor
//     parallelism) is this same executable's own subcommand, spawned with --json-out into DIR/parts/ and its
//     output captured in DIR/logs/<section>.log. Spawning keeps the report decoupled from the subcommands (a
//     subcommand missing from this build, or crashing, becomes a "failed" section with its message instead of
//     taking the report down) and gives every section a fresh CUDA context and a time limit
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
  double section_timeout_s = 600;  // a section still running after this is stopped and marked failed

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
};

// The study for this machine: every section, in report order. gpu_count decides whether the multi-GPU
// sections run (they need two GPUs or more); quick picks the reduced sweeps.
std::vector<ReportSection> plan_report(bool quick, int gpu_count);

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
// <logs_dir>/<name>.log, stopping it after timeout_s. Never throws for what the child does: a missing
// executable, a non-zero exit without a results file, a timeout or an unreadable results file are kFailed
// (message: the exit status and the log's last line); a non-zero exit WITH a valid results file is kPartial
// (a measuring command exits 1 when some rows failed their check, and those rows are worth reporting).
// `tick` is called about every 200 ms while the child runs (progress display).
SectionOutcome run_section(const ReportSection& section, const std::string& executable, const std::string& parts_dir,
                           const std::string& logs_dir, double timeout_s, const std::function<void()>& tick = {});

// Every section of `plan` run with `executable` (run_section), the parts merged into <out_dir>/results.json
// with the run's context ("report.section.<name>", "report.seconds.<name>", "report.quick", "report.gpus",
// "report.torch"). Throws parallax::Error when no section produced results (listing each one's fate) or the
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
// The same search for any file under scripts/ ("attention_peers.py"): PARALLAX_SCRIPTS_DIR, the install
// prefix, next to the build, the source tree the binary was built from. Throws Error listing where it looked.
std::string find_script(const std::string& executable_dir, const std::string& file);

// The path of the running executable (/proc/self/exe).
std::string self_executable();

}  // namespace parallax::cli
