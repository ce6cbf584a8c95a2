// Host helpers shared by the tensor-parallel layers (tp_linear.cpp, tp_mlp.cpp): one bf16 GEMM through
// parallax::gemm, argument checks, and the event hand-offs between the compute stream and the comm stream.
// Header-only (inline): internal to src/tp, not part of the public API.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <fmt/core.h>

#include <cstdint>

#include "parallax/comm.hpp"
#include "parallax/core.hpp"
#include "parallax/gemm.hpp"
#include "parallax/tp.hpp"

namespace parallax::tp::detail {

inline constexpr std::size_t kBf16 = sizeof(__nv_bfloat16);

// One bf16 GEMM through parallax::gemm. m/n/k are op(A) m x k, op(B) k x n.
inline void run_gemm(const Options& o, cudaStream_t stream, std::int64_t m, std::int64_t n, std::int64_t k, Op op_a,
              const void* a, std::int64_t lda, Op op_b, const void* b, std::int64_t ldb, DType c_type, void* c,
              std::int64_t ldc, const float* bias = nullptr, Epilogue epi = Epilogue::kNone, int max_sms = 0) {
  GemmArgs g;
  g.m = static_cast<int>(m);
  g.n = static_cast<int>(n);
  g.k = static_cast<int>(k);
  g.op_a = op_a;
  g.op_b = op_b;
  g.a_type = g.b_type = DType::kBF16;
  g.c_type = c_type;
  g.a = a;
  g.lda = lda;
  g.b = b;
  g.ldb = ldb;
  g.c = c;
  g.ldc = ldc;
  g.bias = bias;
  g.epilogue = epi;
  g.max_sms = max_sms;
  gemm(g, stream, o.gemm);
}

inline int sm_count(int device) {
  int sms = 0;
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

// GemmArgs::max_sms for a GEMM of this layer; `nccl_overlaps`: an NCCL collective may run next to it.
inline int gemm_sms_for(const Communicator& comm, const Options& o, bool nccl_overlaps) {
  return resolve_gemm_sms(o.gemm_sms, sm_count(comm.device()), comm.config().max_ctas,
                          nccl_overlaps && o.overlap && comm.size() > 1);
}

inline void require_pointer(const void* p, const char* name) {
  PX_REQUIRE(p != nullptr, name, "must not be null");
}

inline void check_t(std::int64_t t) {
  PX_REQUIRE(t >= 1 && t <= INT32_MAX, "t", fmt::format("must be in [1, 2^31) (got {})", t));
}

// The comm stream starts after everything already queued on `stream` (inputs written, outputs free).
inline cudaStream_t begin_comm(Communicator& comm, const Options& o, cudaStream_t stream, Event& ready) {
  if (!o.overlap) return stream;
  ready.record(stream);
  PX_CUDA_CHECK(cudaStreamWaitEvent(comm.stream(), ready, 0));
  return comm.stream();
}

// Hands the comm stream's work back to `stream` (no host synchronization).
inline void end_comm(const Options& o, cudaStream_t stream, cudaStream_t comm_stream, Event& done) {
  if (!o.overlap) return;
  done.record(comm_stream);
  PX_CUDA_CHECK(cudaStreamWaitEvent(stream, done, 0));
}

// After the GEMM of a chunk on `stream`, the comm stream may start on it.
inline void hand_over(const Options& o, cudaStream_t stream, cudaStream_t comm_stream, Event& ready) {
  if (!o.overlap) return;
  ready.record(stream);
  PX_CUDA_CHECK(cudaStreamWaitEvent(comm_stream, ready, 0));
}

}  // namespace parallax::tp::detail
