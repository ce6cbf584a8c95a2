// The results JSON (parallax/results.hpp): builders, round trip, schema version, and a validating parser
// whose every complaint names the offending field. No GPU needed: documents are built from a DeviceInfo
// filled in by hand.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <regex>
#include <string>

#include "parallax/results.hpp"

namespace {

namespace pr = parallax::results;
using json = nlohmann::ordered_json;

parallax::DeviceInfo h100() {
  parallax::DeviceInfo d;
  d.device = 0;
  d.name = "NVIDIA H100 80GB HBM3";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.global_memory_bytes = 85520809984ull;
  d.l2_bytes = 52428800;
  d.shared_memory_per_block = 49152;
  d.shared_memory_per_block_optin = 232448;
  d.shared_memory_per_sm = 233472;
  d.registers_per_sm = 65536;
  d.max_threads_per_sm = 2048;
  d.warp_size = 32;
  d.clock_khz = 1980000;
  d.memory_clock_khz = 2619000;
  d.memory_bus_bits = 5120;
  return d;
}

parallax::bench::Timing timing(double median, double lo, double hi, int reps) {
  parallax::bench::Timing t;
  t.median_ms = median;
  t.min_ms = lo;
  t.max_ms = hi;
  t.mean_ms = median;
  t.repetitions = reps;
  return t;
}

pr::Fields gemm_shape(int size) {
  return {{"m", std::int64_t{size}}, {"n", std::int64_t{size}}, {"k", std::int64_t{size}}, {"beta", 0.5}};
}

// A document that uses every field: an ok record with peer and errors, an incorrect one, a failed one.
pr::Document sample() {
  pr::Document d = pr::make_document(h100());
  d.command = "parallax gemm --ladder --sizes 4096";
  d.ceilings = parallax::bench::Ceilings{2998.5, 51234.25, 750001.5, 8192};
  d.context = {{"repetitions", std::int64_t{30}}, {"budget_ms", 3000.5}, {"measured", true}, {"dtype", std::string("fp32")}};

  const double flops = 2.0 * 4096.0 * 4096.0 * 4096.0;
  const parallax::bench::Work work{flops, 4.0 * 3 * 4096.0 * 4096.0};
  pr::Record ok = pr::make_record("sgemm_ladder", "sgemm5", gemm_shape(4096), "fp32", timing(4.5, 4.25, 5.0, 30), work);
  ok.set_peer("cublasSgemm", 3.0).add_error("fro_rel_err_vs_cublas", 3.1e-7).add_error("max_rel", 1.25e-6);
  ok.add_extra("level", std::int64_t{5}).add_extra("seed", std::string("0x00000000deadbeef"));
  ok.notes = "a note with \"quotes\" and a newline\nin it";
  d.records.push_back(ok);

  pr::Record wrong = pr::make_record("sgemm_ladder", "sgemm6", gemm_shape(4096), "fp32", timing(4.0, 4.0, 4.0, 1), work);
  wrong.set_peer("cublasSgemm", 3.0).add_error("fro_rel_err_vs_cublas", std::numeric_limits<double>::quiet_NaN());
  wrong.mark_incorrect("3 outputs not finite");
  d.records.push_back(wrong);

  d.records.push_back(pr::failed_record("sgemm_ladder", "sgemm7", gemm_shape(4096), "fp32", "not implemented yet"));
  return d;
}

// Serializes the sample, lets `edit` break it, and returns the SchemaError that parsing it throws.
pr::SchemaError parse_error_after(const std::function<void(json&)>& edit) {
  json j = json::parse(pr::serialize(sample()));
  edit(j);
  try {
    pr::parse(j.dump());
  } catch (const pr::SchemaError& e) {
    return e;
  }
  ADD_FAILURE() << "parse accepted the edited document";
  return pr::SchemaError("<none>", "<none>");
}

TEST(Results, MakeDocumentStampsBuildTimeAndHost) {
  const pr::Document d = pr::make_document(h100());
  EXPECT_EQ(d.schema, pr::kSchema);
  EXPECT_EQ(d.schema, "parallax.results/1");
  EXPECT_EQ(d.parallax_version, parallax::version());
  EXPECT_EQ(d.git_sha, parallax::git_sha());
  EXPECT_TRUE(std::regex_match(d.timestamp_utc, std::regex(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z)")))
      << d.timestamp_utc;
  EXPECT_FALSE(d.host.empty());
  EXPECT_EQ(d.device.name, "NVIDIA H100 80GB HBM3");
  EXPECT_GE(d.cuda_runtime_version, 0);
  EXPECT_FALSE(d.ceilings.has_value());
  EXPECT_TRUE(d.records.empty());
}

TEST(Results, MakeRecordDerivesRates) {
  const pr::Record r = pr::make_record("s", "k", {}, "fp32", timing(2.0, 1.5, 3.0, 7), {2e9, 1e6});
  EXPECT_EQ(r.status, pr::Status::kOk);
  EXPECT_DOUBLE_EQ(r.median_ms, 2.0);
  EXPECT_DOUBLE_EQ(r.min_ms, 1.5);
  EXPECT_DOUBLE_EQ(r.max_ms, 3.0);
  EXPECT_EQ(r.repetitions, 7);
  EXPECT_DOUBLE_EQ(r.gflops, 1000.0);  // 2e9 flop in 2 ms
  EXPECT_DOUBLE_EQ(r.gbps, 0.5);       // 1e6 B in 2 ms
  EXPECT_DOUBLE_EQ(r.arithmetic_intensity, 2000.0);
}

TEST(Results, PeerRatioIsThroughputRelativeToPeer) {
  pr::Record r = pr::make_record("s", "k", {}, "fp32", timing(4.0, 4.0, 4.0, 1), {1e9, 0});
  r.set_peer("cublasSgemm", 3.0);
  ASSERT_TRUE(r.peer.has_value());
  EXPECT_EQ(r.peer->name, "cublasSgemm");
  EXPECT_DOUBLE_EQ(r.peer->median_ms, 3.0);
  EXPECT_DOUBLE_EQ(r.peer->throughput_ratio, 0.75);  // slower than the peer: 75 % of its speed
}

TEST(Results, MarkIncorrectJoinsReasonsAndNeverUpgradesAFailure) {
  pr::Record r = pr::make_record("s", "k", {}, "fp32", timing(1, 1, 1, 1), {});
  r.mark_incorrect("a").mark_incorrect("b");
  EXPECT_EQ(r.status, pr::Status::kIncorrect);
  EXPECT_EQ(r.failure, "a; b");
  pr::Record f = pr::failed_record("s", "k", {}, "fp32", "boom");
  f.mark_incorrect("c");
  EXPECT_EQ(f.status, pr::Status::kFailed);
  EXPECT_EQ(f.failure, "boom");
  EXPECT_FALSE(pr::failed_record("s", "k", {}, "fp32", "").failure.empty()) << "a failure always says something";
}

TEST(Results, StatusNames) {
  EXPECT_EQ(pr::status_name(pr::Status::kOk), "ok");
  EXPECT_EQ(pr::status_name(pr::Status::kIncorrect), "incorrect");
  EXPECT_EQ(pr::status_name(pr::Status::kFailed), "failed");
}

TEST(Results, RoundTripKeepsEveryField) {
  const pr::Document in = sample();
  const pr::Document out = pr::parse(pr::serialize(in));

  EXPECT_EQ(out.schema, in.schema);
  EXPECT_EQ(out.parallax_version, in.parallax_version);
  EXPECT_EQ(out.git_sha, in.git_sha);
  EXPECT_EQ(out.timestamp_utc, in.timestamp_utc);
  EXPECT_EQ(out.host, in.host);
  EXPECT_EQ(out.command, in.command);
  EXPECT_EQ(out.cuda_runtime_version, in.cuda_runtime_version);
  EXPECT_EQ(out.cuda_driver_version, in.cuda_driver_version);

  const parallax::DeviceInfo a = in.device, b = out.device;
  EXPECT_EQ(b.device, a.device);
  EXPECT_EQ(b.name, a.name);
  EXPECT_EQ(b.cc_major, a.cc_major);
  EXPECT_EQ(b.cc_minor, a.cc_minor);
  EXPECT_EQ(b.sm_count, a.sm_count);
  EXPECT_EQ(b.global_memory_bytes, a.global_memory_bytes);
  EXPECT_EQ(b.l2_bytes, a.l2_bytes);
  EXPECT_EQ(b.shared_memory_per_block, a.shared_memory_per_block);
  EXPECT_EQ(b.shared_memory_per_block_optin, a.shared_memory_per_block_optin);
  EXPECT_EQ(b.shared_memory_per_sm, a.shared_memory_per_sm);
  EXPECT_EQ(b.registers_per_sm, a.registers_per_sm);
  EXPECT_EQ(b.max_threads_per_sm, a.max_threads_per_sm);
  EXPECT_EQ(b.warp_size, a.warp_size);
  EXPECT_EQ(b.clock_khz, a.clock_khz);
  EXPECT_EQ(b.memory_clock_khz, a.memory_clock_khz);
  EXPECT_EQ(b.memory_bus_bits, a.memory_bus_bits);

  ASSERT_TRUE(out.ceilings.has_value());
  EXPECT_DOUBLE_EQ(out.ceilings->copy_gbps, 2998.5);
  EXPECT_DOUBLE_EQ(out.ceilings->cublas_sgemm_gflops, 51234.25);
  EXPECT_DOUBLE_EQ(out.ceilings->cublas_bf16_gflops, 750001.5);
  EXPECT_EQ(out.ceilings->gemm_size, 8192);
  EXPECT_EQ(out.context, in.context);

  ASSERT_EQ(out.records.size(), 3u);
  const pr::Record& ok = out.records[0];
  const pr::Record& ref = in.records[0];
  EXPECT_EQ(ok.suite, "sgemm_ladder");
  EXPECT_EQ(ok.name, "sgemm5");
  EXPECT_EQ(ok.dtype, "fp32");
  EXPECT_EQ(ok.shape, ref.shape);
  EXPECT_EQ(ok.status, pr::Status::kOk);
  EXPECT_DOUBLE_EQ(ok.median_ms, ref.median_ms);
  EXPECT_DOUBLE_EQ(ok.min_ms, ref.min_ms);
  EXPECT_DOUBLE_EQ(ok.max_ms, ref.max_ms);
  EXPECT_EQ(ok.repetitions, ref.repetitions);
  EXPECT_DOUBLE_EQ(ok.flops, ref.flops);
  EXPECT_DOUBLE_EQ(ok.bytes, ref.bytes);
  EXPECT_DOUBLE_EQ(ok.arithmetic_intensity, ref.arithmetic_intensity);
  EXPECT_DOUBLE_EQ(ok.gflops, ref.gflops);  // doubles survive text exactly (17 significant digits)
  EXPECT_DOUBLE_EQ(ok.gbps, ref.gbps);
  ASSERT_TRUE(ok.peer.has_value());
  EXPECT_EQ(ok.peer->name, "cublasSgemm");
  EXPECT_DOUBLE_EQ(ok.peer->throughput_ratio, ref.peer->throughput_ratio);
  ASSERT_EQ(ok.errors.size(), 2u);
  EXPECT_EQ(ok.errors[0].metric, "fro_rel_err_vs_cublas");
  EXPECT_DOUBLE_EQ(ok.errors[0].value, 3.1e-7);
  EXPECT_EQ(ok.extra, ref.extra);
  EXPECT_EQ(ok.notes, ref.notes);

  const pr::Record& wrong = out.records[1];
  EXPECT_EQ(wrong.status, pr::Status::kIncorrect);
  EXPECT_EQ(wrong.failure, "3 outputs not finite");
  ASSERT_EQ(wrong.errors.size(), 1u);
  EXPECT_TRUE(std::isnan(wrong.errors[0].value)) << "a NaN error is written as null and read back as NaN";

  const pr::Record& failed = out.records[2];
  EXPECT_EQ(failed.status, pr::Status::kFailed);
  EXPECT_EQ(failed.failure, "not implemented yet");
  EXPECT_FALSE(failed.peer.has_value());
}

TEST(Results, SerializationIsAFixedPoint) {
  const std::string once = pr::serialize(sample());
  EXPECT_EQ(pr::serialize(pr::parse(once)), once);
  const std::string compact = pr::serialize(sample(), -1);
  EXPECT_EQ(compact.find('\n'), std::string::npos) << "indent -1 writes one line";
  EXPECT_EQ(pr::serialize(pr::parse(compact), -1), compact);
}

TEST(Results, JsonLayoutIsWhatReadersExpect) {
  const json j = json::parse(pr::serialize(sample()));
  EXPECT_EQ(j.begin().key(), "schema") << "schema comes first";
  EXPECT_EQ(j["schema"], "parallax.results/1");
  EXPECT_EQ(j["device"]["arch"], "sm_90");
  EXPECT_EQ(j["device"]["index"], 0);
  EXPECT_NEAR(j["device"]["theoretical_fp32_tflops"].get<double>(), 2.0 * 128 * 132 * 1.98e9 / 1e12, 1e-9);
  const json& ok = j["records"][0];
  EXPECT_TRUE(ok["shape"]["m"].is_number_integer()) << "integers stay integers";
  EXPECT_TRUE(ok["shape"]["beta"].is_number_float());
  EXPECT_EQ(ok["status"], "ok");
  EXPECT_FALSE(ok.contains("failure"));
  const json& failed = j["records"][2];
  EXPECT_EQ(failed["status"], "failed");
  for (const char* absent : {"median_ms", "min_ms", "max_ms", "repetitions", "gflops", "gbps"})
    EXPECT_FALSE(failed.contains(absent)) << absent << ": a failed record carries no made-up timing";
  EXPECT_TRUE(j["records"][1]["errors"][0]["value"].is_null());
}

TEST(Results, NonFiniteFreeFormValuesSurviveAsText) {
  pr::Document d = sample();
  d.context.emplace_back("odd", std::numeric_limits<double>::infinity());
  d.context.emplace_back("odder", std::numeric_limits<double>::quiet_NaN());
  const pr::Document back = pr::parse(pr::serialize(d));
  EXPECT_EQ(*pr::find(back.context, "odd"), pr::Scalar(std::string("inf")));
  EXPECT_EQ(*pr::find(back.context, "odder"), pr::Scalar(std::string("nan")));
}

TEST(Results, ScalarHelpers) {
  const pr::Fields f = {{"m", std::int64_t{4096}}, {"x", 0.5}, {"ok", true}, {"s", std::string("abc")}};
  ASSERT_NE(pr::find(f, "m"), nullptr);
  EXPECT_EQ(pr::to_string(*pr::find(f, "m")), "4096");
  EXPECT_EQ(pr::to_string(*pr::find(f, "x")), "0.5");
  EXPECT_EQ(pr::to_string(*pr::find(f, "ok")), "true");
  EXPECT_EQ(pr::to_string(*pr::find(f, "s")), "abc");
  EXPECT_EQ(pr::find(f, "nope"), nullptr);
  EXPECT_TRUE(std::holds_alternative<std::int64_t>(pr::Scalar(5))) << "an int literal is an integer scalar";
}

TEST(Results, OptionalFieldsMayBeAbsent) {
  json j = json::parse(pr::serialize(sample()));
  for (const char* key : {"command", "cuda_runtime_version", "cuda_driver_version", "ceilings", "context"}) j.erase(key);
  for (auto& r : j["records"])
    for (const char* key : {"peer", "errors", "extra", "notes"}) r.erase(key);
  const pr::Document d = pr::parse(j.dump());
  EXPECT_EQ(d.command, "");
  EXPECT_EQ(d.cuda_runtime_version, 0);
  EXPECT_FALSE(d.ceilings.has_value());
  EXPECT_TRUE(d.context.empty());
  ASSERT_EQ(d.records.size(), 3u);
  EXPECT_FALSE(d.records[0].peer.has_value());
  EXPECT_TRUE(d.records[0].errors.empty());
  EXPECT_TRUE(d.records[0].extra.empty());
}

TEST(Results, UnknownFieldsAreIgnored) {
  json j = json::parse(pr::serialize(sample()));
  j["added_in_a_later_minor_revision"] = {1, 2, 3};
  j["records"][0]["another"] = {{"nested", true}};
  j["device"]["pcie_gen"] = 5;
  const pr::Document d = pr::parse(j.dump());
  EXPECT_EQ(d.records.size(), 3u);
}

TEST(Results, EmptyRecordListIsValid) {
  pr::Document d = pr::make_document(h100());
  EXPECT_TRUE(pr::parse(pr::serialize(d)).records.empty());
}

// ---------------------------------------------------------------- malformed documents

TEST(ResultsSchema, NotJsonAtAll) {
  try {
    pr::parse("{ this is not json");
    FAIL();
  } catch (const pr::SchemaError& e) {
    EXPECT_EQ(e.field(), "");
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
  }
  EXPECT_THROW(pr::parse(""), pr::SchemaError);
}

TEST(ResultsSchema, RootMustBeAnObject) {
  try {
    pr::parse("[1, 2]");
    FAIL();
  } catch (const pr::SchemaError& e) {
    EXPECT_NE(std::string(e.what()).find("must be a JSON object, got array"), std::string::npos) << e.what();
  }
}

TEST(ResultsSchema, SchemaErrorIsAParallaxError) {
  EXPECT_THROW(pr::parse("{}"), parallax::Error);
}

TEST(ResultsSchema, MissingSchemaSaysSo) {
  const auto e = parse_error_after([](json& j) { j.erase("schema"); });
  EXPECT_EQ(e.field(), "schema");
  EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
}

TEST(ResultsSchema, OtherVersionIsRefusedByName) {
  const auto e = parse_error_after([](json& j) { j["schema"] = "parallax.results/2"; });
  EXPECT_EQ(e.field(), "schema");
  const std::string what = e.what();
  EXPECT_NE(what.find("unsupported version 'parallax.results/2'"), std::string::npos) << what;
  EXPECT_NE(what.find("parallax.results/1"), std::string::npos) << what;
}

TEST(ResultsSchema, VersionIsCheckedBeforeAnythingElse) {
  // A version-2 document may lack every version-1 field; the complaint must still be about the version.
  try {
    pr::parse(R"({"schema": "parallax.results/2"})");
    FAIL();
  } catch (const pr::SchemaError& e) {
    EXPECT_EQ(e.field(), "schema");
  }
}

struct BadCase {
  const char* what;
  std::function<void(json&)> edit;
  const char* field;
  const char* message;  // expected substring of what()
};

class ResultsMalformed : public ::testing::TestWithParam<BadCase> {};

TEST_P(ResultsMalformed, NamesTheField) {
  const BadCase& c = GetParam();
  const auto e = parse_error_after(c.edit);
  EXPECT_EQ(e.field(), c.field) << c.what << ": " << e.what();
  EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << c.what << ": " << e.what();
  EXPECT_NE(std::string(e.what()).find(std::string("'") + c.field + "'"), std::string::npos)
      << "the message itself names the field: " << e.what();
}

const BadCase kBadCases[] = {
    {"schema not a string", [](json& j) { j["schema"] = 1; }, "schema", "expected a string, got number"},
    {"git_sha missing", [](json& j) { j.erase("git_sha"); }, "git_sha", "missing"},
    {"version mistyped", [](json& j) { j["parallax_version"] = 1.5; }, "parallax_version", "expected a string"},
    {"timestamp missing", [](json& j) { j.erase("timestamp_utc"); }, "timestamp_utc", "missing"},
    {"host mistyped", [](json& j) { j["host"] = nullptr; }, "host", "expected a string, got null"},
    {"command mistyped", [](json& j) { j["command"] = 3; }, "command", "expected a string"},
    {"runtime version mistyped", [](json& j) { j["cuda_runtime_version"] = "13.0"; }, "cuda_runtime_version",
     "expected an integer"},
    {"device missing", [](json& j) { j.erase("device"); }, "device", "missing"},
    {"device not an object", [](json& j) { j["device"] = "H100"; }, "device", "expected an object"},
    {"sm_count a string", [](json& j) { j["device"]["sm_count"] = "132"; }, "device.sm_count",
     "expected an integer, got string"},
    {"cc_major fractional", [](json& j) { j["device"]["cc_major"] = 9.5; }, "device.cc_major", "expected an integer"},
    {"l2 negative", [](json& j) { j["device"]["l2_bytes"] = -1; }, "device.l2_bytes", "out of range"},
    {"device name missing", [](json& j) { j["device"].erase("name"); }, "device.name", "missing"},
    {"ceilings mistyped", [](json& j) { j["ceilings"]["copy_gbps"] = "fast"; }, "ceilings.copy_gbps",
     "expected a number"},
    {"ceilings size missing", [](json& j) { j["ceilings"].erase("gemm_size"); }, "ceilings.gemm_size", "missing"},
    {"context nested", [](json& j) { j["context"]["x"] = json::array(); }, "context.x",
     "expected a number, string or boolean, got array"},
    {"records missing", [](json& j) { j.erase("records"); }, "records", "missing"},
    {"records an object", [](json& j) { j["records"] = json::object(); }, "records", "expected an array"},
    {"record not an object", [](json& j) { j["records"][1] = 5; }, "records[1]", "expected an object"},
    {"suite missing", [](json& j) { j["records"][0].erase("suite"); }, "records[0].suite", "missing"},
    {"name mistyped", [](json& j) { j["records"][1]["name"] = 6; }, "records[1].name", "expected a string"},
    {"dtype missing", [](json& j) { j["records"][0].erase("dtype"); }, "records[0].dtype", "missing"},
    {"shape missing", [](json& j) { j["records"][0].erase("shape"); }, "records[0].shape", "missing"},
    {"shape value nested", [](json& j) { j["records"][0]["shape"]["m"] = {1, 2}; }, "records[0].shape.m",
     "expected a number, string or boolean"},
    {"status unknown", [](json& j) { j["records"][0]["status"] = "great"; }, "records[0].status", "unknown status"},
    {"status missing", [](json& j) { j["records"][0].erase("status"); }, "records[0].status", "missing"},
    {"median missing", [](json& j) { j["records"][1].erase("median_ms"); }, "records[1].median_ms", "missing"},
    {"median a string", [](json& j) { j["records"][0]["median_ms"] = "4.5"; }, "records[0].median_ms",
     "expected a number, got string"},
    {"median negative", [](json& j) { j["records"][0]["median_ms"] = -1; }, "records[0].median_ms", ">= 0"},
    {"median outside min..max", [](json& j) { j["records"][0]["median_ms"] = 9.0; }, "records[0].median_ms",
     "[min_ms, max_ms]"},
    {"repetitions zero", [](json& j) { j["records"][0]["repetitions"] = 0; }, "records[0].repetitions",
     "out of range"},
    {"repetitions fractional", [](json& j) { j["records"][0]["repetitions"] = 2.5; }, "records[0].repetitions",
     "expected an integer"},
    {"gflops missing", [](json& j) { j["records"][0].erase("gflops"); }, "records[0].gflops", "missing"},
    {"flops missing on a failed record", [](json& j) { j["records"][2].erase("flops"); }, "records[2].flops",
     "missing"},
    {"failure missing", [](json& j) { j["records"][2].erase("failure"); }, "records[2].failure", "missing"},
    {"failure empty", [](json& j) { j["records"][1]["failure"] = ""; }, "records[1].failure", "must say why"},
    {"peer not an object", [](json& j) { j["records"][0]["peer"] = "cublas"; }, "records[0].peer",
     "expected an object"},
    {"peer name missing", [](json& j) { j["records"][0]["peer"].erase("name"); }, "records[0].peer.name", "missing"},
    {"peer ratio mistyped", [](json& j) { j["records"][0]["peer"]["throughput_ratio"] = true; },
     "records[0].peer.throughput_ratio", "expected a number, got boolean"},
    {"errors not an array", [](json& j) { j["records"][0]["errors"] = 1e-7; }, "records[0].errors",
     "expected an array"},
    {"error metric missing", [](json& j) { j["records"][0]["errors"][1].erase("metric"); },
     "records[0].errors[1].metric", "missing"},
    {"error value a string", [](json& j) { j["records"][0]["errors"][1]["value"] = "small"; },
     "records[0].errors[1].value", "expected a number or null"},
    {"extra nested", [](json& j) { j["records"][0]["extra"]["level"] = json::object(); }, "records[0].extra.level",
     "expected a number, string or boolean"},
    {"notes mistyped", [](json& j) { j["records"][0]["notes"] = 1; }, "records[0].notes", "expected a string"},
};

INSTANTIATE_TEST_SUITE_P(AllFields, ResultsMalformed, ::testing::ValuesIn(kBadCases),
                         [](const ::testing::TestParamInfo<BadCase>& param) {
                           std::string name = param.param.what;
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name + "_" + std::to_string(param.index);
                         });

// ---------------------------------------------------------------- files

class ResultsFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("parallax_results_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(ResultsFiles, WriteThenReadRoundTrips) {
  const std::string path = (dir_ / "ladder.json").string();
  const pr::Document in = sample();
  pr::write_file(in, path);
  const pr::Document d = pr::read_file(path);
  EXPECT_EQ(d.records.size(), 3u);
  EXPECT_EQ(pr::serialize(d), pr::serialize(in));
  EXPECT_EQ(d.command, "parallax gemm --ladder --sizes 4096");
}

TEST_F(ResultsFiles, MissingFileNamesThePath) {
  const std::string path = (dir_ / "nope.json").string();
  try {
    pr::read_file(path);
    FAIL();
  } catch (const parallax::Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST_F(ResultsFiles, MalformedFileNamesPathAndField) {
  const std::string path = (dir_ / "bad.json").string();
  json j = json::parse(pr::serialize(sample()));
  j["records"][0].erase("dtype");
  std::ofstream(path) << j.dump();
  try {
    pr::read_file(path);
    FAIL();
  } catch (const pr::SchemaError& e) {
    EXPECT_EQ(e.field(), "records[0].dtype");
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST_F(ResultsFiles, UnwritablePathIsAnError) {
  EXPECT_THROW(pr::write_file(sample(), (dir_ / "no_such_dir" / "x.json").string()), parallax::Error);
}

}  // namespace
