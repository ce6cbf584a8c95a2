// `parallax report` without a GPU: merging section documents (results::merge), the plan of sections, running a
// section against stand-in executables (ok, partial, failing, garbage, hanging, missing), finding the report
// script, option parsing, and the --from path on the committed sample and on malformed files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "cli.hpp"
#include "cmd_report.hpp"
#include "common/expect_invalid.hpp"
#include "parallax/results.hpp"

#ifndef PARALLAX_TEST_DATA_DIR
#error "tests/CMakeLists.txt defines PARALLAX_TEST_DATA_DIR (the committed sample results live there)"
#endif

namespace {

namespace cli = parallax::cli;
namespace pr = parallax::results;
namespace fs = std::filesystem;
using parallax::testing::expect_invalid;
using State = cli::SectionOutcome::State;

const std::string kSample = std::string(PARALLAX_TEST_DATA_DIR) + "/sample_results.json";

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

parallax::DeviceInfo device(const std::string& name) {
  parallax::DeviceInfo d;
  d.name = name;
  d.cc_major = 9;
  d.sm_count = 132;
  d.l2_bytes = 52428800;
  d.warp_size = 32;
  return d;
}

pr::Record record(const std::string& suite, const std::string& name, double ms) {
  parallax::bench::Timing t;
  t.median_ms = t.min_ms = t.max_ms = t.mean_ms = ms;
  t.repetitions = 3;
  return pr::make_record(suite, name, {{"m", std::int64_t{64}}}, "fp32", t, {2e6, 1e4});
}

pr::Document doc(const std::string& gpu, std::vector<pr::Record> records, pr::Fields context = {}) {
  pr::Document d = pr::make_document(device(gpu));
  d.records = std::move(records);
  d.context = std::move(context);
  return d;
}

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "parallax_report_XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  // Writes an executable shell script (a stand-in for the parallax executable) and returns its path.
  std::string script(const std::string& name, const std::string& body) const {
    const fs::path p = path_ / name;
    std::ofstream(p) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(p, fs::perms::owner_all);
    return p.string();
  }

 private:
  fs::path path_;
};

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Sets an environment variable for one scope, restoring what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_.c_str(), old_->c_str(), 1);
    else unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// ------------------------------------------------------------------------------------------------ merge

TEST(ReportMerge, ConcatenatesRecordsPrefixesContextTakesFirstCeilings) {
  pr::Document roofs = doc("H100", {}, {{"gemm_size", std::int64_t{8192}}});
  roofs.ceilings = parallax::bench::Ceilings{3000, 52000, 800000, 8192};
  pr::Document ladder = doc("H100", {record("sgemm_ladder", "sgemm1", 2.0), record("sgemm_ladder", "sgemm2", 1.0)},
                            {{"repetitions", std::int64_t{30}}, {"gemm_size", std::int64_t{4096}}});
  ladder.ceilings = parallax::bench::Ceilings{1, 1, 1, 1};  // not the first with ceilings: ignored
  pr::Document attn = doc("H100", {record("attention", "mma", 0.5)});

  const pr::Document m = pr::merge({{"roofs", roofs}, {"sgemm_ladder", ladder}, {"attention", attn}});
  EXPECT_EQ(m.schema, pr::kSchema);
  EXPECT_EQ(m.device.name, "H100");
  EXPECT_EQ(m.git_sha, roofs.git_sha);
  EXPECT_TRUE(m.command.empty());
  ASSERT_TRUE(m.ceilings.has_value());
  EXPECT_DOUBLE_EQ(m.ceilings->copy_gbps, 3000);
  ASSERT_EQ(m.records.size(), 3u);
  EXPECT_EQ(m.records[0].name, "sgemm1");
  EXPECT_EQ(m.records[1].name, "sgemm2");
  EXPECT_EQ(m.records[2].suite, "attention");
  // Equal keys of two sections both survive, under their labels.
  ASSERT_NE(pr::find(m.context, "roofs.gemm_size"), nullptr);
  ASSERT_NE(pr::find(m.context, "sgemm_ladder.gemm_size"), nullptr);
  EXPECT_EQ(pr::to_string(*pr::find(m.context, "roofs.gemm_size")), "8192");
  EXPECT_EQ(pr::to_string(*pr::find(m.context, "sgemm_ladder.gemm_size")), "4096");
  EXPECT_EQ(pr::find(m.context, "gemm_size"), nullptr);
  EXPECT_EQ(pr::find(m.context, "merge.git_sha.sgemm_ladder"), nullptr);  // same SHA: nothing to note

  // The merged document is an ordinary results document: it round-trips.
  const pr::Document back = pr::parse(pr::serialize(m));
  EXPECT_EQ(back.records.size(), 3u);
  EXPECT_EQ(pr::serialize(back), pr::serialize(m));
}

TEST(ReportMerge, NoCeilingsAnywhereStaysWithout) {
  const pr::Document m = pr::merge({{"a", doc("X", {record("s", "k", 1)})}});
  EXPECT_FALSE(m.ceilings.has_value());
  EXPECT_EQ(m.records.size(), 1u);
}

TEST(ReportMerge, NotesADifferentGitSha) {
  pr::Document a = doc("X", {}), b = doc("X", {});
  b.git_sha = "0123456789ab";
  a.git_sha = "ba9876543210";
  const pr::Document m = pr::merge({{"a", a}, {"b", b}});
  ASSERT_NE(pr::find(m.context, "merge.git_sha.b"), nullptr);
  EXPECT_EQ(pr::to_string(*pr::find(m.context, "merge.git_sha.b")), "0123456789ab");
  EXPECT_EQ(m.git_sha, "ba9876543210");
}

TEST(ReportMerge, RejectsBadPartsNamingTheRule) {
  expect_invalid([] { pr::merge({}); }, "parts", "at least one document");
  expect_invalid([] { pr::merge({{"", doc("X", {})}}); }, "parts", "label of part 0 is empty");
  expect_invalid([] { pr::merge({{"a.b", doc("X", {})}}); }, "parts", "contains '.'");
  expect_invalid([] { pr::merge({{"a", doc("X", {})}, {"b", doc("X", {})}, {"a", doc("X", {})}}); }, "parts",
                 "label 'a' appears twice (parts 0 and 2)");
  expect_invalid([] { pr::merge({{"a", doc("H100", {})}, {"b", doc("A100", {})}}); }, "parts",
                 "part 'b' was measured on 'A100' but part 'a' on 'H100'");
  pr::Document other = doc("X", {});
  other.schema = "parallax.results/2";
  expect_invalid([&] { pr::merge({{"a", other}}); }, "parts", "schema 'parallax.results/2'");
}

// ------------------------------------------------------------------------------------------------ plan

std::vector<std::string> names_of(const std::vector<cli::ReportSection>& plan) {
  std::vector<std::string> names;
  for (const auto& s : plan) names.push_back(s.name);
  return names;
}

const cli::ReportSection* find_section(const std::vector<cli::ReportSection>& plan, const std::string& name) {
  for (const auto& s : plan)
    if (s.name == name) return &s;
  return nullptr;
}

TEST(ReportPlan, SectionsInReportOrderWithUniqueNames) {
  EXPECT_EQ(names_of(cli::plan_report(false, 2)),
            (std::vector<std::string>{"roofs", "sgemm_ladder", "gemm", "attention", "attention_backward", "comm",
                                      "tp_strong_column_g2", "tp_strong_row_g2", "tp_strong_mlp_g2",
                                      "tp_weak_column_g2", "tp_weak_row_g2"}));
  EXPECT_EQ(names_of(cli::plan_report(true, 2)),
            (std::vector<std::string>{"roofs", "sgemm_ladder", "gemm", "attention", "attention_backward", "comm",
                                      "tp_strong_column_g2", "tp_weak_column_g2"}));
  for (bool quick : {false, true}) {
    for (int gpus : {1, 2, 3, 8}) {
      const auto plan = cli::plan_report(quick, gpus);
      const auto names = names_of(plan);
      EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size()) << "names are merge labels";
      for (const auto& s : plan) {
        EXPECT_EQ(s.name.find('.'), std::string::npos) << s.name;
        EXPECT_FALSE(s.args.empty()) << s.name;
        EXPECT_FALSE(s.title.empty()) << s.name;
        // The orchestrator adds --json-out itself.
        EXPECT_EQ(std::count(s.args.begin(), s.args.end(), "--json-out"), 0) << s.name;
      }
    }
  }
}

TEST(ReportPlan, MultiGpuSectionsSkipOnOneGpuSayingWhy) {
  for (int gpus : {0, 1}) {
    const auto plan = cli::plan_report(false, gpus);
    EXPECT_EQ(names_of(plan), (std::vector<std::string>{"roofs", "sgemm_ladder", "gemm", "attention",
                                                        "attention_backward", "comm", "tp"}));
    for (const auto& s : plan) {
      if (s.name == "comm" || s.name == "tp")
        EXPECT_EQ(s.skip_reason, "needs 2 or more GPUs, " + std::to_string(gpus) + " visible") << s.name;
      else
        EXPECT_TRUE(s.skip_reason.empty()) << s.name;
    }
  }
}

// Issue 8's promise, checked on the plan itself: the budgets are the sections' hard limits, so their sum (plus
// the report script's) bounds the run: --quick < 2 min and the full study < 15 min, for any GPU count.
TEST(ReportPlan, BudgetsAddUpToThePromise) {
  for (int gpus = 1; gpus <= 8; ++gpus) {
    for (bool quick : {false, true}) {
      const auto plan = cli::plan_report(quick, gpus);
      double sum = cli::report_script_budget(quick);
      for (const auto& s : plan) {
        if (!s.skip_reason.empty()) continue;
        EXPECT_GE(s.budget_s, 4.0) << s.name << ": too short to start a CUDA context and measure";
        sum += s.budget_s;
      }
      EXPECT_DOUBLE_EQ(cli::plan_budget(plan, quick), sum);
      EXPECT_LT(sum, quick ? cli::kQuickLimitS : cli::kFullLimitS) << (quick ? "--quick" : "full") << " on " << gpus;
    }
  }
  // The numbers themselves (so a change is a deliberate one): one GPU, and two. Quick budgets were rebalanced
  // from the first H100/H200 runs: the backward section (torch peers + parallax) needs ~30 s, the others far
  // less than they had.
  EXPECT_DOUBLE_EQ(cli::plan_budget(cli::plan_report(true, 1), true), 99);
  EXPECT_DOUBLE_EQ(cli::plan_budget(cli::plan_report(true, 2), true), 119);
  EXPECT_DOUBLE_EQ(cli::plan_budget(cli::plan_report(false, 1), false), 615);
  EXPECT_DOUBLE_EQ(cli::plan_budget(cli::plan_report(false, 2), false), 855);
  // Skipped sections cost nothing.
  auto plan = cli::plan_report(false, 1);
  const double before = cli::plan_budget(plan, false);
  plan[1].skip_reason = "test";
  EXPECT_DOUBLE_EQ(cli::plan_budget(plan, false), before - plan[1].budget_s);
}

TEST(ReportPlan, TpScalesStrongAndWeakOverGpuCounts) {
  const auto plan = cli::plan_report(false, 8);
  for (const char* scaling : {"strong", "weak"})
    for (const char* layer : {"column", "row"})
      for (int g : {2, 4, 8}) {
        const std::string name = fmt::format("tp_{}_{}_g{}", scaling, layer, g);
        const cli::ReportSection* s = find_section(plan, name);
        ASSERT_NE(s, nullptr) << name;
        const auto& a = s->args;
        EXPECT_EQ(a[0], "tp");
        EXPECT_EQ(*(std::find(a.begin(), a.end(), "--gpus") + 1), std::to_string(g)) << name;
        EXPECT_EQ(*(std::find(a.begin(), a.end(), "--scaling") + 1), scaling) << name;
        EXPECT_EQ(*(std::find(a.begin(), a.end(), "--layer") + 1), layer) << name;
        // The records get what the section measured, whatever the producer writes.
        ASSERT_NE(pr::find(s->tags, "scaling"), nullptr);
        EXPECT_EQ(pr::to_string(*pr::find(s->tags, "scaling")), scaling);
        EXPECT_EQ(pr::to_string(*pr::find(s->tags, "layer")), layer);
      }
  EXPECT_NE(find_section(plan, "tp_strong_mlp_g8"), nullptr);
  EXPECT_EQ(find_section(plan, "tp_weak_column_g3"), nullptr);
  // A count that is not a power of two is measured too, after the powers below it.
  const auto odd = names_of(cli::plan_report(false, 3));
  EXPECT_NE(std::find(odd.begin(), odd.end(), "tp_strong_column_g2"), odd.end());
  EXPECT_NE(std::find(odd.begin(), odd.end(), "tp_strong_column_g3"), odd.end());
  // The TP runs share one pool: 8 GPUs make more, shorter runs, not a longer report.
  double tp2 = 0, tp8 = 0;
  for (const auto& s : cli::plan_report(false, 2)) tp2 += s.name.rfind("tp_", 0) == 0 ? s.budget_s : 0;
  for (const auto& s : plan) tp8 += s.name.rfind("tp_", 0) == 0 ? s.budget_s : 0;
  EXPECT_NEAR(tp2, tp8, 1e-9);
  // Quick: the column layer on every GPU, strong and weak.
  EXPECT_EQ(names_of(cli::plan_report(true, 8)).back(), "tp_weak_column_g8");
  EXPECT_NE(find_section(cli::plan_report(true, 8), "tp_strong_column_g8"), nullptr);
}

TEST(ReportPlan, QuickUsesSmallerSweeps) {
  auto args_of = [](bool quick, const std::string& name) {
    for (const auto& s : cli::plan_report(quick, 8))
      if (s.name == name) return s.args;
    return std::vector<std::string>{};
  };
  const auto quick_ladder = args_of(true, "sgemm_ladder"), full_ladder = args_of(false, "sgemm_ladder");
  auto sizes = [](const std::vector<std::string>& a) {
    const auto it = std::find(a.begin(), a.end(), "--sizes");
    return it == a.end() || it + 1 == a.end() ? std::string() : *(it + 1);
  };
  EXPECT_EQ(sizes(quick_ladder), "1024,4096");
  EXPECT_EQ(sizes(full_ladder), "1000,1024,2048,4096,8192");
  const auto quick_gemm = args_of(true, "gemm"), full_gemm = args_of(false, "gemm");
  const auto shapes = std::find(quick_gemm.begin(), quick_gemm.end(), "--shapes");
  ASSERT_NE(shapes, quick_gemm.end());
  EXPECT_EQ(*(shapes + 1), "2048,4096");
  EXPECT_EQ(std::count(full_gemm.begin(), full_gemm.end(), "--shapes"), 0) << "full: the default study of issue 4";
  for (const char* attention : {"attention", "attention_backward"}) {
    const auto q = args_of(true, attention), f = args_of(false, attention);
    EXPECT_EQ(std::count(q.begin(), q.end(), "--quick"), 1) << attention;
    EXPECT_EQ(std::count(f.begin(), f.end(), "--quick"), 0) << attention;
    EXPECT_EQ(std::count(f.begin(), f.end(), "--torch-peers"), 1) << attention;
  }
  const auto b = args_of(false, "attention_backward");
  EXPECT_EQ(std::count(b.begin(), b.end(), "--backward"), 1);
  const auto qc = args_of(true, "comm");
  EXPECT_EQ(*(std::find(qc.begin(), qc.end(), "--gpus") + 1), "8") << "collectives over every visible GPU";
}

// The sections whose subcommands exist must parse with this build's own CLI, so the plan cannot drift from the
// options it calls. Only the producers still being written on other branches (attention --backward, the TP
// "mlp" layer) may be unsupported, and then the plan skips them saying why.
TEST(ReportPlan, ExistingSubcommandsAcceptThePlannedArguments) {
  const std::set<std::string> may_be_missing{"attention_backward", "tp_strong_mlp_g2"};
  for (bool quick : {false, true}) {
    for (const auto& s : cli::plan_report(quick, 2)) {
      const std::string why = cli::unsupported_reason(s);
      if (may_be_missing.count(s.name)) {
        if (!why.empty()) EXPECT_TRUE(contains(why, "this build does not support `parallax ")) << why;
        continue;
      }
      EXPECT_EQ(why, "") << s.name << (quick ? " (quick)" : "");
    }
  }
}

TEST(ReportPlan, UnsupportedCommandsAreSkippedWithTheReason) {
  std::vector<cli::ReportSection> plan{{"a", "a", {"info", "--gemm-size", "1024"}, "", 10, {}},
                                       {"b", "b", {"attention", "--no-such-option"}, "", 10, {}},
                                       {"c", "c", {"no-such-subcommand"}, "", 10, {}},
                                       {"d", "d", {"comm"}, "needs 2 or more GPUs, 1 visible", 10, {}}};
  cli::skip_unsupported(plan);
  EXPECT_EQ(plan[0].skip_reason, "");
  EXPECT_TRUE(contains(plan[1].skip_reason, "this build does not support `parallax attention --no-such-option`"))
      << plan[1].skip_reason;
  EXPECT_TRUE(contains(plan[1].skip_reason, "--no-such-option")) << plan[1].skip_reason;
  EXPECT_TRUE(contains(plan[2].skip_reason, "this build does not support `parallax no-such-subcommand`"))
      << plan[2].skip_reason;
  EXPECT_EQ(plan[3].skip_reason, "needs 2 or more GPUs, 1 visible") << "an earlier reason is kept";
}

TEST(ReportPlan, DescribedWithEveryCommandBudgetAndTotal) {
  auto plan = cli::plan_report(true, 2);
  cli::skip_unsupported(plan);
  const std::string text = cli::describe_plan(plan, true, 2);
  EXPECT_TRUE(contains(text, "parallax report --quick plan for 2 GPUs")) << text;
  EXPECT_TRUE(contains(text, "parallax info --gemm-size 4096 --json-out OUT/parts/roofs.json")) << text;
  EXPECT_TRUE(contains(text, "parallax tp --gpus 2 --layer column --scaling weak")) << text;
  EXPECT_TRUE(contains(text, "scripts/report.py --from OUT/results.json")) << text;
  EXPECT_TRUE(contains(text, fmt::format("total budget {:.0f} s", cli::plan_budget(plan, true)))) << text;
  EXPECT_TRUE(contains(text, "the promise: --quick < 2 min")) << text;
  for (const auto& s : plan) EXPECT_TRUE(contains(text, "  " + s.name + " ")) << s.name << "\n" << text;
}

TEST(ReportPlan, TagsFillOnlyMissingShapeKeys) {
  pr::Document d = doc("X", {record("tp", "column-forward-overlap-on", 1.0), record("tp", "x", 2.0)});
  d.records[1].shape.emplace_back("scaling", std::string("weak"));
  cli::tag_records(d, {{"scaling", std::string("strong")}, {"layer", std::string("column")}});
  EXPECT_EQ(pr::to_string(*pr::find(d.records[0].shape, "scaling")), "strong");
  EXPECT_EQ(pr::to_string(*pr::find(d.records[0].shape, "layer")), "column");
  EXPECT_EQ(pr::to_string(*pr::find(d.records[1].shape, "scaling")), "weak") << "the producer's own value wins";
  EXPECT_EQ(pr::to_string(*pr::find(d.records[1].shape, "m")), "64");
}

// ------------------------------------------------------------------------------------------------ run_section

struct ReportSectionRun : ::testing::Test {
  TempDir dir;
  fs::path parts = dir.path() / "parts", logs = dir.path() / "logs";
  void SetUp() override {
    fs::create_directories(parts);
    fs::create_directories(logs);
  }
  cli::SectionOutcome run(const std::string& exe, std::vector<std::string> args = {"info"}, double timeout = 30,
                          const std::string& skip = "") {
    return cli::run_section({"roofs", "device roofs", std::move(args), skip, timeout, {}}, exe, parts.string(),
                            logs.string(), timeout);
  }
  // A stand-in that writes the committed sample wherever --json-out points, then exits with `code`.
  std::string writer(int code) {
    return dir.script("writer" + std::to_string(code) + ".sh",
                      "echo \"args: $*\"\nwhile [ $# -gt 0 ]; do if [ \"$1\" = --json-out ]; then cp '" + kSample +
                          "' \"$2\"; fi; shift; done\necho 'parallax gemm: 2 of 45 rows did not pass' >&2\nexit " +
                          std::to_string(code));
  }
};

TEST_F(ReportSectionRun, ExitZeroWithResultsIsOk) {
  const auto r = run(writer(0), {"gemm", "--ladder", "--sizes", "1024"});
  EXPECT_EQ(r.state, State::kOk) << r.summary();
  EXPECT_EQ(r.summary(), "ok");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.json_path, (parts / "roofs.json").string());
  EXPECT_NO_THROW(pr::read_file(r.json_path));
  // The subcommand got its arguments plus --json-out, and its output landed in the section's log.
  const std::string log = read(logs / "roofs.log");
  EXPECT_TRUE(contains(log, "args: gemm --ladder --sizes 1024 --json-out " + r.json_path)) << log;
  EXPECT_TRUE(contains(log, "rows did not pass")) << "stderr is captured too: " << log;
}

TEST_F(ReportSectionRun, NonZeroExitWithResultsIsPartialAndCountsBadRecords) {
  const auto r = run(writer(1));
  EXPECT_EQ(r.state, State::kPartial) << r.summary();
  EXPECT_EQ(r.exit_code, 1);
  // The sample has exactly one record that is not ok (a synthetic failed GEMM row).
  EXPECT_TRUE(contains(r.summary(), "partial: exit 1, 1 of ")) << r.summary();
  EXPECT_TRUE(contains(r.summary(), "records not ok")) << r.summary();
}

TEST_F(ReportSectionRun, FailureWithoutResultsQuotesTheLastLine) {
  const auto r = run(dir.script("fail.sh", "echo starting\necho 'parallax: error: unknown subcommand attention' >&2\nexit 2"));
  EXPECT_EQ(r.state, State::kFailed);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.message, "exit 2, no results written: parallax: error: unknown subcommand attention"))
      << r.message;
  EXPECT_TRUE(contains(r.message, (logs / "roofs.log").string())) << r.message;
  EXPECT_TRUE(contains(r.summary(), "failed: ")) << r.summary();
}

TEST_F(ReportSectionRun, StalePartFromAnEarlierRunDoesNotCount) {
  fs::copy_file(kSample, parts / "roofs.json");
  const auto r = run(dir.script("fail.sh", "exit 1"));
  EXPECT_EQ(r.state, State::kFailed) << r.summary();
  EXPECT_FALSE(fs::exists(parts / "roofs.json"));
}

TEST_F(ReportSectionRun, UnreadableResultsFail) {
  const auto r = run(dir.script("garbage.sh",
                                "while [ $# -gt 0 ]; do if [ \"$1\" = --json-out ]; then echo '{\"schema\": 7' > \"$2\"; "
                                "fi; shift; done"));
  EXPECT_EQ(r.state, State::kFailed);
  EXPECT_TRUE(contains(r.message, "exit 0, unreadable results")) << r.message;
  EXPECT_TRUE(contains(r.message, "not valid JSON")) << r.message;
}

TEST_F(ReportSectionRun, HangingSectionIsStoppedAtItsLimit) {
  const auto start = std::chrono::steady_clock::now();
  const auto r = run(dir.script("hang.sh", "exec sleep 60"), {"info"}, 1.0);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.state, State::kFailed);
  EXPECT_TRUE(contains(r.message, "stopped after the 1 s section limit")) << r.message;
  EXPECT_LT(s, 15.0) << "SIGTERM should end `sleep` at once";
  EXPECT_GE(r.seconds, 1.0);
}

TEST_F(ReportSectionRun, MissingExecutableFails) {
  const auto r = run((dir.path() / "no-such-parallax").string());
  EXPECT_EQ(r.state, State::kFailed);
  EXPECT_TRUE(contains(r.message, "could not start")) << r.message;
}

TEST_F(ReportSectionRun, SkippedSectionDoesNotRun) {
  const std::string exe = dir.script("touch.sh", "touch '" + (dir.path() / "ran").string() + "'");
  const auto r = run(exe, {"comm"}, 30, "needs 2 or more GPUs, 1 visible");
  EXPECT_EQ(r.state, State::kSkipped);
  EXPECT_EQ(r.summary(), "skipped: needs 2 or more GPUs, 1 visible");
  EXPECT_FALSE(fs::exists(dir.path() / "ran"));
}

// ------------------------------------------------------------------------------------------------ run_sections

// A whole report run against stand-ins: the roofs and the ladder write the real committed H100 documents, the
// attention subcommand "does not exist", comm is skipped. The merged results.json must carry both parts'
// records and ceilings and every section's fate, and the report built from it must say what is missing.
TEST(ReportSections, MergesWhatRanAndRecordsEveryFate) {
  TempDir dir;
  const std::string real = std::string(PARALLAX_TEST_DATA_DIR) + "/../../bench/results/nvidia-h100-80gb-hbm3/"
                           "2026-11-22-b8983165b4ea/";
  // The stand-in picks its document by subcommand, like the real executable picks its work.
  const std::string exe = dir.script(
      "parallax",
      "out=''; for a in \"$@\"; do if [ \"$prev\" = --json-out ]; then out=$a; fi; prev=$a; done\n"
      "case \"$1\" in\n"
      "  info) cp '" + real + "info.json' \"$out\" ;;\n"
      "  gemm) cp '" + real + "ladder.json' \"$out\" ;;\n"
      "  *) echo \"parallax: The following argument was not expected: $1\" >&2; exit 2 ;;\n"
      "esac");
  cli::ReportOptions o;
  o.out_dir = (dir.path() / "report").string();
  const std::vector<cli::ReportSection> plan{
      {"roofs", "roofs", {"info"}, "", 60, {}},
      {"sgemm_ladder", "ladder", {"gemm", "--ladder"}, "", 60, {{"direction", std::string("forward")}}},
      {"attention", "attention", {"attention", "--sweep"}, "", 60, {}},
      {"comm", "collectives", {"comm"}, "needs 2 or more GPUs, 1 visible", 60, {}}};
  const cli::ReportRun run = cli::run_sections(o, plan, exe, 1, "not importable");

  ASSERT_EQ(run.outcomes.size(), 4u);
  EXPECT_EQ(run.outcomes[0].second.state, State::kOk) << run.outcomes[0].second.summary();
  EXPECT_EQ(run.outcomes[1].second.state, State::kOk) << run.outcomes[1].second.summary();
  EXPECT_EQ(run.outcomes[2].second.state, State::kFailed);
  EXPECT_EQ(run.outcomes[3].second.state, State::kSkipped);

  const pr::Document d = pr::read_file(run.results_path);
  EXPECT_EQ(run.results_path, (dir.path() / "report" / "results.json").string());
  EXPECT_EQ(d.device.name, "NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(d.ceilings.has_value());
  EXPECT_NEAR(d.ceilings->copy_gbps, 3008.2, 0.1);
  EXPECT_EQ(d.records.size(), 45u);  // the ladder's rows; info has none
  EXPECT_EQ(d.command, "parallax report --out " + o.out_dir);
  auto ctx = [&](const std::string& key) {
    const pr::Scalar* v = pr::find(d.context, key);
    return v ? pr::to_string(*v) : std::string("<absent>");
  };
  EXPECT_EQ(ctx("report.section.roofs"), "ok");
  EXPECT_EQ(ctx("report.section.sgemm_ladder"), "ok");
  EXPECT_TRUE(contains(ctx("report.section.attention"),
                       "failed: exit 2, no results written: parallax: The following argument was not expected: "
                       "attention"))
      << ctx("report.section.attention");
  EXPECT_EQ(ctx("report.section.comm"), "skipped: needs 2 or more GPUs, 1 visible");
  EXPECT_EQ(ctx("report.gpus"), "1");
  EXPECT_EQ(ctx("report.quick"), "false");
  EXPECT_EQ(ctx("report.torch"), "not importable");
  EXPECT_EQ(ctx("sgemm_ladder.mode"), "ladder");  // section contexts survive under their names
  EXPECT_NE(ctx("report.seconds.roofs"), "<absent>");
  EXPECT_EQ(ctx("report.budget.roofs"), "60");
  EXPECT_EQ(ctx("report.budget.comm"), "<absent>") << "a skipped section has no budget";
  // The section's tags landed on its records (and only there).
  for (const auto& r : d.records) {
    ASSERT_NE(pr::find(r.shape, "direction"), nullptr) << r.name;
    EXPECT_EQ(pr::to_string(*pr::find(r.shape, "direction")), "forward");
  }
  EXPECT_TRUE(fs::exists(dir.path() / "report" / "logs" / "attention.log"));

  // The report built from it names what is missing and why.
  if (std::system("python3 -c pass >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 is not on PATH";
  const std::string cmd = "python3 '" + cli::find_report_script("/nonexistent") + "' --from '" + run.results_path +
                          "' --out '" + o.out_dir + "' --no-plots >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string md = read(dir.path() / "report" / "report.md");
  EXPECT_TRUE(contains(md, "Not measured in this run (failed: exit 2, no results written")) << md;
  EXPECT_TRUE(contains(md, "Not measured in this run (skipped: needs 2 or more GPUs, 1 visible).")) << md;
  EXPECT_TRUE(contains(md, "| sgemm8 | pipelined, autotuned | 25515 (79%)")) << md;
}

TEST(ReportSections, NothingRanIsAnErrorListingEachSection) {
  TempDir dir;
  cli::ReportOptions o;
  o.out_dir = (dir.path() / "report").string();
  const std::string exe = dir.script("parallax", "echo 'no CUDA GPU visible' >&2; exit 1");
  try {
    cli::run_sections(o,
                      {{"roofs", "roofs", {"info"}, "", 30, {}},
                       {"tp", "tp", {"tp"}, "needs 2 or more GPUs, 1 visible", 30, {}}},
                      exe, 1, "x");
    ADD_FAILURE() << "no exception";
  } catch (const parallax::Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, "no section produced results")) << what;
    EXPECT_TRUE(contains(what, "roofs: failed: exit 1, no results written: no CUDA GPU visible")) << what;
    EXPECT_TRUE(contains(what, "tp: skipped: needs 2 or more GPUs, 1 visible")) << what;
  }
  EXPECT_FALSE(fs::exists(dir.path() / "report" / "results.json"));
}

// ------------------------------------------------------------------------------------------------ script

TEST(ReportScript, FoundThroughTheEnvironmentFirst) {
  TempDir dir;
  std::ofstream(dir.path() / "report.py") << "# stand-in\n";
  ScopedEnv env("PARALLAX_SCRIPTS_DIR", dir.path().c_str());
  EXPECT_EQ(fs::path(cli::find_report_script("/nonexistent/bin")), fs::canonical(dir.path() / "report.py"));
}

TEST(ReportScript, FallsBackToTheSourceTree) {
  TempDir empty;
  ScopedEnv env("PARALLAX_SCRIPTS_DIR", empty.path().c_str());  // holds no report.py
  const fs::path found = cli::find_report_script("/nonexistent/bin");
  EXPECT_EQ(found.filename(), "report.py");
  EXPECT_EQ(found.parent_path().filename(), "scripts");
  EXPECT_TRUE(fs::is_regular_file(found));
}

// ------------------------------------------------------------------------------------------------ options

struct ReportParse {
  CLI::App root{"test"};
  cli::Action action;
  std::shared_ptr<cli::ReportOptions> options = std::make_shared<cli::ReportOptions>();
  explicit ReportParse(std::vector<std::string> args) {
    cli::register_report(root, action, options);
    args.insert(args.begin(), "report");
    std::reverse(args.begin(), args.end());
    root.parse(args);
  }
};

std::string parse_error(std::vector<std::string> args) {
  try {
    ReportParse p(std::move(args));
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(ReportOptions, Defaults) {
  ReportParse p({});
  EXPECT_FALSE(p.options->quick);
  EXPECT_EQ(p.options->out_dir, "parallax-report");
  EXPECT_TRUE(p.options->from.empty());
  EXPECT_EQ(p.options->python, "python3");
  EXPECT_TRUE(p.options->plots);
  EXPECT_TRUE(static_cast<bool>(p.action));
  EXPECT_EQ(p.options->command_line(), "parallax report --out parallax-report");
}

TEST(ReportOptions, Values) {
  ReportParse p({"--quick", "--out", "q", "--no-plots", "--python", "/usr/bin/python3", "--budget-scale", "2",
                 "--gpus", "2"});
  EXPECT_TRUE(p.options->quick);
  EXPECT_EQ(p.options->out_dir, "q");
  EXPECT_FALSE(p.options->plots);
  EXPECT_EQ(p.options->python, "/usr/bin/python3");
  EXPECT_DOUBLE_EQ(p.options->budget_scale, 2);
  EXPECT_EQ(p.options->gpus, 2);
  EXPECT_FALSE(p.options->dry_run);
  EXPECT_EQ(p.options->command_line(), "parallax report --quick --gpus 2 --out q --no-plots --budget-scale 2");
  EXPECT_TRUE(ReportParse({"--dry-run"}).options->dry_run);
  EXPECT_TRUE(ReportParse({"--plan", "--quick"}).options->dry_run);
  ReportParse f({"--from", kSample});
  EXPECT_EQ(f.options->from, kSample);
}

TEST(ReportOptions, BadValuesAreRejected) {
  EXPECT_TRUE(contains(parse_error({"--from", "/no/such/results.json"}), "/no/such/results.json"));
  EXPECT_TRUE(contains(parse_error({"--from", kSample, "--quick"}), "excludes"));
  EXPECT_FALSE(parse_error({"--budget-scale", "0"}).empty());
  EXPECT_FALSE(parse_error({"--gpus", "0"}).empty());
  EXPECT_TRUE(contains(parse_error({"--from", kSample, "--dry-run"}), "excludes"));
  EXPECT_TRUE(contains(parse_error({"--from", kSample, "--gpus", "2"}), "excludes"));
  EXPECT_TRUE(contains(parse_error({"--out", ""}), "must not be empty"));
}

// ------------------------------------------------------------------------------------------------ run_main

struct RunResult {
  int code;
  std::string out;
  std::string err;
};
RunResult run_cli(std::vector<std::string> args) {
  args.insert(args.begin(), "parallax");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int code = cli::run_main(static_cast<int>(argv.size()), argv.data());
  std::fflush(stdout);
  std::fflush(stderr);
  return {code, ::testing::internal::GetCapturedStdout(), ::testing::internal::GetCapturedStderr()};
}

TEST(ReportCli, WithoutGpuAndWithoutFromSaysSoAndFails) {
  if (parallax::has_gpu()) GTEST_SKIP() << "a GPU is visible: `parallax report` would measure for real";
  TempDir dir;
  const auto r = run_cli({"report", "--out", (dir.path() / "r").string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.err, "no CUDA GPU visible")) << r.err;
  EXPECT_TRUE(contains(r.err, "parallax report --from results.json")) << r.err;
  EXPECT_TRUE(contains(r.err, "parallax report --dry-run")) << r.err;
  EXPECT_FALSE(fs::exists(dir.path() / "r" / "results.json"));
}

// --dry-run works on any machine: the plan for the given GPU count, with every command and budget, nothing run.
TEST(ReportCli, DryRunPrintsThePlanAndRunsNothing) {
  TempDir dir;
  const auto r = run_cli({"report", "--dry-run", "--gpus", "2", "--out", (dir.path() / "r").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "parallax report plan for 2 GPUs")) << r.out;
  EXPECT_TRUE(contains(r.out, "parallax gemm --ladder --sizes 1000,1024,2048,4096,8192")) << r.out;
  EXPECT_TRUE(contains(r.out, "parallax comm --gpus 2 --op all")) << r.out;
  EXPECT_TRUE(contains(r.out, "parallax tp --gpus 2 --layer row --scaling strong")) << r.out;
  // What runs depends on which producers this build has (skipped sections cost nothing).
  auto plan = cli::plan_report(false, 2);
  cli::skip_unsupported(plan);
  EXPECT_TRUE(contains(r.out, fmt::format("total budget {:.0f} s", cli::plan_budget(plan, false)))) << r.out;
  EXPECT_FALSE(fs::exists(dir.path() / "r"));
  const auto q = run_cli({"report", "--plan", "--quick", "--gpus", "1"});
  ASSERT_EQ(q.code, 0) << q.err;
  EXPECT_TRUE(contains(q.out, "skipped: needs 2 or more GPUs, 1 visible")) << q.out;
  auto quick = cli::plan_report(true, 1);
  cli::skip_unsupported(quick);
  EXPECT_TRUE(contains(q.out, fmt::format("total budget {:.0f} s", cli::plan_budget(quick, true)))) << q.out;
}

TEST(ReportCli, FromMalformedResultsNamesTheField) {
  TempDir dir;
  const fs::path bad = dir.path() / "bad.json";
  std::string text = read(kSample);
  const auto pos = text.find("\"suite\"");
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, 7, "\"suitx\"");  // records[0] loses its suite
  std::ofstream(bad) << text;
  const auto r = run_cli({"report", "--from", bad.string(), "--out", (dir.path() / "r").string(), "--no-plots"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.err, "field 'records[0].suite': missing")) << r.err;
  EXPECT_TRUE(contains(r.err, bad.string())) << r.err;
  EXPECT_FALSE(fs::exists(dir.path() / "r" / "report.md"));

  std::ofstream(bad, std::ios::trunc) << "{\"schema\": \"parallax.results/9\"}";
  const auto v = run_cli({"report", "--from", bad.string(), "--out", (dir.path() / "r").string()});
  EXPECT_EQ(v.code, 1);
  EXPECT_TRUE(contains(v.err, "unsupported version 'parallax.results/9'")) << v.err;
}

TEST(ReportCli, FromTheSampleWritesTheReport) {
  if (std::system("python3 -c pass >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 is not on PATH";
  TempDir dir;
  const fs::path out = dir.path() / "r";
  const auto r = run_cli({"report", "--from", kSample, "--out", out.string(), "--no-plots"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string md = read(out / "report.md");
  EXPECT_TRUE(contains(md, "# parallax report")) << md.substr(0, 400);
  EXPECT_TRUE(contains(md, "NVIDIA H100 80GB HBM3"));
  EXPECT_TRUE(contains(md, "SYNTHETIC"));
  EXPECT_TRUE(contains(md, "| sgemm8 | pipelined, autotuned | 25515 (79%)")) << "the real ladder row at 1000^3";
  EXPECT_TRUE(contains(r.out, "report.md")) << r.out;
}

TEST(ReportCli, FromWithMissingPythonSaysWhatToInstall) {
  TempDir dir;
  const auto r = run_cli({"report", "--from", kSample, "--out", (dir.path() / "r").string(), "--python",
                          (dir.path() / "no-python").string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.err, "cannot run")) << r.err;
  EXPECT_TRUE(contains(r.err, "matplotlib")) << r.err;
}

}  // namespace
