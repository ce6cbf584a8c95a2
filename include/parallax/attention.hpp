// FlashAttention forward (issue 5): softmax(scale * Q K^T + mask) V without materializing the scores.
//
// Layouts (FlashAttention's): q and out are [B, Sq, H, D], k and v are [B, Sk, Hkv, D], lse is [B, H, Sq]
// fp32 contiguous. Any strides (in elements) with unit stride along D; strides are per tensor.
//
//   out[b, i, h, :] = sum_j P[b, h, i, j] v[b, j, h / (H / Hkv), :]
//   P = softmax_j(scale * q[b, i, h, :] . k[b, j, h / (H / Hkv), :] + mask(i, j))
//   lse[b, h, i] = log(sum_j exp(scale * s_ij + mask)) (natural log; -inf for a fully masked row)
//
// Causal masking is aligned bottom-right (FlashAttention >= 2.1): query i may see key j when
// j <= i + (Sk - Sq). With Sq > Sk the first Sq - Sk rows see no key at all: their output is 0 and their
// LSE -inf. GQA / MQA: H must be a multiple of Hkv; query head h reads key/value head h / (H / Hkv).
// Numerics: bf16 / fp16 in and out, fp32 scores, softmax and accumulation.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "parallax/gemm.hpp"  // DType

namespace parallax {

// Strides of a 4-D [B, S, H, D] tensor in elements; the stride along D must be 1.
struct AttentionStrides {
  std::int64_t batch = 0;
  std::int64_t seq = 0;
  std::int64_t head = 0;
  // Dense [B, S, H, D]: head = D, seq = H * D, batch = S * H * D.
  static AttentionStrides dense(int seqlen, int heads, int head_dim) {
    return {static_cast<std::int64_t>(seqlen) * heads * head_dim, static_cast<std::int64_t>(heads) * head_dim,
            head_dim};
  }
};

struct AttentionArgs {
  int batch = 0;
  int seqlen_q = 0;
  int seqlen_k = 0;
  int heads = 0;     // H, query heads
  int heads_kv = 0;  // Hkv, key/value heads; H % Hkv == 0
  int head_dim = 0;  // D: 64 or 128 (supported_head_dims())
  DType dtype = DType::kBF16;  // of q, k, v and out: bf16 or f16
  const void* q = nullptr;
  AttentionStrides q_strides;
  const void* k = nullptr;
  AttentionStrides k_strides;
  const void* v = nullptr;
  AttentionStrides v_strides;
  void* out = nullptr;
  AttentionStrides out_strides;
  float* lse = nullptr;                // optional: [B, H, Sq] fp32, contiguous
  std::optional<float> softmax_scale;  // default 1 / sqrt(D)
  bool causal = false;

  float scale() const;  // softmax_scale or 1 / sqrt(head_dim)
};

// Head dimensions the kernels are compiled for.
std::vector<int> supported_head_dims();

// Host-side checks; throws InvalidArgument naming the argument and the rule (e.g. head_dim: "must be one of
// 64, 128 (got 96)").
void validate(const AttentionArgs& args);

// Kernels ("attention ladder"):
//   "reference"  level 1: materialized fp32 scores, one row per block: the GPU reference of the tests
//   "tiled"      level 2: tiled online softmax on CUDA cores (the seed's "naive FlashAttention")
//   "mma"        level 3: FA2-style tensor-core kernel (mma.sync, ldmatrix, cp.async; sm_80+)
//   "wgmma"      level 4: FA3-style Hopper kernel (wgmma + TMA, warp-specialized; sm_90a)
//   "auto"       the best for this device
enum class AttentionKernel : int { kAuto = 0, kReference = 1, kTiled = 2, kMma = 3, kWgmma = 4 };
std::vector<std::string_view> attention_kernel_names();
std::string_view attention_kernel_name(AttentionKernel kernel);
AttentionKernel parse_attention_kernel(std::string_view text);  // names or level numbers "1".."4"

// FLOP count of one forward, the convention of the FlashAttention papers: 4 * B * H * Sq * Sk * D (two GEMMs
// of 2 * Sq * Sk * D each), halved when causal (no correction for Sq != Sk or the diagonal).
double attention_flops(int batch, int heads, int seqlen_q, int seqlen_k, int head_dim, bool causal);

// Asynchronous on `stream`; validates everything on the host first.
void attention_forward(const AttentionArgs& args, cudaStream_t stream = nullptr, std::string_view kernel = "auto");
void attention_forward(const AttentionArgs& args, cudaStream_t stream, AttentionKernel kernel);

// ---- Backward (issue 6) ----------------------------------------------------------------------------------
// Gradients of the forward above: given dO = dL/d(out), returns dq, dk, dv in the forward's layouts.
//
//   P_ij  = exp(scale * q_i . k_j - lse_i)           (recomputed from the forward's LSE; masked: 0)
//   dv_j  = sum_i P_ij dO_i                           dP_ij = dO_i . v_j
//   Delta_i = sum_j P_ij dP_ij = dO_i . out_i         (the "row-sum preprocessing")
//   dS_ij = P_ij (dP_ij - Delta_i)
//   dq_i  = scale * sum_j dS_ij k_j                   dk_j = scale * sum_i dS_ij q_i
//
// With GQA / MQA the gradients of kv head hk are summed over its H / Hkv query heads. Rows that see no key
// (causal with Sq > Sk, LSE -inf) contribute nothing and get dq = 0. out and lse must be what the forward
// returned for these q, k, v (Delta uses out; P uses lse): the backward does not recompute the softmax
// statistics.
struct AttentionBackwardArgs {
  int batch = 0;
  int seqlen_q = 0;
  int seqlen_k = 0;
  int heads = 0;
  int heads_kv = 0;
  int head_dim = 0;
  DType dtype = DType::kBF16;  // of q, k, v, out, dout, dq, dk, dv
  // Inputs: the forward's q, k, v, out and lse ([B, H, Sq] fp32 contiguous, required), and dout = dL/dout.
  const void* q = nullptr;
  AttentionStrides q_strides;
  const void* k = nullptr;
  AttentionStrides k_strides;
  const void* v = nullptr;
  AttentionStrides v_strides;
  const void* out = nullptr;
  AttentionStrides out_strides;
  const void* dout = nullptr;  // [B, Sq, H, D]
  AttentionStrides dout_strides;
  const float* lse = nullptr;
  // Outputs (overwritten): dq [B, Sq, H, D], dk and dv [B, Sk, Hkv, D].
  void* dq = nullptr;
  AttentionStrides dq_strides;
  void* dk = nullptr;
  AttentionStrides dk_strides;
  void* dv = nullptr;
  AttentionStrides dv_strides;
  std::optional<float> softmax_scale;  // default 1 / sqrt(D); must match the forward's
  bool causal = false;
  // The default accumulates dq with fp32 atomics from many CTAs, so its last bits depend on scheduling.
  // deterministic = true makes the results bitwise identical run to run: "mma" computes dq in a separate pass
  // that owns each dq row (no atomics; S and dP are recomputed), "wgmma" orders the additions (key block 0,
  // 1, 2, ... per query block, kept by semaphores).
  bool deterministic = false;

  float scale() const;  // softmax_scale or 1 / sqrt(head_dim)
  // The forward call these gradients belong to (q, k, v, out, lse, shape, scale, causal), for validation.
  AttentionArgs forward() const;
};

// Host-side checks of the backward: everything validate(forward()) checks, lse present, dout / dq / dk / dv
// non-null, aligned, strides >= 0, outputs with non-aliasing rows, no output overlapping an input or another
// output. Throws InvalidArgument naming the argument and the rule.
void validate(const AttentionBackwardArgs& args);

// Kernels of the backward ladder: "reference" (level 1: materialized fp32 rows, the GPU reference of the
// tests), "mma" (level 3: FA2-style mma.sync / ldmatrix / cp.async, sm_80+), "wgmma" (level 4: FA3-style
// wgmma / TMA / warp specialization, compute capability 9.0 only; q/k/v/dout must be TMA-describable: strides
// > 0 along dimensions longer than 1, batch and heads <= 65535), "auto" (wgmma on 9.0 when TMA can describe
// the tensors, else mma when the layout allows 16-byte vectors on sm_80+, else reference). "tiled" has no
// backward: asking for it is an InvalidArgument that lists these names.
std::vector<std::string_view> attention_backward_kernel_names();

// FLOP count of one backward: 2.5 x attention_flops (five GEMMs of 2 Sq Sk D each against the forward's two;
// the FlashAttention papers' convention), halved when causal like the forward's.
double attention_backward_flops(int batch, int heads, int seqlen_q, int seqlen_k, int head_dim, bool causal);

// Asynchronous on `stream`; validates everything on the host first. Workspace (fp32 Delta [B, H, Sq], an fp32
// dq accumulator [B, H, Sq, D] unless "mma" runs deterministic, and for "wgmma" deterministic one int per
// 64-row query block) is allocated and freed stream-ordered on
// `stream` (cudaMallocAsync / cudaFreeAsync: the pool of the device keeps it cached between calls).
void attention_backward(const AttentionBackwardArgs& args, cudaStream_t stream = nullptr,
                        std::string_view kernel = "auto");
void attention_backward(const AttentionBackwardArgs& args, cudaStream_t stream, AttentionKernel kernel);

}  // namespace parallax
