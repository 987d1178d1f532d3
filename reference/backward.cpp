// fmha CPU reference: backward attention (dQ, dK, dV from Q, K, V, O, LSE, dO).
//
// Semantics are those documented on fmha::ref::bwd in attention.h. Per batch entry b, query head h (K/V head
// hk = h / (heads_q / heads_kv)), row i with visible keys [lo, hi):
//   P_ij  = exp(scale·S_ij − LSE_i)          S_ij = Σ_d Q_id·K_jd
//   dP_ij = Σ_d dO_id·V_jd                   D_i  = Σ_d dO_id·O_id
//   dS_ij = P_ij·(dP_ij − D_i)
//   dQ_i += scale·dS_ij·K_j     dK_j += scale·dS_ij·Q_i     dV_j += P_ij·dO_i
// dK/dV of a K/V head accumulate over every query head of its group. All sums are fp64; results are stored as
// float. Rows whose LSE is −inf (or whose visible key range is empty) are skipped entirely: none of their Q, O,
// dO values are read and their dQ is 0. Keys no row sees end with dK = dV = 0 and their K/V values are never
// read. Rounding::kKernel rounds Q, K, V, O, dO to s.dtype on read and rounds P (for dV) and dS (for dQ, dK)
// to s.dtype before the second products; dS itself is formed from the unrounded P, as a kernel keeps P in
// fp32 registers while it converts a copy for the dV MMA.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/attention.h"
#include "reference/dtype.h"

namespace fmha::ref {
namespace {

/// Throws std::invalid_argument("bwd: <what>: expected <expected>, got <actual>") (the format fwd uses).
[[noreturn]] void bad_argument(const std::string& what, const std::string& expected, const std::string& actual) {
  throw std::invalid_argument("bwd: " + what + ": expected " + expected + ", got " + actual);
}

/// Checks a view's cumulative row offsets (when it has them) leave room for `lengths[b]` rows in entry b, so
/// that entries never overlap; `name` names the view in the error message.
void check_cu(const char* name, const int* cu, const std::vector<int>& lengths) {
  if (cu == nullptr) return;
  for (size_t b = 0; b < lengths.size(); ++b) {
    const int64_t room = static_cast<int64_t>(cu[b + 1]) - cu[b];
    if (room < lengths[b]) {
      bad_argument(std::string(name) + ".cu_seqlens[" + std::to_string(b + 1) + "] - " + name + ".cu_seqlens[" +
                       std::to_string(b) + "]",
                   ">= " + std::to_string(lengths[b]) + " (the entry's length)", std::to_string(room));
    }
  }
}

/// Validates the problem shape and the views bwd will touch; throws std::invalid_argument on the first problem.
void validate(const AttnShape& s, const ConstView& q, const ConstView& k, const ConstView& v, const ConstView& o,
              const ConstView& d_o, const ConstView& lse, const MutView& dq, const MutView& dk, const MutView& dv) {
  if (s.batch < 0) bad_argument("batch", ">= 0", std::to_string(s.batch));
  if (s.heads_q <= 0) bad_argument("heads_q", "> 0", std::to_string(s.heads_q));
  if (s.heads_kv <= 0) bad_argument("heads_kv", "> 0", std::to_string(s.heads_kv));
  if (s.heads_q % s.heads_kv != 0) {
    bad_argument("heads_q % heads_kv", "0 (heads_q = " + std::to_string(s.heads_q) +
                                           " must be a multiple of heads_kv = " + std::to_string(s.heads_kv) + ")",
                 std::to_string(s.heads_q % s.heads_kv));
  }
  if (s.head_dim_qk <= 0) bad_argument("head_dim_qk", "> 0", std::to_string(s.head_dim_qk));
  if (s.head_dim_v <= 0) bad_argument("head_dim_v", "> 0", std::to_string(s.head_dim_v));
  if (!std::isfinite(s.scale)) bad_argument("scale", "a finite value (0 = default)", std::to_string(s.scale));
  if (s.seqlens_q.size() != static_cast<size_t>(s.batch)) {
    bad_argument("seqlens_q.size()", std::to_string(s.batch) + " (batch)", std::to_string(s.seqlens_q.size()));
  }
  if (s.seqlens_k.size() != static_cast<size_t>(s.batch)) {
    bad_argument("seqlens_k.size()", std::to_string(s.batch) + " (batch)", std::to_string(s.seqlens_k.size()));
  }
  bool any_q = false, any_k = false;
  for (int b = 0; b < s.batch; ++b) {
    if (s.seqlens_q[b] < 0) {
      bad_argument("seqlens_q[" + std::to_string(b) + "]", ">= 0", std::to_string(s.seqlens_q[b]));
    }
    if (s.seqlens_k[b] < 0) {
      bad_argument("seqlens_k[" + std::to_string(b) + "]", ">= 0", std::to_string(s.seqlens_k[b]));
    }
    any_q = any_q || s.seqlens_q[b] > 0;
    any_k = any_k || s.seqlens_k[b] > 0;
  }
  // Pointers are only required where there are rows to read or write.
  struct Need { const char* name; const void* data; bool needed; };
  const Need needs[] = {{"q.data", q.data, any_q},   {"o.data", o.data, any_q},   {"d_o.data", d_o.data, any_q},
                        {"lse.data", lse.data, any_q}, {"dq.data", dq.data, any_q}, {"k.data", k.data, any_k},
                        {"v.data", v.data, any_k},   {"dk.data", dk.data, any_k}, {"dv.data", dv.data, any_k}};
  for (const Need& n : needs) {
    if (n.needed && n.data == nullptr) bad_argument(n.name, "a non-null pointer", "null");
  }
  check_cu("q", q.cu_seqlens, s.seqlens_q);
  check_cu("o", o.cu_seqlens, s.seqlens_q);
  check_cu("d_o", d_o.cu_seqlens, s.seqlens_q);
  check_cu("lse", lse.cu_seqlens, s.seqlens_q);
  check_cu("dq", dq.cu_seqlens, s.seqlens_q);
  check_cu("k", k.cu_seqlens, s.seqlens_k);
  check_cu("v", v.cu_seqlens, s.seqlens_k);
  check_cu("dk", dk.cu_seqlens, s.seqlens_k);
  check_cu("dv", dv.cu_seqlens, s.seqlens_k);
}

/// Copies rows j < len with seen[j] set, heads [0, heads) and dims [0, dim) of entry b of `view` into a dense fp64
/// buffer laid out [head][row][dim], rounding each value to `dtype` when `round` is set. Only those elements are
/// read; the buffer holds 0 for rows that are not seen.
void gather(const ConstView& view, int b, int len, const std::vector<char>& seen, int heads, int dim, bool round,
            DType dtype, std::vector<double>& out) {
  out.assign(static_cast<size_t>(heads) * len * dim, 0.0);
  for (int h = 0; h < heads; ++h) {
    for (int i = 0; i < len; ++i) {
      if (!seen[i]) continue;
      double* row = &out[(static_cast<size_t>(h) * len + i) * dim];
      for (int d = 0; d < dim; ++d) {
        const float x = view.at(b, i, h, d);
        row[d] = round ? static_cast<double>(round_to(dtype, x)) : static_cast<double>(x);
      }
    }
  }
}

/// Clamped range of keys that row i of an entry with lengths (sq, sk) sees; empty when lo >= hi.
KeyRange clamped_keys(const AttnShape& s, int sq, int sk, int i) {
  KeyRange r = visible_keys(s.mask, s.align, sq, sk, i);
  if (r.lo < 0) r.lo = 0;
  if (r.hi > sk) r.hi = sk;
  return r;
}

/// Marks in seen[0, sk) the keys that at least one row i < sq of the entry sees (difference array over the
/// per-row intervals).
void mark_seen_keys(const AttnShape& s, int sq, int sk, std::vector<char>& seen) {
  std::vector<int> delta(static_cast<size_t>(sk) + 1, 0);
  for (int i = 0; i < sq; ++i) {
    const KeyRange r = clamped_keys(s, sq, sk, i);
    if (r.lo < r.hi) {
      ++delta[r.lo];
      --delta[r.hi];
    }
  }
  seen.assign(sk, 0);
  int running = 0;
  for (int j = 0; j < sk; ++j) {
    running += delta[j];
    seen[j] = running > 0;
  }
}

/// Dot product of two fp64 vectors of length n.
double dot(const double* a, const double* b, int n) {
  double acc = 0.0;
  for (int d = 0; d < n; ++d) acc += a[d] * b[d];
  return acc;
}

}  // namespace

void bwd(const AttnShape& s, ConstView q, ConstView k, ConstView v, ConstView o, ConstView d_o, ConstView lse,
         MutView dq, MutView dk, MutView dv) {
  validate(s, q, k, v, o, d_o, lse, dq, dk, dv);

  const int group = s.heads_q / s.heads_kv;
  const int dqk = s.head_dim_qk;
  const int dvo = s.head_dim_v;
  const double scale = s.softmax_scale();
  const bool kernel = s.rounding == Rounding::kKernel;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  /// P or dS as fed to the second products: rounded to the element type under kKernel.
  auto second_operand = [&](double x) {
    return kernel ? static_cast<double>(round_to(s.dtype, static_cast<float>(x))) : x;
  };

  /// One input element, rounded to the element type under kKernel.
  auto read = [&](const ConstView& view, int b, int i, int h, int d) {
    const float x = view.at(b, i, h, d);
    return kernel ? static_cast<double>(round_to(s.dtype, x)) : static_cast<double>(x);
  };

  std::vector<char> seen;                                   // keys of one entry seen by some row
  std::vector<double> kb, vb;                               // K, V of one entry, [head_kv][row][dim]
  std::vector<double> q_row(dqk), o_row(dvo), do_row(dvo);  // one query row's inputs
  std::vector<double> dq_row(dqk);                          // dQ of one row (unscaled)
  std::vector<double> dk_acc, dv_acc;                       // [head_kv][row][dim], summed over each GQA group

  for (int b = 0; b < s.batch; ++b) {
    const int sq = s.seqlens_q[b];
    const int sk = s.seqlens_k[b];

    dk_acc.assign(static_cast<size_t>(s.heads_kv) * sk * dqk, 0.0);
    dv_acc.assign(static_cast<size_t>(s.heads_kv) * sk * dvo, 0.0);

    // K/V rows that some row sees; the others are never read.
    mark_seen_keys(s, sq, sk, seen);
    gather(k, b, sk, seen, s.heads_kv, dqk, kernel, s.dtype, kb);
    gather(v, b, sk, seen, s.heads_kv, dvo, kernel, s.dtype, vb);

    for (int h = 0; h < s.heads_q; ++h) {
      const int hk = h / group;
      for (int i = 0; i < sq; ++i) {
        const double lse_i = static_cast<double>(lse.at(b, i, h, 0));
        const KeyRange r = clamped_keys(s, sq, sk, i);
        const int lo = r.lo;
        const int hi = r.hi;
        std::fill(dq_row.begin(), dq_row.end(), 0.0);

        if (lo < hi && lse_i != neg_inf) {
          // This row's inputs, read (and rounded) only now that it is known to contribute.
          for (int d = 0; d < dqk; ++d) q_row[d] = read(q, b, i, h, d);
          for (int d = 0; d < dvo; ++d) {
            o_row[d] = read(o, b, i, h, d);
            do_row[d] = read(d_o, b, i, h, d);
          }
          const double D_i = dot(do_row.data(), o_row.data(), dvo);

          for (int j = lo; j < hi; ++j) {
            const double* kj = &kb[(static_cast<size_t>(hk) * sk + j) * dqk];
            const double* vj = &vb[(static_cast<size_t>(hk) * sk + j) * dvo];
            const double p = std::exp(scale * dot(q_row.data(), kj, dqk) - lse_i);
            const double dp = dot(do_row.data(), vj, dvo);
            const double ds = p * (dp - D_i);
            const double p2 = second_operand(p);
            const double ds2 = second_operand(ds);
            double* dkj = &dk_acc[(static_cast<size_t>(hk) * sk + j) * dqk];
            double* dvj = &dv_acc[(static_cast<size_t>(hk) * sk + j) * dvo];
            for (int d = 0; d < dqk; ++d) {
              dq_row[d] += ds2 * kj[d];
              dkj[d] += ds2 * q_row[d];
            }
            for (int d = 0; d < dvo; ++d) dvj[d] += p2 * do_row[d];
          }
        }
        for (int d = 0; d < dqk; ++d) dq.at(b, i, h, d) = static_cast<float>(scale * dq_row[d]);
      }
    }

    for (int hk = 0; hk < s.heads_kv; ++hk) {
      for (int j = 0; j < sk; ++j) {
        const double* dkj = &dk_acc[(static_cast<size_t>(hk) * sk + j) * dqk];
        const double* dvj = &dv_acc[(static_cast<size_t>(hk) * sk + j) * dvo];
        for (int d = 0; d < dqk; ++d) dk.at(b, j, hk, d) = static_cast<float>(scale * dkj[d]);
        for (int d = 0; d < dvo; ++d) dv.at(b, j, hk, d) = static_cast<float>(dvj[d]);
      }
    }
  }
}

}  // namespace fmha::ref
