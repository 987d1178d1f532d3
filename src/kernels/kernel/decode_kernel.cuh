// The decode kernel: the attention kernel's body (fwd_kernel.cuh, attention_body) with the decode family's parts.
// A tile is one key split of one row block of the packed query rows of one K/V head of one sequence
// (kernel/decode_plan.hpp): the group · n query rows that share a K/V head are packed into the tile's 64 rows, so
// the cache is read once per K/V head. One consumer warpgroup (64 rows) and the producer warp: decode is bound by
// reading K and V, which the producer streams through TMA into the same two-stage pipeline as the forward; the
// consumers load the packed Q rows themselves (their layout is not a TMA box), and the split's key range and each
// token's causal limit come from the DecodeMask. Two CTAs share an SM (tiles::kDecodeCtasPerSm), each with 16 KiB
// K and V stages (tiles::decode_block_n keys), one Q buffer and no O staging, so that one CTA's loads stay in
// flight while the other starts or ends a tile. The epilogue writes O and LSE, or with several splits the fp32
// partials that the split-KV combine reduces (collective/decode_epilogue.hpp). The tiles are walked by a static
// round robin over a persistent grid, so that the producer loads the next tile's K/V while the consumers finish.
//
// Technique: FlashDecoding (Dao et al., 2023: split-KV with an LSE-weighted combine) and FlashAttention-3's packed
// GQA rows (Shah et al., 2024), composed from this library's shared parts.
#pragma once

#include <type_traits>

#include "kernels/collective/decode_epilogue.hpp"
#include "kernels/collective/paged_kv_source.hpp"
#include "kernels/kernel/decode_plan.hpp"
#include "kernels/kernel/fwd_kernel.cuh"

namespace fmha::kernel {

/// Query rows per decode tile (one consumer warpgroup).
constexpr int kDecodeBlockM = tiles::kDecodeBlockM;

/// The decode kernels' configuration: the forward's with one consumer warpgroup of 64 rows, tiles::decode_block_n
/// keys per block, one Q buffer, no O staging and tiles::kDecodeCtasPerSm CTAs per SM, plus the TMA box of paged
/// caches (PagedKVSource): PageBoxRows keys, the first PageBoxRows rows of a K/V stage's layout. Boxes of 64 keys
/// serve pages that are a multiple of 64 keys, boxes of 16 keys other multiples of 16. PageBoxRows = 0: no box;
/// every other page size is gathered by the producer warp's lanes (PagedGatherKVSource).
template <class Element_, int HeadDim, int PageBoxRows = 16>
struct DecodeConfig : FwdConfig<Element_, HeadDim, kDecodeBlockM, tiles::decode_block_n(HeadDim), 1,
                                tiles::kDecodeCtasPerSm, false> {
  using Base = FwdConfig<Element_, HeadDim, kDecodeBlockM, tiles::decode_block_n(HeadDim), 1, tiles::kDecodeCtasPerSm,
                         false>;
  static constexpr int kPageBoxRows = PageBoxRows;
  static constexpr bool kPageGather = PageBoxRows == 0;
  static constexpr int kTmaBoxRows = kPageGather ? 1 : PageBoxRows;  // the descriptor's box (unused by gathers)
  static_assert(Base::kBlockN % kTmaBoxRows == 0, "decode: whole page boxes per key block");
  static constexpr int kAtomCols = 64;  // columns of the K/V layout's swizzle atom (128 bytes of 16-bit elements)
  static_assert(sizeof(Element_) == 2 && HeadDim % kAtomCols == 0, "decode: 16-bit elements, head-dim tiles of 64");
  using SmemLayoutKBox = decltype(composition(
      take<0, 2>(typename Base::SmemLayoutK{}),
      Layout<Shape<Int<kTmaBoxRows>, Int<HeadDim>>, Stride<_1, Int<Base::kBlockN>>>{}));
  using TmaKVPaged = decltype(make_tma_copy(SM90_TMA_LOAD{}, typename Base::GmemTensor{}, SmemLayoutKBox{},
                                            Shape<Int<kTmaBoxRows>, Int<HeadDim>>{}, _1{}));
};

/// Kernel parameters of decode (a __grid_constant__; the TMA descriptors of the caches live inside).
/// Paged: the caches are page pools read through PagedKVSource (page_table, page_size, pages_per_seq,
/// page_table_stride; slots = pages, rows per slot = page_size); else contiguous slots.
template <class Config, bool Paged>
struct DecodeKernelParams {
  using Element = typename Config::Element;
  using Tma = std::conditional_t<Paged, typename Config::TmaKVPaged, typename Config::TmaKV>;
  Tma tma_k;
  Tma tma_v;
  typename Config::GmemShape shape_k;  ///< (rows per slot or page, head dim, K/V heads, slots or pages) of both caches
  DecodePlanInfo plan;
  int heads_q, heads_kv, group, new_tokens, head_dim;
  int max_keys;  ///< bound on L_b: min(plan's max_seqlen_k, cache rows per slot)
  int slots;     ///< bound on the slot index
  bool append;   ///< L_b = seqlens_k[b] + n (else seqlens_k[b])
  const int* seqlens_k;
  const int* cache_batch_idx;  ///< null: slot (or page-table row) b
  const int* page_table;       ///< paged: row c holds the pages of slot c
  int64_t page_table_stride;
  int page_size, pages_per_seq, page_table_rows;
  const Element* q;
  int64_t q_batch_stride, q_token_stride, q_head_stride;
  Element* o;
  int64_t o_batch_stride, o_token_stride, o_head_stride;
  float* lse;       ///< optional [batch][n][heads_q]
  float* o_part;    ///< splits > 1: [splits][rows_total][head_dim]
  float* lse_part;  ///< splits > 1: [splits][rows_total]
  int64_t rows_total;  ///< batch · n · heads_q
  float scale, scale_log2;
  // The caches as plain strided pointers (elements), for exact_rows only.
  const Element* k;
  const Element* v;
  int64_t k_slot_stride, k_row_stride, k_head_stride;
  int64_t v_slot_stride, v_row_stride, v_head_stride;
#ifdef FMHA_TIMELINE
  unsigned long long* timeline;
#endif
};

/// One decode tile with its sequence's geometry: rows [m_block · 64, …) of the sq = group · n packed rows of K/V
/// head hk of entry b, against keys [k_off, k_off + sk) of cache slot `slot` (key split `split`); token t sees the
/// range's keys j ≤ t + offset.
struct DecodeWork {
  int m_block, b, hk, split, slot;
  int sq, k_off, sk, offset;
};

/// Key j of a paged cache for exact_rows (the ExactRow members): page table entry (k_begin + j) / page_size, clamped
/// as in PagedKVSource.
template <class Element>
struct PagedExactRow {
  const Element* q;
  const Element* k_base;  ///< K/V head hk of page 0
  const Element* v_base;
  const int* table_row;
  int64_t k_page_stride, k_row_stride, v_page_stride, v_row_stride;
  int page_size, pages_per_seq, num_pages, k_begin;
  CUTLASS_DEVICE int64_t page_of(int key) const {
    return min(max(table_row[min(key / page_size, pages_per_seq - 1)], 0), num_pages - 1);
  }
  CUTLASS_DEVICE const Element* k(int j) const {
    const int key = k_begin + j;
    return k_base + page_of(key) * k_page_stride + int64_t(key % page_size) * k_row_stride;
  }
  CUTLASS_DEVICE const Element* v(int j) const {
    const int key = k_begin + j;
    return v_base + page_of(key) * v_page_stride + int64_t(key % page_size) * v_row_stride;
  }
};

/// The decode family of the attention kernel (the members FwdFamily documents); Paged: the caches are page pools.
template <class Config, bool Paged>
struct DecodeFamily {
  using Params = DecodeKernelParams<Config, Paged>;
  using Tile = DecodeWork;
  using Mask = DecodeMask<Config::kBlockM, Config::kBlockN>;
  using Epilogue = DecodeEpilogue<Config>;
  using Element = typename Config::Element;
  static constexpr bool kCausal = false;  // no tile pairing; the per-token limit is the DecodeMask's
  static constexpr bool kQFromProducer = false;
  static constexpr bool kKVGather = Paged && Config::kPageGather;

  CUTLASS_DEVICE static int first(Params const&) { return int(blockIdx.x); }
  CUTLASS_DEVICE static int next(Params const&, int t) { return t + int(gridDim.x); }
  CUTLASS_DEVICE static int num_tiles(Params const& p) { return p.plan.num_tiles; }

  /// Tile t, with its sequence's length read on the device and clamped (never trusted): L to [0, max_keys], the
  /// slot to [0, slots).
  CUTLASS_DEVICE static Tile tile(Params const& p, int t) {
    const DecodeTile d = decode_tile_of(p.plan, p.heads_kv, t);
    Tile w;
    w.m_block = d.m_block;
    w.b = d.b;
    w.hk = d.hk;
    w.split = d.split;
    const int cached = min(max(p.seqlens_k[d.b], 0), p.max_keys);
    const int len = min(p.append ? cached + p.new_tokens : cached, p.max_keys);  // max_keys ≤ 2^31 − 17
    const int rows = Paged ? p.page_table_rows : p.slots;  // paged: `slot` is the page-table row
    w.slot = p.cache_batch_idx ? min(max(p.cache_batch_idx[d.b], 0), rows - 1) : d.b;
    const KeyRangeOfSplit r = split_key_range(p.plan, d.split, len);
    w.sq = p.plan.rows_per_head;
    w.k_off = r.begin;
    w.sk = r.end - r.begin;
    w.offset = len - p.new_tokens - r.begin;
    return w;
  }
  CUTLASS_DEVICE static Mask mask(Params const& p, Tile const& w) {
    return {w.sk, w.offset, w.m_block * Config::kBlockM, w.sq, p.group};
  }
  CUTLASS_DEVICE static void prefetch(Params const& p) {
    prefetch_tma_descriptors(p.tma_k, p.tma_v);
  }
  /// The cache's keys of the split, from row k_off of slot `slot`, K/V head hk (TMA fills past the slot's rows with
  /// zeros; rows past L inside the slot are masked, and V's zeroed: kv_tail_dirty).
  template <class SK, class SV>
  CUTLASS_DEVICE static auto kv_source(Params const& p, Tile const& w, SK const& sK, SV const& sV) {
    Tensor mK = p.tma_k.get_tma_tensor(p.shape_k);
    Tensor mV = p.tma_v.get_tma_tensor(p.shape_k);
    if constexpr (kKVGather) {
      using Source = PagedGatherKVSource<Config::kBlockN, Config::kHeadDim, typename Config::SmemLayoutK, Element>;
      return Source{p.k + int64_t(w.hk) * p.k_head_stride, p.v + int64_t(w.hk) * p.v_head_stride, p.k_slot_stride,
                    p.k_row_stride, p.v_slot_stride, p.v_row_stride, raw_pointer_cast(sK.data()),
                    raw_pointer_cast(sV.data()), p.page_table + int64_t(w.slot) * p.page_table_stride,
                    p.pages_per_seq, p.page_size, p.slots, w.k_off, p.head_dim};
    } else if constexpr (Paged) {
      using Source = PagedKVSource<Config::kBlockN, Config::kPageBoxRows, Config::kHeadDim, Config::kAtomCols,
                                   typename Config::SmemLayoutKBox, Element, typename Params::Tma,
                                   typename Params::Tma, decltype(mK), decltype(mV)>;
      return Source{p.tma_k, p.tma_v, mK, mV, raw_pointer_cast(sK.data()), raw_pointer_cast(sV.data()),
                    p.page_table + int64_t(w.slot) * p.page_table_stride, p.pages_per_seq, p.page_size, p.slots,
                    w.k_off, w.hk};
    } else {
      return kv_dense(p, w, mK, mV, sK, sV);
    }
  }
  template <class MK, class MV, class SK, class SV>
  CUTLASS_DEVICE static auto kv_dense(Params const& p, Tile const& w, MK const& mK, MV const& mV, SK const& sK,
                                      SV const& sV) {
    Tensor gK = local_tile(domain_offset(make_coord(w.k_off, _0{}), mK(_, _, w.hk, w.slot)),
                           Shape<Int<Config::kBlockN>, Int<Config::kHeadDim>>{}, make_coord(_, _0{}));
    Tensor gV = local_tile(domain_offset(make_coord(w.k_off, _0{}), mV(_, _, w.hk, w.slot)),
                           Shape<Int<Config::kBlockN>, Int<Config::kHeadDim>>{}, make_coord(_, _0{}));
    return make_dense_kv_source(p.tma_k, p.tma_v, gK, gV, sK, sV);
  }
  /// A cache slot's rows past L may hold anything (NaN included).
  CUTLASS_DEVICE static bool kv_tail_dirty(Params const&) { return true; }
  CUTLASS_DEVICE static int head_dim(Params const& p) { return p.head_dim; }

  /// Packed row i: token i / group of query head hk · group + i % group.
  CUTLASS_DEVICE static auto exact_row(Params const& p, Tile const& w, int i) {
    const PackedRow pr = packed_row(i, w.hk, p.group);
    if constexpr (Paged) {
      PagedExactRow<Element> r;
      r.q = p.q + int64_t(w.b) * p.q_batch_stride + int64_t(pr.token) * p.q_token_stride +
            int64_t(pr.head) * p.q_head_stride;
      r.k_base = p.k + int64_t(w.hk) * p.k_head_stride;
      r.v_base = p.v + int64_t(w.hk) * p.v_head_stride;
      r.table_row = p.page_table + int64_t(w.slot) * p.page_table_stride;
      r.k_page_stride = p.k_slot_stride, r.k_row_stride = p.k_row_stride;
      r.v_page_stride = p.v_slot_stride, r.v_row_stride = p.v_row_stride;
      r.page_size = p.page_size, r.pages_per_seq = p.pages_per_seq, r.num_pages = p.slots, r.k_begin = w.k_off;
      return r;
    } else {
      return exact_dense(p, w, pr);
    }
  }
  CUTLASS_DEVICE static ExactRow<Element> exact_dense(Params const& p, Tile const& w, PackedRow pr) {
    ExactRow<Element> r;
    r.q = p.q + int64_t(w.b) * p.q_batch_stride + int64_t(pr.token) * p.q_token_stride +
          int64_t(pr.head) * p.q_head_stride;
    r.k0 = p.k + int64_t(w.slot) * p.k_slot_stride + int64_t(w.k_off) * p.k_row_stride +
           int64_t(w.hk) * p.k_head_stride;
    r.v0 = p.v + int64_t(w.slot) * p.v_slot_stride + int64_t(w.k_off) * p.v_row_stride +
           int64_t(w.hk) * p.v_head_stride;
    r.k_row_stride = p.k_row_stride;
    r.v_row_stride = p.v_row_stride;
    return r;
  }

  /// The consumers' load of the tile's packed Q rows into the stage sQs ((64, head-dim tile), swizzled): 16-byte
  /// chunks (8 elements, contiguous in the swizzled layout too), zeros in padding rows and columns past head_dim.
  /// tid: 0 … 128 · consumer warpgroups − 1.
  template <class SQs>
  CUTLASS_DEVICE static void load_q(Params const& p, Tile const& w, SQs&& sQs, int tid) {
    constexpr int kChunks = Config::kHeadDim / 8;
    constexpr int kThreads = 128 * Config::kConsumerWGs;
    CUTLASS_PRAGMA_UNROLL
    for (int idx = tid; idx < Config::kBlockM * kChunks; idx += kThreads) {
      const int row = idx / kChunks;
      const int col = (idx % kChunks) * 8;
      const int i = w.m_block * Config::kBlockM + row;
      uint4 val = make_uint4(0, 0, 0, 0);
      if (i < w.sq && col < p.head_dim) {
        const PackedRow pr = packed_row(i, w.hk, p.group);
        val = *reinterpret_cast<const uint4*>(p.q + int64_t(w.b) * p.q_batch_stride +
                                              int64_t(pr.token) * p.q_token_stride +
                                              int64_t(pr.head) * p.q_head_stride + col);
      }
      *reinterpret_cast<uint4*>(&sQs(row, col)) = val;
    }
  }
};

template <class Config, bool Paged>
__global__ void __launch_bounds__(Config::kThreads, Config::kCtasPerSm)
    decode_kernel(CUTE_GRID_CONSTANT DecodeKernelParams<Config, Paged> const p) {
  attention_body<Config, false, DecodeFamily<Config, Paged>>(p);
}

/// The append: new K/V rows [batch][n][heads_kv][head_dim] written into the cache at positions seqlens_k[b] + t of
/// entry b's slot or pages (the same clamps as DecodeFamily::tile and PagedKVSource; positions past the slot's rows
/// are dropped). One thread
/// per 16-byte chunk of a (b, t, hk) row of K and of V.
template <class Element>
struct DecodeAppendArgs {
  int batch, new_tokens, heads_kv, head_dim;
  int rows_per_slot;  ///< contiguous: capacity; paged: pages_per_seq · page_size
  int slots;          ///< contiguous: slots; paged: pages
  const int* seqlens_k;
  const int* cache_batch_idx;
  const int* page_table;  ///< null: contiguous
  int64_t page_table_stride;
  int page_size, pages_per_seq, page_table_rows;
  const Element* k_new;
  const Element* v_new;
  int64_t k_new_batch_stride, k_new_token_stride, k_new_head_stride;
  int64_t v_new_batch_stride, v_new_token_stride, v_new_head_stride;
  Element* k;
  Element* v;
  int64_t k_slot_stride, k_row_stride, k_head_stride;
  int64_t v_slot_stride, v_row_stride, v_head_stride;
};

template <class Element>
__global__ void decode_append_kernel(DecodeAppendArgs<Element> const a) {
  const int chunks = a.head_dim / 8;
  const int64_t total = int64_t(a.batch) * a.new_tokens * a.heads_kv * chunks;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int x = int(idx % chunks) * 8;
    int64_t rest = idx / chunks;
    const int hk = int(rest % a.heads_kv);
    rest /= a.heads_kv;
    const int t = int(rest % a.new_tokens);
    const int b = int(rest / a.new_tokens);
    const int pos = min(max(a.seqlens_k[b], 0), a.rows_per_slot) + t;
    if (pos >= a.rows_per_slot) continue;
    const int rows = a.page_table ? a.page_table_rows : a.slots;
    const int c = a.cache_batch_idx ? min(max(a.cache_batch_idx[b], 0), rows - 1) : b;
    int slot = c, row = pos;
    if (a.page_table) {  // clamped as in PagedKVSource
      slot = min(max(a.page_table[int64_t(c) * a.page_table_stride + pos / a.page_size], 0), a.slots - 1);
      row = pos % a.page_size;
    }
    const uint4 kv = *reinterpret_cast<const uint4*>(a.k_new + b * a.k_new_batch_stride + t * a.k_new_token_stride +
                                                     hk * a.k_new_head_stride + x);
    const uint4 vv = *reinterpret_cast<const uint4*>(a.v_new + b * a.v_new_batch_stride + t * a.v_new_token_stride +
                                                     hk * a.v_new_head_stride + x);
    *reinterpret_cast<uint4*>(a.k + slot * a.k_slot_stride + row * a.k_row_stride + hk * a.k_head_stride + x) = kv;
    *reinterpret_cast<uint4*>(a.v + slot * a.v_slot_stride + row * a.v_row_stride + hk * a.v_head_stride + x) = vv;
  }
}

}  // namespace fmha::kernel
