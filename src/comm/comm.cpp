// Communicator, bootstraps and bandwidth arithmetic (see include/parallax/comm.hpp).
#include "parallax/comm.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>

#include "parallax/core.hpp"

#if defined(PARALLAX_HAVE_MPI)
#include <mpi.h>
#endif

namespace parallax {

void throw_nccl_error(ncclResult_t status, const char* call, const char* file, int line) {
  throw Error(fmt::format("NCCL error {} ({}) in {} at {}:{}", static_cast<int>(status), ncclGetErrorString(status),
                          call, file, line),
              call, file, line);
}

// ---- split planning -------------------------------------------------------------------------------------
std::vector<Split> plan_split(std::int64_t total, int parts) {
  PX_REQUIRE(total >= 0, "total", "must be >= 0 (got " + std::to_string(total) + ")");
  PX_REQUIRE(parts >= 1, "parts", "must be >= 1 (got " + std::to_string(parts) + ")");
  std::vector<Split> splits(static_cast<std::size_t>(parts));
  const std::int64_t base = total / parts;
  const std::int64_t extra = total % parts;  // the first `extra` ranks take one more
  std::int64_t offset = 0;
  for (int r = 0; r < parts; ++r) {
    splits[r].offset = offset;
    splits[r].size = base + (r < extra ? 1 : 0);
    offset += splits[r].size;
  }
  return splits;
}

std::int64_t max_split(std::int64_t total, int parts) {
  PX_REQUIRE(total >= 0, "total", "must be >= 0 (got " + std::to_string(total) + ")");
  PX_REQUIRE(parts >= 1, "parts", "must be >= 1 (got " + std::to_string(parts) + ")");
  return (total + parts - 1) / parts;
}

// ---- collectives ----------------------------------------------------------------------------------------
std::string_view collective_name(Collective op) {
  switch (op) {
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduce: return "reduce";
    case Collective::kAllReduce: return "all-reduce";
    case Collective::kAllGather: return "all-gather";
    case Collective::kReduceScatter: return "reduce-scatter";
  }
  return "unknown";
}

std::vector<Collective> all_collectives() {
  return {Collective::kBroadcast, Collective::kReduce, Collective::kAllReduce, Collective::kAllGather,
          Collective::kReduceScatter};
}

Collective parse_collective(std::string_view text) {
  for (Collective op : all_collectives())
    if (text == collective_name(op)) return op;
  throw InvalidArgument("op", fmt::format("unknown collective '{}' (valid: broadcast, reduce, all-reduce, "
                                          "all-gather, reduce-scatter)", text));
}

double bus_bandwidth_factor(Collective op, int nranks) {
  PX_REQUIRE(nranks >= 1, "nranks", "must be >= 1 (got " + std::to_string(nranks) + ")");
  const double n = nranks;
  switch (op) {
    case Collective::kAllReduce: return 2.0 * (n - 1.0) / n;
    case Collective::kAllGather:
    case Collective::kReduceScatter: return (n - 1.0) / n;
    case Collective::kBroadcast:
    case Collective::kReduce: return 1.0;
  }
  throw InvalidArgument("op", "not a Collective enumerator");
}

double algorithm_bandwidth_gbs(std::size_t bytes, double seconds) {
  PX_REQUIRE(seconds > 0, "seconds", fmt::format("must be > 0 (got {})", seconds));
  return static_cast<double>(bytes) / seconds / 1e9;
}

double bus_bandwidth_gbs(Collective op, int nranks, std::size_t bytes, double seconds) {
  return algorithm_bandwidth_gbs(bytes, seconds) * bus_bandwidth_factor(op, nranks);
}

// ---- launch environment ---------------------------------------------------------------------------------
namespace {

int parse_env_int(const EnvLookup& lookup, const char* name, int min_value) {
  const auto text = lookup(name);
  if (!text) throw InvalidArgument("env", fmt::format("{} is not set (its launcher's other variables are)", name));
  int value = 0;
  const char* first = text->data();
  const char* last = first + text->size();
  const auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || ptr != last || text->empty())
    throw InvalidArgument("env", fmt::format("{}='{}' is not an integer", name, *text));
  if (value < min_value)
    throw InvalidArgument("env", fmt::format("{}={} must be >= {}", name, value, min_value));
  return value;
}

struct EnvScheme {
  const char* source;
  const char* rank;
  const char* size;
  const char* local_rank;
};

}  // namespace

std::optional<LaunchEnv> parse_launch_env(const EnvLookup& lookup) {
  static constexpr EnvScheme kSchemes[] = {
      {"OpenMPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"Slurm", "PMIX_RANK", "SLURM_NTASKS", "SLURM_LOCALID"},
      {"MPICH", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
  };
  for (const EnvScheme& s : kSchemes) {
    if (!lookup(s.rank)) continue;
    LaunchEnv env;
    env.source = s.source;
    env.rank = parse_env_int(lookup, s.rank, 0);
    env.world_size = parse_env_int(lookup, s.size, 1);
    env.local_rank = parse_env_int(lookup, s.local_rank, 0);
    if (env.rank >= env.world_size)
      throw InvalidArgument("env", fmt::format("{}={} must be < {}={}", s.rank, env.rank, s.size, env.world_size));
    if (env.local_rank > env.rank)
      throw InvalidArgument("env", fmt::format("{}={} must be <= {}={} (a local rank never exceeds the global rank)",
                                               s.local_rank, env.local_rank, s.rank, env.rank));
    return env;
  }
  return std::nullopt;
}

std::optional<LaunchEnv> parse_launch_env() {
  return parse_launch_env([](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (!v) return std::nullopt;
    return std::string(v);
  });
}

std::string ensure_nvls_disabled() {
  // overwrite = 0: an explicit user setting wins.
  ::setenv("NCCL_NVLS_ENABLE", "0", 0);
  const char* v = std::getenv("NCCL_NVLS_ENABLE");
  return v ? v : "";
}

bool mpi_available() noexcept {
#if defined(PARALLAX_HAVE_MPI)
  return true;
#else
  return false;
#endif
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kF32: return ncclFloat32;
    case DType::kF16: return ncclFloat16;
    case DType::kBF16: return ncclBfloat16;
  }
  throw InvalidArgument("type", "not a DType enumerator");
}

// ---- the communicator -----------------------------------------------------------------------------------
void validate(const CommConfig& c) {
  PX_REQUIRE(c.min_ctas >= 0 && c.min_ctas <= 64, "min_ctas",
             fmt::format("must be in [0, 64], 0 meaning NCCL's default (got {})", c.min_ctas));
  PX_REQUIRE(c.max_ctas >= 0 && c.max_ctas <= 64, "max_ctas",
             fmt::format("must be in [0, 64], 0 meaning NCCL's default (got {})", c.max_ctas));
  PX_REQUIRE(c.min_ctas == 0 || c.max_ctas == 0 || c.min_ctas <= c.max_ctas, "min_ctas",
             fmt::format("must be <= max_ctas (got min_ctas={}, max_ctas={})", c.min_ctas, c.max_ctas));
}

Communicator::Communicator(const ncclUniqueId& id, int rank, int nranks, int device, CommConfig config)
    : rank_(rank), nranks_(nranks), device_(device), config_(config) {
  validate(config);
  PX_REQUIRE(nranks >= 1, "nranks", "must be >= 1 (got " + std::to_string(nranks) + ")");
  PX_REQUIRE(rank >= 0 && rank < nranks, "rank",
             fmt::format("must be in [0, {}) (got {})", nranks, rank));
  const int devices = device_count();
  PX_REQUIRE(device >= 0 && device < devices, "device",
             fmt::format("must be in [0, {}) — the visible CUDA devices (got {})", devices, device));
  ensure_nvls_disabled();
  PX_CUDA_CHECK(cudaSetDevice(device));
  PX_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  // Blocking init (config.blocking stays at its default, 1) so the call returns a ready communicator.
  ncclConfig_t nccl_config = NCCL_CONFIG_INITIALIZER;
  if (config.min_ctas > 0) nccl_config.minCTAs = config.min_ctas;
  if (config.max_ctas > 0) nccl_config.maxCTAs = config.max_ctas;
  const ncclResult_t status = ncclCommInitRankConfig(&comm_, nranks, id, rank, &nccl_config);
  if (status != ncclSuccess) {
    cudaStreamDestroy(stream_);
    throw_nccl_error(status, "ncclCommInitRankConfig", __FILE__, __LINE__);
  }
}

Communicator::~Communicator() {
  // Never throws. An aborted communicator was already torn down by ncclCommAbort.
  if (comm_ && !aborted_) {
    cudaSetDevice(device_);
    ncclCommDestroy(comm_);
  }
  if (stream_) cudaStreamDestroy(stream_);
}

ncclUniqueId Communicator::make_unique_id() {
  ncclUniqueId id;
  PX_NCCL_CHECK(ncclGetUniqueId(&id));
  return id;
}

std::vector<std::unique_ptr<Communicator>> Communicator::create_local(int ngpus, CommConfig config) {
  validate(config);
  const int devices = device_count();
  PX_REQUIRE(ngpus >= 1, "gpus", "must be >= 1 (got " + std::to_string(ngpus) + ")");
  PX_REQUIRE(ngpus <= devices, "gpus",
             fmt::format("must be <= the {} visible CUDA device(s) (got {})", devices, ngpus));
  ensure_nvls_disabled();
  const ncclUniqueId id = make_unique_id();
  std::vector<std::unique_ptr<Communicator>> comms(static_cast<std::size_t>(ngpus));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ngpus));
  // ncclCommInitRank blocks until all ranks joined: one thread per rank.
  std::vector<std::thread> threads;
  for (int r = 0; r < ngpus; ++r)
    threads.emplace_back([&, r] {
      try {
        comms[r] = std::make_unique<Communicator>(id, r, ngpus, r, config);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return comms;
}

std::unique_ptr<Communicator> Communicator::from_mpi(CommConfig config) {
  validate(config);
#if defined(PARALLAX_HAVE_MPI)
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    MPI_Init(nullptr, nullptr);
    // MPI_Finalize at exit, after every Communicator is gone (they are destroyed before static teardown).
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    });
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const auto env = parse_launch_env();
  const int local_rank = env ? env->local_rank : rank;
  const int devices = device_count();
  if (local_rank >= devices)
    throw Error(fmt::format("MPI rank {} has local rank {} but only {} CUDA device(s) are visible: launch at "
                            "most one process per GPU per node", rank, local_rank, devices));
  ncclUniqueId id;
  if (rank == 0) id = make_unique_id();
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  return std::make_unique<Communicator>(id, rank, size, local_rank, config);
#else
  throw Error("this parallax build has no MPI (find_package(MPI) failed at configure time): the mpirun bootstrap "
              "is compiled out; use the single-process mode (--gpus N) or rebuild with MPI installed");
#endif
}

void Communicator::all_reduce(const void* send, void* recv, std::size_t count, DType type, cudaStream_t stream,
                              ncclRedOp_t op) {
  PX_NCCL_CHECK(ncclAllReduce(send, recv, count, nccl_type(type), op, comm_, pick(stream)));
}

void Communicator::all_gather(const void* send, void* recv, std::size_t send_count, DType type,
                              cudaStream_t stream) {
  PX_NCCL_CHECK(ncclAllGather(send, recv, send_count, nccl_type(type), comm_, pick(stream)));
}

void Communicator::reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type,
                                  cudaStream_t stream, ncclRedOp_t op) {
  PX_NCCL_CHECK(ncclReduceScatter(send, recv, recv_count, nccl_type(type), op, comm_, pick(stream)));
}

void Communicator::broadcast(const void* send, void* recv, std::size_t count, DType type, int root,
                             cudaStream_t stream) {
  PX_REQUIRE(root >= 0 && root < nranks_, "root", fmt::format("must be in [0, {}) (got {})", nranks_, root));
  PX_NCCL_CHECK(ncclBroadcast(send, recv, count, nccl_type(type), root, comm_, pick(stream)));
}

void Communicator::reduce(const void* send, void* recv, std::size_t count, DType type, int root,
                          cudaStream_t stream, ncclRedOp_t op) {
  PX_REQUIRE(root >= 0 && root < nranks_, "root", fmt::format("must be in [0, {}) (got {})", nranks_, root));
  PX_NCCL_CHECK(ncclReduce(send, recv, count, nccl_type(type), op, root, comm_, pick(stream)));
}

void Communicator::wait(cudaStream_t stream, std::string_view operation, std::chrono::milliseconds timeout) {
  if (aborted_) throw Error(fmt::format("{}: the communicator of rank {} was aborted earlier", operation, rank_));
  stream = pick(stream);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const cudaError_t q = cudaStreamQuery(stream);
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) {
      ncclCommAbort(comm_);
      aborted_ = true;
      throw Error(fmt::format("{}: CUDA error on rank {}: {}", operation, rank_, cudaGetErrorString(q)));
    }
    ncclResult_t async_status = ncclSuccess;
    PX_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async_status));
    if (async_status != ncclSuccess && async_status != ncclInProgress) {
      ncclCommAbort(comm_);
      aborted_ = true;
      throw Error(fmt::format("{}: NCCL asynchronous error on rank {}: {}", operation, rank_,
                              ncclGetErrorString(async_status)));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      // Abort unblocks the NCCL kernels still waiting for a peer, so the stream can drain.
      ncclCommAbort(comm_);
      aborted_ = true;
      throw Error(fmt::format("{}: rank {} timed out after {} ms waiting for its peers; communicator aborted",
                              operation, rank_, timeout.count()));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void Communicator::abort() noexcept {
  if (comm_ && !aborted_) ncclCommAbort(comm_);
  aborted_ = true;
}

void Communicator::require_same(std::string_view what, std::span<const std::int64_t> values) {
  const std::size_t n = values.size();
  if (nranks_ == 1 || n == 0) return;
  PX_CUDA_CHECK(cudaSetDevice(device_));
  // Two-step so even the length is agreed on first: a length mismatch would otherwise make the all-gather
  // itself mismatched. Step 1 gathers the lengths (1 element each), step 2 the values.
  DeviceBuffer<std::int64_t> lengths(static_cast<std::size_t>(nranks_));
  std::int64_t* d_len = lengths.data();
  const std::int64_t my_len = static_cast<std::int64_t>(n);
  PX_CUDA_CHECK(cudaMemcpyAsync(d_len + rank_, &my_len, sizeof(my_len), cudaMemcpyHostToDevice, stream_));
  PX_NCCL_CHECK(ncclAllGather(d_len + rank_, d_len, 1, ncclInt64, comm_, stream_));
  wait(stream_, fmt::format("metadata exchange for '{}'", what), std::chrono::seconds(60));
  const std::vector<std::int64_t> all_len = lengths.download(stream_);
  for (int r = 0; r < nranks_; ++r)
    if (all_len[r] != my_len)
      throw InvalidArgument(std::string(what),
                            fmt::format("differs across ranks: rank {} describes it with {} values, rank {} with {}",
                                        rank_, my_len, r, all_len[r]));
  DeviceBuffer<std::int64_t> gathered(n * static_cast<std::size_t>(nranks_));
  PX_CUDA_CHECK(cudaMemcpyAsync(gathered.data() + rank_ * n, values.data(), n * sizeof(std::int64_t),
                                cudaMemcpyHostToDevice, stream_));
  PX_NCCL_CHECK(ncclAllGather(gathered.data() + rank_ * n, gathered.data(), n, ncclInt64, comm_, stream_));
  wait(stream_, fmt::format("metadata exchange for '{}'", what), std::chrono::seconds(60));
  const std::vector<std::int64_t> all = gathered.download(stream_);
  bool same = true;
  for (std::size_t i = 0; i < all.size(); ++i) same = same && all[i] == all[i % n];
  if (same) return;
  std::string described;
  for (int r = 0; r < nranks_; ++r)
    described += fmt::format("{}rank {} has [{}]", r ? ", " : "", r,
                             fmt::join(all.begin() + r * n, all.begin() + (r + 1) * n, ", "));
  throw InvalidArgument(std::string(what), "differs across ranks: " + described);
}

std::vector<std::int64_t> Communicator::exchange(std::string_view what, std::span<const std::int64_t> values) {
  const std::size_t n = values.size();
  if (nranks_ == 1 || n == 0) return {values.begin(), values.end()};
  PX_CUDA_CHECK(cudaSetDevice(device_));
  DeviceBuffer<std::int64_t> gathered(n * static_cast<std::size_t>(nranks_));
  PX_CUDA_CHECK(cudaMemcpyAsync(gathered.data() + rank_ * n, values.data(), n * sizeof(std::int64_t),
                                cudaMemcpyHostToDevice, stream_));
  PX_NCCL_CHECK(ncclAllGather(gathered.data() + rank_ * n, gathered.data(), n, ncclInt64, comm_, stream_));
  wait(stream_, fmt::format("exchange of '{}'", what), std::chrono::seconds(60));
  return gathered.download(stream_);
}

void run_local_ranks(std::span<const std::unique_ptr<Communicator>> comms,
                     const std::function<void(Communicator&)>& fn) {
  std::vector<std::exception_ptr> errors(comms.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < comms.size(); ++r)
    threads.emplace_back([&, r] {
      try {
        PX_CUDA_CHECK(cudaSetDevice(comms[r]->device()));
        fn(*comms[r]);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace parallax
