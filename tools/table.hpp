// Output helpers shared by every `parallax` subcommand: a small readable-table printer, number formatting,
// the --json / --json-out conventions of cli.hpp, a progress line on stderr, and the "needs a GPU" check.
//
// Header-only on purpose: tools/CMakeLists.txt compiles cmd_*.cpp and cli_*.cpp, and these helpers are small
// enough that a separate translation unit would buy nothing.
#pragma once

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "parallax/core.hpp"
#include "parallax/results.hpp"

namespace parallax::cli {

// ------------------------------------------------------------------------------------------------ table

enum class Align {
  kAuto,   // right when every cell of the column looks like a number (placeholders aside), else left
  kLeft,
  kRight,
};

struct Column {
  std::string header;
  Align align = Align::kAuto;
};

// What an empty measurement cell shows (a failed row, a theoretical value that is not known).
inline constexpr std::string_view kNoValue = "-";

// True for cells a reader compares by magnitude: "12", "-3.5", "1.2e-07", "81.3%", "2.5x", "nan", "inf".
// Numbers are right-aligned so their digits line up; text reads best left-aligned.
inline bool looks_numeric(std::string_view cell) {
  if (cell.empty()) return false;
  if (cell == "nan" || cell == "inf" || cell == "-inf") return true;
  if (cell.back() == '%' || cell.back() == 'x') cell.remove_suffix(1);
  if (cell.empty()) return false;
  const std::string s(cell);
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && (std::isdigit(static_cast<unsigned char>(s.front())) || s.front() == '-' ||
                                         s.front() == '+' || s.front() == '.');
}

// Display width in terminal columns: counts UTF-8 code points, not bytes ("µs" is two columns, not three).
inline std::size_t display_width(std::string_view text) {
  std::size_t width = 0;
  for (const char c : text)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++width;
  return width;
}

// A plain-text table: headers, a dashed rule, rows; column widths fit the widest cell; two spaces between
// columns; no trailing blanks.
//
//   level  name    median ms  GFLOP/s
//   -----  ------  ---------  -------
//       1  sgemm1    123.456    1113.2
class Table {
 public:
  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {
    PX_REQUIRE(!columns_.empty(), "columns", "a table needs at least one column");
  }

  // A row; missing trailing cells are blank, extra cells are an error.
  Table& add_row(std::vector<std::string> cells) {
    PX_REQUIRE(cells.size() <= columns_.size(), "cells",
               "row has " + std::to_string(cells.size()) + " cells for " + std::to_string(columns_.size()) +
                   " columns");
    cells.resize(columns_.size());
    rows_.push_back(std::move(cells));
    return *this;
  }

  std::size_t rows() const noexcept { return rows_.size(); }
  std::size_t columns() const noexcept { return columns_.size(); }

  // Effective alignment of column `c` (kAuto resolved against the current rows).
  Align alignment(std::size_t c) const {
    if (columns_.at(c).align != Align::kAuto) return columns_[c].align;
    bool any_number = false;
    for (const auto& row : rows_) {
      const std::string& cell = row[c];
      if (cell.empty() || cell == kNoValue) continue;
      if (!looks_numeric(cell)) return Align::kLeft;
      any_number = true;
    }
    return any_number ? Align::kRight : Align::kLeft;
  }

  std::string render() const {
    std::vector<std::size_t> width(columns_.size());
    std::vector<Align> align(columns_.size());
    for (std::size_t c = 0; c < columns_.size(); ++c) {
      width[c] = display_width(columns_[c].header);
      for (const auto& row : rows_) width[c] = std::max(width[c], display_width(row[c]));
      align[c] = alignment(c);
    }
    std::string out;
    auto emit_line = [&](auto&& cell_of) {
      std::string line;
      for (std::size_t c = 0; c < columns_.size(); ++c) {
        const std::string cell = cell_of(c);
        const std::string pad(width[c] - display_width(cell), ' ');
        if (c > 0) line += "  ";
        line += align[c] == Align::kRight ? pad + cell : cell + pad;
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line;
      out += '\n';
    };
    emit_line([&](std::size_t c) { return columns_[c].header; });
    emit_line([&](std::size_t c) { return std::string(width[c], '-'); });
    for (const auto& row : rows_) emit_line([&](std::size_t c) { return row[c]; });
    return out;
  }

  void print(std::FILE* out = stdout) const {
    fmt::print(out, "{}", render());
    std::fflush(out);
  }

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// ------------------------------------------------------------------------------------------------ numbers

// Fixed-point with `decimals` digits; "nan"/"inf" for non-finite values (a broken kernel must not print 0).
inline std::string fixed(double value, int decimals) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return fmt::format("{:.{}f}", value, decimals);
}

// Scientific with `digits` decimals ("3.14e-07"); errors span many orders of magnitude.
inline std::string sci(double value, int digits = 2) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return fmt::format("{:.{}e}", value, digits);
}

// A percentage given in percent ("81.3%").
inline std::string percent(double value_percent, int decimals = 1) {
  const std::string s = fixed(value_percent, decimals);
  return std::isfinite(value_percent) ? s + "%" : s;
}

// Milliseconds, always three decimals (microsecond resolution) so a column's decimal points line up.
inline std::string milliseconds(double ms) { return fixed(ms, 3); }

// Binary-prefixed size ("80.0 GiB", "50.0 MiB", "228 KiB", "512 B").
inline std::string bytes_iec(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  if (u == 0) return fmt::format("{:.0f} B", bytes);
  // Whole numbers print without decimals (228 KiB); others keep one (50.0 MiB reads as exact anyway).
  return bytes == std::floor(bytes) && bytes >= 100 ? fmt::format("{:.0f} {}", bytes, units[u])
                                                    : fmt::format("{:.1f} {}", bytes, units[u]);
}

// ------------------------------------------------------------------------------------------------ JSON out

// The output options every subcommand takes (cli.hpp conventions):
//   --json           print one JSON document on stdout and nothing else there (tables are skipped)
//   --json-out FILE  also write the JSON document to FILE (the table is still printed unless --json)
struct OutputOptions {
  bool json = false;
  std::string json_out;

  bool prints_table() const noexcept { return !json; }
  bool wants_json() const noexcept { return json || !json_out.empty(); }
};

inline void add_output_options(CLI::App& command, OutputOptions& out) {
  command.add_flag("--json", out.json, "Print one JSON document on stdout instead of the tables");
  command.add_option("--json-out", out.json_out, "Also write the JSON document to this file")
      ->type_name("FILE");
}

// Sends `json_text` where the options ask: stdout under --json, the --json-out file when given.
// Throws parallax::Error if the file cannot be written (the command then exits 1).
inline void emit_json(const OutputOptions& out, const std::string& json_text) {
  if (out.json) {
    fmt::print(stdout, "{}\n", json_text);
    std::fflush(stdout);
  }
  if (!out.json_out.empty()) {
    std::ofstream file(out.json_out, std::ios::binary | std::ios::trunc);
    if (!file) throw Error("cannot open --json-out file '" + out.json_out + "' for writing");
    file << json_text << '\n';
    file.close();
    if (!file) throw Error("failed writing --json-out file '" + out.json_out + "'");
    if (!out.json) fmt::print(stderr, "wrote {}\n", out.json_out);
  }
}

inline void emit_json(const OutputOptions& out, const results::Document& document) {
  if (out.wants_json()) emit_json(out, results::serialize(document));
}

// ------------------------------------------------------------------------------------------------ progress

// Progress of a long run on stderr (stdout stays clean for tables and JSON).
//   * stderr is a terminal: one line redrawn in place, "[#####.....]  12/45  4096^3 sgemm3  0:32"
//   * otherwise (a log file, CI): a plain line at most every `interval` seconds, so logs show the run is
//     alive without one line per step
class Progress {
 public:
  enum class Mode { kAuto, kTerminal, kLines, kOff };

  explicit Progress(int total, Mode mode = Mode::kAuto, double interval_s = 10.0, std::FILE* out = stderr)
      : total_(std::max(total, 1)), interval_s_(interval_s), out_(out), start_(Clock::now()), last_(start_) {
    mode_ = mode != Mode::kAuto ? mode : (isatty(fileno(out_)) ? Mode::kTerminal : Mode::kLines);
  }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress() { finish(); }

  // `done` steps of `total` are complete; `what` is being worked on now.
  void update(int done, std::string_view what) {
    const double elapsed = seconds_since(start_);
    const std::string clock = fmt::format("{}:{:02}", static_cast<int>(elapsed) / 60, static_cast<int>(elapsed) % 60);
    if (mode_ == Mode::kTerminal) {
      constexpr int kBar = 20;
      const int filled = std::clamp(done * kBar / total_, 0, kBar);
      // \r returns to column 0, ESC[K erases the old line's tail.
      fmt::print(out_, "\r\033[K[{}{}] {:>{}}/{}  {}  {}", std::string(filled, '#'), std::string(kBar - filled, '.'),
                 done, std::to_string(total_).size(), total_, what, clock);
      std::fflush(out_);
      drawn_ = true;
    } else if (mode_ == Mode::kLines && seconds_since(last_) >= interval_s_) {
      fmt::print(out_, "progress: {}/{} {} ({} elapsed)\n", done, total_, what, clock);
      std::fflush(out_);
      last_ = Clock::now();
    }
  }

  // Clears the terminal line (so the table that follows starts clean). Idempotent.
  void finish() {
    if (mode_ == Mode::kTerminal && drawn_) {
      fmt::print(out_, "\r\033[K");
      std::fflush(out_);
    }
    drawn_ = false;
  }

  Mode mode() const noexcept { return mode_; }

 private:
  using Clock = std::chrono::steady_clock;
  static double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  }
  int total_;
  double interval_s_;
  std::FILE* out_;
  Mode mode_;
  Clock::time_point start_;
  Clock::time_point last_;
  bool drawn_ = false;
};

// ------------------------------------------------------------------------------------------------ checks

// Every measuring command needs a GPU; without one it stops with a message that says what to check
// (exit code 1 through run_main).
inline void require_gpu(std::string_view command) {
  if (!parallax::has_gpu())
    throw Error("no CUDA GPU visible: `parallax " + std::string(command) +
                "` needs one (cudaGetDeviceCount found none; check the NVIDIA driver and CUDA_VISIBLE_DEVICES)");
}

// NVIDIA_TF32_OVERRIDE set to anything but 0 lets NVIDIA's libraries run FP32 GEMMs on TF32 tensor cores
// (only "0" is documented; other values are "reserved"), which would silently turn the strict-FP32 cuBLAS
// peer and ceiling into a TF32 one. Measuring commands refuse to run under it.
inline void refuse_tf32_override(std::string_view command) {
  const char* value = std::getenv("NVIDIA_TF32_OVERRIDE");
  if (value != nullptr && std::string_view(value) != "0" && std::string_view(value) != "")
    throw Error("NVIDIA_TF32_OVERRIDE=" + std::string(value) + " is set: cuBLAS may then use TF32 for the FP32 " +
                "peer, so `parallax " + std::string(command) +
                "` would compare against the wrong thing; unset it (or set it to 0) and run again");
}

}  // namespace parallax::cli
