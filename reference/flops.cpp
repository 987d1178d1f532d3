// fmha: FLOP and byte formulas (see flops.h).
#include "reference/flops.h"

#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace fmha::ref {
namespace {

void require_nonneg(const char* fn, const char* what, long long v) {
  if (v < 0) throw std::invalid_argument(std::string(fn) + ": " + what + ": expected >= 0, got " + std::to_string(v));
}

}  // namespace

double fwd_flops(const std::vector<int>& sq, const std::vector<int>& sk, int heads_q, int d_qk, int d_v,
                 bool causal) {
  if (sq.size() != sk.size())
    throw std::invalid_argument("fwd_flops: sk.size(): expected sq.size() = " + std::to_string(sq.size()) +
                                ", got " + std::to_string(sk.size()));
  require_nonneg("fwd_flops", "heads_q", heads_q);
  require_nonneg("fwd_flops", "d_qk", d_qk);
  require_nonneg("fwd_flops", "d_v", d_v);
  double pairs = 0.0;
  for (size_t b = 0; b < sq.size(); ++b) {
    require_nonneg("fwd_flops", "sq[b]", sq[b]);
    require_nonneg("fwd_flops", "sk[b]", sk[b]);
    pairs += double(sq[b]) * double(sk[b]);
  }
  const double c = causal ? 0.5 : 1.0;
  return 2.0 * pairs * heads_q * c * (double(d_qk) + double(d_v));
}

double bwd_flops(int batch, int max_sq, int max_sk, int heads_q, int d_qk, int d_v, bool causal) {
  for (auto [name, v] : {std::pair<const char*, int>{"batch", batch}, {"max_sq", max_sq}, {"max_sk", max_sk},
                         {"heads_q", heads_q}, {"d_qk", d_qk}, {"d_v", d_v}})
    require_nonneg("bwd_flops", name, v);
  const double c = causal ? 0.5 : 1.0;
  return 2.0 * c * double(max_sq) * double(max_sk) * (3.0 * d_qk + 2.0 * d_v) * double(heads_q) * double(batch);
}

double gen_bytes(const std::vector<int>& seqlens_kv, int heads_q, int heads_kv, int head_dim, DType in, DType out) {
  require_nonneg("gen_bytes", "heads_q", heads_q);
  require_nonneg("gen_bytes", "heads_kv", heads_kv);
  require_nonneg("gen_bytes", "head_dim", head_dim);
  const double si = double(dtype_size(in)), so = double(dtype_size(out));
  const double B = double(seqlens_kv.size());
  double cached = 0.0;
  for (int len : seqlens_kv) {
    require_nonneg("gen_bytes", "seqlens_kv[b]", len);
    cached += double(len) + 1.0;
  }
  return double(head_dim) *
         (si * heads_q * B + so * heads_q * B + 2.0 * si * heads_kv * B + 2.0 * si * heads_kv * cached);
}

double mla_decode_flops(int batch, int k, int heads, int d_latent, int d_rope) {
  for (auto [name, v] : {std::pair<const char*, int>{"batch", batch}, {"k", k}, {"heads", heads},
                         {"d_latent", d_latent}, {"d_rope", d_rope}})
    require_nonneg("mla_decode_flops", name, v);
  return 2.0 * double(batch) * double(k) * double(heads) * (2.0 * d_latent + d_rope);
}

double mla_decode_bytes(int batch, int k, int heads, DType in, DType out, int d_latent, int d_rope) {
  for (auto [name, v] : {std::pair<const char*, int>{"batch", batch}, {"k", k}, {"heads", heads},
                         {"d_latent", d_latent}, {"d_rope", d_rope}})
    require_nonneg("mla_decode_bytes", name, v);
  const double si = double(dtype_size(in)), so = double(dtype_size(out));
  const double w = double(d_latent) + d_rope;
  return si * batch * heads * w + si * batch * double(k) * w + so * batch * heads * double(d_latent);
}

double per_second_tera(double count, double time_ms) {
  if (!(time_ms > 0.0)) return std::numeric_limits<double>::infinity();
  return count * 1e-12 / (time_ms * 1e-3);
}

}  // namespace fmha::ref
