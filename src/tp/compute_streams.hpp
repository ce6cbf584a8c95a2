// The compute streams of a chunked forward (tp::Options::compute_streams).
//
// Why more than one: the GEMM of a row chunk is a persistent kernel (or a cuBLAS grid) whose last wave
// leaves part of the GPU idle while its slowest blocks finish. On ONE stream the next chunk's GEMM cannot
// start until every block of this one has exited, so each chunk pays that tail; the whole layer as one GEMM
// pays it once (measured on 2xH200: ~650 TFLOP/s for the 2048-row chunks against ~760 for the whole layer).
// With chunk c on stream c % S, chunk c+1's GEMM is already queued on another stream when chunk c's blocks
// start to retire, and the block scheduler hands it each SM as it frees up. Chunk c+2 shares chunk c's
// stream, so at most two consecutive chunks' GEMMs are in flight and they never compete for the same tile.
//
// Stream 0 is the caller's stream itself (no fork needed for it); streams 1..S-1 are owned here, created on
// the current device at first use and kept for the layer's lifetime. fork() makes them wait (by an event) for
// everything already queued on the caller's stream: the inputs are written and the outputs free. join()
// makes the caller's stream wait for them: after it, every chunk's GEMM is ordered before what the caller
// queues next. Neither blocks the host. With count = 1 (or the sequential baseline) at(c) is the caller's
// stream for every chunk and fork/join enqueue nothing.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "parallax/core.hpp"

namespace parallax::tp::detail {

class ComputeStreams {
 public:
  ComputeStreams() = default;
  ComputeStreams(const ComputeStreams&) = delete;
  ComputeStreams& operator=(const ComputeStreams&) = delete;

  // Starts a call: `count` streams (1 = the caller's only), the extra ones ordered after `stream`'s work.
  void fork(cudaStream_t stream, int count);
  // The stream that runs chunk `chunk`'s GEMMs in the current call.
  cudaStream_t at(std::size_t chunk) const noexcept;
  // The caller's stream waits for the extra streams' work (no-op for count = 1).
  void join();
  int count() const noexcept { return count_; }

 private:
  cudaStream_t caller_ = nullptr;
  int count_ = 1;
  std::vector<std::unique_ptr<Stream>> extra_;  // streams 1..S-1, grown on demand
  std::vector<std::unique_ptr<Event>> done_;    // one per extra stream, recorded by join()
  std::unique_ptr<Event> forked_;               // recorded on the caller's stream by fork()
};

}  // namespace parallax::tp::detail
