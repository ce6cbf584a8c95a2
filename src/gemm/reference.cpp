// Float64 CPU reference GEMM (see parallax/reference.hpp).
#include "parallax/reference.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "parallax/core.hpp"

namespace parallax {
namespace {

// Elements a row-major rows x cols matrix with leading dimension ld spans (rows, cols >= 1).
std::size_t span_elements(int rows, int cols, int ld) {
  return static_cast<std::size_t>(rows - 1) * static_cast<std::size_t>(ld) + static_cast<std::size_t>(cols);
}

std::string got(const char* name, long long value) { return std::string(" (got ") + name + "=" + std::to_string(value); }

// Rows [row_begin, row_end) of the result. i-k-j order: for each row i, row p of B is scaled by A[i][p] and
// accumulated into one row of doubles, so B and the accumulators are both walked contiguously.
void reference_rows(int row_begin, int row_end, int n, int k, double alpha, const float* a, int lda,
                    const float* b, int ldb, double beta, const float* c, int ldc, double* out) {
  std::vector<double> acc(static_cast<std::size_t>(n));
  for (int i = row_begin; i < row_end; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    const float* a_row = a + static_cast<std::size_t>(i) * lda;
    for (int p = 0; p < k; ++p) {
      const double a_ip = a_row[p];
      const float* b_row = b + static_cast<std::size_t>(p) * ldb;
      for (int j = 0; j < n; ++j) acc[j] += a_ip * static_cast<double>(b_row[j]);
    }
    double* out_row = out + static_cast<std::size_t>(i) * n;
    if (beta == 0.0) {
      for (int j = 0; j < n; ++j) out_row[j] = alpha * acc[j];
    } else {
      const float* c_row = c + static_cast<std::size_t>(i) * ldc;
      for (int j = 0; j < n; ++j) out_row[j] = alpha * acc[j] + beta * static_cast<double>(c_row[j]);
    }
  }
}

}  // namespace

std::vector<double> gemm_reference_f64(int m, int n, int k, double alpha, std::span<const float> a, int lda,
                                       std::span<const float> b, int ldb, double beta, std::span<const float> c_in,
                                       int ldc) {
  PX_REQUIRE(m >= 1, "m", "must be >= 1" + got("m", m) + ")");
  PX_REQUIRE(n >= 1, "n", "must be >= 1" + got("n", n) + ")");
  PX_REQUIRE(k >= 1, "k", "must be >= 1" + got("k", k) + ")");
  PX_REQUIRE(lda >= k, "lda", "must be >= k, the row length of row-major A" + got("lda", lda) + ", k=" +
                                  std::to_string(k) + ")");
  PX_REQUIRE(ldb >= n, "ldb", "must be >= n, the row length of row-major B" + got("ldb", ldb) + ", n=" +
                                  std::to_string(n) + ")");
  const std::size_t a_needed = span_elements(m, k, lda);
  const std::size_t b_needed = span_elements(k, n, ldb);
  PX_REQUIRE(a.size() >= a_needed, "a",
             "must hold (m - 1) * lda + k = " + std::to_string(a_needed) + " elements (got " +
                 std::to_string(a.size()) + ")");
  PX_REQUIRE(b.size() >= b_needed, "b",
             "must hold (k - 1) * ldb + n = " + std::to_string(b_needed) + " elements (got " +
                 std::to_string(b.size()) + ")");
  if (beta != 0.0) {
    PX_REQUIRE(ldc >= n, "ldc", "must be >= n, the row length of row-major C, when beta != 0" + got("ldc", ldc) +
                                    ", n=" + std::to_string(n) + ")");
    const std::size_t c_needed = span_elements(m, n, ldc);
    PX_REQUIRE(c_in.size() >= c_needed, "c_in",
               "must hold (m - 1) * ldc + n = " + std::to_string(c_needed) + " elements when beta != 0 (got " +
                   std::to_string(c_in.size()) + ")");
  }

  std::vector<double> out(static_cast<std::size_t>(m) * static_cast<std::size_t>(n));
  const float* c = beta != 0.0 ? c_in.data() : nullptr;

  // Split rows across threads only when the work pays for starting them (~1 ms of work per thread).
  const double work = static_cast<double>(m) * n * k;
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const int threads = static_cast<int>(std::min<double>({static_cast<double>(hw), 32.0, static_cast<double>(m),
                                                         std::max(1.0, work / (1 << 22))}));
  if (threads <= 1) {
    reference_rows(0, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c, ldc, out.data());
    return out;
  }
  // Thread t computes rows [m * t / threads, m * (t + 1) / threads). If the system refuses a thread, the rows
  // of the threads that did not start are computed here instead.
  auto row_split = [&](int t) { return static_cast<int>(static_cast<long long>(m) * t / threads); };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads));
  try {
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back(reference_rows, row_split(t), row_split(t + 1), n, k, alpha, a.data(), lda, b.data(), ldb,
                        beta, c, ldc, out.data());
    }
  } catch (const std::system_error&) {
  }
  reference_rows(row_split(static_cast<int>(pool.size())), m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c,
                 ldc, out.data());
  for (auto& thread : pool) thread.join();
  return out;
}

}  // namespace parallax
