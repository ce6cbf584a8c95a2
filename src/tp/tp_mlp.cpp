// TensorParallelMLP: column-parallel -> GELU -> row-parallel, one all-reduce each way (see include/parallax/tp.hpp
// for the math). Host code only: parallax::gemm, the GELU kernels of tp_kernels.cu, NCCL all-reduces, events.
//
// Why this split is the one to use: with W1 split by columns and W2 by the SAME hidden units as rows, rank r's
// activation A_r = gelu(X W1_r + b1_r) is exactly the input slice the row half needs — the GELU is elementwise,
// so it commutes with the column split — and the only communication is the sum of the partial outputs
// (forward) and of the partial input gradients (backward). A column layer followed by a row layer on their own
// would gather A ([t, hidden], the widest tensor of the block) in between.
//
// Pipelining. Both passes walk the same row chunks as the linear layers:
//   forward : [GEMM1 c -> GEMM2 c] on compute stream c % compute_streams, then all-reduce(Y chunk c) on the
//             comm stream while [GEMM1 c+1 -> GEMM2 c+1] run (on the other compute stream, so GEMM1 c+1 may
//             start in GEMM2 c's tail). Chunking GEMM1 as well (not only GEMM2) lets chunk 0's all-reduce
//             start after 1/C of the compute instead of after all of GEMM1. Chunk c's rows of A_r, H_r and Y
//             are its own, so the two streams never touch the same memory.
//   backward: the dX chain first, per chunk: dA c -> dH c (elementwise) -> dX partial c -> all-reduce c;
//             then the GEMMs that need no communication (dW2, dW1) and the column sums hide the all-reduces.
// The all-reduces run on NCCL (a sum needs SMs; the copy-engine transport applies to gathers only), so the
// overlapped GEMMs use the Options::gemm_sms cap that leaves NCCL's blocks room (see resolve_gemm_sms).
#include <fmt/core.h>

#include <algorithm>

#include "parallax/gemm.hpp"
#include "parallax/tp.hpp"
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

TensorParallelMLP::TensorParallelMLP(Communicator& comm, std::int64_t k, std::int64_t hidden, std::int64_t n,
                                     Options options)
    : comm_(comm), k_(k), hidden_(hidden), n_(n), options_(std::move(options)) {
  PX_REQUIRE(k >= 1 && k <= INT32_MAX, "k", fmt::format("must be in [1, 2^31) (got {})", k));
  PX_REQUIRE(hidden >= 1 && hidden <= INT32_MAX, "hidden", fmt::format("must be in [1, 2^31) (got {})", hidden));
  PX_REQUIRE(n >= 1 && n <= INT32_MAX, "n", fmt::format("must be in [1, 2^31) (got {})", n));
  validate(options_);
  shard_ = plan_split(hidden, comm.size())[comm.rank()];
  // plan_split hands the remainder to the first ranks, so rank 0 — the one that adds b2 — always owns at
  // least one hidden unit when hidden >= 1 (the row layer's "rank 0 owns no rows" case cannot happen here).
}

TensorParallelMLP::~TensorParallelMLP() = default;

void TensorParallelMLP::ensure_workspace(std::int64_t t, bool backward, bool need_pre) {
  const std::size_t need = static_cast<std::size_t>(t * shard_.size);
  if (need == 0) return;
  // Reallocation frees the old buffers (cudaFree waits for the device), exactly like the column layer's
  // gather buffers: only when t grows past every earlier call.
  if (act_.size() < need) act_ = DeviceBuffer<__nv_bfloat16>(need);
  if (backward && grad_.size() < need) grad_ = DeviceBuffer<__nv_bfloat16>(need);
  if (need_pre && pre_.size() < need) pre_ = DeviceBuffer<__nv_bfloat16>(need);
}

void TensorParallelMLP::forward(const __nv_bfloat16* x, std::int64_t t, const __nv_bfloat16* w1_shard,
                                const float* b1_shard, const __nv_bfloat16* w2_shard, const float* b2,
                                __nv_bfloat16* y, cudaStream_t stream, __nv_bfloat16* h_shard) {
  check_t(t);
  require_pointer(x, "x");
  require_pointer(y, "y");
  const std::int64_t hr = shard_.size;
  if (hr > 0) {
    require_pointer(w1_shard, "w1_shard");
    require_pointer(w2_shard, "w2_shard");
  }
  const int P = comm_.size();
  if (options_.check_shapes && P > 1) {
    const std::int64_t shape[] = {t, k_, hidden_, n_, options_.chunks,
                                  static_cast<std::int64_t>(options_.chunk_schedule)};
    comm_.require_same("MLP forward shape [t, k, hidden, n, chunks, chunk schedule]", shape);
  }
  PX_CUDA_CHECK(cudaSetDevice(comm_.device()));
  if (hr > 0) ensure_workspace(t, false, false);
  const float* my_b2 = comm_.rank() == 0 ? b2 : nullptr;  // the bias belongs to the sum once
  const int sms = gemm_sms_for(comm_, options_, true);
  cudaStream_t cs = P > 1 ? begin_comm(comm_, options_, stream, ready_) : stream;
  // One rank has nothing to overlap: its chunks stay on `stream`.
  if (!compute_) compute_ = std::make_unique<detail::ComputeStreams>();
  compute_->fork(stream, options_.overlap && P > 1 ? options_.compute_streams : 1);
  const auto row_chunks = plan_row_chunks(t, options_.chunks, options_.chunk_schedule);
  for (std::size_t c = 0; c < row_chunks.size(); ++c) {
    const Split& rows = row_chunks[c];
    cudaStream_t gs = compute_->at(c);  // this chunk's GEMM stream
    __nv_bfloat16* y_rows = y + rows.offset * n_;
    if (hr > 0) {
      __nv_bfloat16* a_rows = act_.data() + rows.offset * hr;
      const __nv_bfloat16* x_rows = x + rows.offset * k_;
      if (h_shard == nullptr) {
        // A_r = gelu(X W1_r + b1_r) straight out of the fp32 accumulator (one rounding, no H in memory).
        run_gemm(options_, gs, rows.size, hr, k_, Op::kN, x_rows, k_, Op::kN, w1_shard, hr, DType::kBF16,
                 a_rows, hr, b1_shard, Epilogue::kGelu, sms);
      } else {
        // Training: keep H_r for the backward; the GELU reads it back (memory-bound, ~1/20 of the GEMM at
        // k = 8192: 4 bytes moved per element against 2k flops).
        __nv_bfloat16* h_rows = h_shard + rows.offset * hr;
        run_gemm(options_, gs, rows.size, hr, k_, Op::kN, x_rows, k_, Op::kN, w1_shard, hr, DType::kBF16,
                 h_rows, hr, b1_shard, Epilogue::kNone, sms);
        detail::gelu_forward(h_rows, a_rows, hr, rows.size, hr, gs);
      }
      // Y_r = A_r W2_r (+ b2 on rank 0): the row half's partial product.
      run_gemm(options_, gs, rows.size, n_, hr, Op::kN, a_rows, hr, Op::kN, w2_shard, n_, DType::kBF16, y_rows,
               n_, my_b2, Epilogue::kNone, sms);
    } else {
      // No hidden units here (hidden < P; never rank 0): this rank's partial sum is zero.
      PX_CUDA_CHECK(cudaMemsetAsync(y_rows, 0, rows.size * n_ * kBf16, gs));
    }
    if (P > 1) {
      hand_over(options_, gs, cs, ready_);
      comm_.all_reduce(y_rows, y_rows, static_cast<std::size_t>(rows.size * n_), DType::kBF16, cs);
    }
  }
  compute_->join();
  if (P > 1) end_comm(options_, stream, cs, done_);
}

void TensorParallelMLP::backward(const __nv_bfloat16* x, const __nv_bfloat16* dy, std::int64_t t,
                                 const __nv_bfloat16* w1_shard, const float* b1_shard,
                                 const __nv_bfloat16* w2_shard, const __nv_bfloat16* h_shard, __nv_bfloat16* dx,
                                 float* dw1_shard, float* dw2_shard, cudaStream_t stream, float* db1_shard,
                                 float* db2) {
  check_t(t);
  require_pointer(x, "x");
  require_pointer(dy, "dy");
  require_pointer(dx, "dx");
  const std::int64_t hr = shard_.size;
  if (hr > 0) {
    require_pointer(w1_shard, "w1_shard");
    require_pointer(w2_shard, "w2_shard");
    require_pointer(dw1_shard, "dw1_shard");
    require_pointer(dw2_shard, "dw2_shard");
  }
  const int P = comm_.size();
  if (options_.check_shapes && P > 1) {
    const std::int64_t shape[] = {t, k_, hidden_, n_, options_.chunks,
                                  static_cast<std::int64_t>(options_.chunk_schedule)};
    comm_.require_same("MLP backward shape [t, k, hidden, n, chunks, chunk schedule]", shape);
  }
  PX_CUDA_CHECK(cudaSetDevice(comm_.device()));
  const bool recompute = h_shard == nullptr;
  if (hr > 0) ensure_workspace(t, true, recompute);
  const __nv_bfloat16* h = recompute ? pre_.data() : h_shard;  // H_r [t, h_r], leading dimension h_r
  const int sms = gemm_sms_for(comm_, options_, true);
  cudaStream_t cs = P > 1 ? begin_comm(comm_, options_, stream, ready_) : stream;

  // 1. The dX chain, chunk by chunk, each chunk's all-reduce launched as soon as its partial exists.
  for (const Split& rows : plan_row_chunks(t, options_.chunks, options_.chunk_schedule)) {
    __nv_bfloat16* dx_rows = dx + rows.offset * k_;
    if (hr > 0) {
      const __nv_bfloat16* h_rows = h + rows.offset * hr;
      __nv_bfloat16* g_rows = grad_.data() + rows.offset * hr;
      if (recompute)  // H_r = X W1_r + b1_r for these rows (the forward's GEMM again, no epilogue)
        run_gemm(options_, stream, rows.size, hr, k_, Op::kN, x + rows.offset * k_, k_, Op::kN, w1_shard, hr,
                 DType::kBF16, pre_.data() + rows.offset * hr, hr, b1_shard, Epilogue::kNone, sms);
      // dA_r = dY W2_rᵀ (t_c x h_r, inner n): W2_r is stored h_r x n, i.e. op_b = T with ldb = n.
      run_gemm(options_, stream, rows.size, hr, n_, Op::kN, dy + rows.offset * n_, n_, Op::kT, w2_shard, n_,
               DType::kBF16, g_rows, hr, nullptr, Epilogue::kNone, sms);
      // dH_r = dA_r * gelu'(H_r), in place.
      detail::gelu_backward(g_rows, h_rows, g_rows, hr, rows.size, hr, stream);
      // dX partial = dH_r W1_rᵀ (t_c x k, inner h_r): W1_r is stored k x h_r, op_b = T with ldb = h_r.
      run_gemm(options_, stream, rows.size, k_, hr, Op::kN, g_rows, hr, Op::kT, w1_shard, hr, DType::kBF16, dx_rows,
               k_, nullptr, Epilogue::kNone, sms);
    } else {  // a rank without hidden units contributes zeros to the sum
      PX_CUDA_CHECK(cudaMemsetAsync(dx_rows, 0, rows.size * k_ * kBf16, stream));
    }
    if (P > 1) {
      hand_over(options_, stream, cs, ready_);
      comm_.all_reduce(dx_rows, dx_rows, static_cast<std::size_t>(rows.size * k_), DType::kBF16, cs);
    }
  }

  // 2. Communication-free work on `stream` while the comm stream reduces dX.
  if (db2 != nullptr) detail::column_sum(dy, n_, t, n_, db2, stream);  // replicated dY: full db2 on every rank
  if (hr > 0) {
    // A_r = gelu(H_r) again (elementwise; cheaper than keeping A_r alive from the forward).
    detail::gelu_forward(h, act_.data(), hr, t, hr, stream);
    // dW2_r = A_rᵀ dY (h_r x n, inner t): A_r stored t x h_r -> op_a = T, lda = h_r.
    run_gemm(options_, stream, hr, n_, t, Op::kT, act_.data(), hr, Op::kN, dy, n_, DType::kF32, dw2_shard, n_,
             nullptr, Epilogue::kNone, sms);
    // dW1_r = Xᵀ dH_r (k x h_r, inner t): X stored t x k -> op_a = T, lda = k.
    run_gemm(options_, stream, k_, hr, t, Op::kT, x, k_, Op::kN, grad_.data(), hr, DType::kF32, dw1_shard, hr,
             nullptr, Epilogue::kNone, sms);
    if (db1_shard != nullptr) detail::column_sum(grad_.data(), hr, t, hr, db1_shard, stream);  // 1ᵀ dH_r
  }
  if (P > 1) end_comm(options_, stream, cs, done_);
}

}  // namespace parallax::tp
