// Copy-engine all-gather (see ce_gather.hpp for the protocol).
#include "tp/ce_gather.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <cstring>
#include <functional>

#include "tp/stream_memops.hpp"

namespace parallax::tp::detail {

namespace {

constexpr std::size_t kBf16 = sizeof(__nv_bfloat16);
// Per-rank record of the setup exchange (int64 words).
enum Word : int { kOk = 0, kPid, kHost, kDevice, kWs, kPad, kIpcOk, kIpcWs, kIpcPad = kIpcWs + 8, kWords = kIpcPad + 8 };
static_assert(sizeof(cudaIpcMemHandle_t) == 64, "an IPC handle is 64 bytes (8 int64 words)");

std::int64_t host_hash() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return static_cast<std::int64_t>(std::hash<std::string>{}(name) & 0x7fffffffffffffffULL);
}

}  // namespace

CopyEngineGather::CopyEngineGather(Communicator& comm, std::int64_t n, int chunks) : comm_(comm), n_(n) {
  layout_.ranks = comm.size();
  layout_.chunks = chunks;
  col_splits_ = plan_split(n, comm.size());
  const int P = comm.size();
  peer_ws_.assign(P, nullptr);
  peer_pad_.assign(P, nullptr);
  push_.assign(P, nullptr);
  pushed_.resize(P);
  PX_CUDA_CHECK(cudaSetDevice(comm.device()));
  for (int q = 0; q < P; ++q)
    if (q != comm.rank()) {
      PX_CUDA_CHECK(cudaStreamCreateWithFlags(&push_[q], cudaStreamNonBlocking));
      pushed_[q] = std::make_unique<Event>(false);
    }
}

CopyEngineGather::~CopyEngineGather() {
  cudaSetDevice(comm_.device());
  release();
  for (cudaStream_t s : push_)
    if (s) cudaStreamDestroy(s);
}

// Our streams are drained first: after that no copy of ours still targets a peer, and (by the protocol) no
// peer still writes into our workspace — each of its writes was waited for by our unpack stream.
void CopyEngineGather::release() noexcept {
  for (cudaStream_t s : push_)
    if (s) cudaStreamSynchronize(s);
  cudaStreamSynchronize(comm_.stream());
  for (void* p : ipc_opened_) cudaIpcCloseMemHandle(p);
  ipc_opened_.clear();
  std::fill(peer_ws_.begin(), peer_ws_.end(), nullptr);
  std::fill(peer_pad_.begin(), peer_pad_.end(), nullptr);
  workspace_ = {};
  pad_ = {};
  t_cap_ = 0;
}

bool CopyEngineGather::prepare(std::int64_t t, cudaStream_t stream, std::string* why) {
  if (t <= t_cap_) return true;
  const int P = comm_.size(), me = comm_.rank();
  PX_CUDA_CHECK(cudaSetDevice(comm_.device()));
  if (t_cap_ > 0) {
    // Growing: every rank drains, then a barrier (the exchange) before anyone frees what peers write into.
    PX_CUDA_CHECK(cudaStreamSynchronize(stream));
    release();
    const std::int64_t token = 0;
    (void)comm_.exchange("copy-engine gather regrow barrier", std::span<const std::int64_t>(&token, 1));
  }
  // Round the capacity up so slowly growing t does not re-exchange every call.
  const std::int64_t cap = (t + 255) / 256 * 256;
  workspace_ = DeviceBuffer<__nv_bfloat16>(static_cast<std::size_t>(cap * n_));
  pad_ = DeviceBuffer<std::uint32_t>(layout_.slots());
  PX_CUDA_CHECK(cudaMemset(pad_.data(), 0, pad_.bytes()));
  PX_CUDA_CHECK(cudaDeviceSynchronize());
  epoch_ = 0;
  flush_ = parallax::detail::can_flush_remote_writes(comm_.device());

  std::vector<std::int64_t> mine(kWords, 0);
  std::string local_why;
  mine[kOk] = parallax::detail::stream_memops_available() ? 1 : 0;
  if (!mine[kOk]) local_why = "the CUDA driver does not export cuStreamWaitValue32/cuStreamWriteValue32";
  mine[kPid] = static_cast<std::int64_t>(getpid());
  mine[kHost] = host_hash();
  mine[kDevice] = comm_.device();
  mine[kWs] = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(workspace_.data()));
  mine[kPad] = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(pad_.data()));
  cudaIpcMemHandle_t h_ws{}, h_pad{};
  if (cudaIpcGetMemHandle(&h_ws, workspace_.data()) == cudaSuccess &&
      cudaIpcGetMemHandle(&h_pad, pad_.data()) == cudaSuccess) {
    mine[kIpcOk] = 1;
    std::memcpy(&mine[kIpcWs], &h_ws, sizeof(h_ws));
    std::memcpy(&mine[kIpcPad], &h_pad, sizeof(h_pad));
  } else {
    cudaGetLastError();
  }
  const std::vector<std::int64_t> all = comm_.exchange("copy-engine gather setup", mine);

  bool ok = mine[kOk] != 0;
  for (int q = 0; q < P && ok; ++q) {
    if (q == me) continue;
    const std::int64_t* w = all.data() + static_cast<std::size_t>(q) * kWords;
    if (w[kHost] != mine[kHost]) {
      ok = false;
      local_why = fmt::format("rank {} is on another host", q);
    } else if (w[kPid] == mine[kPid]) {  // same process: raw pointers after enabling peer access
      int can = 0;
      PX_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, comm_.device(), static_cast<int>(w[kDevice])));
      if (!can) {
        ok = false;
        local_why = fmt::format("device {} cannot access device {} (no peer access)", comm_.device(), w[kDevice]);
        break;
      }
      const cudaError_t e = cudaDeviceEnablePeerAccess(static_cast<int>(w[kDevice]), 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
      else PX_CUDA_CHECK(e);
      peer_ws_[q] = reinterpret_cast<__nv_bfloat16*>(static_cast<std::uintptr_t>(w[kWs]));
      peer_pad_[q] = reinterpret_cast<std::uint32_t*>(static_cast<std::uintptr_t>(w[kPad]));
    } else if (w[kIpcOk]) {  // another process on this host: CUDA IPC
      cudaIpcMemHandle_t hw{}, hp{};
      std::memcpy(&hw, &w[kIpcWs], sizeof(hw));
      std::memcpy(&hp, &w[kIpcPad], sizeof(hp));
      void* pw = nullptr;
      void* pp = nullptr;
      if (cudaIpcOpenMemHandle(&pw, hw, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
        cudaGetLastError();
        ok = false;
        local_why = fmt::format("cudaIpcOpenMemHandle of rank {}'s workspace failed", q);
        break;
      }
      ipc_opened_.push_back(pw);
      if (cudaIpcOpenMemHandle(&pp, hp, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
        cudaGetLastError();
        ok = false;
        local_why = fmt::format("cudaIpcOpenMemHandle of rank {}'s signal pad failed", q);
        break;
      }
      ipc_opened_.push_back(pp);
      peer_ws_[q] = static_cast<__nv_bfloat16*>(pw);
      peer_pad_[q] = static_cast<std::uint32_t*>(pp);
    } else {
      ok = false;
      local_why = fmt::format("rank {} could not export a CUDA IPC handle", q);
    }
  }
  // Everyone must agree, or one rank would push while its peer waits in an NCCL all-gather.
  const std::int64_t verdict[] = {ok ? 1 : 0};
  const std::vector<std::int64_t> verdicts = comm_.exchange("copy-engine gather verdict", verdict);
  int first_bad = -1;
  for (int q = 0; q < P; ++q)
    if (!verdicts[q] && first_bad < 0) first_bad = q;
  if (first_bad >= 0) {
    if (why)
      *why = first_bad == me ? fmt::format("rank {}: {}", me, local_why)
                             : fmt::format("rank {} cannot use the copy engines", first_bad);
    release();
    return false;
  }
  t_cap_ = cap;
  return true;
}

void CopyEngineGather::begin(cudaStream_t stream, bool overlap) {
  epoch_ = next_epoch(epoch_);
  const int P = comm_.size(), me = comm_.rank();
  cudaStream_t unpack_stream = overlap ? comm_.stream() : stream;
  if (overlap) {
    // The unpack stream writes Y: it starts after everything the caller queued before this call.
    ready_.record(stream);
    PX_CUDA_CHECK(cudaStreamWaitEvent(unpack_stream, ready_, 0));
  }
  // "My workspace is free for call epoch_": after the previous call's unpack (same stream, stream order).
  for (int q = 0; q < P; ++q)
    if (q != me) parallax::detail::stream_write(unpack_stream, peer_pad_[q] + layout_.ready(me), epoch_);
}

void CopyEngineGather::after_gemm(const Split& rows, int chunk, const Split& shard, __nv_bfloat16* y, bool overlap,
                                  cudaStream_t gemm_stream) {
  const int P = comm_.size(), me = comm_.rank();
  // Chunk `chunk`'s GEMM is queued on gemm_stream before this point; only it gates the pushes (the other
  // compute stream's GEMM, writing other rows, does not). One event serves every chunk: each wait below
  // captures the record made just before it.
  if (overlap) ready_.record(gemm_stream);
  for (int q = 0; q < P; ++q) {
    if (q == me) continue;
    cudaStream_t s = overlap ? push_[q] : gemm_stream;
    if (overlap) PX_CUDA_CHECK(cudaStreamWaitEvent(s, ready_, 0));
    // WAR: peer q's workspace is free once q announced this epoch (its own pad entry lives in OUR pad).
    if (chunk == 0) parallax::detail::stream_wait_geq(s, pad_.data() + layout_.ready(q), epoch_, false);
    if (shard.size > 0) {
      const std::int64_t off = rows.offset * n_ + shard.offset;
      PX_CUDA_CHECK(cudaMemcpy2DAsync(peer_ws_[q] + off, n_ * kBf16, y + off, n_ * kBf16, shard.size * kBf16,
                                      rows.size, cudaMemcpyDefault, s));
    }
    // RAW: flag written after the copy (the write carries a fence), even for an empty shard.
    parallax::detail::stream_write(s, peer_pad_[q] + layout_.data(chunk, me), epoch_);
  }
}

void CopyEngineGather::unpack(const std::vector<Split>& row_chunks, __nv_bfloat16* y, bool overlap,
                              cudaStream_t stream) {
  const int P = comm_.size(), me = comm_.rank();
  cudaStream_t s = overlap ? comm_.stream() : stream;
  for (std::size_t c = 0; c < row_chunks.size(); ++c) {
    const Split& rows = row_chunks[c];
    for (int q = 0; q < P; ++q) {
      if (q == me) continue;
      parallax::detail::stream_wait_geq(s, pad_.data() + layout_.data(static_cast<int>(c), q), epoch_, flush_);
      if (col_splits_[q].size == 0) continue;
      const std::int64_t off = rows.offset * n_ + col_splits_[q].offset;
      PX_CUDA_CHECK(cudaMemcpy2DAsync(y + off, n_ * kBf16, workspace_.data() + off, n_ * kBf16,
                                      col_splits_[q].size * kBf16, rows.size, cudaMemcpyDeviceToDevice, s));
    }
  }
  if (!overlap) return;
  // The caller's stream waits for the pushes (they read Y's own columns) and the unpacks (they write Y).
  for (int q = 0; q < P; ++q) {
    if (q == me) continue;
    pushed_[q]->record(push_[q]);
    PX_CUDA_CHECK(cudaStreamWaitEvent(stream, *pushed_[q], 0));
  }
  done_.record(s);
  PX_CUDA_CHECK(cudaStreamWaitEvent(stream, done_, 0));
}

}  // namespace parallax::tp::detail
