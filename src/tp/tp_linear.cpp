// Tensor-parallel linear layers with overlapped communication (see include/parallax/tp.hpp for the math).
// Host code only: the device work is parallax::gemm, NCCL collectives and cudaMemcpy2DAsync, ordered by events.
#include "parallax/tp.hpp"

#include <fmt/core.h>

#include <algorithm>

#include "parallax/gemm.hpp"
#include "tp/ce_gather.hpp"
#include "tp/compute_streams.hpp"
#include "tp/tp_common.hpp"
#include "tp/tp_kernels.hpp"

namespace parallax::tp {

using detail::begin_comm;
using detail::check_t;
using detail::end_comm;
using detail::gemm_sms_for;
using detail::hand_over;
using detail::kBf16;
using detail::require_pointer;
using detail::run_gemm;
using detail::sm_count;

std::string_view transport_name(Transport t) {
  switch (t) {
    case Transport::kNccl: return "nccl";
    case Transport::kCopyEngine: return "copy-engine";
    case Transport::kAuto: return "auto";
  }
  return "unknown";
}

Transport parse_transport(std::string_view text) {
  for (Transport t : {Transport::kNccl, Transport::kCopyEngine, Transport::kAuto})
    if (text == transport_name(t)) return t;
  throw InvalidArgument("transport", fmt::format("unknown transport '{}' (valid: nccl, copy-engine, auto)", text));
}

std::string_view chunk_schedule_name(ChunkSchedule s) {
  switch (s) {
    case ChunkSchedule::kUniform: return "uniform";
    case ChunkSchedule::kTapered: return "tapered";
  }
  return "unknown";
}

ChunkSchedule parse_chunk_schedule(std::string_view text) {
  for (ChunkSchedule s : {ChunkSchedule::kUniform, ChunkSchedule::kTapered})
    if (text == chunk_schedule_name(s)) return s;
  throw InvalidArgument("chunk_schedule",
                        fmt::format("unknown chunk schedule '{}' (valid: uniform, tapered)", text));
}

void validate(const Options& o) {
  PX_REQUIRE(o.chunks >= 1 && o.chunks <= 1024, "chunks", fmt::format("must be in [1, 1024] (got {})", o.chunks));
  (void)parse_gemm_kernel(o.gemm);  // throws InvalidArgument("kernel", ... valid: ...)
  const int t = static_cast<int>(o.transport);
  PX_REQUIRE(t >= 0 && t <= 2, "transport", fmt::format("not a Transport enumerator ({})", t));
  PX_REQUIRE(o.gemm_sms >= -1 && o.gemm_sms <= 4096, "gemm_sms",
             fmt::format("must be -1 (auto), 0 (all SMs) or a positive SM count (got {})", o.gemm_sms));
  // Two streams already let every chunk's tail overlap the next chunk's start (at most two consecutive
  // chunks run at once either way); more only add streams and events. 8 bounds the resources.
  PX_REQUIRE(o.compute_streams >= 1 && o.compute_streams <= 8, "compute_streams",
             fmt::format("must be in [1, 8] (got {})", o.compute_streams));
  const int cs = static_cast<int>(o.chunk_schedule);
  PX_REQUIRE(cs >= 0 && cs <= 1, "chunk_schedule", fmt::format("not a ChunkSchedule enumerator ({})", cs));
}

int resolve_gemm_sms(int gemm_sms, int sm_count, int comm_max_ctas, bool nccl_overlaps) {
  PX_REQUIRE(gemm_sms >= -1, "gemm_sms", fmt::format("must be >= -1 (got {})", gemm_sms));
  PX_REQUIRE(sm_count >= 1, "sm_count", fmt::format("must be >= 1 (got {})", sm_count));
  if (gemm_sms > 0) return std::min(gemm_sms, sm_count);
  if (gemm_sms == 0 || !nccl_overlaps || comm_max_ctas <= 0) return 0;
  // Leave the collective's blocks their SMs, but never starve the GEMM below half the GPU.
  return std::max(sm_count - comm_max_ctas, (sm_count + 1) / 2);
}

std::size_t SignalPadLayout::slots() const {
  PX_REQUIRE(ranks >= 1 && chunks >= 1, "layout", fmt::format("ranks and chunks must be >= 1 (got {}, {})", ranks, chunks));
  return static_cast<std::size_t>(ranks) * (1 + static_cast<std::size_t>(chunks));
}
std::size_t SignalPadLayout::ready(int src) const {
  PX_REQUIRE(src >= 0 && src < ranks, "src", fmt::format("must be in [0, {}) (got {})", ranks, src));
  return static_cast<std::size_t>(src);
}
std::size_t SignalPadLayout::data(int chunk, int src) const {
  PX_REQUIRE(src >= 0 && src < ranks, "src", fmt::format("must be in [0, {}) (got {})", ranks, src));
  PX_REQUIRE(chunk >= 0 && chunk < chunks, "chunk", fmt::format("must be in [0, {}) (got {})", chunks, chunk));
  return static_cast<std::size_t>(ranks) * (1 + static_cast<std::size_t>(chunk)) + static_cast<std::size_t>(src);
}

std::uint32_t next_epoch(std::uint32_t epoch) {
  const std::uint32_t next = epoch + 1u;
  return next == 0u ? 1u : next;
}

bool epoch_reached(std::uint32_t flag, std::uint32_t epoch) {
  return static_cast<std::int32_t>(flag - epoch) >= 0;
}

std::vector<Split> plan_row_chunks(std::int64_t t, int chunks, ChunkSchedule schedule, std::int64_t align) {
  PX_REQUIRE(chunks >= 1, "chunks", fmt::format("must be >= 1 (got {})", chunks));
  PX_REQUIRE(t >= 1, "t", fmt::format("must be >= 1 (got {})", t));
  PX_REQUIRE(align >= 1, "align", fmt::format("must be >= 1 (got {})", align));
  const int c = static_cast<int>(std::min<std::int64_t>(chunks, t));  // every chunk keeps >= 1 row
  if (schedule == ChunkSchedule::kUniform || c == 1) return plan_split(t, c);
  PX_REQUIRE(schedule == ChunkSchedule::kTapered, "chunk_schedule",
             fmt::format("not a ChunkSchedule enumerator ({})", static_cast<int>(schedule)));
  // Tapered: cut in units of `align` rows (single rows when t has fewer than c units). Every chunk gets one
  // unit; the spare units are shared by the weights c, c-1, ..., 1 (floors, so the shares are
  // non-increasing), and the few units the floors leave over (< c) go one each to the first chunks, which
  // keeps the sizes non-increasing. The last chunk gives back the part of its last unit beyond t (< unit
  // rows, and it holds >= 1 unit, so it keeps >= 1 row).
  const std::int64_t unit = (t + align - 1) / align >= c ? align : 1;
  const std::int64_t units = (t + unit - 1) / unit;
  const std::int64_t spare = units - c;
  const std::int64_t weights = static_cast<std::int64_t>(c) * (c + 1) / 2;
  std::vector<std::int64_t> share(c);
  std::int64_t given = 0;
  for (int i = 0; i < c; ++i) {
    share[i] = 1 + spare * (c - i) / weights;
    given += share[i] - 1;
  }
  for (int i = 0; given < spare; ++i, ++given) ++share[i];
  std::vector<Split> out(c);
  std::int64_t offset = 0;
  for (int i = 0; i < c; ++i) {
    out[i].offset = offset;
    out[i].size = i + 1 < c ? share[i] * unit : t - offset;
    offset += out[i].size;
  }
  return out;
}

// ---- column parallel ------------------------------------------------------------------------------------
ColumnParallelLinear::ColumnParallelLinear(Communicator& comm, std::int64_t k, std::int64_t n, Options options)
    : comm_(comm), k_(k), n_(n), options_(std::move(options)) {
  PX_REQUIRE(k >= 1 && k <= INT32_MAX, "k", fmt::format("must be in [1, 2^31) (got {})", k));
  PX_REQUIRE(n >= 1 && n <= INT32_MAX, "n", fmt::format("must be in [1, 2^31) (got {})", n));
  validate(options_);
  shard_ = plan_split(n, comm.size())[comm.rank()];
  padded_n_ = max_split(n, comm.size());
}

ColumnParallelLinear::~ColumnParallelLinear() = default;

void ColumnParallelLinear::forward(const __nv_bfloat16* x, std::int64_t t, const __nv_bfloat16* w_shard,
                                   const float* bias_shard, __nv_bfloat16* y, cudaStream_t stream) {
  check_t(t);
  require_pointer(x, "x");
  require_pointer(y, "y");
  if (shard_.size > 0) require_pointer(w_shard, "w_shard");
  const int P = comm_.size();
  if (options_.check_shapes && P > 1) {
    const std::int64_t shape[] = {t, k_, n_, options_.chunks, static_cast<std::int64_t>(options_.chunk_schedule)};
    comm_.require_same("column-parallel forward shape [t, k, n, chunks, chunk schedule]", shape);
  }
  PX_CUDA_CHECK(cudaSetDevice(comm_.device()));
  if (P == 1) {  // nothing to gather: the GEMM writes Y directly
    run_gemm(options_, stream, t, n_, k_, Op::kN, x, k_, Op::kN, w_shard, n_, DType::kBF16, y, n_, bias_shard,
             Epilogue::kNone, gemm_sms_for(comm_, options_, false));
    return;
  }
  if (!compute_) compute_ = std::make_unique<detail::ComputeStreams>();
  if (options_.transport != Transport::kNccl && in_use_ != Transport::kNccl) {
    if (!ce_) ce_ = std::make_unique<detail::CopyEngineGather>(comm_, n_, options_.chunks);
    std::string why;
    if (ce_->prepare(t, stream, &why)) {
      in_use_ = Transport::kCopyEngine;
      // The copy engines use no SM: the GEMM keeps all of them.
      const int sms = resolve_gemm_sms(options_.gemm_sms, sm_count(comm_.device()), 0, false);
      compute_->fork(stream, options_.overlap ? options_.compute_streams : 1);
      ce_->run(plan_row_chunks(t, options_.chunks, options_.chunk_schedule), y, shard_, options_.overlap, stream,
               *compute_, [&](const Split& rows, __nv_bfloat16* y_rows, cudaStream_t s) {
                 run_gemm(options_, s, rows.size, shard_.size, k_, Op::kN, x + rows.offset * k_, k_, Op::kN,
                          w_shard, shard_.size, DType::kBF16, y_rows, n_, bias_shard, Epilogue::kNone, sms);
               });
      compute_->join();
      return;
    }
    ce_.reset();
    if (options_.transport == Transport::kCopyEngine)
      throw Error("column-parallel forward: transport 'copy-engine' is unavailable (" + why +
                  "); use transport 'nccl' or 'auto'");
    in_use_ = Transport::kNccl;  // auto: fall back, on every rank alike (prepare's verdict is collective)
  }
  in_use_ = Transport::kNccl;
  forward_nccl(x, t, w_shard, bias_shard, y, stream);
}

void ColumnParallelLinear::forward_nccl(const __nv_bfloat16* x, std::int64_t t, const __nv_bfloat16* w_shard,
                                        const float* bias_shard, __nv_bfloat16* y, cudaStream_t stream) {
  const int P = comm_.size();
  const int sms = gemm_sms_for(comm_, options_, true);
  const std::size_t need = static_cast<std::size_t>(t * padded_n_);
  if (local_.size() < need) {
    local_ = DeviceBuffer<__nv_bfloat16>(need);
    gathered_ = DeviceBuffer<__nv_bfloat16>(need * P);
  }
  const auto col_splits = plan_split(n_, P);
  cudaStream_t cs = begin_comm(comm_, options_, stream, ready_);
  compute_->fork(stream, options_.overlap ? options_.compute_streams : 1);
  const auto row_chunks = plan_row_chunks(t, options_.chunks, options_.chunk_schedule);
  for (std::size_t c = 0; c < row_chunks.size(); ++c) {
    const Split& rows = row_chunks[c];
    cudaStream_t gs = compute_->at(c);  // this chunk's GEMM stream
    __nv_bfloat16* local_rows = local_.data() + rows.offset * padded_n_;
    // This rank's block of chunk rows, padded to padded_n_ columns (the pad columns are never read back).
    if (shard_.size > 0)
      run_gemm(options_, gs, rows.size, shard_.size, k_, Op::kN, x + rows.offset * k_, k_, Op::kN, w_shard,
               shard_.size, DType::kBF16, local_rows, padded_n_, bias_shard, Epilogue::kNone, sms);
    hand_over(options_, gs, cs, ready_);
    // Chunk-major gathered layout: the P blocks of this chunk sit contiguously at P * rows.offset * padded_n_.
    __nv_bfloat16* gathered_rows = gathered_.data() + static_cast<std::int64_t>(P) * rows.offset * padded_n_;
    const std::size_t count = static_cast<std::size_t>(rows.size * padded_n_);
    comm_.all_gather(local_rows, gathered_rows, count, DType::kBF16, cs);
    // Scatter each rank's block into its columns of Y (a strided 2-D copy per rank, on the comm stream).
    for (int r = 0; r < P; ++r) {
      if (col_splits[r].size == 0) continue;
      PX_CUDA_CHECK(cudaMemcpy2DAsync(y + rows.offset * n_ + col_splits[r].offset, n_ * kBf16,
                                      gathered_rows + static_cast<std::int64_t>(r) * count, padded_n_ * kBf16,
                                      col_splits[r].size * kBf16, rows.size, cudaMemcpyDeviceToDevice, cs));
    }
  }
  compute_->join();
  end_comm(options_, stream, cs, done_);
}

void ColumnParallelLinear::backward(const __nv_bfloat16* x, const __nv_bfloat16* dy, std::int64_t t,
                                    const __nv_bfloat16* w_shard, __nv_bfloat16* dx, float* dw_shard,
                                    cudaStream_t stream, float* db_shard) {
  check_t(t);
  require_pointer(x, "x");
  require_pointer(dy, "dy");
  require_pointer(dx, "dx");
  if (shard_.size > 0) {
    require_pointer(w_shard, "w_shard");
    require_pointer(dw_shard, "dw_shard");
  }
  const int P = comm_.size();
  if (options_.check_shapes && P > 1) {
    const std::int64_t shape[] = {t, k_, n_, options_.chunks, static_cast<std::int64_t>(options_.chunk_schedule)};
    comm_.require_same("column-parallel backward shape [t, k, n, chunks, chunk schedule]", shape);
  }
  PX_CUDA_CHECK(cudaSetDevice(comm_.device()));
  const __nv_bfloat16* dy_shard = dy + shard_.offset;  // dY[:, shard] in place, leading dimension n
  const int sms = gemm_sms_for(comm_, options_, true);
  cudaStream_t cs = P > 1 ? begin_comm(comm_, options_, stream, ready_) : stream;
  // dX partials first (they feed the all-reduce), chunk by chunk: dX[rows] = dY_r[rows] · W_rᵀ.
  // W_r is stored k x n_r, i.e. op_b = T with B stored (n=k) x (k=n_r), ldb = n_r.
  for (const Split& rows : plan_row_chunks(t, options_.chunks, options_.chunk_schedule)) {
    __nv_bfloat16* dx_rows = dx + rows.offset * k_;
    if (shard_.size > 0)
      run_gemm(options_, stream, rows.size, k_, shard_.size, Op::kN, dy_shard + rows.offset * n_, n_, Op::kT,
               w_shard, shard_.size, DType::kBF16, dx_rows, k_, nullptr, Epilogue::kNone, sms);
    else  // a rank without columns contributes zeros to the sum
      PX_CUDA_CHECK(cudaMemsetAsync(dx_rows, 0, rows.size * k_ * kBf16, stream));
    if (P > 1) {
      hand_over(options_, stream, cs, ready_);
      comm_.all_reduce(dx_rows, dx_rows, static_cast<std::size_t>(rows.size * k_), DType::kBF16, cs);
    }
  }
  // dW_r = Xᵀ dY_r (k x n_r): runs on `stream` while the comm stream reduces dX. X is stored t x k, so
  // op_a = T with A stored (k=t) x (m=k), lda = k.
  if (shard_.size > 0)
    run_gemm(options_, stream, k_, shard_.size, t, Op::kT, x, k_, Op::kN, dy_shard, n_, DType::kF32, dw_shard,
             shard_.size, nullptr, Epilogue::kNone, sms);
  // db_r = 1ᵀ dY_r: a column sum of this rank's columns (memory-bound; also overlaps the all-reduce).
  if (db_shard != nullptr && shard_.size > 0) detail::column_sum(dy_shard, n_, t, shard_.size, db_shard, stream);
  if (P > 1) end_comm(options_, stream, cs, done_);
}

// ---- row parallel ---------------------------------------------------------------------------------------
RowParallelLinear::RowParallelLinear(Communicator& comm, std::int64_t k, std::int64_t n, Options options)
    : comm_(comm), k_(k), n_(n), options_(std::move(options)) {
  PX_REQUIRE(k >= 1 && k <= INT32_MAX, "k", fmt::format("must be in [1, 2^31) (got {})", k));
  PX_REQUIRE(n >= 1 && n <= INT32_MAX, "n", fmt::format("must be in [1, 2^31) (got {})", n));
  validate(options_);
  shard_ = plan_split(k, comm.size())[comm.rank()];
}

RowParallelLinear::~RowParallelLinear() = default;

void RowParallelLinear::forward(const __nv_bfloat16* x_shard, std::int64_t t, const __nv_bfloat16* w_shard,
                                const float* bias, __nv_bfloat16* y, cudaStream_t stream) {
  check_t(t);
  require_pointer(y, "y");
  if (shard_.size > 0) {
    require_pointer(x_shard, "x_shard");
    require_pointer(w_shard, "w_shard");
  }
  const int P = comm_.size();
  if (options_.check_shapes && P > 1) {
    const std::int64_t shape[] = {t, k_, n_, options_.chunks, static_cast<std::int64_t>(options_.chunk_schedule)};
    comm_.require_same("row-parallel forward shape [t, k, n, chunks, chunk schedule]", shape);
  }
  PX_CUDA_CHECK(cudaSetDevice(comm_.device()));
  // The bias belongs to the sum once: only rank 0's GEMM adds it.
  const float* my_bias = comm_.rank() == 0 ? bias : nullptr;
  const int sms = gemm_sms_for(comm_, options_, true);
  if (shard_.size == 0 && my_bias != nullptr)
    throw InvalidArgument("k", "rank 0 owns no rows of W (k < ranks) but must add the bias; use k >= ranks");
  cudaStream_t cs = P > 1 ? begin_comm(comm_, options_, stream, ready_) : stream;
  // One rank has nothing to overlap: its chunks stay on `stream`.
  if (!compute_) compute_ = std::make_unique<detail::ComputeStreams>();
  compute_->fork(stream, options_.overlap && P > 1 ? options_.compute_streams : 1);
  const auto row_chunks = plan_row_chunks(t, options_.chunks, options_.chunk_schedule);
  for (std::size_t c = 0; c < row_chunks.size(); ++c) {
    const Split& rows = row_chunks[c];
    cudaStream_t gs = compute_->at(c);
    __nv_bfloat16* y_rows = y + rows.offset * n_;
    if (shard_.size > 0)
      run_gemm(options_, gs, rows.size, n_, shard_.size, Op::kN, x_shard + rows.offset * shard_.size,
               shard_.size, Op::kN, w_shard, n_, DType::kBF16, y_rows, n_, my_bias, Epilogue::kNone, sms);
    else
      PX_CUDA_CHECK(cudaMemsetAsync(y_rows, 0, rows.size * n_ * kBf16, gs));
    if (P > 1) {
      hand_over(options_, gs, cs, ready_);
      comm_.all_reduce(y_rows, y_rows, static_cast<std::size_t>(rows.size * n_), DType::kBF16, cs);
    }
  }
  compute_->join();
  if (P > 1) end_comm(options_, stream, cs, done_);
}

void RowParallelLinear::backward(const __nv_bfloat16* x_shard, const __nv_bfloat16* dy, std::int64_t t,
                                 const __nv_bfloat16* w_shard, __nv_bfloat16* dx_shard, float* dw_shard,
                                 cudaStream_t stream, float* db) {
  check_t(t);
  require_pointer(dy, "dy");
  PX_CUDA_CHECK(cudaSetDevice(comm_.device()));
  // The bias is replicated and dY too: every rank computes the full db (no communication).
  if (db != nullptr) detail::column_sum(dy, n_, t, n_, db, stream);
  if (shard_.size == 0) return;  // nothing owned, nothing to compute, no communication
  require_pointer(x_shard, "x_shard");
  require_pointer(w_shard, "w_shard");
  require_pointer(dx_shard, "dx_shard");
  require_pointer(dw_shard, "dw_shard");
  PX_CUDA_CHECK(cudaSetDevice(comm_.device()));
  // dX_r = dY · W_rᵀ (t x k_r): W_r stored k_r x n -> op_b = T, ldb = n.
  run_gemm(options_, stream, t, shard_.size, n_, Op::kN, dy, n_, Op::kT, w_shard, n_, DType::kBF16, dx_shard,
           shard_.size);
  // dW_r = X_rᵀ · dY (k_r x n): X_r stored t x k_r -> op_a = T, lda = k_r.
  run_gemm(options_, stream, shard_.size, n_, t, Op::kT, x_shard, shard_.size, Op::kN, dy, n_, DType::kF32,
           dw_shard, n_);
}

}  // namespace parallax::tp
