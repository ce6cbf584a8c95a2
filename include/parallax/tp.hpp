// Tensor-parallel linear layers (Megatron-style) over a parallax::Communicator, with the communication
// overlapped with the GEMMs.
//
// Shapes (row-major, bf16 activations/weights, fp32 accumulation via parallax::gemm):
//   X [t, k], W [k, n], Y = X W + b [t, n]. P = comm.size() ranks; splits come from plan_split (uneven
//   splits allowed: the first n % P ranks own one more column/row).
//
// ColumnParallelLinear: rank r owns the columns split(n)[r] of W and b: W_r [k, n_r].
//   forward : Y_r = X W_r + b_r, then Y is all-gathered so every rank holds the full [t, n] ("output
//             gathered"). The all-gather runs in row chunks: chunk c's GEMM is followed, on the comm stream,
//             by chunk c's all-gather and its scatter into Y's column blocks while chunk c+1's GEMM runs.
//             NCCL needs equal counts, so every rank's block is padded to max_split(n, P) columns.
//   backward: given the full dY [t, n]: dX = sum_r dY_r W_rᵀ (all-reduce), dW_r = Xᵀ dY_r.
//             The dX partial GEMMs go first, chunk by chunk; each chunk's all-reduce starts on the comm stream
//             as soon as its GEMM is done, and the dW GEMM (which needs no communication) runs meanwhile.
//             dY_r and Wᵀ/Xᵀ are read in place through op_a/op_b = T (no transposes are materialized).
// RowParallelLinear: rank r owns the rows split(k)[r] of W: W_r [k_r, n]; its input is X_r = X[:, k_r].
//   forward : Y = all-reduce(X_r W_r) + b (the bias is added by rank 0's GEMM only), chunked and overlapped
//             like the column forward.
//   backward: dX_r = dY W_rᵀ, dW_r = X_rᵀ dY — no communication (dY is replicated).
// TensorParallelMLP: Y = gelu(X W1 + b1) W2 + b2 (the tanh GELU of gemm.hpp), Megatron's pairing of the two:
//   rank r owns the hidden columns split(hidden)[r] = h_r of W1 / b1 and the same rows of W2, so the
//   column half's output A_r = gelu(X W1_r + b1_r) [t, h_r] is exactly the row half's input: no gather in
//   between, ONE all-reduce forward (of the partial Y_r = A_r W2_r) and ONE backward (of dX).
//   forward : per row chunk: H_r = X W1_r + b1_r with the GELU fused into the GEMM epilogue (A_r straight
//             out of the accumulator), Y_r = A_r W2_r (+ b2 on rank 0), all-reduce of Y's chunk on the comm
//             stream while the next chunk's two GEMMs run.
//   backward: per row chunk: dA_r = dY W2_rᵀ, dH_r = dA_r * gelu'(H_r), dX partial = dH_r W1_rᵀ, whose
//             all-reduce starts at once; then, overlapping the all-reduces, A_r = gelu(H_r), dW2_r = A_rᵀ dY,
//             dW1_r = Xᵀ dH_r, db1_r = 1ᵀ dH_r and db2 = 1ᵀ dY (full, every rank, as in the row layer).
//   H_r (the pre-activation) is needed by the backward: either the forward saves it (h_shard; the GELU then
//   runs as a separate elementwise pass, since a GEMM epilogue writes one output) or the backward recomputes
//   it chunk by chunk (one extra GEMM, X W1_r; no memory kept between the passes).
//
// Streams: the caller's `stream` runs the GEMMs (the overlapped forwards spread their row chunks over
// Options::compute_streams streams forked from it, so consecutive chunks' GEMMs overlap their tails); the
// communicator's own stream runs the collectives; events order them. Nothing blocks the host:
// forward/backward return at once, and `stream` is made to wait for the communication and the forked streams
// at the end, so the results are ready in stream order. overlap = false is the sequential baseline: every
// GEMM and collective on `stream`, one after the other.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "parallax/comm.hpp"
#include "parallax/core.hpp"

namespace parallax::tp {

// How the column-parallel forward gathers Y (the all-reduces always use NCCL: a sum needs SMs).
//   kNccl        ncclAllGather per row chunk into a padded buffer, then a 2-D scatter into Y's columns.
//   kCopyEngine  the copy engines push this rank's block of each chunk straight into every peer's receive
//                workspace (cudaMemcpy2DAsync over NVLink: no SM is used, so the GEMM keeps all of them),
//                ordered across GPUs by flags in peer-visible memory (stream memory operations; see
//                src/tp/ce_gather.hpp). Needs every pair of ranks in one host with peer access (one process:
//                cudaDeviceEnablePeerAccess; mpirun: CUDA IPC handles).
//   kAuto        kCopyEngine where every rank can, else kNccl (decided collectively, so all ranks agree).
enum class Transport : int { kNccl = 0, kCopyEngine = 1, kAuto = 2 };
std::string_view transport_name(Transport t);  // "nccl", "copy-engine", "auto"
// Accepts the names above; throws InvalidArgument("transport", ... valid: ...).
Transport parse_transport(std::string_view text);

// How the t rows are cut into Options::chunks row chunks (plan_row_chunks).
//   kUniform  plan_split of the rows: equal chunks (the first t % chunks one row longer).
//   kTapered  linearly decreasing chunk sizes (weights C, C-1, ..., 1), in multiples of kChunkRowAlign rows
//             where t allows: a large first chunk (an efficient GEMM; its communication has the whole rest
//             of the layer to hide behind) and a small last chunk, whose communication is the part no GEMM
//             is left to hide (the exposed tail shrinks ~C/2 times against uniform chunks).
enum class ChunkSchedule : int { kUniform = 0, kTapered = 1 };
std::string_view chunk_schedule_name(ChunkSchedule s);  // "uniform", "tapered"
// Accepts the names above; throws InvalidArgument("chunk_schedule", ... valid: ...).
ChunkSchedule parse_chunk_schedule(std::string_view text);

// Tapered chunks are cut at multiples of this many rows (a multiple of every GEMM tile height parallax and
// cuBLAS use, so no chunk starts a partial row of tiles that a uniform cut would not), unless t is too small
// to give every chunk one such unit; then at single rows.
inline constexpr std::int64_t kChunkRowAlign = 128;

struct Options {
  int chunks = 4;                // row chunks for pipelining (clamped to t)
  bool overlap = true;           // false: the sequential baseline on one stream
  // Forwards with overlap: chunk c's GEMMs run on compute stream c % compute_streams (the caller's stream
  // and compute_streams - 1 streams forked from it by an event, joined back at the end). With one stream
  // every chunk's persistent GEMM drains its last, partly empty wave before the next chunk's GEMM may
  // start; with two, chunk c+1's blocks fill the SMs chunk c's tail leaves idle. 1 = the single-stream
  // pipeline. Ignored when overlap = false (the sequential baseline stays on one stream) and by backwards.
  int compute_streams = 2;
  ChunkSchedule chunk_schedule = ChunkSchedule::kUniform;  // how the rows are cut into chunks
  std::string gemm = "cublas";   // any of gemm_kernel_names()
  bool check_shapes = true;      // metadata exchange (require_same) before the first collective of each call
  Transport transport = Transport::kAuto;  // the column forward's all-gather (see Transport)
  // SMs the layer's GEMMs may occupy (GemmArgs::max_sms): 0 all; > 0 that many; -1 (auto) = all SMs, except
  // while an NCCL collective overlaps the GEMM and the communicator was configured with max_ctas: then
  // SMs - max_ctas, so NCCL's blocks find free SMs instead of queueing behind a persistent GEMM grid.
  int gemm_sms = -1;
};

// Host-side checks of Options; throws InvalidArgument("chunks" / "gemm" / "transport" / "gemm_sms" /
// "compute_streams" / "chunk_schedule", ...).
void validate(const Options& options);

// The GemmArgs::max_sms a layer uses (see Options::gemm_sms). `nccl_overlaps`: an NCCL collective runs
// concurrently with this GEMM; `comm_max_ctas`: the communicator's CommConfig::max_ctas (0: NCCL default).
int resolve_gemm_sms(int gemm_sms, int sm_count, int comm_max_ctas, bool nccl_overlaps);

// Signal pad of the copy-engine gather: one uint32 flag per (slot, source rank) in each rank's device memory.
//   ready(src):       rank src has entered call `epoch` and drained the previous call's data out of its
//                     workspace, so others may write into it (write-after-read safety).
//   data(chunk, src): rank src's block of row chunk `chunk` has fully landed in this rank's workspace.
// Flags carry the call's epoch (1, 2, ...; 0 = never written) and are compared cyclically, exactly like
// CU_STREAM_WAIT_VALUE_GEQ: (int32_t)(flag - epoch) >= 0, so wrap-around after 2^32 calls is harmless.
struct SignalPadLayout {
  int ranks = 1;
  int chunks = 1;
  std::size_t slots() const;                   // flags in one pad
  std::size_t ready(int src) const;            // index of ready(src)
  std::size_t data(int chunk, int src) const;  // index of data(chunk, src)
};
std::uint32_t next_epoch(std::uint32_t epoch);  // epoch + 1, skipping 0 (the never-written value)
bool epoch_reached(std::uint32_t flag, std::uint32_t epoch);

namespace detail {
class CopyEngineGather;
class ComputeStreams;
}

// The row chunks of `t` rows: min(chunks, t) consecutive chunks in order, each >= 1 row, covering [0, t)
// exactly. kUniform: plan_split(t, chunks). kTapered: sizes non-increasing, proportional to C, C-1, ..., 1
// (C = the chunk count), cut at multiples of `align` rows (the last chunk takes the remainder) when t has at
// least C such units, else at single rows. Throws InvalidArgument for t < 1, chunks < 1, align < 1.
std::vector<Split> plan_row_chunks(std::int64_t t, int chunks, ChunkSchedule schedule = ChunkSchedule::kUniform,
                                   std::int64_t align = kChunkRowAlign);

class ColumnParallelLinear {
 public:
  // k, n: the full layer's shape. Throws InvalidArgument for k, n < 1 or bad options.
  ColumnParallelLinear(Communicator& comm, std::int64_t k, std::int64_t n, Options options = {});
  ~ColumnParallelLinear();
  Split shard() const noexcept { return shard_; }  // the columns of W / b / Y this rank owns
  // The gather transport the last forward used (kAuto before the first multi-rank forward).
  Transport transport_in_use() const noexcept { return in_use_; }

  // x [t, k] (replicated), w_shard [k, shard().size], bias_shard (shard().size floats or nullptr),
  // y [t, n] (output, gathered on every rank).
  void forward(const __nv_bfloat16* x, std::int64_t t, const __nv_bfloat16* w_shard, const float* bias_shard,
               __nv_bfloat16* y, cudaStream_t stream);
  // dy [t, n] (replicated), dx [t, k] bf16 (all-reduced), dw_shard [k, shard().size] fp32,
  // db_shard (optional, shard().size floats): db_r[j] = sum over rows of dY[:, shard offset + j], fp32.
  void backward(const __nv_bfloat16* x, const __nv_bfloat16* dy, std::int64_t t, const __nv_bfloat16* w_shard,
                __nv_bfloat16* dx, float* dw_shard, cudaStream_t stream, float* db_shard = nullptr);

 private:
  void forward_nccl(const __nv_bfloat16* x, std::int64_t t, const __nv_bfloat16* w_shard, const float* bias_shard,
                    __nv_bfloat16* y, cudaStream_t stream);
  Communicator& comm_;
  std::int64_t k_, n_, padded_n_;
  Split shard_;
  Options options_;
  Transport in_use_ = Transport::kAuto;
  std::unique_ptr<detail::CopyEngineGather> ce_;
  std::unique_ptr<detail::ComputeStreams> compute_;  // the forward's chunk GEMM streams (Options::compute_streams)
  DeviceBuffer<__nv_bfloat16> local_;     // [t, padded_n] this rank's Y block
  DeviceBuffer<__nv_bfloat16> gathered_;  // [P, t, padded_n] (chunk-major: chunk c's P blocks are contiguous)
  Event ready_{false}, done_{false};
};

class RowParallelLinear {
 public:
  RowParallelLinear(Communicator& comm, std::int64_t k, std::int64_t n, Options options = {});
  ~RowParallelLinear();
  Split shard() const noexcept { return shard_; }  // the rows of W (= columns of X) this rank owns

  // x_shard [t, shard().size], w_shard [shard().size, n], bias (n floats, full, or nullptr), y [t, n].
  void forward(const __nv_bfloat16* x_shard, std::int64_t t, const __nv_bfloat16* w_shard, const float* bias,
               __nv_bfloat16* y, cudaStream_t stream);
  // dy [t, n], dx_shard [t, shard().size] bf16, dw_shard [shard().size, n] fp32, db (optional, n floats):
  // the full bias gradient sum_rows dY, computed identically on EVERY rank (dY is replicated, the bias is
  // not split, and a rank-local copy saves the broadcast an optimizer step would otherwise need).
  void backward(const __nv_bfloat16* x_shard, const __nv_bfloat16* dy, std::int64_t t,
                const __nv_bfloat16* w_shard, __nv_bfloat16* dx_shard, float* dw_shard, cudaStream_t stream,
                float* db = nullptr);

 private:
  Communicator& comm_;
  std::int64_t k_, n_;
  Split shard_;
  Options options_;
  std::unique_ptr<detail::ComputeStreams> compute_;
  Event ready_{false}, done_{false};
};

class TensorParallelMLP {
 public:
  // k: input features, hidden: the inner width (split across ranks; uneven allowed, ranks may own none when
  // hidden < P), n: output features. Throws InvalidArgument for k, hidden, n < 1 or bad options.
  // Options::transport is not used (both collectives are all-reduces, which need NCCL's SMs; see Transport).
  TensorParallelMLP(Communicator& comm, std::int64_t k, std::int64_t hidden, std::int64_t n, Options options = {});
  ~TensorParallelMLP();
  Split shard() const noexcept { return shard_; }  // the hidden units (W1 columns, W2 rows) this rank owns
  std::int64_t k() const noexcept { return k_; }
  std::int64_t hidden() const noexcept { return hidden_; }
  std::int64_t n() const noexcept { return n_; }

  // x [t, k] (replicated), w1_shard [k, h_r], b1_shard (h_r floats or nullptr), w2_shard [h_r, n],
  // b2 (n floats, full, or nullptr; added once, by rank 0), y [t, n] (output, all-reduced on every rank).
  // h_shard: nullptr (inference: GELU fused into the first GEMM's epilogue) or [t, h_r] bf16 where the
  // pre-activation H_r = X W1_r + b1_r is stored for backward (the GELU then is a separate pass).
  void forward(const __nv_bfloat16* x, std::int64_t t, const __nv_bfloat16* w1_shard, const float* b1_shard,
               const __nv_bfloat16* w2_shard, const float* b2, __nv_bfloat16* y, cudaStream_t stream,
               __nv_bfloat16* h_shard = nullptr);
  // dy [t, n] (replicated). h_shard: the forward's saved H_r, or nullptr to recompute it from x, w1_shard and
  // b1_shard. Outputs: dx [t, k] bf16 (all-reduced), dw1_shard [k, h_r] fp32, dw2_shard [h_r, n] fp32,
  // db1_shard (optional, h_r floats), db2 (optional, n floats: the full 1ᵀ dY on every rank).
  void backward(const __nv_bfloat16* x, const __nv_bfloat16* dy, std::int64_t t, const __nv_bfloat16* w1_shard,
                const float* b1_shard, const __nv_bfloat16* w2_shard, const __nv_bfloat16* h_shard,
                __nv_bfloat16* dx, float* dw1_shard, float* dw2_shard, cudaStream_t stream,
                float* db1_shard = nullptr, float* db2 = nullptr);

 private:
  void ensure_workspace(std::int64_t t, bool backward, bool need_pre);
  Communicator& comm_;
  std::int64_t k_, hidden_, n_;
  Split shard_;
  Options options_;
  DeviceBuffer<__nv_bfloat16> act_;   // [t, h_r] A_r (forward: the row half's input; backward: for dW2)
  DeviceBuffer<__nv_bfloat16> grad_;  // [t, h_r] dA_r, turned into dH_r in place (backward)
  DeviceBuffer<__nv_bfloat16> pre_;   // [t, h_r] recomputed H_r (backward without a saved h_shard)
  std::unique_ptr<detail::ComputeStreams> compute_;
  Event ready_{false}, done_{false};
};

}  // namespace parallax::tp
