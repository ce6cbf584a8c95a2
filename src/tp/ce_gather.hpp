// Copy-engine all-gather of the column-parallel forward (tp::Transport::kCopyEngine).
//
// Why: the parallax GEMM (level 13) is persistent, one ~200 KB-smem block per SM, so an NCCL all-gather
// kernel cannot get an SM until the GEMM ends and "overlap" serializes. The copy engines (DMA units that
// move cudaMemcpy traffic over NVLink) need no SM at all: the GEMM keeps the whole GPU while chunk c travels.
//
// Data path per row chunk c on rank r (shard columns S_r of Y):
//   1. compute stream c % S (ComputeStreams; S = Options::compute_streams): the GEMM writes Y[c, S_r] straight
//      into the caller's Y (ldc = n). The event that lets the pushes start is recorded on THAT stream, so a
//      chunk's pushes wait for its own GEMM only, while the next chunk's GEMM (on the other stream) may
//      already be filling the SMs this one's tail leaves idle.
//   2. push stream q (one per peer, so the peers' copies use different copy engines): a 2-D copy of
//      Y[c, S_r] into peer q's receive workspace W_q[c, S_r], then flag data(c, r) = epoch in q's signal pad.
//   3. unpack stream (the communicator's stream): for every peer q, wait for data(c, q) = epoch in r's own
//      pad, then a local 2-D copy W_r[c, S_q] -> Y[c, S_q].
// Receiver side: peers push into a persistent workspace [t_cap x n], not into Y, because Y's address
// changes per call and telling the peers a new address needs a host round trip per call (or an IPC
// registration, milliseconds). The price is one local copy of the (P-1)/P peer columns (HBM, ~0.15 ms for
// 8192 x 28672 bf16 at ~3 TB/s), itself done by a copy engine and overlapped with the next chunk's GEMM;
// only the last chunk's copy is exposed. The workspace has Y's full width so sender and receiver use the
// same offsets (this rank's own columns of it are never written: 1/P of it is slack, for simpler copies).
//
// Ordering across GPUs without the host: a per-call epoch E (next_epoch) and the flags of SignalPadLayout.
//   * WAR: at the start of call E, rank q writes ready(q) = E into every peer's pad, on its unpack stream,
//     i.e. after its unpack of call E-1 has drained its workspace. Rank r's push stream to q waits for
//     ready(q) >= E in r's own (local) pad before its first copy into q's workspace.
//   * RAW: the push stream writes data(c, r) = E after the copy (stream order + the write's memory fence
//     make the data visible first); q's unpack waits for it (with CU_STREAM_WAIT_VALUE_FLUSH where the
//     device supports it).
//   * No deadlock through shared hardware queues: every rank enqueues in the same order — ready writes,
//     then per chunk (GEMM, pushes), then all unpack waits — and each wait is satisfied by an operation a
//     peer enqueued earlier in that order, so no cycle of waits can form even if streams share a channel.
//     Unpack waits go last so a queue collision can delay an unpack, never a GEMM. The extra compute
//     streams change nothing here: a GEMM waits on no flag, only on the fork event of its own rank.
// Setup (first call, or when t grows): a host-synchronizing exchange through the communicator of
// {pid, host, device, workspace and pad pointers, CUDA IPC handles}. Same process: peer access is enabled
// and raw pointers are used; other process on the same host: cudaIpcOpenMemHandle; otherwise (or without
// peer access / stream memops) the gather is unavailable and every rank agrees on that (a second exchange).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "parallax/comm.hpp"
#include "parallax/core.hpp"
#include "parallax/tp.hpp"
#include "tp/compute_streams.hpp"

namespace parallax::tp::detail {

class CopyEngineGather {
 public:
  CopyEngineGather(Communicator& comm, std::int64_t n, int chunks);
  ~CopyEngineGather();
  CopyEngineGather(const CopyEngineGather&) = delete;
  CopyEngineGather& operator=(const CopyEngineGather&) = delete;

  // Collective: all ranks call it with the same t. Makes the workspace hold >= t rows (re-exchanging the
  // pointers when it grows; synchronizes the host then). Returns false — on every rank alike — when the
  // copy-engine path is unavailable; `why` then says which rank could not and why.
  bool prepare(std::int64_t t, cudaStream_t stream, std::string* why);

  // Enqueues the gather of one call over `row_chunks` (plan_row_chunks; at most the constructor's `chunks`,
  // identical on every rank). `gemm(rows, y_rows_own_cols, s)` enqueues chunk `rows`' GEMM on stream `s`
  // (= compute.at(chunk), already forked from `stream` by the caller, who joins it afterwards) writing this
  // rank's columns of Y's rows. overlap = false: everything on `stream` (the baseline; compute then holds
  // `stream` alone).
  template <typename GemmFn>
  void run(const std::vector<Split>& row_chunks, __nv_bfloat16* y, const Split& shard, bool overlap,
           cudaStream_t stream, const ComputeStreams& compute, GemmFn&& gemm);

 private:
  void release() noexcept;
  void begin(cudaStream_t stream, bool overlap);
  void after_gemm(const Split& rows, int chunk, const Split& shard, __nv_bfloat16* y, bool overlap,
                  cudaStream_t gemm_stream);
  void unpack(const std::vector<Split>& row_chunks, __nv_bfloat16* y, bool overlap, cudaStream_t stream);

  Communicator& comm_;
  std::int64_t n_;
  SignalPadLayout layout_;
  std::int64_t t_cap_ = 0;
  std::uint32_t epoch_ = 0;
  bool flush_ = false;
  DeviceBuffer<__nv_bfloat16> workspace_;  // [t_cap, n]
  DeviceBuffer<std::uint32_t> pad_;        // layout_.slots()
  std::vector<__nv_bfloat16*> peer_ws_;    // per rank (own entry unused)
  std::vector<std::uint32_t*> peer_pad_;
  std::vector<void*> ipc_opened_;          // pointers from cudaIpcOpenMemHandle to close
  std::vector<cudaStream_t> push_;         // per rank (own entry null)
  std::vector<Split> col_splits_;
  Event ready_{false}, done_{false};
  std::vector<std::unique_ptr<Event>> pushed_;  // per rank (own entry null)
};

template <typename GemmFn>
void CopyEngineGather::run(const std::vector<Split>& row_chunks, __nv_bfloat16* y, const Split& shard,
                           bool overlap, cudaStream_t stream, const ComputeStreams& compute, GemmFn&& gemm) {
  PX_REQUIRE(!row_chunks.empty() && static_cast<int>(row_chunks.size()) <= layout_.chunks, "row_chunks",
             "must hold 1 to the signal pad's chunk count of chunks");
  begin(stream, overlap);
  for (std::size_t c = 0; c < row_chunks.size(); ++c) {
    const Split& rows = row_chunks[c];
    cudaStream_t gs = overlap ? compute.at(c) : stream;
    if (shard.size > 0) gemm(rows, y + rows.offset * n_ + shard.offset, gs);
    after_gemm(rows, static_cast<int>(c), shard, y, overlap, gs);
  }
  unpack(row_chunks, y, overlap, stream);
}

}  // namespace parallax::tp::detail
