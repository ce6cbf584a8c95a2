// NCCL communication: an RAII communicator, two bootstraps, and the arithmetic the benchmarks report.
//
// Bootstraps (pick by how the program was launched):
//   * one process, all local GPUs: Communicator::create_local(n) starts one host thread per GPU, each calling
//     ncclCommInitRank with a shared ncclUniqueId. We chose one thread per rank over ncclCommInitAll + group
//     calls because every later collective must also be issued per rank: NCCL allows one ncclGroupStart
//     nesting per thread, and a thread per rank lets each rank run its own streams and GEMMs exactly like an
//     MPI rank would, so the TP code is the same in both modes. The caller then drives rank r from its own
//     thread (see run_local_ranks()).
//   * `mpirun -np N`: Communicator::from_mpi() — rank 0 creates the ncclUniqueId, MPI_Bcast carries it, and
//     the local rank (OMPI_COMM_WORLD_LOCAL_RANK, ...) picks the GPU. Compiled out without MPI (throws Error).
//
// NCCL_NVLS_ENABLE: NVLink SHARP (multicast) must stay off on the shared H200 machines; both bootstraps set
// NCCL_NVLS_ENABLE=0 when the variable is unset (an explicit setting is respected).
//
// Failure without hangs: every NCCL call is checked (Error naming the call), and wait() polls the stream
// together with ncclCommGetAsyncError; after `timeout` it aborts the communicator (ncclCommAbort) and throws
// an Error naming the operation, instead of blocking forever on a peer that never arrives.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "parallax/gemm.hpp"

namespace parallax {

[[noreturn]] void throw_nccl_error(ncclResult_t status, const char* call, const char* file, int line);

#define PX_NCCL_CHECK(call)                                                              \
  do {                                                                                   \
    const ncclResult_t px_nccl_status_ = (call);                                         \
    if (px_nccl_status_ != ncclSuccess && px_nccl_status_ != ncclInProgress)             \
      ::parallax::throw_nccl_error(px_nccl_status_, #call, __FILE__, __LINE__);          \
  } while (0)

// ---- split planning -------------------------------------------------------------------------------------
// `total` items over `parts` ranks: the first total % parts ranks get one item more (sizes differ by at most
// one, offsets are the prefix sums). Throws InvalidArgument for total < 0 or parts < 1. A rank may get 0.
struct Split {
  std::int64_t offset = 0;
  std::int64_t size = 0;
};
std::vector<Split> plan_split(std::int64_t total, int parts);
// The largest part (the padded size used when a collective needs equal counts).
std::int64_t max_split(std::int64_t total, int parts);

// ---- collectives and their bandwidth arithmetic ---------------------------------------------------------
enum class Collective : int { kBroadcast = 0, kReduce, kAllReduce, kAllGather, kReduceScatter };
std::string_view collective_name(Collective op);  // "broadcast", "reduce", "all-reduce", ...
// Accepts the names above; throws InvalidArgument("op", ...) listing them.
Collective parse_collective(std::string_view text);
std::vector<Collective> all_collectives();

// nccl-tests conventions (their doc/PERFORMANCE.md). `bytes` is the size the table reports:
//   all-reduce / broadcast / reduce: the buffer size; all-gather: the gathered (output) size;
//   reduce-scatter: the input size (= nranks * output). algbw = bytes / time.
// busbw = algbw * factor, the factor making busbw comparable with the link bandwidth for any rank count:
//   all-reduce 2(n-1)/n (a reduce-scatter then an all-gather, each moving (n-1)/n of the data per rank)
//   all-gather, reduce-scatter (n-1)/n;  broadcast, reduce 1.
double bus_bandwidth_factor(Collective op, int nranks);
// GB/s (1e9 bytes per second). Throws InvalidArgument for seconds <= 0 or nranks < 1.
double algorithm_bandwidth_gbs(std::size_t bytes, double seconds);
double bus_bandwidth_gbs(Collective op, int nranks, std::size_t bytes, double seconds);

// ---- launch environment ---------------------------------------------------------------------------------
// Rank / size / local rank as set by the launcher. Recognised, in this order:
//   OpenMPI: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
//   PMIx / Slurm: PMIX_RANK + SLURM_NTASKS/SLURM_LOCALID;  MPICH / Hydra: PMI_RANK, PMI_SIZE, MPI_LOCALRANKID
//   torchrun-style: RANK, WORLD_SIZE, LOCAL_RANK
// Returns nullopt when none is set. Throws InvalidArgument("env", ...) naming the variable when one is set
// but malformed (not an integer, rank >= size, negative, ...).
struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string source;  // "OpenMPI", "Slurm", "MPICH", "torchrun"
};
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
std::optional<LaunchEnv> parse_launch_env(const EnvLookup& lookup);
std::optional<LaunchEnv> parse_launch_env();  // from the process environment
// Sets NCCL_NVLS_ENABLE=0 unless it is already set; returns the value in effect.
std::string ensure_nvls_disabled();
// Whether this build has the mpirun bootstrap.
bool mpi_available() noexcept;

ncclDataType_t nccl_type(DType t);

// ---- the communicator -----------------------------------------------------------------------------------
// NCCL configuration (ncclConfig_t) a communicator is created with. 0 keeps NCCL's default.
//   max_ctas / min_ctas: bounds on the thread blocks (channels) NCCL's kernels use. A GEMM that overlaps a
//   collective should leave at least max_ctas SMs free (tp::Options::gemm_sms = -1 does exactly that), or
//   the collective's blocks queue behind the GEMM's and the "overlap" serializes.
struct CommConfig {
  int min_ctas = 0;
  int max_ctas = 0;
};
// Throws InvalidArgument("min_ctas" / "max_ctas", ...) for negative values, values above 64 (NCCL's
// MAXCHANNELS) or min_ctas > max_ctas (when both are set).
void validate(const CommConfig& config);

class Communicator {
 public:
  // Rank `rank` of `nranks` on CUDA device `device`, joining the clique named by `id`. Makes `device`
  // current on the calling thread. Creates its own non-blocking communication stream.
  Communicator(const ncclUniqueId& id, int rank, int nranks, int device, CommConfig config = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  static ncclUniqueId make_unique_id();
  // n ranks on devices 0..n-1 of this process (one init thread per GPU; see above).
  static std::vector<std::unique_ptr<Communicator>> create_local(int ngpus, CommConfig config = {});
  // One rank per MPI process; the local rank picks the device. Calls MPI_Init if nobody did yet.
  static std::unique_ptr<Communicator> from_mpi(CommConfig config = {});

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return nranks_; }
  int device() const noexcept { return device_; }
  ncclComm_t get() const noexcept { return comm_; }
  cudaStream_t stream() const noexcept { return stream_; }
  const CommConfig& config() const noexcept { return config_; }

  // Asynchronous collectives on `stream` (nullptr: the communicator's own stream). Counts are elements of
  // `type`. All ranks must call them in the same order with the same counts.
  void all_reduce(const void* send, void* recv, std::size_t count, DType type, cudaStream_t stream = nullptr,
                  ncclRedOp_t op = ncclSum);
  // recv holds size() * send_count elements, rank r's block at r * send_count.
  void all_gather(const void* send, void* recv, std::size_t send_count, DType type, cudaStream_t stream = nullptr);
  // send holds size() * recv_count elements; rank r gets the reduction of block r.
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type,
                      cudaStream_t stream = nullptr, ncclRedOp_t op = ncclSum);
  void broadcast(const void* send, void* recv, std::size_t count, DType type, int root,
                 cudaStream_t stream = nullptr);
  void reduce(const void* send, void* recv, std::size_t count, DType type, int root,
              cudaStream_t stream = nullptr, ncclRedOp_t op = ncclSum);

  // Blocks until `stream` is idle, polling ncclCommGetAsyncError. On an asynchronous NCCL error or when
  // `timeout` passes, aborts the communicator and throws Error("<operation>: ..."). The communicator is
  // unusable afterwards (aborted() is true).
  void wait(cudaStream_t stream, std::string_view operation,
            std::chrono::milliseconds timeout = std::chrono::seconds(60));
  bool aborted() const noexcept { return aborted_; }
  // Tears the communicator down without waiting for peers (ncclCommAbort); idempotent.
  void abort() noexcept;

  // Metadata exchange before collectives: every rank passes its `values` (same length on all ranks, e.g. a
  // shape); they are all-gathered (int64, a few bytes) and compared. On any difference EVERY rank throws
  // InvalidArgument(what, "differs across ranks: rank 0 has [...], rank 1 has [...]") — no rank is left
  // waiting in a later collective with mismatched counts.
  void require_same(std::string_view what, std::span<const std::int64_t> values);

  // Host-synchronizing all-gather of a few int64 per rank (same count on every rank): returns size() *
  // values.size() values, rank r's at r * values.size(). For one-time setup (peer pointers, IPC handles,
  // capability flags); it blocks the calling thread until every rank contributed (timeout as wait()).
  std::vector<std::int64_t> exchange(std::string_view what, std::span<const std::int64_t> values);
 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int rank_ = 0;
  int nranks_ = 1;
  int device_ = 0;
  bool aborted_ = false;
  CommConfig config_;
  cudaStream_t pick(cudaStream_t s) const noexcept { return s ? s : stream_; }
};

// Runs fn(comm) for every local communicator, each on its own thread with that rank's device current;
// rethrows the first exception (after all threads joined). A rank that throws while others wait in a
// collective would hang them: fn should end with comm.wait(...) so timeouts apply.
void run_local_ranks(std::span<const std::unique_ptr<Communicator>> comms,
                     const std::function<void(Communicator&)>& fn);

}  // namespace parallax
