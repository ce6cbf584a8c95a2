// The one results format of parallax: every benchmark writes it, `parallax report` reads it.
//
// A results document is a JSON object (schema "parallax.results/1"):
//
//   {
//     "schema": "parallax.results/1",
//     "parallax_version": "0.1.0", "git_sha": "1ace21d0c0ff", "timestamp_utc": "2026-11-13T10:04:05Z",
//     "host": "gpu-host-7", "command": "parallax gemm --ladder",      (command: "" when unknown)
//     "cuda_runtime_version": 13000, "cuda_driver_version": 13000,   (0 when unknown)
//     "device": { every DeviceInfo field, plus "arch", "theoretical_fp32_tflops", "theoretical_dram_gbps" },
//     "ceilings": { "copy_gbps", "cublas_sgemm_gflops", "cublas_bf16_gflops", "gemm_size" },   (optional)
//     "context": { free-form scalars: options the run used, e.g. "repetitions": 30 },
//     "records": [ {
//        "suite": "sgemm_ladder", "name": "sgemm5", "dtype": "fp32",
//        "shape": { free-form scalars, e.g. "m": 4096, "n": 4096, "k": 4096 },
//        "status": "ok" | "incorrect" | "failed",  "failure": "why" (not "ok" only),
//        "median_ms", "min_ms", "max_ms", "repetitions",            (absent when "failed")
//        "flops", "bytes", "arithmetic_intensity", "gflops", "gbps", (rates absent when "failed")
//        "peer": { "name": "cublasSgemm", "median_ms": 2.9, "throughput_ratio": 0.81 },   (optional)
//        "errors": [ { "metric": "rel_fro_vs_cublas", "value": 3.1e-7 } ],  (value null = not finite)
//        "extra": { free-form scalars }, "notes": "free text"
//     } ]
//   }
//
// Why the shape is "free-form": a GEMM has m, n, k; attention has batch, heads, sequence, head_dim, causal;
// a collective has bytes and ranks. One record type serves them all and the report groups by suite.
// Why nlohmann::json is absent from this header: the library links it privately, so the public API trades in
// plain structs and std::string (serialize / parse); nothing that includes parallax/results.hpp needs it.
//
// Compatibility: a reader accepts exactly the schema string above. Unknown fields are ignored (so optional
// fields may be added to version 1); removing or retyping a field needs "parallax.results/2".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "parallax/bench.hpp"
#include "parallax/core.hpp"

namespace parallax::results {

inline constexpr std::string_view kSchema = "parallax.results/1";

// A malformed or unsupported results document. field() is the JSON path of the offending field
// ("records[3].median_ms", "device.sm_count", "schema"); empty when the text is not JSON at all.
// `source` (a file path) is named in the message when known.
class SchemaError : public Error {
 public:
  SchemaError(std::string field, std::string problem, const std::string& source = {})
      : Error("results JSON" + (source.empty() ? std::string() : " " + source) + ": " +
              (field.empty() ? std::string() : "field '" + field + "': ") + problem),
        field_(std::move(field)),
        problem_(std::move(problem)) {}
  const std::string& field() const noexcept { return field_; }
  const std::string& problem() const noexcept { return problem_; }

 private:
  std::string field_;
  std::string problem_;
};

// A free-form scalar (shape, context, extra). Integers stay integers so "m": 4096 does not become 4096.0.
using Scalar = std::variant<std::int64_t, double, bool, std::string>;
// An ordered list of named scalars; order is kept in the JSON so documents read the way they were written.
using Fields = std::vector<std::pair<std::string, Scalar>>;

// Lookup in Fields (nullptr when absent).
const Scalar* find(const Fields& fields, std::string_view key);
// Readable text of a scalar ("4096", "0.5", "true", "abc").
std::string to_string(const Scalar& value);

enum class Status {
  kOk,         // ran and passed its checks
  kIncorrect,  // ran and was timed, but its output failed a check (failure says which)
  kFailed,     // did not run (threw, not implemented, out of memory): no timing
};
std::string_view status_name(Status status);  // "ok", "incorrect", "failed"

// The same-run comparison point (cuBLAS for the ladder).
struct Peer {
  std::string name;
  double median_ms = 0;
  double throughput_ratio = 0;  // peer.median_ms / record.median_ms: 0.8 = 80 % of the peer's speed
};

// A named accuracy metric. value is NaN/Inf when the output was not finite (written as null in JSON).
struct ErrorMetric {
  std::string metric;
  double value = 0;
};

struct Record {
  std::string suite;  // "sgemm_ladder", "sgemm", "ceilings", ...
  std::string name;   // kernel or implementation
  Fields shape;
  std::string dtype;  // "fp32", "bf16", ...
  Status status = Status::kOk;
  std::string failure;  // why, when status != kOk

  // Timing (bench::Timing) and work (bench::Work); meaningless when status == kFailed.
  double median_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  int repetitions = 0;
  double flops = 0;
  double bytes = 0;
  // Derived from the above by make_record (stored so the report and humans need not recompute them).
  double arithmetic_intensity = 0;
  double gflops = 0;
  double gbps = 0;

  std::optional<Peer> peer;
  std::vector<ErrorMetric> errors;
  Fields extra;
  std::string notes;

  // Sets the peer and its throughput ratio from this record's median.
  Record& set_peer(std::string peer_name, double peer_median_ms);
  Record& add_error(std::string metric, double value);
  Record& add_extra(std::string key, Scalar value);
  // Marks the record incorrect (keeps its timing); several reasons are joined with "; ".
  Record& mark_incorrect(const std::string& reason);
};

// A timed record: timing statistics, work, and the derived rates.
Record make_record(std::string suite, std::string name, Fields shape, std::string dtype,
                   const bench::Timing& timing, const bench::Work& work);
// A record of something that did not run (no timing); `failure` says why.
Record failed_record(std::string suite, std::string name, Fields shape, std::string dtype, std::string failure);

struct Document {
  std::string schema{kSchema};
  std::string parallax_version;
  std::string git_sha;
  std::string timestamp_utc;  // ISO 8601, "2026-11-13T10:04:05Z"
  std::string host;
  std::string command;  // how the document was produced ("parallax gemm --ladder --sizes 1024"), may be ""
  int cuda_runtime_version = 0;  // cudaRuntimeGetVersion, 0 = unknown
  int cuda_driver_version = 0;   // cudaDriverGetVersion, 0 = unknown
  DeviceInfo device;
  std::optional<bench::Ceilings> ceilings;
  Fields context;
  std::vector<Record> records;
};

// A document stamped with this build and this moment: version, git SHA, UTC time, host name, CUDA versions,
// and the given device.
Document make_document(const DeviceInfo& device);
// The same for the current device (needs a GPU; throws parallax::Error otherwise).
Document make_document();

// "2026-11-13T10:04:05Z" for now.
std::string utc_timestamp();
// This machine's host name ("unknown" if it cannot be read).
std::string host_name();

// JSON text of a document (indent < 0: one line). Doubles keep full precision.
std::string serialize(const Document& document, int indent = 2);
// Parses and validates; throws SchemaError naming the first offending field.
Document parse(std::string_view json_text);

// ---------------------------------------------------------------- merging
//
// `parallax report` runs each section (roofs, ladder, attention, ...) as its own command, each writing its own
// document, and hands ONE document to the report script. merge() is that step:
//   * device, version, git SHA, time, host, CUDA versions: from the first part (the sections of one report
//     run on one machine from one binary); every part must name the same device, or the merged file would
//     put numbers of two GPUs under one roof (InvalidArgument "parts")
//   * ceilings: from the first part that has them
//   * context: every part's keys prefixed with its label ("ladder.repetitions"), so equal keys of different
//     sections cannot overwrite each other; a part whose git SHA differs from the first's is recorded as
//     "merge.git_sha.<label>"
//   * records: concatenated in part order, unchanged
// command is left empty for the caller to fill in.
struct Part {
  std::string label;  // the section name: non-empty, unique among the parts, no '.'
  Document document;
};
Document merge(const std::vector<Part>& parts);

// File helpers (throw parallax::Error naming the path on I/O failure).
void write_file(const Document& document, const std::string& path);
Document read_file(const std::string& path);

}  // namespace parallax::results
