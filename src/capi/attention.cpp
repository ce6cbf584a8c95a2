// C ABI: the attention forward and backward. The body converts the plain C struct into parallax::AttentionArgs (checking
// that every int64 dimension fits the int the kernels index with) and calls the C++ API, which validates
// everything else before any device work.
#include <climits>
#include <cstdint>
#include <string>

#include "capi/guard.hpp"
#include "parallax/attention.hpp"
#include "parallax/core.hpp"
#include "parallax/parallax.h"

using parallax::capi::guarded;
using parallax::capi::Needs;

namespace {

int narrow(std::int64_t value, const char* name) {
  PX_REQUIRE(value >= INT_MIN && value <= INT_MAX, name,
             "must fit in 32 bits (got " + std::string(name) + "=" + std::to_string(value) + ")");
  return static_cast<int>(value);
}

parallax::AttentionStrides strides(const std::int64_t s[3]) { return {s[0], s[1], s[2]}; }

}  // namespace

namespace parallax::capi {

// Also used by the CPU tests: the translation alone, no device work.
AttentionArgs attention_args_from_c(const parallax_attention_args_t* c) {
  PX_REQUIRE(c != nullptr, "args", "must be a non-null pointer to parallax_attention_args_t");
  PX_REQUIRE(c->struct_size == sizeof(parallax_attention_args_t), "args->struct_size",
             "must be sizeof(parallax_attention_args_t) = " + std::to_string(sizeof(parallax_attention_args_t)) +
                 " (got " + std::to_string(c->struct_size) + "): the binding's mirror of the struct has drifted");
  AttentionArgs a;
  a.dtype = static_cast<DType>(c->dtype);
  a.causal = c->causal != 0;
  a.batch = narrow(c->batch, "batch");
  a.seqlen_q = narrow(c->seqlen_q, "seqlen_q");
  a.seqlen_k = narrow(c->seqlen_k, "seqlen_k");
  a.heads = narrow(c->heads, "heads");
  a.heads_kv = narrow(c->heads_kv, "heads_kv");
  a.head_dim = narrow(c->head_dim, "head_dim");
  a.q = c->q, a.k = c->k, a.v = c->v, a.out = c->out, a.lse = c->lse;
  a.q_strides = strides(c->q_strides), a.k_strides = strides(c->k_strides);
  a.v_strides = strides(c->v_strides), a.out_strides = strides(c->out_strides);
  if (c->softmax_scale != 0.0f) a.softmax_scale = c->softmax_scale;  // negative / NaN: rejected by validate
  return a;
}

AttentionBackwardArgs attention_backward_args_from_c(const parallax_attention_backward_args_t* c) {
  PX_REQUIRE(c != nullptr, "args", "must be a non-null pointer to parallax_attention_backward_args_t");
  PX_REQUIRE(c->struct_size == sizeof(parallax_attention_backward_args_t), "args->struct_size",
             "must be sizeof(parallax_attention_backward_args_t) = " +
                 std::to_string(sizeof(parallax_attention_backward_args_t)) + " (got " +
                 std::to_string(c->struct_size) + "): the binding's mirror of the struct has drifted");
  PX_REQUIRE(c->reserved == 0, "args->reserved", "must be 0 (got " + std::to_string(c->reserved) + ")");
  AttentionBackwardArgs a;
  a.dtype = static_cast<DType>(c->dtype);
  a.causal = c->causal != 0;
  a.deterministic = c->deterministic != 0;
  a.batch = narrow(c->batch, "batch");
  a.seqlen_q = narrow(c->seqlen_q, "seqlen_q");
  a.seqlen_k = narrow(c->seqlen_k, "seqlen_k");
  a.heads = narrow(c->heads, "heads");
  a.heads_kv = narrow(c->heads_kv, "heads_kv");
  a.head_dim = narrow(c->head_dim, "head_dim");
  a.q = c->q, a.k = c->k, a.v = c->v, a.out = c->out, a.dout = c->dout, a.lse = c->lse;
  a.dq = c->dq, a.dk = c->dk, a.dv = c->dv;
  a.q_strides = strides(c->q_strides), a.k_strides = strides(c->k_strides);
  a.v_strides = strides(c->v_strides), a.out_strides = strides(c->out_strides);
  a.dout_strides = strides(c->dout_strides), a.dq_strides = strides(c->dq_strides);
  a.dk_strides = strides(c->dk_strides), a.dv_strides = strides(c->dv_strides);
  if (c->softmax_scale != 0.0f) a.softmax_scale = c->softmax_scale;  // negative / NaN: rejected by validate
  return a;
}

}  // namespace parallax::capi

extern "C" {

parallax_status_t parallax_attention_forward(const parallax_attention_args_t* args, const char* kernel,
                                             cudaStream_t stream) noexcept {
  return guarded("parallax_attention_forward", Needs::kGpu, [&] {
    const parallax::AttentionArgs a = parallax::capi::attention_args_from_c(args);
    parallax::attention_forward(a, stream, kernel == nullptr ? std::string_view("auto") : std::string_view(kernel));
  });
}

parallax_status_t parallax_attention_backward(const parallax_attention_backward_args_t* args, const char* kernel,
                                              cudaStream_t stream) noexcept {
  return guarded("parallax_attention_backward", Needs::kGpu, [&] {
    const parallax::AttentionBackwardArgs a = parallax::capi::attention_backward_args_from_c(args);
    parallax::attention_backward(a, stream, kernel == nullptr ? std::string_view("auto") : std::string_view(kernel));
  });
}

}  // extern "C"
