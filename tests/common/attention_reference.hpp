// Float64 CPU references of the attention forward (issue 5) and backward (issue 6), shared by the attention
// test suites.
//
// Inputs are host copies of q [B,Sq,H,D] and k/v [B,Sk,Hkv,D] with arbitrary element strides (unit along D),
// already converted to double (so bf16/f16 rounding of the inputs is the kernel's, not the reference's).
// Output: out [B,Sq,H,D] dense and lse [B,H,Sq] dense, both double.
// Conventions match include/parallax/attention.hpp: causal aligned bottom-right (key j visible to query i iff
// j <= i + Sk - Sq), a row with no visible key gives out = 0 and lse = -inf, GQA head h -> h / (H / Hkv).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace parallax::testing {

struct AttentionShape {
  int batch = 1, seqlen_q = 1, seqlen_k = 1, heads = 1, heads_kv = 1, head_dim = 64;
  bool causal = false;
  double scale = 0;  // 0 -> 1 / sqrt(head_dim)
};

struct Strides4 {  // element strides of a [B, S, H, D] tensor; D stride is 1
  std::int64_t batch = 0, seq = 0, head = 0;
  static Strides4 dense(int s, int h, int d) {
    return {static_cast<std::int64_t>(s) * h * d, static_cast<std::int64_t>(h) * d, d};
  }
  std::int64_t at(int b, int s, int h) const { return b * batch + s * seq + h * head; }
};

// Number of keys query row i may see (the causal limit, bottom-right aligned); 0 = fully masked row.
inline int visible_keys(int i, int seqlen_q, int seqlen_k, bool causal) {
  if (!causal) return seqlen_k;
  const long long last = static_cast<long long>(i) + seqlen_k - seqlen_q;  // last visible key index
  return static_cast<int>(std::clamp<long long>(last + 1, 0, seqlen_k));
}

struct AttentionReference {
  std::vector<double> out;  // [B, Sq, H, D] dense
  std::vector<double> lse;  // [B, H, Sq] dense
};

// q, k, v: whole host buffers (double) addressed through the strides.
inline AttentionReference attention_reference(const AttentionShape& s, const std::vector<double>& q, Strides4 qs,
                                              const std::vector<double>& k, Strides4 ks,
                                              const std::vector<double>& v, Strides4 vs) {
  const int D = s.head_dim, group = s.heads / s.heads_kv;
  const double scale = s.scale > 0 ? s.scale : 1.0 / std::sqrt(static_cast<double>(D));
  AttentionReference r;
  r.out.assign(static_cast<std::size_t>(s.batch) * s.seqlen_q * s.heads * D, 0.0);
  r.lse.assign(static_cast<std::size_t>(s.batch) * s.heads * s.seqlen_q, -std::numeric_limits<double>::infinity());
  std::vector<double> scores(static_cast<std::size_t>(s.seqlen_k));
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h) {
      const int hk = h / group;
      for (int i = 0; i < s.seqlen_q; ++i) {
        const int n = visible_keys(i, s.seqlen_q, s.seqlen_k, s.causal);
        const std::size_t lse_at = (static_cast<std::size_t>(b) * s.heads + h) * s.seqlen_q + i;
        double* o = &r.out[((static_cast<std::size_t>(b) * s.seqlen_q + i) * s.heads + h) * D];
        if (n == 0) continue;  // fully masked: out 0, lse -inf
        const double* qrow = &q[qs.at(b, i, h)];
        double m = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < n; ++j) {
          const double* krow = &k[ks.at(b, j, hk)];
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += qrow[d] * krow[d];
          scores[j] = dot * scale;
          m = std::max(m, scores[j]);
        }
        double sum = 0;
        for (int j = 0; j < n; ++j) {
          scores[j] = std::exp(scores[j] - m);
          sum += scores[j];
        }
        for (int j = 0; j < n; ++j) {
          const double p = scores[j] / sum;
          const double* vrow = &v[vs.at(b, j, hk)];
          for (int d = 0; d < D; ++d) o[d] += p * vrow[d];
        }
        r.lse[lse_at] = m + std::log(sum);
      }
    }
  return r;
}

struct AttentionGradients {
  std::vector<double> dq;  // [B, Sq, H, D] dense
  std::vector<double> dk;  // [B, Sk, Hkv, D] dense
  std::vector<double> dv;  // [B, Sk, Hkv, D] dense
};

// Gradients of sum(out * dout) w.r.t. q, k, v, computed from scratch in float64 (its own softmax: no lse or out
// from the kernel under test enters it). dout: whole host buffer addressed through dos. For each row:
//   P_j = softmax_j(scale q.k_j) over the visible keys, dP_j = dout . v_j, Delta = sum_j P_j dP_j,
//   dS_j = P_j (dP_j - Delta), dq += scale dS_j k_j, dk_j += scale dS_j q, dv_j += P_j dout
// (Delta = dout . out exactly, which the kernels use instead). GQA: kv head gradients summed over the group.
inline AttentionGradients attention_backward_reference(const AttentionShape& s, const std::vector<double>& q,
                                                       Strides4 qs, const std::vector<double>& k, Strides4 ks,
                                                       const std::vector<double>& v, Strides4 vs,
                                                       const std::vector<double>& dout, Strides4 dos) {
  const int D = s.head_dim, group = s.heads / s.heads_kv;
  const double scale = s.scale > 0 ? s.scale : 1.0 / std::sqrt(static_cast<double>(D));
  AttentionGradients g;
  g.dq.assign(static_cast<std::size_t>(s.batch) * s.seqlen_q * s.heads * D, 0.0);
  g.dk.assign(static_cast<std::size_t>(s.batch) * s.seqlen_k * s.heads_kv * D, 0.0);
  g.dv.assign(g.dk.size(), 0.0);
  std::vector<double> p(static_cast<std::size_t>(s.seqlen_k)), dp(p.size());
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h) {
      const int hk = h / group;
      for (int i = 0; i < s.seqlen_q; ++i) {
        const int n = visible_keys(i, s.seqlen_q, s.seqlen_k, s.causal);
        if (n == 0) continue;  // no visible key: no gradient flows through this row
        const double* qrow = &q[qs.at(b, i, h)];
        const double* grow = &dout[dos.at(b, i, h)];
        double m = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < n; ++j) {
          const double* krow = &k[ks.at(b, j, hk)];
          const double* vrow = &v[vs.at(b, j, hk)];
          double dot = 0, dpj = 0;
          for (int d = 0; d < D; ++d) {
            dot += qrow[d] * krow[d];
            dpj += grow[d] * vrow[d];
          }
          p[j] = dot * scale;
          dp[j] = dpj;
          m = std::max(m, p[j]);
        }
        double sum = 0;
        for (int j = 0; j < n; ++j) sum += (p[j] = std::exp(p[j] - m));
        double delta = 0;
        for (int j = 0; j < n; ++j) delta += (p[j] /= sum) * dp[j];
        double* dq = &g.dq[((static_cast<std::size_t>(b) * s.seqlen_q + i) * s.heads + h) * D];
        for (int j = 0; j < n; ++j) {
          const double ds = p[j] * (dp[j] - delta);
          const double* krow = &k[ks.at(b, j, hk)];
          const std::size_t kv_at = ((static_cast<std::size_t>(b) * s.seqlen_k + j) * s.heads_kv + hk) * D;
          for (int d = 0; d < D; ++d) {
            dq[d] += scale * ds * krow[d];
            g.dk[kv_at + d] += scale * ds * qrow[d];
            g.dv[kv_at + d] += p[j] * grow[d];
          }
        }
      }
    }
  return g;
}

}  // namespace parallax::testing
