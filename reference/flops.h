// fmha: FLOP and byte counts reported by the tools and benchmarks (docs/seed.md §7, docs/numerics.md).
//
// These are the seed's conventions, kept so that figures compare with the seed's: causal work counts exactly half
// (c = 0.5) whatever Sq and Sk, masked-out or empty work is not subtracted otherwise, and only the listed tensors
// count as traffic. Throughput: TFLOP/s = flops · 1e-12 / (t_ms · 1e-3), TB/s likewise with bytes (see per_second).
// Plain C++. All results are in FLOP or bytes, as double.
#pragma once

#include <vector>

#include "fmha/types.h"

namespace fmha::ref {

/// Forward (fmha, mla_fwd): 2 · Σ_b(Sq_b · Sk_b) · H · c · (d_qk + d_v), c = 0.5 if causal else 1.
/// For d_qk == d_v == D this is the seed's 4 · Σ_b(Sq_b · Sk_b) · D · H · c; for the MLA shape (192, 128) it is the
/// seed's 2 · Σ · H · c · (192 + 128). sq, sk: per-entry lengths ([batch] each; a dense run passes B copies of Sq
/// and Sk). heads_q = H, the number of query heads (K/V heads do not matter).
/// Throws std::invalid_argument when sq.size() != sk.size() or a length/count is negative.
double fwd_flops(const std::vector<int>& sq, const std::vector<int>& sk, int heads_q, int d_qk, int d_v, bool causal);

/// Backward (bwd, 2bwd): 2 · c · Sq · Sk · (3 · d_qk + 2 · d_v) · H · B, c = 0.5 if causal else 1, H = heads_q
/// (= H_R · H_K). For varlen the seed uses the MAX lengths for Sq and Sk (times B), not a per-entry sum; callers pass
/// max_sq / max_sk accordingly. Throws std::invalid_argument on negative arguments.
double bwd_flops(int batch, int max_sq, int max_sk, int heads_q, int d_qk, int d_v, bool causal);

/// Generation (fmha_gen), bytes moved, all terms multiplied by D = head_dim:
///   sizeof(in) · H · B          (Q)
/// + sizeof(out) · H · B         (O)
/// + 2 · sizeof(in) · H_K · B    (new K and V)
/// + 2 · sizeof(in) · H_K · Σ_b(seqlens_kv[b] + 1)   (cache K and V, including the new token)
/// with B = seqlens_kv.size(), H = heads_q, H_K = heads_kv. As in the seed, the +1 and the new-K/V term are counted
/// even in cache-only mode. out defaults to fp16 (the seed's O type). Throws std::invalid_argument on negatives.
double gen_bytes(const std::vector<int>& seqlens_kv, int heads_q, int heads_kv, int head_dim, DType in,
                 DType out = DType::kFP16);

/// MLA decode: 2 · B · K · H · (2 · d_latent + d_rope), K the problem's key length (the max length when paged).
/// Defaults are the seed's shape (latent 512, rope 64). Throws std::invalid_argument on negatives.
double mla_decode_flops(int batch, int k, int heads, int d_latent = 512, int d_rope = 64);

/// MLA decode bytes: sizeof(in) · B · H · W (Q) + sizeof(in) · B · K · W (latent cache) + sizeof(out) · B · H ·
/// d_latent (O), W = d_latent + d_rope, K as in mla_decode_flops. LSE and split workspace are not counted.
/// out defaults to fp16. Throws std::invalid_argument on negatives.
double mla_decode_bytes(int batch, int k, int heads, DType in, DType out = DType::kFP16, int d_latent = 512,
                        int d_rope = 64);

/// Rate in units of 1e12 per second: count · 1e-12 / (time_ms · 1e-3) (TFLOP/s from FLOP, TB/s from bytes).
/// time_ms ≤ 0 gives +inf (the seed reports inf/nan for 0 iterations; we never report NaN).
double per_second_tera(double count, double time_ms);

}  // namespace fmha::ref
