// The results JSON (schema "parallax.results/1"): builders, serializer and a validating parser.
//
// The parser is strict about what a reader relies on (every required field present and of the right type,
// timings consistent) and lenient about what it does not (unknown fields are ignored), so version 1 can grow
// optional fields without breaking old readers. Every complaint names the JSON path of the field, because a
// results file is usually read long after, and far from, the run that wrote it.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <limits>
#include <sstream>

#include "parallax/results.hpp"

namespace parallax::results {
namespace {

// ordered_json keeps insertion order, so the file reads top-down the way the structs are declared.
using json = nlohmann::ordered_json;

// ---------------------------------------------------------------- writing

// JSON has no NaN/Inf; nlohmann would write null anyway, say so explicitly.
json number(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json scalar_to_json(const Scalar& value) {
  return std::visit(
      [](const auto& v) -> json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, double>) {
          // A non-finite free-form value survives as text rather than turning into an unreadable null.
          if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
          return v;
        } else {
          return v;
        }
      },
      value);
}

json fields_to_json(const Fields& fields) {
  json out = json::object();
  for (const auto& [key, value] : fields) out[key] = scalar_to_json(value);
  return out;
}

json device_to_json(const DeviceInfo& d) {
  json j;
  j["index"] = d.device;
  j["name"] = d.name;
  j["arch"] = d.arch();  // derived, written for readers; ignored by the parser
  j["cc_major"] = d.cc_major;
  j["cc_minor"] = d.cc_minor;
  j["sm_count"] = d.sm_count;
  j["global_memory_bytes"] = static_cast<std::uint64_t>(d.global_memory_bytes);
  j["l2_bytes"] = static_cast<std::uint64_t>(d.l2_bytes);
  j["shared_memory_per_block"] = static_cast<std::uint64_t>(d.shared_memory_per_block);
  j["shared_memory_per_block_optin"] = static_cast<std::uint64_t>(d.shared_memory_per_block_optin);
  j["shared_memory_per_sm"] = static_cast<std::uint64_t>(d.shared_memory_per_sm);
  j["registers_per_sm"] = d.registers_per_sm;
  j["max_threads_per_sm"] = d.max_threads_per_sm;
  j["warp_size"] = d.warp_size;
  j["clock_khz"] = d.clock_khz;
  j["memory_clock_khz"] = d.memory_clock_khz;
  j["memory_bus_bits"] = d.memory_bus_bits;
  j["theoretical_fp32_tflops"] = number(d.theoretical_fp32_tflops());  // derived
  j["theoretical_dram_gbps"] = number(d.theoretical_dram_gbps());      // derived
  return j;
}

json ceilings_to_json(const bench::Ceilings& c) {
  json j;
  j["copy_gbps"] = number(c.copy_gbps);
  j["cublas_sgemm_gflops"] = number(c.cublas_sgemm_gflops);
  j["cublas_bf16_gflops"] = number(c.cublas_bf16_gflops);
  j["gemm_size"] = c.gemm_size;
  return j;
}

json record_to_json(const Record& r) {
  json j;
  j["suite"] = r.suite;
  j["name"] = r.name;
  j["dtype"] = r.dtype;
  j["shape"] = fields_to_json(r.shape);
  j["status"] = std::string(status_name(r.status));
  if (r.status != Status::kOk) j["failure"] = r.failure;
  if (r.status != Status::kFailed) {  // a failed record has no timing: leave it out rather than write zeros
    j["median_ms"] = number(r.median_ms);
    j["min_ms"] = number(r.min_ms);
    j["max_ms"] = number(r.max_ms);
    j["repetitions"] = r.repetitions;
  }
  j["flops"] = number(r.flops);
  j["bytes"] = number(r.bytes);
  if (r.status != Status::kFailed) {
    j["arithmetic_intensity"] = number(r.arithmetic_intensity);
    j["gflops"] = number(r.gflops);
    j["gbps"] = number(r.gbps);
  }
  if (r.peer) {
    j["peer"] = {{"name", r.peer->name},
                 {"median_ms", number(r.peer->median_ms)},
                 {"throughput_ratio", number(r.peer->throughput_ratio)}};
  }
  json errors = json::array();
  for (const auto& e : r.errors) errors.push_back({{"metric", e.metric}, {"value", number(e.value)}});
  j["errors"] = std::move(errors);
  j["extra"] = fields_to_json(r.extra);
  j["notes"] = r.notes;
  return j;
}

// ---------------------------------------------------------------- reading

std::string join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}
std::string index_path(const std::string& path, std::size_t i) { return path + "[" + std::to_string(i) + "]"; }

[[noreturn]] void wrong_type(const std::string& path, const char* expected, const json& got) {
  throw SchemaError(path, std::string("expected ") + expected + ", got " + got.type_name());
}

const json& member(const json& object, std::string_view key, const std::string& path) {
  const auto it = object.find(key);
  if (it == object.end()) throw SchemaError(join(path, key), "missing");
  return *it;
}
// Optional member: nullptr when absent or null.
const json* optional_member(const json& object, std::string_view key) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

const json& as_object(const json& j, const std::string& path) {
  if (!j.is_object()) wrong_type(path, "an object", j);
  return j;
}

std::string read_string(const json& object, std::string_view key, const std::string& path) {
  const json& j = member(object, key, path);
  if (!j.is_string()) wrong_type(join(path, key), "a string", j);
  return j.get<std::string>();
}

double read_number(const json& object, std::string_view key, const std::string& path) {
  const json& j = member(object, key, path);
  if (!j.is_number()) wrong_type(join(path, key), "a number", j);
  return j.get<double>();
}

double read_non_negative(const json& object, std::string_view key, const std::string& path) {
  const double v = read_number(object, key, path);
  if (v < 0) throw SchemaError(join(path, key), "must be >= 0 (got " + std::to_string(v) + ")");
  return v;
}

std::int64_t read_integer(const json& object, std::string_view key, const std::string& path, std::int64_t lo,
                          std::int64_t hi) {
  const json& j = member(object, key, path);
  if (!j.is_number_integer()) wrong_type(join(path, key), "an integer", j);
  // An unsigned value above int64 max is out of every range we accept.
  if (j.is_number_unsigned() && j.get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
    throw SchemaError(join(path, key), "out of range (got " + std::to_string(j.get<std::uint64_t>()) + ")");
  const auto v = j.get<std::int64_t>();
  if (v < lo || v > hi)
    throw SchemaError(join(path, key), "out of range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                           "] (got " + std::to_string(v) + ")");
  return v;
}
int read_int(const json& object, std::string_view key, const std::string& path, int lo = 0) {
  return static_cast<int>(read_integer(object, key, path, lo, std::numeric_limits<int>::max()));
}
std::size_t read_size(const json& object, std::string_view key, const std::string& path) {
  return static_cast<std::size_t>(read_integer(object, key, path, 0, std::numeric_limits<std::int64_t>::max()));
}

Scalar scalar_from_json(const json& j, const std::string& path) {
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_number_integer()) {
    if (j.is_number_unsigned() && j.get<std::uint64_t>() > std::numeric_limits<std::int64_t>::max())
      return static_cast<double>(j.get<std::uint64_t>());
    return j.get<std::int64_t>();
  }
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) return j.get<std::string>();
  wrong_type(path, "a number, string or boolean", j);
}

Fields fields_from_json(const json& j, const std::string& path) {
  as_object(j, path);
  Fields out;
  for (const auto& [key, value] : j.items()) out.emplace_back(key, scalar_from_json(value, join(path, key)));
  return out;
}
Fields optional_fields(const json& object, std::string_view key, const std::string& path) {
  const json* j = optional_member(object, key);
  return j ? fields_from_json(*j, join(path, key)) : Fields{};
}

DeviceInfo device_from_json(const json& j, const std::string& path) {
  as_object(j, path);
  DeviceInfo d;
  d.device = read_int(j, "index", path);
  d.name = read_string(j, "name", path);
  d.cc_major = read_int(j, "cc_major", path);
  d.cc_minor = read_int(j, "cc_minor", path);
  d.sm_count = read_int(j, "sm_count", path);
  d.global_memory_bytes = read_size(j, "global_memory_bytes", path);
  d.l2_bytes = read_size(j, "l2_bytes", path);
  d.shared_memory_per_block = read_size(j, "shared_memory_per_block", path);
  d.shared_memory_per_block_optin = read_size(j, "shared_memory_per_block_optin", path);
  d.shared_memory_per_sm = read_size(j, "shared_memory_per_sm", path);
  d.registers_per_sm = read_int(j, "registers_per_sm", path);
  d.max_threads_per_sm = read_int(j, "max_threads_per_sm", path);
  d.warp_size = read_int(j, "warp_size", path);
  d.clock_khz = read_int(j, "clock_khz", path);
  d.memory_clock_khz = read_int(j, "memory_clock_khz", path);
  d.memory_bus_bits = read_int(j, "memory_bus_bits", path);
  return d;
}

bench::Ceilings ceilings_from_json(const json& j, const std::string& path) {
  as_object(j, path);
  bench::Ceilings c;
  c.copy_gbps = read_non_negative(j, "copy_gbps", path);
  c.cublas_sgemm_gflops = read_non_negative(j, "cublas_sgemm_gflops", path);
  c.cublas_bf16_gflops = read_non_negative(j, "cublas_bf16_gflops", path);
  c.gemm_size = read_int(j, "gemm_size", path);
  return c;
}

Status status_from_string(const std::string& s, const std::string& path) {
  for (Status st : {Status::kOk, Status::kIncorrect, Status::kFailed})
    if (s == status_name(st)) return st;
  throw SchemaError(path, "unknown status '" + s + "' (valid: ok, incorrect, failed)");
}

Record record_from_json(const json& j, const std::string& path) {
  as_object(j, path);
  Record r;
  r.suite = read_string(j, "suite", path);
  r.name = read_string(j, "name", path);
  r.dtype = read_string(j, "dtype", path);
  r.shape = fields_from_json(member(j, "shape", path), join(path, "shape"));
  r.status = status_from_string(read_string(j, "status", path), join(path, "status"));
  if (r.status != Status::kOk) {
    r.failure = read_string(j, "failure", path);
    if (r.failure.empty()) throw SchemaError(join(path, "failure"), "must say why the record is not ok");
  }
  r.flops = read_non_negative(j, "flops", path);
  r.bytes = read_non_negative(j, "bytes", path);
  // Timed records must carry their timing; a failed one may (it is ignored there).
  if (r.status != Status::kFailed) {
    r.median_ms = read_non_negative(j, "median_ms", path);
    r.min_ms = read_non_negative(j, "min_ms", path);
    r.max_ms = read_non_negative(j, "max_ms", path);
    r.repetitions = read_int(j, "repetitions", path, 1);
    r.arithmetic_intensity = read_non_negative(j, "arithmetic_intensity", path);
    r.gflops = read_non_negative(j, "gflops", path);
    r.gbps = read_non_negative(j, "gbps", path);
    // The median of a sample lies between its extremes; anything else means the writer mixed up fields.
    if (!(r.min_ms <= r.median_ms && r.median_ms <= r.max_ms))
      throw SchemaError(join(path, "median_ms"), "must lie in [min_ms, max_ms] (got min " +
                                                     std::to_string(r.min_ms) + ", median " +
                                                     std::to_string(r.median_ms) + ", max " +
                                                     std::to_string(r.max_ms) + ")");
  }
  if (const json* p = optional_member(j, "peer")) {
    const std::string pp = join(path, "peer");
    as_object(*p, pp);
    r.peer = Peer{read_string(*p, "name", pp), read_non_negative(*p, "median_ms", pp),
                  read_non_negative(*p, "throughput_ratio", pp)};
  }
  if (const json* e = optional_member(j, "errors")) {
    const std::string ep = join(path, "errors");
    if (!e->is_array()) wrong_type(ep, "an array", *e);
    for (std::size_t i = 0; i < e->size(); ++i) {
      const std::string ip = index_path(ep, i);
      const json& item = as_object((*e)[i], ip);
      ErrorMetric m;
      m.metric = read_string(item, "metric", ip);
      const json& v = member(item, "value", ip);
      // null is how a non-finite error (NaN output) is written; read it back as NaN.
      if (v.is_null()) m.value = std::numeric_limits<double>::quiet_NaN();
      else if (v.is_number()) m.value = v.get<double>();
      else wrong_type(join(ip, "value"), "a number or null", v);
      r.errors.push_back(std::move(m));
    }
  }
  r.extra = optional_fields(j, "extra", path);
  if (const json* n = optional_member(j, "notes")) {
    if (!n->is_string()) wrong_type(join(path, "notes"), "a string", *n);
    r.notes = n->get<std::string>();
  }
  return r;
}

int optional_int(const json& object, std::string_view key, const std::string& path) {
  return optional_member(object, key) ? read_int(object, key, path) : 0;
}

Document document_from_json(const json& j) {
  if (!j.is_object()) throw SchemaError("", std::string("the document must be a JSON object, got ") + j.type_name());
  Document d;
  // The schema first: a document of another version may differ in every other field, so say that, not
  // "field x missing".
  const auto schema = j.find("schema");
  if (schema == j.end()) throw SchemaError("schema", "missing (not a parallax results document?)");
  if (!schema->is_string()) wrong_type("schema", "a string", *schema);
  d.schema = schema->get<std::string>();
  if (d.schema != kSchema)
    throw SchemaError("schema", "unsupported version '" + d.schema + "'; this build reads '" +
                                    std::string(kSchema) + "'");
  d.parallax_version = read_string(j, "parallax_version", "");
  d.git_sha = read_string(j, "git_sha", "");
  d.timestamp_utc = read_string(j, "timestamp_utc", "");
  d.host = read_string(j, "host", "");
  if (const json* c = optional_member(j, "command")) {
    if (!c->is_string()) wrong_type("command", "a string", *c);
    d.command = c->get<std::string>();
  }
  d.cuda_runtime_version = optional_int(j, "cuda_runtime_version", "");
  d.cuda_driver_version = optional_int(j, "cuda_driver_version", "");
  d.device = device_from_json(member(j, "device", ""), "device");
  if (const json* c = optional_member(j, "ceilings")) d.ceilings = ceilings_from_json(*c, "ceilings");
  d.context = optional_fields(j, "context", "");
  const json& records = member(j, "records", "");
  if (!records.is_array()) wrong_type("records", "an array", records);
  for (std::size_t i = 0; i < records.size(); ++i)
    d.records.push_back(record_from_json(records[i], index_path("records", i)));
  return d;
}

}  // namespace

// ---------------------------------------------------------------- public API

const Scalar* find(const Fields& fields, std::string_view key) {
  for (const auto& [k, v] : fields)
    if (k == key) return &v;
  return nullptr;
}

std::string to_string(const Scalar& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return v;
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, double>) {
          std::ostringstream s;
          s.precision(std::numeric_limits<double>::max_digits10);
          s << v;
          return s.str();
        } else {
          return std::to_string(v);
        }
      },
      value);
}

std::string_view status_name(Status status) {
  switch (status) {
    case Status::kOk: return "ok";
    case Status::kIncorrect: return "incorrect";
    case Status::kFailed: return "failed";
  }
  return "failed";
}

Record& Record::set_peer(std::string peer_name, double peer_median_ms) {
  peer = Peer{std::move(peer_name), peer_median_ms, median_ms > 0 ? peer_median_ms / median_ms : 0};
  return *this;
}

Record& Record::add_error(std::string metric, double value) {
  errors.push_back({std::move(metric), value});
  return *this;
}

Record& Record::add_extra(std::string key, Scalar value) {
  extra.emplace_back(std::move(key), std::move(value));
  return *this;
}

Record& Record::mark_incorrect(const std::string& reason) {
  if (status == Status::kFailed) return *this;  // nothing ran: "failed" already says more
  status = Status::kIncorrect;
  failure = failure.empty() ? reason : failure + "; " + reason;
  return *this;
}

Record make_record(std::string suite, std::string name, Fields shape, std::string dtype,
                   const bench::Timing& timing, const bench::Work& work) {
  Record r;
  r.suite = std::move(suite);
  r.name = std::move(name);
  r.shape = std::move(shape);
  r.dtype = std::move(dtype);
  r.median_ms = timing.median_ms;
  r.min_ms = timing.min_ms;
  r.max_ms = timing.max_ms;
  r.repetitions = timing.repetitions;
  r.flops = work.flops;
  r.bytes = work.bytes;
  r.arithmetic_intensity = work.arithmetic_intensity();
  r.gflops = work.gflops_per_s(timing.median_ms);
  r.gbps = work.gbytes_per_s(timing.median_ms);
  return r;
}

Record failed_record(std::string suite, std::string name, Fields shape, std::string dtype, std::string failure) {
  Record r;
  r.suite = std::move(suite);
  r.name = std::move(name);
  r.shape = std::move(shape);
  r.dtype = std::move(dtype);
  r.status = Status::kFailed;
  r.failure = failure.empty() ? std::string("failed (no reason given)") : std::move(failure);
  return r;
}

std::string utc_timestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "unknown";
  return buf;
}

Document make_document(const DeviceInfo& device) {
  Document d;
  d.parallax_version = parallax::version();
  d.git_sha = parallax::git_sha();
  d.timestamp_utc = utc_timestamp();
  d.host = host_name();
  // Both calls work without a GPU (the driver version reads 0 without a driver); failures just leave 0.
  if (cudaRuntimeGetVersion(&d.cuda_runtime_version) != cudaSuccess) d.cuda_runtime_version = 0;
  if (cudaDriverGetVersion(&d.cuda_driver_version) != cudaSuccess) d.cuda_driver_version = 0;
  (void)cudaGetLastError();
  d.device = device;
  return d;
}

Document make_document() { return make_document(device_info()); }

std::string serialize(const Document& d, int indent) {
  json j;
  j["schema"] = d.schema;
  j["parallax_version"] = d.parallax_version;
  j["git_sha"] = d.git_sha;
  j["timestamp_utc"] = d.timestamp_utc;
  j["host"] = d.host;
  j["command"] = d.command;
  j["cuda_runtime_version"] = d.cuda_runtime_version;
  j["cuda_driver_version"] = d.cuda_driver_version;
  j["device"] = device_to_json(d.device);
  if (d.ceilings) j["ceilings"] = ceilings_to_json(*d.ceilings);
  j["context"] = fields_to_json(d.context);
  json records = json::array();
  for (const auto& r : d.records) records.push_back(record_to_json(r));
  j["records"] = std::move(records);
  // error_handler::replace: a stray invalid UTF-8 byte in a kernel's error message must not lose the file.
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

Document parse(std::string_view text) {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    throw SchemaError("", std::string("not valid JSON: ") + e.what());
  }
  return document_from_json(j);
}

Document merge(const std::vector<Part>& parts) {
  PX_REQUIRE(!parts.empty(), "parts", "needs at least one document to merge");
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string& label = parts[i].label;
    PX_REQUIRE(!label.empty(), "parts", "the label of part " + std::to_string(i) + " is empty");
    // Labels prefix context keys ("ladder.repetitions"): a '.' inside one would make the prefix ambiguous.
    PX_REQUIRE(label.find('.') == std::string::npos, "parts",
               "label '" + label + "' contains '.', which separates the label from the key in the context");
    for (std::size_t j = 0; j < i; ++j)
      PX_REQUIRE(parts[j].label != label, "parts",
                 "label '" + label + "' appears twice (parts " + std::to_string(j) + " and " + std::to_string(i) + ")");
    PX_REQUIRE(parts[i].document.schema == kSchema, "parts",
               "part '" + label + "' has schema '" + parts[i].document.schema + "', expected '" +
                   std::string(kSchema) + "'");
    PX_REQUIRE(parts[i].document.device.name == parts[0].document.device.name, "parts",
               "part '" + label + "' was measured on '" + parts[i].document.device.name + "' but part '" +
                   parts[0].label + "' on '" + parts[0].document.device.name +
                   "'; one results document describes one device");
  }
  const Document& first = parts.front().document;
  Document merged;
  merged.parallax_version = first.parallax_version;
  merged.git_sha = first.git_sha;
  merged.timestamp_utc = first.timestamp_utc;
  merged.host = first.host;
  merged.cuda_runtime_version = first.cuda_runtime_version;
  merged.cuda_driver_version = first.cuda_driver_version;
  merged.device = first.device;
  for (const Part& part : parts) {
    const Document& d = part.document;
    if (!merged.ceilings && d.ceilings) merged.ceilings = d.ceilings;
    if (d.git_sha != first.git_sha) merged.context.emplace_back("merge.git_sha." + part.label, d.git_sha);
    for (const auto& [key, value] : d.context) merged.context.emplace_back(part.label + "." + key, value);
    merged.records.insert(merged.records.end(), d.records.begin(), d.records.end());
  }
  return merged;
}

void write_file(const Document& document, const std::string& path) {
  const std::string text = serialize(document);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("cannot open '" + path + "' for writing");
  out << text << '\n';
  out.close();
  if (!out) throw Error("failed writing '" + path + "'");
}

Document read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '" + path + "' for reading");
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return parse(text.str());
  } catch (const SchemaError& e) {
    throw SchemaError(e.field(), e.problem(), path);
  }
}

}  // namespace parallax::results
