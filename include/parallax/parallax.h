/* parallax C ABI: the stable, exception-free boundary of libparallax.so.
 *
 * Who uses it: the Python package (python/parallax, through ctypes) and any C, Rust, Julia... caller.
 * The C++ API (parallax/core.hpp, parallax/sgemm.hpp) throws; this header never does. Every entry point
 * catches everything and turns it into a status code, so no C++ exception ever unwinds into a C or ctypes
 * frame (that would be undefined behaviour: typically std::terminate, taking the Python process with it).
 *
 * Conventions
 *  - Every function that can fail returns parallax_status_t. PARALLAX_SUCCESS is 0.
 *  - On failure the message ("parallax_sgemm: invalid argument 'lda': must be >= k ...") is kept per thread:
 *    parallax_last_error() returns it. Each status-returning call on a thread replaces that thread's
 *    message (with "" on success), so read it right after the failing call. Threads never see each
 *    other's messages.
 *  - PARALLAX_ERROR_INVALID_ARGUMENT means the arguments were checked on the host and rejected: nothing was
 *    enqueued on the device and outputs were not touched.
 *  - Matrices are row-major with an explicit leading dimension (elements between consecutive rows, >= the
 *    row length). Pointers are device pointers. Dimensions are int64_t so that no caller (Python ints in
 *    particular) silently truncates a large value; an entry point rejects a value its kernels cannot
 *    index rather than wrapping it.
 *  - Work is enqueued on `stream` and the call returns without waiting for it (asynchronous, like a kernel
 *    launch). A stream of NULL is the legacy default stream. The device is the calling thread's current
 *    CUDA device (parallax_set_device, or your framework's device guard).
 *  - Only the five functions that cannot fail return a value directly: parallax_last_error,
 *    parallax_status_name, parallax_abi_version, parallax_version, parallax_git_sha.
 */
#ifndef PARALLAX_PARALLAX_H
#define PARALLAX_PARALLAX_H

#include <cuda_runtime_api.h> /* cudaStream_t (C-compatible header) */
#include <stddef.h>
#include <stdint.h>

/* Exported even if the library is one day built with -fvisibility=hidden. */
#if defined(__GNUC__) || defined(__clang__)
#define PARALLAX_API __attribute__((visibility("default")))
#else
#define PARALLAX_API
#endif

/* In C++ the declarations carry noexcept, so a caller's compiler knows (and the definitions must honour)
 * that nothing propagates out. */
#ifdef __cplusplus
#define PARALLAX_NOEXCEPT noexcept
extern "C" {
#else
#define PARALLAX_NOEXCEPT
#endif

/* Bumped whenever a signature, a struct layout or an enum value below changes incompatibly. A binding
 * compares parallax_abi_version() with the value it was written for and refuses to load on a mismatch. */
#define PARALLAX_ABI_VERSION 1

/* ---------------------------------------------------------------------------------------------------------
 * Status codes
 * ------------------------------------------------------------------------------------------------------- */
typedef enum parallax_status {
  PARALLAX_SUCCESS = 0,
  /* An argument broke a rule; the message names the argument and the rule. Nothing ran on the device. */
  PARALLAX_ERROR_INVALID_ARGUMENT = 1,
  /* The operation needs a CUDA GPU and none is visible (no driver, no device, CUDA_VISIBLE_DEVICES=""). */
  PARALLAX_ERROR_NO_DEVICE = 2,
  /* The entry point exists but this kernel / dtype / option is not implemented (yet). */
  PARALLAX_ERROR_NOT_IMPLEMENTED = 3,
  /* Device (cudaMalloc, cuBLAS workspace) or host memory is exhausted. */
  PARALLAX_ERROR_OUT_OF_MEMORY = 4,
  /* A CUDA runtime or cuBLAS call failed; the message names the call and CUDA's error. An asynchronous
   * kernel fault can surface here on a later call: that is how CUDA reports it. */
  PARALLAX_ERROR_CUDA = 5,
  /* Any other failure reported by the library (the message says what). */
  PARALLAX_ERROR_RUNTIME = 6,
  /* A bug: an exception the library did not expect. Please report the message. */
  PARALLAX_ERROR_INTERNAL = 7
} parallax_status_t;

/* This thread's message from its last status-returning parallax call: "" after a success. The pointer stays
 * valid until this thread's next parallax call. Never NULL. */
PARALLAX_API const char* parallax_last_error(void) PARALLAX_NOEXCEPT;

/* "PARALLAX_SUCCESS", "PARALLAX_ERROR_INVALID_ARGUMENT", ...; "PARALLAX_STATUS_UNKNOWN" for other values.
 * Static storage; does not touch parallax_last_error(). */
PARALLAX_API const char* parallax_status_name(parallax_status_t status) PARALLAX_NOEXCEPT;

/* ---------------------------------------------------------------------------------------------------------
 * Library identity
 * ------------------------------------------------------------------------------------------------------- */
PARALLAX_API int parallax_abi_version(void) PARALLAX_NOEXCEPT;     /* PARALLAX_ABI_VERSION of the build */
PARALLAX_API const char* parallax_version(void) PARALLAX_NOEXCEPT; /* "0.1.0" */
PARALLAX_API const char* parallax_git_sha(void) PARALLAX_NOEXCEPT; /* short sha of the build, or "unknown" */

/* ---------------------------------------------------------------------------------------------------------
 * Element types. Used by the production GEMM and attention entry points (see "Planned" at the end); the FP32
 * ladder below is float-only and needs no dtype argument.
 * ------------------------------------------------------------------------------------------------------- */
typedef enum parallax_dtype {
  PARALLAX_DTYPE_F32 = 0,
  PARALLAX_DTYPE_F16 = 1,
  PARALLAX_DTYPE_BF16 = 2
} parallax_dtype_t;

/* Operand transform of a GEMM input (row-major storage; T reads the stored matrix transposed). */
typedef enum parallax_op {
  PARALLAX_OP_N = 0,
  PARALLAX_OP_T = 1
} parallax_op_t;

/* ---------------------------------------------------------------------------------------------------------
 * Devices
 * ------------------------------------------------------------------------------------------------------- */

/* Number of visible CUDA devices. 0 (and PARALLAX_SUCCESS) without a driver or a GPU: that is an answer,
 * not an error. */
PARALLAX_API parallax_status_t parallax_device_count(int* count) PARALLAX_NOEXCEPT;

/* The calling thread's current CUDA device, and setting it (cudaGetDevice / cudaSetDevice). */
PARALLAX_API parallax_status_t parallax_get_device(int* device) PARALLAX_NOEXCEPT;
PARALLAX_API parallax_status_t parallax_set_device(int device) PARALLAX_NOEXCEPT;

/* The device that owns `ptr` (device or managed memory). PARALLAX_ERROR_INVALID_ARGUMENT naming 'ptr' when
 * it is host memory (pageable or pinned) or not a CUDA allocation. Bindings use it to check that operands
 * handed over as bare pointers live on the right GPU before launching anything. */
PARALLAX_API parallax_status_t parallax_pointer_device(const void* ptr, int* device) PARALLAX_NOEXCEPT;

/* What a kernel author and a benchmark need to know about a GPU (mirrors parallax::DeviceInfo).
 * The caller sets struct_size = sizeof(parallax_device_info_t) before the call: a binding whose mirror of
 * this struct has drifted gets PARALLAX_ERROR_INVALID_ARGUMENT instead of a corrupted struct. */
typedef struct parallax_device_info {
  uint64_t struct_size;
  int32_t device;
  int32_t cc_major;
  int32_t cc_minor;
  int32_t sm_count;
  int32_t registers_per_sm;
  int32_t max_threads_per_sm;
  int32_t warp_size;
  int32_t clock_khz;        /* peak SM clock */
  int32_t memory_clock_khz; /* peak memory clock */
  int32_t memory_bus_bits;
  uint64_t global_memory_bytes;
  uint64_t l2_bytes;
  uint64_t shared_memory_per_block;       /* default limit (48 KiB) */
  uint64_t shared_memory_per_block_optin; /* after opting in with cudaFuncSetAttribute */
  uint64_t shared_memory_per_sm;
  double theoretical_fp32_tflops; /* datasheet-style peak from clocks and unit counts (a lead, not a measurement) */
  double theoretical_dram_gbps;
  char name[256]; /* "NVIDIA H100 80GB HBM3", NUL-terminated */
  char arch[16];  /* "sm_90" */
} parallax_device_info_t;

/* Properties of `device` (-1: the current device). PARALLAX_ERROR_NO_DEVICE without a GPU;
 * PARALLAX_ERROR_INVALID_ARGUMENT naming 'device' when it does not exist. */
PARALLAX_API parallax_status_t parallax_device_info(int device, parallax_device_info_t* info) PARALLAX_NOEXCEPT;

/* ---------------------------------------------------------------------------------------------------------
 * FP32 SGEMM ladder (parallax/sgemm.hpp): C = alpha * A * B + beta * C, row-major, no transposes.
 *   A is m x k (lda >= k), B is k x n (ldb >= n), C is m x n (ldc >= n); m, n, k >= 1 and < 2^31.
 *   beta == 0 never reads C (it may hold garbage or NaN). C must not overlap A or B.
 * A caller with column-major data uses the identity C^T = B^T * A^T: column-major X is row-major X^T, so
 * pass (n, m, k, B, ldb, A, lda, C, ldc). Mixed layouts (one operand transposed) have no NN form.
 * ------------------------------------------------------------------------------------------------------- */

/* Levels are numbered 1..count in ladder order (1 = naive ... 8 = pipelined, autotuned). */
PARALLAX_API parallax_status_t parallax_sgemm_level_count(int* count) PARALLAX_NOEXCEPT;
/* "sgemm1" ... "sgemm8" (static storage). */
PARALLAX_API parallax_status_t parallax_sgemm_level_name(int level, const char** name) PARALLAX_NOEXCEPT;
/* One line: "2D blocktiling" (static storage). */
PARALLAX_API parallax_status_t parallax_sgemm_level_description(int level, const char** description) PARALLAX_NOEXCEPT;
/* Accepts "sgemm3", "3" or the short key ("smem"); PARALLAX_ERROR_INVALID_ARGUMENT listing valid names. */
PARALLAX_API parallax_status_t parallax_sgemm_level_parse(const char* text, int* level) PARALLAX_NOEXCEPT;

/* Runs ladder level `level` on `stream`. A level that is not written yet returns
 * PARALLAX_ERROR_NOT_IMPLEMENTED. */
PARALLAX_API parallax_status_t parallax_sgemm(int level, int64_t m, int64_t n, int64_t k, float alpha,
                                              const float* a, int64_t lda, const float* b, int64_t ldb,
                                              float beta, float* c, int64_t ldc,
                                              cudaStream_t stream) PARALLAX_NOEXCEPT;

/* The reference and the peer: cublasSgemm in strict FP32 (TF32 off), same arguments and rules as above. */
PARALLAX_API parallax_status_t parallax_sgemm_cublas(int64_t m, int64_t n, int64_t k, float alpha,
                                                     const float* a, int64_t lda, const float* b, int64_t ldb,
                                                     float beta, float* c, int64_t ldc,
                                                     cudaStream_t stream) PARALLAX_NOEXCEPT;

/* ---------------------------------------------------------------------------------------------------------
 * Tensor-core GEMM (parallax/gemm.hpp):  D = act(alpha * op(A) * op(B) + beta * C + bias), written over C.
 *   Row-major; op(A) is m x k, op(B) is k x n: A is stored m x k (op N, lda >= k) or k x m (op T, lda >= m),
 *   B is stored k x n (op N, ldb >= n) or n x k (op T, ldb >= k), C is m x n (ldc >= n).
 *   ab_dtype: F16 or BF16 (both inputs); c_dtype: F32, F16 or BF16; fp32 accumulation; m, n, k >= 1.
 *   bias: NULL or n floats on the device (added to each column before the activation).
 *   beta == 0 never reads C. C must not overlap A, B or bias. alpha, beta finite.
 * The caller sets struct_size = sizeof(parallax_gemm_args_t): a binding whose mirror of the struct has
 * drifted gets PARALLAX_ERROR_INVALID_ARGUMENT naming 'struct_size'.
 * ------------------------------------------------------------------------------------------------------- */
typedef enum parallax_epilogue {
  PARALLAX_EPILOGUE_NONE = 0,
  PARALLAX_EPILOGUE_GELU = 1, /* tanh approximation */
  PARALLAX_EPILOGUE_SILU = 2
} parallax_epilogue_t;

typedef struct parallax_gemm_args {
  uint64_t struct_size;
  int64_t m;
  int64_t n;
  int64_t k;
  int32_t op_a;     /* parallax_op_t */
  int32_t op_b;     /* parallax_op_t */
  int32_t ab_dtype; /* parallax_dtype_t: F16 or BF16 */
  int32_t c_dtype;  /* parallax_dtype_t */
  const void* a;
  int64_t lda;
  const void* b;
  int64_t ldb;
  void* c;
  int64_t ldc;
  float alpha;
  float beta;
  const float* bias;
  int32_t epilogue; /* parallax_epilogue_t */
  int32_t reserved; /* must be 0 */
} parallax_gemm_args_t;

/* Kernels by index 0..count-1: "auto", "wmma", "mma", "wgmma", "wgmma-ws", "wgmma-persistent", "cublas"
 * (static storage). */
PARALLAX_API parallax_status_t parallax_gemm_kernel_count(int* count) PARALLAX_NOEXCEPT;
PARALLAX_API parallax_status_t parallax_gemm_kernel_name(int index, const char** name) PARALLAX_NOEXCEPT;

/* Runs `kernel` (NULL or "auto": the dispatcher's choice for this GPU and shape; else a name above or a level
 * number "9".."13") on `stream`, asynchronously. Every argument is checked on the host first
 * (PARALLAX_ERROR_INVALID_ARGUMENT naming it). A kernel that needs a newer GPU (the wgmma levels on an sm_80)
 * returns PARALLAX_ERROR_RUNTIME saying so. */
PARALLAX_API parallax_status_t parallax_gemm(const parallax_gemm_args_t* args, const char* kernel,
                                             cudaStream_t stream) PARALLAX_NOEXCEPT;

/* ---------------------------------------------------------------------------------------------------------
 * FlashAttention forward (parallax/attention.hpp): out = softmax(scale * q k^T + mask) v.
 * q, out: [B, Sq, H, D]; k, v: [B, Sk, Hkv, D]; strides in elements {batch, seq, head}, unit stride along D.
 * lse: optional [B, H, Sq] fp32 contiguous (NULL: not written). softmax_scale == 0: 1 / sqrt(head_dim).
 * Causal masking is bottom-right aligned; a fully masked row gives out 0 and lse -inf. dtype f16 or bf16,
 * head_dim 64 or 128, heads % heads_kv == 0. The caller sets struct_size = sizeof(parallax_attention_args_t).
 * `kernel`: NULL or "auto", else "reference", "tiled", "mma", "wgmma" or a level number "1".."4"; a level
 * that is not written yet returns PARALLAX_ERROR_NOT_IMPLEMENTED. Asynchronous on `stream`.
 * ------------------------------------------------------------------------------------------------------- */
typedef struct parallax_attention_args {
  uint64_t struct_size;
  int32_t dtype; /* parallax_dtype_t */
  int32_t causal;
  int64_t batch, seqlen_q, seqlen_k, heads, heads_kv, head_dim;
  const void* q;
  int64_t q_strides[3];
  const void* k;
  int64_t k_strides[3];
  const void* v;
  int64_t v_strides[3];
  void* out;
  int64_t out_strides[3];
  float* lse;
  float softmax_scale;
} parallax_attention_args_t;

PARALLAX_API parallax_status_t parallax_attention_forward(const parallax_attention_args_t* args, const char* kernel,
                                                          cudaStream_t stream) PARALLAX_NOEXCEPT;

/* ---------------------------------------------------------------------------------------------------------
 * FlashAttention backward (parallax/attention.hpp, AttentionBackwardArgs): dq, dk, dv of the forward above
 * given dout = dL/dout. q, out, dout, dq: [B, Sq, H, D]; k, v, dk, dv: [B, Sk, Hkv, D]; strides in elements
 * {batch, seq, head}, unit stride along D. out and lse (required, [B, H, Sq] fp32) are the forward's results
 * for these q, k, v with the same causal / softmax_scale (0: 1 / sqrt(head_dim)). GQA: dk / dv are summed over
 * each kv head's group. deterministic != 0: bitwise reproducible dq (slower). `kernel`: NULL or "auto",
 * "reference", "mma", "wgmma" (or "1", "3", "4"; "wgmma" needs compute capability 9.0); "tiled" has no
 * backward (invalid argument).
 * Workspace is allocated stream-ordered on `stream` (cudaMallocAsync). Asynchronous on `stream`.
 * The caller sets struct_size = sizeof(parallax_attention_backward_args_t).
 * ------------------------------------------------------------------------------------------------------- */
typedef struct parallax_attention_backward_args {
  uint64_t struct_size;
  int32_t dtype; /* parallax_dtype_t */
  int32_t causal;
  int32_t deterministic;
  int32_t reserved; /* 0 */
  int64_t batch, seqlen_q, seqlen_k, heads, heads_kv, head_dim;
  const void* q;
  int64_t q_strides[3];
  const void* k;
  int64_t k_strides[3];
  const void* v;
  int64_t v_strides[3];
  const void* out;
  int64_t out_strides[3];
  const void* dout;
  int64_t dout_strides[3];
  const float* lse;
  void* dq;
  int64_t dq_strides[3];
  void* dk;
  int64_t dk_strides[3];
  void* dv;
  int64_t dv_strides[3];
  float softmax_scale;
} parallax_attention_backward_args_t;

PARALLAX_API parallax_status_t parallax_attention_backward(const parallax_attention_backward_args_t* args,
                                                           const char* kernel, cudaStream_t stream) PARALLAX_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PARALLAX_PARALLAX_H */
