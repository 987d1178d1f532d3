// fmha: decode (generation) attention against a KV cache on Hopper: a few new query tokens per sequence attend the
// sequence's cached keys (and, with an append, their own new keys), with split-KV as plan / run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#include "fmha/status.h"
#include "fmha/types.h"

namespace fmha {

/// Arguments of one decode call. For each batch entry b with n = new_tokens query tokens:
///   L_b = seqlens_k[b] + n with an append (k_new, v_new set), else seqlens_k[b] (cache-only);
///   query token t sees cache keys 0 … L_b − n + t (causal q-end: the tokens are the sequence's last n);
///   O[b][t][h] = softmax(scale · q·kᵀ) · v over those keys, LSE[b][t][h] = ln Σ exp(scale · q·k).
/// A token that sees no key (L_b − n + t < 0, e.g. an empty cache-only sequence) gets O = 0 and LSE = −inf.
///
/// Layouts (strides in elements, 64-bit; the head-dim mode is contiguous):
///  * q, o: [batch][new_tokens][heads_q][head_dim]: element (b, t, h, d) at q[b·q_batch_stride + t·q_token_stride +
///    h·q_head_stride + d]; o likewise with its own strides.
///  * lse (optional, fp32): [batch][new_tokens][heads_q], contiguous (index (b·new_tokens + t)·heads_q + h).
///  * KV cache, contiguous (page_table null): k_cache, v_cache [slots][capacity][heads_kv][head_dim]: key j of slot c
///    at k_cache[c·k_slot_stride + j·k_row_stride + hk·k_head_stride + d]. Entry b reads slot cache_batch_idx[b]
///    (device int[batch], optional; default slot b: the seed's --remap); `slots` bounds the slot index.
///  * KV cache, paged (page_table set): k_cache, v_cache [num_pages][page_size][heads_kv][head_dim] (slot stride =
///    page stride); key j of entry b lives in page page_table[c · page_table_stride + j / page_size], row
///    j % page_size, where c = cache_batch_idx[b] (or b). Any page_size ≥ 1: pages of a multiple of 64 keys are read
///    in TMA boxes of 64 keys (as fast as a contiguous cache), other multiples of 16 in boxes of 16 keys, other sizes
///    in boxes of one key (slower: one table read per key and one TMA per key and 64 columns of the head dim).
///  * k_new, v_new (optional, both or neither: the append): [batch][new_tokens][heads_kv][head_dim]. Before the
///    attention they are written into the cache at positions seqlens_k[b] … seqlens_k[b] + n − 1 of entry b (in
///    place: the caches are outputs then), in a separate kernel on the same stream, so no CTA of the attention reads
///    a slot that another is writing. Rotary embedding is not applied (out of scope: rotate k_new first).
///  * GQA / MQA: query head h reads K/V head h / (heads_q / heads_kv).
/// Device values (seqlens_k, cache_batch_idx, page_table) are clamped, never trusted: L_b to [0, min(max_seqlen_k,
/// capacity)] (paged: pages_per_seq · page_size), slot indices to [0, slots), page indices to [0, num_pages), so a bad
/// value gives a wrong result for its entry but never a read or write outside the tensors (an append past the
/// capacity is dropped). Cache rows past L_b are never read into a result, even when they hold NaN.
/// Alignment: every pointer 16-byte aligned (lse, seqlens_k, cache_batch_idx, page_table 4-byte); strides positive
/// multiples of 8 elements below 2^39 (a mode of extent 1 may have stride 0, except the caches' row stride, also with
/// page_size 1).
/// Dtypes: fp16 or bf16 for q, caches, k_new, v_new and o; fp32 accumulation. Head dims: multiples of 8 up to 128
/// (tiles 64 and 128). new_tokens 1 … 16 (with an append at most the keys a sequence's cache holds); heads_kv
/// divides heads_q. The device values must not change while a decode that reads them runs (like any input): the
/// producer warp and the consumers of a CTA read them separately.
struct DecodeParams {
  DType dtype = DType::kBF16;
  int batch = 1;
  int heads_q = 1;
  int heads_kv = 1;
  int head_dim = 128;
  int new_tokens = 1;       ///< n: query tokens per entry (1 … 16)
  /// Bound on every L_b (keys after the append) for which a plan holds; 0 = the cache's capacity (contiguous) or
  /// pages_per_seq · page_size (paged). Part of the plan: decode replays with any lengths up to it.
  int max_seqlen_k = 0;

  const void* q = nullptr;
  int64_t q_batch_stride = 0, q_token_stride = 0, q_head_stride = 0;
  void* o = nullptr;
  int64_t o_batch_stride = 0, o_token_stride = 0, o_head_stride = 0;
  float* lse = nullptr;  ///< optional

  void* k_cache = nullptr;  ///< written only by the append
  void* v_cache = nullptr;
  int64_t k_slot_stride = 0, k_row_stride = 0, k_head_stride = 0;  ///< paged: slot = page
  int64_t v_slot_stride = 0, v_row_stride = 0, v_head_stride = 0;
  int slots = 0;     ///< contiguous: slots of the cache (≥ batch without cache_batch_idx); paged: pages (≥ 1)
  int capacity = 0;  ///< contiguous: rows per slot; paged: ignored (page_size rows per page)

  const int* seqlens_k = nullptr;        ///< device int[batch]: cached tokens before this call (required)
  const int* cache_batch_idx = nullptr;  ///< optional device int[batch]: slot (or page-table row) of entry b
  const int* page_table = nullptr;       ///< paged: device int, row c of pages_per_seq page indices
  int page_size = 0;                     ///< paged: keys per page
  int pages_per_seq = 0;                 ///< paged: entries per page-table row
  int64_t page_table_stride = 0;         ///< paged: elements between page-table rows (≥ pages_per_seq)
  int page_table_rows = 0;               ///< paged: rows of the page table (bounds the row index c); 0 = batch
                                         ///< (then, or without cache_batch_idx, at least batch rows)

  const void* k_new = nullptr;  ///< optional: the append
  const void* v_new = nullptr;
  int64_t k_new_batch_stride = 0, k_new_token_stride = 0, k_new_head_stride = 0;
  int64_t v_new_batch_stride = 0, v_new_token_stride = 0, v_new_head_stride = 0;

  float softmax_scale = 0.f;  ///< 0 means 1/sqrt(head_dim)
  int splits = 0;             ///< key splits: 0 = the heuristic (DecodePlan), else at most this many
  int sm_count = 0;           ///< SMs the heuristic fills (two CTAs each); 0 or more than the device has = all
                              ///< (decode_plan then queries the device; up to 132 it plans without one)
};

/// Fills every stride of `p` for contiguous tensors (q, o, k_new, v_new [batch][n][heads][head_dim]; caches
/// [slots][capacity or page_size][heads_kv][head_dim]; page table rows of pages_per_seq) from the shape fields.
void set_decode_contiguous_strides(DecodeParams& p);

/// What a decode call launches, fixed on the host from the shapes and max_seqlen_k (never from device values), so
/// that a CUDA graph captured with one plan replays with any lengths up to max_seqlen_k. Plain integers: copy it,
/// keep it with the graph; it holds no device memory. A plan is valid for every DecodeParams with the same fields
/// that decode_plan read (dtype, batch, heads, head_dim, new_tokens, max_seqlen_k, splits, sm_count, paging).
struct DecodePlan {
  int batch = 0, heads_q = 0, heads_kv = 0, head_dim = 0, new_tokens = 0;  ///< the shape it was made for
  int max_seqlen_k = 0;    ///< resolved bound on L_b
  int block_m = 0;         ///< packed query rows per tile (the heads_q / heads_kv · new_tokens rows of a K/V head)
  int block_n = 0;         ///< keys per key block
  int m_blocks = 0;        ///< row tiles per (entry, K/V head)
  int splits = 1;          ///< key ranges per (entry, K/V head); 1: no combine
  int keys_per_split = 0;  ///< a multiple of block_n
  int num_tiles = 0;       ///< batch · heads_kv · m_blocks · splits
  int grid = 0;            ///< CTAs launched (≤ num_tiles and ≤ two per SM): a persistent grid
  std::size_t workspace_bytes = 0;  ///< fp32 partial O and LSE of the splits (0 with one split)
};

/// Checks `p` (kInvalidArgument naming the first bad argument with expected versus actual value; kNotSupported
/// for dtypes and head dims without a kernel) and fills `plan`. Needs no GPU when 0 < p.sm_count ≤ 132; otherwise
/// reads the current device's SM count (kNotSupported without an sm_90 device).
Status decode_plan(const DecodeParams& p, DecodePlan* plan);

/// Bytes of workspace decode needs with `plan` (plan.workspace_bytes).
std::size_t decode_workspace_size(const DecodePlan& plan);

/// Runs decode on `stream` (asynchronous): the append (when k_new is set), the attention, and with several splits
/// the combine. Errors: those of decode_plan; kInvalidArgument "plan: …" when `plan` was made for other shapes;
/// "workspace" when it is smaller than the plan's or misaligned; kNotBuilt, kNotSupported (device), kCudaError as
/// fwd. Capturable in a CUDA graph (no host synchronisation, no allocation).
Status decode(const DecodeParams& p, const DecodePlan& plan, Workspace workspace, cudaStream_t stream = nullptr);

/// Display name of the kernel decode runs with `plan`, e.g. "decode bf16 d128 64x64 split 4".
std::string decode_kernel_name(const DecodeParams& p, const DecodePlan& plan);

}  // namespace fmha
