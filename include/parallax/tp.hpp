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
//
// Streams: the caller's `stream` runs the GEMMs; the communicator's own stream runs the collectives; events
// order them. Nothing blocks the host: forward/backward return at once, and `stream` is made to wait for the
// communication at the end, so the results are ready in stream order. overlap = false is the sequential
// baseline: every GEMM and collective on `stream`, one after the other.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "parallax/comm.hpp"
#include "parallax/core.hpp"

namespace parallax::tp {

struct Options {
  int chunks = 4;                // row chunks for pipelining (clamped to t)
  bool overlap = true;           // false: the sequential baseline on one stream
  std::string gemm = "cublas";   // any of gemm_kernel_names()
  bool check_shapes = true;      // metadata exchange (require_same) before the first collective of each call
};

// Host-side checks of Options; throws InvalidArgument("chunks" / "gemm", ...).
void validate(const Options& options);

// Rows of chunk c of `t` rows split into `chunks` (plan_split of the rows).
std::vector<Split> plan_row_chunks(std::int64_t t, int chunks);

class ColumnParallelLinear {
 public:
  // k, n: the full layer's shape. Throws InvalidArgument for k, n < 1 or bad options.
  ColumnParallelLinear(Communicator& comm, std::int64_t k, std::int64_t n, Options options = {});
  Split shard() const noexcept { return shard_; }  // the columns of W / b / Y this rank owns

  // x [t, k] (replicated), w_shard [k, shard().size], bias_shard (shard().size floats or nullptr),
  // y [t, n] (output, gathered on every rank).
  void forward(const __nv_bfloat16* x, std::int64_t t, const __nv_bfloat16* w_shard, const float* bias_shard,
               __nv_bfloat16* y, cudaStream_t stream);
  // dy [t, n] (replicated), dx [t, k] bf16 (all-reduced), dw_shard [k, shard().size] fp32.
  void backward(const __nv_bfloat16* x, const __nv_bfloat16* dy, std::int64_t t, const __nv_bfloat16* w_shard,
                __nv_bfloat16* dx, float* dw_shard, cudaStream_t stream);

 private:
  Communicator& comm_;
  std::int64_t k_, n_, padded_n_;
  Split shard_;
  Options options_;
  DeviceBuffer<__nv_bfloat16> local_;     // [t, padded_n] this rank's Y block
  DeviceBuffer<__nv_bfloat16> gathered_;  // [P, t, padded_n] (chunk-major: chunk c's P blocks are contiguous)
  Event ready_{false}, done_{false};
};

class RowParallelLinear {
 public:
  RowParallelLinear(Communicator& comm, std::int64_t k, std::int64_t n, Options options = {});
  Split shard() const noexcept { return shard_; }  // the rows of W (= columns of X) this rank owns

  // x_shard [t, shard().size], w_shard [shard().size, n], bias (n floats, full, or nullptr), y [t, n].
  void forward(const __nv_bfloat16* x_shard, std::int64_t t, const __nv_bfloat16* w_shard, const float* bias,
               __nv_bfloat16* y, cudaStream_t stream);
  // dy [t, n], dx_shard [t, shard().size] bf16, dw_shard [shard().size, n] fp32.
  void backward(const __nv_bfloat16* x_shard, const __nv_bfloat16* dy, std::int64_t t,
                const __nv_bfloat16* w_shard, __nv_bfloat16* dx_shard, float* dw_shard, cudaStream_t stream);

 private:
  Communicator& comm_;
  std::int64_t k_, n_;
  Split shard_;
  Options options_;
  Event ready_{false}, done_{false};
};

}  // namespace parallax::tp
