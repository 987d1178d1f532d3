// Where the producer's operands come from. A K/V source issues the load of key block n of the current tile into a
// shared-memory pipeline stage, completing on that stage's mbarrier; a Q source the load of the tile's query rows.
// The forward reads dense tensors with TMA (DenseKVSource, DenseQSource); decode reads contiguous caches with the
// dense source and paged ones with PagedKVSource (TMA boxes of 16 keys, each from its page), with the same calls, so
// the producer loop and the mainloop stay as they are.
#pragma once

#include <cute/tensor.hpp>

namespace fmha::kernel {

/// K/V blocks of one (entry, K/V head) from dense tensors through TMA: tKg / tVg are the TMA partitions of the
/// tile's global K and V blocks, (TMA, block n), tKs / tVs those of the shared-memory stages, (TMA, stage).
template <class TmaK, class TmaV, class TKg, class TKs, class TVg, class TVs>
struct DenseKVSource {
  TmaK const& tma_k;
  TmaV const& tma_v;
  TKg tKg;
  TKs tKs;
  TVg tVg;
  TVs tVs;

  /// Issues the TMA load of K block n into stage `stage`, completing (transaction bytes) on `barrier`.
  template <class Barrier>
  CUTLASS_DEVICE void load_k(int n, int stage, Barrier& barrier) const {
    cute::copy(tma_k.with(barrier), tKg(cute::_, n), tKs(cute::_, stage));
  }

  /// Issues the TMA load of V block n into stage `stage`, completing on `barrier`.
  template <class Barrier>
  CUTLASS_DEVICE void load_v(int n, int stage, Barrier& barrier) const {
    cute::copy(tma_v.with(barrier), tVg(cute::_, n), tVs(cute::_, stage));
  }
};

/// The dense source of one tile: the TMA descriptors and the tile's global K / V views gK, gV ((keys, head dim,
/// block)), partitioned against the shared-memory stage tensors sK, sV ((keys, head dim, stage)).
template <class TmaK, class TmaV, class GK, class GV, class SK, class SV>
CUTLASS_DEVICE auto make_dense_kv_source(TmaK const& tma_k, TmaV const& tma_v, GK const& gK, GV const& gV,
                                         SK const& sK, SV const& sV) {
  using namespace cute;
  auto part_k = tma_partition(tma_k, _0{}, Layout<_1>{}, group_modes<0, 2>(sK), group_modes<0, 2>(gK));
  auto part_v = tma_partition(tma_v, _0{}, Layout<_1>{}, group_modes<0, 2>(sV), group_modes<0, 2>(gV));
  return DenseKVSource<TmaK, TmaV, decltype(get<0>(part_k)), decltype(get<1>(part_k)), decltype(get<0>(part_v)),
                       decltype(get<1>(part_v))>{tma_k, tma_v, get<0>(part_k), get<1>(part_k), get<0>(part_v),
                                                 get<1>(part_v)};
}

/// K/V blocks of one (entry, K/V head) from a paged cache through TMA (decode): key j of the tile's range is key
/// k_begin + j of the sequence, which lives in page table_row[(k_begin + j) / page_size], row (k_begin + j) %
/// page_size. Each key block of kBlockN keys is loaded as kBlockN / kBoxRows TMA boxes of kBoxRows keys, each from its
/// own page, so any page size that is a multiple of kBoxRows works (several boxes per page, or several pages per
/// block). Page-table reads are clamped to the row's pages_per_seq entries and page indices to [0, num_pages): keys
/// past the sequence's length (masked by the consumers) come from some valid page, never from outside the cache.
/// mK / mV: the caches' TMA tensors (page rows, head dim, K/V heads, pages); smem_k / smem_v the stages' storage,
/// each stage kBlockN · kHeadDim elements in the layout whose first kBoxRows rows SmemLayoutBox describes: box i of
/// a stage starts kBoxRows · kAtomCols elements further (kAtomCols: the columns of the layout's swizzle atom, whose
/// rows are contiguous), which the swizzle leaves alone (it permutes within 1024 elements).
template <int kBlockN, int kBoxRows, int kHeadDim, int kAtomCols, class SmemLayoutBox, class Element, class TmaK,
          class TmaV, class MK, class MV>
struct PagedKVSource {
  static_assert(kBlockN % kBoxRows == 0, "paged K/V source: whole boxes per key block");
  static_assert((kBoxRows * kAtomCols) % 1024 == 0, "paged K/V source: box offsets must not touch the swizzle's bits");
  TmaK const& tma_k;
  TmaV const& tma_v;
  MK mK;
  MV mV;
  Element* smem_k;
  Element* smem_v;
  const int* table_row;
  int pages_per_seq, page_size, num_pages, k_begin, hk;

  template <class Tma, class M, class Barrier>
  CUTLASS_DEVICE void load(Tma const& tma, M const& m, Element* smem, int n, int stage, Barrier& barrier) const {
    using namespace cute;
    int page[kBlockN / kBoxRows];
    CUTLASS_PRAGMA_UNROLL  // the table reads first, independent of each other
    for (int i = 0; i < kBlockN / kBoxRows; ++i) {
      const int key = k_begin + n * kBlockN + i * kBoxRows;
      page[i] = min(max(table_row[min(key / page_size, pages_per_seq - 1)], 0), num_pages - 1);
    }
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < kBlockN / kBoxRows; ++i) {
      const int row = (k_begin + n * kBlockN + i * kBoxRows) % page_size;
      Tensor g = local_tile(m(_, _, hk, page[i]), Shape<Int<kBoxRows>, Int<kHeadDim>>{},
                            make_coord(row / kBoxRows, _0{}));
      Tensor sb = make_tensor(make_smem_ptr(smem + stage * (kBlockN * kHeadDim) + i * (kBoxRows * kAtomCols)),
                              SmemLayoutBox{});
      auto part = tma_partition(tma, _0{}, Layout<_1>{}, group_modes<0, 2>(sb), group_modes<0, 2>(g));
      cute::copy(tma.with(barrier), get<0>(part), get<1>(part));
    }
  }
  /// Issues the TMA loads of K block n into stage `stage`, completing (transaction bytes) on `barrier`.
  template <class Barrier>
  CUTLASS_DEVICE void load_k(int n, int stage, Barrier& barrier) const { load(tma_k, mK, smem_k, n, stage, barrier); }
  /// Issues the TMA loads of V block n into stage `stage`, completing on `barrier`.
  template <class Barrier>
  CUTLASS_DEVICE void load_v(int n, int stage, Barrier& barrier) const { load(tma_v, mV, smem_v, n, stage, barrier); }
};

/// The query rows of one tile from a dense tensor through TMA: tQg is the TMA partition of the tile's global Q
/// block, tQs that of the shared-memory stages, (TMA, stage).
template <class TmaQ, class TQg, class TQs>
struct DenseQSource {
  TmaQ const& tma_q;
  TQg tQg;
  TQs tQs;

  /// Issues the TMA load of the tile's Q into stage `stage`, completing on `barrier`.
  template <class Barrier>
  CUTLASS_DEVICE void load_q(int stage, Barrier& barrier) const {
    cute::copy(tma_q.with(barrier), tQg, tQs(cute::_, stage));
  }
};

/// The dense Q source of one tile: the TMA descriptor and the tile's global Q block gQ ((rows, head dim)),
/// partitioned against the shared-memory stage tensor sQ ((rows, head dim, stage)).
template <class TmaQ, class GQ, class SQ>
CUTLASS_DEVICE auto make_dense_q_source(TmaQ const& tma_q, GQ const& gQ, SQ const& sQ) {
  using namespace cute;
  auto part_q = tma_partition(tma_q, _0{}, Layout<_1>{}, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
  return DenseQSource<TmaQ, decltype(get<0>(part_q)), decltype(get<1>(part_q))>{tma_q, get<0>(part_q),
                                                                                get<1>(part_q)};
}

}  // namespace fmha::kernel
