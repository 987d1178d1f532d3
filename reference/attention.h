// fmha CPU reference: forward, split-KV, generation (decode), backward and MLA attention.
//
// Plain C++ with fp64 accumulation; the semantics defined here are the library's (docs/numerics.md):
//  * scores S = Q·Kᵀ, masked, scaled by `scale` (default 1/sqrt(head_dim_qk)); P = softmax(S) row-wise;
//    O = P·V; LSE = ln Σ_j exp(scale·S_ij) (natural log, of the scaled scores).
//  * a row that sees no key (Sk = 0, or fully masked) gives O = 0, LSE = −inf, and zero gradients.
//  * memory outside the valid rows (beyond a batch entry's length, or beyond a cache's length) is never read.
//  * query head h uses K/V head h / (heads_q / heads_kv) (GQA/MQA).
// Rounding::kKernel emulates a kernel: inputs are rounded to `dtype` on read, P (and dS in the backward) are
// rounded to `dtype` before the second product, accumulation is still fp64. Rounding::kExact uses the values as
// given. See dtype.h for the rounding functions.
// In the forward family (fwd, gen, mla_decode) the P fed to P·V is the unnormalised exp(s − rowmax), taken to fp32
// and then rounded to `dtype`; the row sum (and so LSE) uses the unrounded P, as a kernel's fp32 row sum does
// (fwd with AttnShape::row_sum_rounded_p: the rounded P, as a kernel that sums P on the tensor cores does).
// Outputs (O, LSE) are never rounded: they are returned as float from the fp64 result.
// fwd, combine_splits, gen and mla_decode check their arguments; a bad one throws std::invalid_argument naming it
// with the expected versus actual value, e.g. "fwd: heads_q % heads_kv: expected 0, got 3 (heads_q=9, heads_kv=6)".
#pragma once

#include <cstdint>
#include <vector>

#include "fmha/types.h"
#include "reference/tensor.h"

namespace fmha::ref {

enum class Rounding { kExact, kKernel };

/// Shape and options of a (possibly varlen) attention problem, shared by forward and backward.
struct AttnShape {
  int batch = 1;
  int heads_q = 1;
  int heads_kv = 1;                ///< must divide heads_q
  int head_dim_qk = 64;
  int head_dim_v = 64;
  std::vector<int> seqlens_q;      ///< [batch] query length per entry (≥ 0)
  std::vector<int> seqlens_k;      ///< [batch] key length per entry (≥ 0)
  MaskType mask = MaskType::kNone;
  CausalAlign align = CausalAlign::kQBegin;
  double scale = 0.0;              ///< softmax scale; 0 means 1/sqrt(head_dim_qk)
  DType dtype = DType::kFP16;      ///< element type emulated by Rounding::kKernel
  Rounding rounding = Rounding::kExact;
  /// fwd under kKernel only: the row sum (so O's normaliser and LSE) adds P as rounded to dtype for P·V, as a
  /// kernel that sums P on the tensor cores does (fmha's 192-row forward kernels), instead of the
  /// unrounded P.
  /// Ignored by kExact and by the backward.
  bool row_sum_rounded_p = false;

  double softmax_scale() const;    ///< scale, or 1/sqrt(head_dim_qk) when scale == 0
};

/// Keys [lo, hi) that query row i of an entry with lengths (sq, sk) sees under `mask`/`align`; empty when lo ≥ hi.
/// None/residual: [0, sk). Causal q-begin: [0, min(sk, i+1)). Causal q-end: [0, min(sk, i+1+sk−sq)), clamped at 0.
struct KeyRange { int lo; int hi; };
KeyRange visible_keys(MaskType mask, CausalAlign align, int sq, int sk, int i);

/// Forward attention.
/// q: (b, i, h, d) for h < heads_q, d < head_dim_qk; k: (b, j, hk, d) for hk < heads_kv; v: (b, j, hk, d) for
/// d < head_dim_v; o: (b, i, h, d) for d < head_dim_v (written); lse: (b, i, h, 0) (written when lse.data != null).
/// Only keys in [key_begin, key_end) ∩ visible_keys are used (default: all); this is what one split-KV
/// partition computes: its O is normalised by its own row sum and its LSE covers only its keys.
/// Rows i < seqlens_q[b] are written; nothing else in o / lse is touched. Throws std::invalid_argument for
/// heads_q % heads_kv != 0, seqlens sizes != batch, negative lengths, head dims < 1, key_begin < 0,
/// key_end < key_begin, a non-finite scale, or null q/o (k/v) data when there are rows (keys).
void fwd(const AttnShape& s, ConstView q, ConstView k, ConstView v, MutView o, MutView lse,
         int key_begin = 0, int key_end = INT32_MAX);

/// Split-KV combine: merges n_splits partial results of `rows` rows each.
/// o_parts [n_splits][rows][d] (each normalised by its own row sum), lse_parts [n_splits][rows] (−inf for a split
/// that saw no key). Writes o [rows][d] = Σ_s exp(LSE_s − LSE)·O_s and lse [rows] = ln Σ_s exp(LSE_s);
/// a row whose splits are all empty gets O = 0, LSE = −inf. An empty split (LSE −inf) never has its O read (it may
/// hold garbage); a NaN partial LSE makes its row NaN. lse may be null. Throws std::invalid_argument for
/// n_splits < 1, rows < 0 or d < 0.
void combine_splits(int n_splits, int rows, int d, const float* o_parts, const float* lse_parts, float* o,
                    float* lse);

/// Backward attention, given the forward's O and LSE.
/// Same views as fwd, plus d_o (b, i, h, d < head_dim_v); writes dq (b, i, h, d < head_dim_qk),
/// dk (b, j, hk, d < head_dim_qk), dv (b, j, hk, d < head_dim_v). dK/dV sum over the heads of each GQA group.
/// P_ij = exp(scale·S_ij − LSE_i); dP = dO·Vᵀ; D_i = Σ_d dO_i·O_i; dS = P∘(dP − D); dQ = scale·dS·K;
/// dK = scale·dSᵀ·Q; dV = Pᵀ·dO. Rows with LSE = −inf contribute nothing.
void bwd(const AttnShape& s, ConstView q, ConstView k, ConstView v, ConstView o, ConstView d_o, ConstView lse,
         MutView dq, MutView dk, MutView dv);

/// Generation (decode) against a KV cache: one query token per batch entry.
struct GenShape {
  int batch = 1;
  int heads_q = 1;
  int heads_kv = 1;
  int head_dim = 128;
  int new_tokens = 1;                ///< query tokens per entry (n ≥ 1; more than 1: speculative tokens)
  std::vector<int> seqlens_kv;       ///< [batch] tokens already in the cache, before any append
  std::vector<int> cache_batch_idx;  ///< [batch] cache slot of each entry (remap); empty means slot b = b
  /// true: the n new K/V rows are written at positions seqlens_kv[b] … seqlens_kv[b] + n − 1, then attended, and
  /// query token t sees keys 0 … seqlens_kv[b] + t; false (cache-only: the n tokens are already the cache's last
  /// n): token t sees keys 0 … seqlens_kv[b] − n + t (none where that is negative).
  bool append = true;
  /// Contiguous cache (page_size == 0): cache tensors are [num_slots][capacity][heads_kv][head_dim].
  /// Paged cache (page_size > 0): cache tensors are [num_pages][page_size][heads_kv][head_dim], and token t of slot
  /// c lives in page page_table[c * pages_per_seq + t / page_size], row t % page_size.
  int capacity = 0;
  int page_size = 0;
  int pages_per_seq = 0;
  std::vector<int> page_table;
  double scale = 0.0;                ///< 0 means 1/sqrt(head_dim)
  DType dtype = DType::kFP16;
  Rounding rounding = Rounding::kExact;
};

/// q [batch][new_tokens][heads_q][head_dim]; new_k, new_v [batch][new_tokens][heads_kv][head_dim] (ignored when
/// !append); cache_k, cache_v as described in GenShape (mutated by the append); o [batch][new_tokens][heads_q]
/// [head_dim]; lse [batch][new_tokens][heads_q] (may be null). Keys seen by token t: see GenShape::append (the
/// causal q-end mask of the n new tokens against the cache), intersected with [key_begin, key_end) (one split-KV
/// partition; default all; an empty range gives O = 0, LSE = −inf). All appends happen before any attention;
/// under kKernel the stored new K/V are rounded to dtype. Only tokens [0, seqlens_kv[b] (+ n)) of a slot are read.
/// Throws std::invalid_argument for a size mismatch, new_tokens < 1, a negative slot, two entries appending into
/// one slot, seqlens_kv[b] (+ n) above the capacity (or pages_per_seq · page_size), a page table too short for a
/// slot, a negative page entry, or a bad key window.
void gen(const GenShape& s, const float* q, const float* new_k, const float* new_v, float* cache_k, float* cache_v,
         float* o, float* lse, int key_begin = 0, int key_end = INT32_MAX);

/// MLA decode in the weight-absorbed form: one shared latent row per token serves as K = [latent | rope] and
/// V = latent.
struct MlaDecodeShape {
  int batch = 1;
  int heads = 128;
  int d_latent = 512;
  int d_rope = 64;
  std::vector<int> seqlens;   ///< [batch] cache length per entry
  /// Unpaged (page_size == 0): cache [batch][capacity][d_latent + d_rope].
  /// Paged: cache [num_pages][page_size][d_latent + d_rope], token t of entry b in page
  /// page_table[b * pages_per_seq + t / page_size].
  int capacity = 0;
  int page_size = 0;
  int pages_per_seq = 0;
  std::vector<int> page_table;
  double scale = 0.0;         ///< explicit in the seed; 0 here means 1/sqrt(d_latent + d_rope)
  DType dtype = DType::kFP16;
  Rounding rounding = Rounding::kExact;
};

/// q [batch][heads][d_latent + d_rope]; o [batch][heads][d_latent]; lse [batch][heads] (may be null).
/// Keys [key_begin, key_end) of each entry only (one split-KV partition; default all); an empty range gives O = 0,
/// LSE = −inf. Only tokens below seqlens[b] are read. Throws std::invalid_argument like gen.
void mla_decode(const MlaDecodeShape& s, const float* q, const float* cache, float* o, float* lse,
                int key_begin = 0, int key_end = INT32_MAX);

}  // namespace fmha::ref
