// Host side of the attention forward and backward: names, argument validation, workspace, dispatch to the
// level launchers. No device code here; kernels live next to this file, one per level (attn_0N_*.cu,
// attn_bwd_0N_*.cu).
#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <string>

#include "attention/launchers.hpp"
#include "parallax/attention.hpp"
#include "parallax/core.hpp"

namespace parallax {
namespace {

struct KernelEntry {
  AttentionKernel kernel;
  std::string_view name;
};
constexpr std::array<KernelEntry, 5> kKernels{{
    {AttentionKernel::kAuto, "auto"},
    {AttentionKernel::kReference, "reference"},
    {AttentionKernel::kTiled, "tiled"},
    {AttentionKernel::kMma, "mma"},
    {AttentionKernel::kWgmma, "wgmma"},
}};
constexpr std::array<int, 2> kHeadDims{64, 128};

std::string valid_kernel_list() {
  std::string s;
  for (const auto& e : kKernels) s += std::string(s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}
std::string head_dim_list() {
  std::string s;
  for (int d : kHeadDims) s += std::string(s.empty() ? "" : ", ") + std::to_string(d);
  return s;
}
std::string got(const char* name, long long v) { return std::string(" (got ") + name + "=" + std::to_string(v) + ")"; }
std::string got2(const char* name, long long v, const char* other, long long w) {
  return std::string(" (got ") + name + "=" + std::to_string(v) + ", " + other + "=" + std::to_string(w) + ")";
}

// Half-open byte range touched by a strided [B, S, H, D] tensor (strides already checked >= 0).
struct ByteRange {
  std::uintptr_t begin, end;
};
ByteRange tensor_range(const void* ptr, int b, int s, int h, int d, const AttentionStrides& st, int elem) {
  const auto begin = reinterpret_cast<std::uintptr_t>(ptr);
  const std::uint64_t last = static_cast<std::uint64_t>(b - 1) * static_cast<std::uint64_t>(st.batch) +
                             static_cast<std::uint64_t>(s - 1) * static_cast<std::uint64_t>(st.seq) +
                             static_cast<std::uint64_t>(h - 1) * static_cast<std::uint64_t>(st.head) +
                             static_cast<std::uint64_t>(d);
  return {begin, begin + static_cast<std::uintptr_t>(last) * static_cast<std::uintptr_t>(elem)};
}
bool overlaps(ByteRange x, ByteRange y) { return x.begin < y.end && y.begin < x.end; }
bool aligned(const void* p, unsigned bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

void require_strides(const AttentionStrides& st, const std::string& name) {
  // Negative strides would need a different range computation everywhere; FlashAttention forbids them too.
  PX_REQUIRE(st.batch >= 0 && st.seq >= 0 && st.head >= 0, name,
             "strides must be >= 0 (got batch=" + std::to_string(st.batch) + ", seq=" + std::to_string(st.seq) +
                 ", head=" + std::to_string(st.head) + ")");
}

// A written tensor: two of its elements must not share an address, so each stride must step over everything
// inside it for one of the usual orders; we require the FlashAttention rule head >= D and seq, batch >= D
// (distinctness of [S, H] pairs is the caller's responsibility beyond that). A stride of an extent-1
// dimension is never used and may be anything.
void require_written_rows(const AttentionStrides& st, const std::string& arg, const std::string& tensor, int seqlen,
                          int batch, int head_dim) {
  const std::string why = " (" + tensor + " is written, its rows must not alias)";
  PX_REQUIRE(st.head >= head_dim, arg + "_strides",
             "head stride must be >= head_dim" + why + got2("head", st.head, "head_dim", head_dim));
  PX_REQUIRE(seqlen == 1 || st.seq >= head_dim, arg + "_strides",
             "seq stride must be >= head_dim" + why + got2("seq", st.seq, "head_dim", head_dim));
  PX_REQUIRE(batch == 1 || st.batch >= head_dim, arg + "_strides",
             "batch stride must be >= head_dim" + why + got2("batch", st.batch, "head_dim", head_dim));
}

}  // namespace

float AttentionArgs::scale() const {
  return softmax_scale ? *softmax_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
}

std::vector<int> supported_head_dims() { return {kHeadDims.begin(), kHeadDims.end()}; }

double attention_flops(int batch, int heads, int seqlen_q, int seqlen_k, int head_dim, bool causal) {
  const double full = 4.0 * batch * heads * static_cast<double>(seqlen_q) * seqlen_k * head_dim;
  return causal ? full / 2 : full;
}

void validate(const AttentionArgs& a) {
  PX_REQUIRE(a.batch >= 1, "batch", "must be >= 1" + got("batch", a.batch));
  PX_REQUIRE(a.seqlen_q >= 1, "seqlen_q", "must be >= 1" + got("seqlen_q", a.seqlen_q));
  PX_REQUIRE(a.seqlen_k >= 1, "seqlen_k", "must be >= 1" + got("seqlen_k", a.seqlen_k));
  PX_REQUIRE(a.heads >= 1, "heads", "must be >= 1" + got("heads", a.heads));
  PX_REQUIRE(a.heads_kv >= 1, "heads_kv", "must be >= 1" + got("heads_kv", a.heads_kv));
  PX_REQUIRE(a.heads % a.heads_kv == 0, "heads_kv",
             "must divide heads (GQA/MQA: query head h reads kv head h / (heads / heads_kv))" +
                 got2("heads_kv", a.heads_kv, "heads", a.heads));
  bool dim_ok = false;
  for (int d : kHeadDims) dim_ok = dim_ok || a.head_dim == d;
  PX_REQUIRE(dim_ok, "head_dim", "must be one of " + head_dim_list() + got("head_dim", a.head_dim));
  PX_REQUIRE(a.dtype == DType::kBF16 || a.dtype == DType::kF16, "dtype",
             "must be bf16 or f16 (got " +
                 (a.dtype == DType::kF32 ? std::string("f32") : std::to_string(static_cast<int>(a.dtype))) + ")");
  PX_REQUIRE(a.q != nullptr, "q", "must be a non-null device pointer");
  PX_REQUIRE(a.k != nullptr, "k", "must be a non-null device pointer");
  PX_REQUIRE(a.v != nullptr, "v", "must be a non-null device pointer");
  PX_REQUIRE(a.out != nullptr, "out", "must be a non-null device pointer");
  // Every kernel reads at least whole elements; levels 3-4 need more (see attention_vector_aligned).
  PX_REQUIRE(aligned(a.q, 2), "q", "must be aligned to its element size (2 bytes)");
  PX_REQUIRE(aligned(a.k, 2), "k", "must be aligned to its element size (2 bytes)");
  PX_REQUIRE(aligned(a.v, 2), "v", "must be aligned to its element size (2 bytes)");
  PX_REQUIRE(aligned(a.out, 2), "out", "must be aligned to its element size (2 bytes)");
  PX_REQUIRE(a.lse == nullptr || aligned(a.lse, 4), "lse", "must be aligned to 4 bytes (fp32)");
  if (a.softmax_scale)
    PX_REQUIRE(std::isfinite(*a.softmax_scale) && *a.softmax_scale > 0, "softmax_scale",
               "must be finite and > 0 (got " + std::to_string(*a.softmax_scale) + ")");
  require_strides(a.q_strides, "q_strides");
  require_strides(a.k_strides, "k_strides");
  require_strides(a.v_strides, "v_strides");
  require_strides(a.out_strides, "out_strides");
  require_written_rows(a.out_strides, "out", "out", a.seqlen_q, a.batch, a.head_dim);
  const ByteRange out = tensor_range(a.out, a.batch, a.seqlen_q, a.heads, a.head_dim, a.out_strides, 2);
  const ByteRange q = tensor_range(a.q, a.batch, a.seqlen_q, a.heads, a.head_dim, a.q_strides, 2);
  const ByteRange k = tensor_range(a.k, a.batch, a.seqlen_k, a.heads_kv, a.head_dim, a.k_strides, 2);
  const ByteRange v = tensor_range(a.v, a.batch, a.seqlen_k, a.heads_kv, a.head_dim, a.v_strides, 2);
  PX_REQUIRE(!overlaps(out, q), "out", "must not overlap q (out is written while q is read)");
  PX_REQUIRE(!overlaps(out, k), "out", "must not overlap k (out is written while k is read)");
  PX_REQUIRE(!overlaps(out, v), "out", "must not overlap v (out is written while v is read)");
  if (a.lse != nullptr) {
    const auto lb = reinterpret_cast<std::uintptr_t>(a.lse);
    const ByteRange lse{lb, lb + static_cast<std::uintptr_t>(a.batch) * a.heads * a.seqlen_q * sizeof(float)};
    PX_REQUIRE(!overlaps(lse, q), "lse", "must not overlap q");
    PX_REQUIRE(!overlaps(lse, k), "lse", "must not overlap k");
    PX_REQUIRE(!overlaps(lse, v), "lse", "must not overlap v");
    PX_REQUIRE(!overlaps(lse, out), "lse", "must not overlap out");
  }
}

namespace detail {

bool attention_vector_aligned(const AttentionArgs& a) {
  const auto strides_ok = [](const AttentionStrides& s) { return s.batch % 8 == 0 && s.seq % 8 == 0 && s.head % 8 == 0; };
  return aligned(a.q, 16) && aligned(a.k, 16) && aligned(a.v, 16) && aligned(a.out, 16) && strides_ok(a.q_strides) &&
         strides_ok(a.k_strides) && strides_ok(a.v_strides) && strides_ok(a.out_strides);
}

bool attention_tma_compatible(const AttentionArgs& a) {
  if (!attention_vector_aligned(a) || a.batch > 65535 || a.heads > 65535) return false;
  constexpr std::int64_t kMaxStride = (std::int64_t{1} << 39) - 1;  // elements: TMA strides are < 2^40 bytes
  const auto ok = [&](const AttentionStrides& s, int seqlen, int heads) {
    const auto dim_ok = [&](std::int64_t stride, int extent) { return extent == 1 || (stride > 0 && stride <= kMaxStride); };
    return dim_ok(s.seq, seqlen) && dim_ok(s.head, heads) && dim_ok(s.batch, a.batch);
  };
  return ok(a.q_strides, a.seqlen_q, a.heads) && ok(a.k_strides, a.seqlen_k, a.heads_kv) &&
         ok(a.v_strides, a.seqlen_k, a.heads_kv);
}

bool attention_vector_aligned(const AttentionBackwardArgs& a) {
  const auto strides_ok = [](const AttentionStrides& s) { return s.batch % 8 == 0 && s.seq % 8 == 0 && s.head % 8 == 0; };
  return aligned(a.q, 16) && aligned(a.k, 16) && aligned(a.v, 16) && aligned(a.out, 16) && aligned(a.dout, 16) &&
         aligned(a.dq, 16) && aligned(a.dk, 16) && aligned(a.dv, 16) && strides_ok(a.q_strides) &&
         strides_ok(a.k_strides) && strides_ok(a.v_strides) && strides_ok(a.out_strides) &&
         strides_ok(a.dout_strides) && strides_ok(a.dq_strides) && strides_ok(a.dk_strides) &&
         strides_ok(a.dv_strides);
}

bool attention_backward_tma_compatible(const AttentionBackwardArgs& a) {
  if (!attention_vector_aligned(a) || !attention_tma_compatible(a.forward())) return false;
  // dout is read through a tensor map like q (same shape [B, Sq, H, D]).
  AttentionArgs f = a.forward();
  f.q = a.dout;
  f.q_strides = a.dout_strides;
  return attention_tma_compatible(f);
}

namespace {
int current_cc_major() {
  int device = 0, major = 0;
  PX_CUDA_CHECK(cudaGetDevice(&device));
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major;
}
void require_cc(std::string_view kernel, int major_needed, int major_have) {
  if (major_have < major_needed)
    throw Error("attention kernel '" + std::string(kernel) + "' needs an sm_" + std::to_string(major_needed) +
                "0+ GPU; this device is sm_" + std::to_string(major_have) + "x (use 'tiled' or 'auto')");
}
}  // namespace

// "auto": level 4 on sm_90 (exactly compute capability 9.0: the kernel is sm_90a code) when TMA can describe
// the operands, else level 3 on sm_80+ when they allow 16-byte loads, else level 2.
AttentionKernel choose_attention_kernel(const AttentionArgs& a) {
  int device = 0, major = 0, minor = 0;
  PX_CUDA_CHECK(cudaGetDevice(&device));
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major == 9 && minor == 0 && attention_tma_compatible(a)) return AttentionKernel::kWgmma;
  if (major >= 8 && attention_vector_aligned(a)) return AttentionKernel::kMma;
  return AttentionKernel::kTiled;
}

// Backward "auto": level 4 on compute capability 9.0 when TMA can describe q/k/v/dout (and all eight tensors
// allow 16-byte vectors), else level 3 on sm_80+ with 16-byte-aligned tensors, else level 1.
AttentionKernel choose_attention_backward_kernel(const AttentionBackwardArgs& a) {
  int device = 0, major = 0, minor = 0;
  PX_CUDA_CHECK(cudaGetDevice(&device));
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  PX_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return choose_attention_backward_kernel(a, major, minor);
}
AttentionKernel choose_attention_backward_kernel(const AttentionBackwardArgs& a, int cc_major, int cc_minor) {
  if (cc_major == 9 && cc_minor == 0 && attention_backward_tma_compatible(a)) return AttentionKernel::kWgmma;
  if (cc_major >= 8 && attention_vector_aligned(a)) return AttentionKernel::kMma;
  return AttentionKernel::kReference;
}

}  // namespace detail

std::vector<std::string_view> attention_kernel_names() {
  std::vector<std::string_view> names;
  for (const auto& e : kKernels) names.push_back(e.name);
  return names;
}

std::string_view attention_kernel_name(AttentionKernel kernel) {
  for (const auto& e : kKernels)
    if (e.kernel == kernel) return e.name;
  throw InvalidArgument("kernel", "unknown AttentionKernel value " + std::to_string(static_cast<int>(kernel)) +
                                      "; valid: " + valid_kernel_list());
}

AttentionKernel parse_attention_kernel(std::string_view text) {
  for (const auto& e : kKernels)
    if (text == e.name) return e.kernel;
  for (const auto& e : kKernels)
    if (e.kernel != AttentionKernel::kAuto && text == std::to_string(static_cast<int>(e.kernel))) return e.kernel;
  throw InvalidArgument("kernel", "unknown attention kernel '" + std::string(text) + "'; valid: " +
                                      valid_kernel_list() + " (or a level number 1..4)");
}

void attention_forward(const AttentionArgs& args, cudaStream_t stream, AttentionKernel kernel) {
  (void)attention_kernel_name(kernel);  // rejects values outside the enum before anything else
  validate(args);
  const auto require_vectors = [&](AttentionKernel k) {
    PX_REQUIRE(detail::attention_vector_aligned(args), "q",
               "kernel '" + std::string(attention_kernel_name(k)) +
                   "' needs q, k, v, out 16-byte aligned and all their strides multiples of 8 elements "
                   "(use 'tiled' or 'auto' for other layouts)");
  };
  switch (kernel) {
    case AttentionKernel::kAuto: return attention_forward(args, stream, detail::choose_attention_kernel(args));
    case AttentionKernel::kReference: return detail::launch_attention_reference(args, stream);
    case AttentionKernel::kTiled: return detail::launch_attention_tiled(args, stream);
    case AttentionKernel::kMma:
      require_vectors(kernel);
      detail::require_cc("mma", 8, detail::current_cc_major());
      return detail::launch_attention_mma(args, stream);
    case AttentionKernel::kWgmma:
      require_vectors(kernel);
      PX_REQUIRE(detail::attention_tma_compatible(args), "q_strides",
                 "kernel 'wgmma' loads q/k/v through TMA: every q/k/v stride of a dimension longer than 1 must be "
                 "> 0 (no broadcasting) and batch, heads must be <= 65535 (use 'mma' or 'auto' for other layouts)");
      detail::require_cc("wgmma", 9, detail::current_cc_major());
      return detail::launch_attention_wgmma(args, stream);
  }
}

void attention_forward(const AttentionArgs& args, cudaStream_t stream, std::string_view kernel) {
  attention_forward(args, stream, parse_attention_kernel(kernel));
}

}  // namespace parallax

// ---- backward --------------------------------------------------------------------------------------------

namespace parallax {

float AttentionBackwardArgs::scale() const {
  return softmax_scale ? *softmax_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
}

AttentionArgs AttentionBackwardArgs::forward() const {
  AttentionArgs f;
  f.batch = batch;
  f.seqlen_q = seqlen_q;
  f.seqlen_k = seqlen_k;
  f.heads = heads;
  f.heads_kv = heads_kv;
  f.head_dim = head_dim;
  f.dtype = dtype;
  f.q = q;
  f.q_strides = q_strides;
  f.k = k;
  f.k_strides = k_strides;
  f.v = v;
  f.v_strides = v_strides;
  // The forward's outputs are the backward's inputs; the view is only validated, never written through.
  f.out = const_cast<void*>(out);
  f.out_strides = out_strides;
  f.lse = const_cast<float*>(lse);
  f.softmax_scale = softmax_scale;
  f.causal = causal;
  return f;
}

double attention_backward_flops(int batch, int heads, int seqlen_q, int seqlen_k, int head_dim, bool causal) {
  return 2.5 * attention_flops(batch, heads, seqlen_q, seqlen_k, head_dim, causal);
}

void validate(const AttentionBackwardArgs& a) {
  // Shape, dtype, scale, q/k/v/out pointers and strides, out/lse not overlapping q/k/v: the forward's rules.
  validate(a.forward());
  PX_REQUIRE(a.lse != nullptr, "lse",
             "is required by the backward: pass the lse the forward returned ([B, H, Sq] fp32)");
  PX_REQUIRE(a.dout != nullptr, "dout", "must be a non-null device pointer");
  PX_REQUIRE(a.dq != nullptr, "dq", "must be a non-null device pointer");
  PX_REQUIRE(a.dk != nullptr, "dk", "must be a non-null device pointer");
  PX_REQUIRE(a.dv != nullptr, "dv", "must be a non-null device pointer");
  PX_REQUIRE(aligned(a.dout, 2), "dout", "must be aligned to its element size (2 bytes)");
  PX_REQUIRE(aligned(a.dq, 2), "dq", "must be aligned to its element size (2 bytes)");
  PX_REQUIRE(aligned(a.dk, 2), "dk", "must be aligned to its element size (2 bytes)");
  PX_REQUIRE(aligned(a.dv, 2), "dv", "must be aligned to its element size (2 bytes)");
  require_strides(a.dout_strides, "dout_strides");
  require_strides(a.dq_strides, "dq_strides");
  require_strides(a.dk_strides, "dk_strides");
  require_strides(a.dv_strides, "dv_strides");
  require_written_rows(a.dq_strides, "dq", "dq", a.seqlen_q, a.batch, a.head_dim);
  require_written_rows(a.dk_strides, "dk", "dk", a.seqlen_k, a.batch, a.head_dim);
  require_written_rows(a.dv_strides, "dv", "dv", a.seqlen_k, a.batch, a.head_dim);

  const int B = a.batch, Sq = a.seqlen_q, Sk = a.seqlen_k, H = a.heads, Hkv = a.heads_kv, D = a.head_dim;
  const auto lb = reinterpret_cast<std::uintptr_t>(a.lse);
  struct Named {
    const char* name;
    ByteRange range;
  };
  const Named inputs[] = {
      {"q", tensor_range(a.q, B, Sq, H, D, a.q_strides, 2)},
      {"k", tensor_range(a.k, B, Sk, Hkv, D, a.k_strides, 2)},
      {"v", tensor_range(a.v, B, Sk, Hkv, D, a.v_strides, 2)},
      {"out", tensor_range(a.out, B, Sq, H, D, a.out_strides, 2)},
      {"dout", tensor_range(a.dout, B, Sq, H, D, a.dout_strides, 2)},
      {"lse", {lb, lb + static_cast<std::uintptr_t>(B) * H * Sq * sizeof(float)}},
  };
  const Named outputs[] = {
      {"dq", tensor_range(a.dq, B, Sq, H, D, a.dq_strides, 2)},
      {"dk", tensor_range(a.dk, B, Sk, Hkv, D, a.dk_strides, 2)},
      {"dv", tensor_range(a.dv, B, Sk, Hkv, D, a.dv_strides, 2)},
  };
  for (std::size_t o = 0; o < std::size(outputs); ++o) {
    for (const Named& in : inputs)
      PX_REQUIRE(!overlaps(outputs[o].range, in.range), outputs[o].name,
                 std::string("must not overlap ") + in.name + " (" + outputs[o].name + " is written while " +
                     in.name + " is read)");
    for (std::size_t p = 0; p < o; ++p)
      PX_REQUIRE(!overlaps(outputs[o].range, outputs[p].range), outputs[o].name,
                 std::string("must not overlap ") + outputs[p].name + " (both are written)");
  }
}

std::vector<std::string_view> attention_backward_kernel_names() { return {"auto", "reference", "mma", "wgmma"}; }

namespace {

// Stream-ordered fp32 scratch: cudaMallocAsync now, cudaFreeAsync on the same stream when it goes out of scope
// (after the launches were enqueued, so the free is ordered after the kernels that use it). The device's
// default memory pool keeps the blocks cached, so repeated calls do not pay for cudaMalloc.
class StreamScratch {
 public:
  StreamScratch(std::size_t floats, cudaStream_t stream) : stream_(stream) {
    if (floats > 0) PX_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&ptr_), floats * sizeof(float), stream));
  }
  ~StreamScratch() {
    if (ptr_ != nullptr) (void)cudaFreeAsync(ptr_, stream_);
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  float* get() const { return ptr_; }

 private:
  float* ptr_ = nullptr;
  cudaStream_t stream_;
};

}  // namespace

void attention_backward(const AttentionBackwardArgs& args, cudaStream_t stream, AttentionKernel kernel) {
  (void)attention_kernel_name(kernel);  // rejects values outside the enum before anything else
  if (kernel == AttentionKernel::kTiled)
    throw InvalidArgument("kernel", "kernel '" + std::string(attention_kernel_name(kernel)) +
                                        "' has no backward; valid for the backward: auto, reference, mma, wgmma");
  validate(args);
  if (kernel == AttentionKernel::kAuto) kernel = detail::choose_attention_backward_kernel(args);
  if (kernel == AttentionKernel::kMma || kernel == AttentionKernel::kWgmma) {
    const std::string name(attention_kernel_name(kernel));
    PX_REQUIRE(detail::attention_vector_aligned(args), "q",
               "kernel '" + name + "' needs q, k, v, out, dout, dq, dk, dv 16-byte aligned and all their strides "
               "multiples of 8 elements (use 'reference' or 'auto' for other layouts)");
  }
  if (kernel == AttentionKernel::kMma) detail::require_cc("mma", 8, detail::current_cc_major());
  if (kernel == AttentionKernel::kWgmma) {
    PX_REQUIRE(detail::attention_backward_tma_compatible(args), "q_strides",
               "backward kernel 'wgmma' loads q/k/v/dout through TMA: every q/k/v/dout stride of a dimension longer "
               "than 1 must be > 0 (no broadcasting) and batch, heads must be <= 65535 (use 'mma' or 'auto' for "
               "other layouts)");
    detail::require_cc("wgmma", 9, detail::current_cc_major());
  }
  const std::size_t rows = static_cast<std::size_t>(args.batch) * args.heads * args.seqlen_q;
  StreamScratch delta(rows, stream);
  // Level 3 accumulates dq in fp32 only in the default mode (deterministic: a separate dQ pass); level 4
  // always does, in deterministic mode in a fixed order kept by one int semaphore per 64-row query block.
  const bool accumulate_dq =
      (kernel == AttentionKernel::kMma && !args.deterministic) || kernel == AttentionKernel::kWgmma;
  StreamScratch dq_accum(accumulate_dq ? rows * args.head_dim : 0, stream);
  StreamScratch semaphores(kernel == AttentionKernel::kWgmma ? detail::attention_backward_wgmma_semaphores(args) : 0,
                           stream);  // int32 counters, sized in 4-byte units like the floats
  const detail::AttentionBackwardWorkspace ws{delta.get(), dq_accum.get(), reinterpret_cast<int*>(semaphores.get())};
  if (kernel == AttentionKernel::kReference) return detail::launch_attention_backward_reference(args, ws, stream);
  if (kernel == AttentionKernel::kWgmma) return detail::launch_attention_backward_wgmma(args, ws, stream);
  return detail::launch_attention_backward_mma(args, ws, stream);
}

void attention_backward(const AttentionBackwardArgs& args, cudaStream_t stream, std::string_view kernel) {
  attention_backward(args, stream, parse_attention_kernel(kernel));
}

}  // namespace parallax
