// The paged K/V source of the attention kernel's producer (decode): the same calls as the dense sources of
// collective/kv_source.hpp (load_k / load_v of key block n into a pipeline stage), for caches kept as pages of a
// pool with a page table, so the producer loop and the mainloop stay as they are. Its own header, so that work on
// it rebuilds only the decode units.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

namespace fmha::kernel {

/// K/V blocks of one (entry, K/V head) from a paged cache through TMA (decode): key j of the tile's range is key
/// k_begin + j of the sequence, which lives in page table_row[(k_begin + j) / page_size], row (k_begin + j) %
/// page_size. Each key block of kBlockN keys is loaded as kBlockN / kBoxRows TMA boxes of kBoxRows keys, each from its
/// own page, so any page size that is a multiple of kBoxRows works (several boxes per page, or several pages per
/// block); kBoxRows = 1 takes any page size. Page-table reads are clamped to the row's pages_per_seq entries and page
/// indices to [0, num_pages): keys past the sequence's length (masked by the consumers) come from some valid page,
/// never from outside the cache. The table entries of up to 16 boxes are read together (independent loads), then
/// their boxes issued.
/// mK / mV: the caches' TMA tensors (page rows, head dim, K/V heads, pages); smem_k / smem_v the stages' storage,
/// each stage kBlockN · kHeadDim elements in the layout whose first kBoxRows rows SmemLayoutBox describes: box i of
/// a stage starts kBoxRows · kAtomCols elements further (kAtomCols: the columns of the layout's swizzle atom, whose
/// rows are contiguous). A box that starts inside the swizzle's 8-row period lands where the stage's layout expects
/// it, because the 128-byte swizzle is a function of the shared-memory address for TMA writes and wgmma reads alike
/// (the stages are 1024-byte aligned); TMA needs each box to start on 128 bytes, which one row of kAtomCols 16-bit
/// elements is.
template <int kBlockN, int kBoxRows, int kHeadDim, int kAtomCols, class SmemLayoutBox, class Element, class TmaK,
          class TmaV, class MK, class MV>
struct PagedKVSource {
  static_assert(kBlockN % kBoxRows == 0, "paged K/V source: whole boxes per key block");
  static_assert((kAtomCols * sizeof(Element)) % 128 == 0, "paged K/V source: boxes must start on 128 bytes");
  static constexpr int kBoxes = kBlockN / kBoxRows;
  static constexpr int kChunk = kBoxes < 16 ? kBoxes : 16;  // boxes whose table entries are read together
  static_assert(kBoxes % kChunk == 0, "paged K/V source: whole chunks of boxes per key block");
  TmaK const& tma_k;
  TmaV const& tma_v;
  MK mK;
  MV mV;
  Element* smem_k;
  Element* smem_v;
  const int* table_row;
  int pages_per_seq, page_size, num_pages, k_begin, hk;

  /// The boxes c0 … c0 + kChunk − 1 of key block n: their table entries first (independent loads), then the boxes.
  template <class Tma, class M, class Barrier>
  CUTLASS_DEVICE void load_chunk(Tma const& tma, M const& m, Element* smem, int n, int c0, int stage,
                                 Barrier& barrier) const {
    using namespace cute;
    int page[kChunk];
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < kChunk; ++i) {
      const int key = k_begin + n * kBlockN + (c0 + i) * kBoxRows;
      page[i] = min(max(table_row[min(key / page_size, pages_per_seq - 1)], 0), num_pages - 1);
    }
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < kChunk; ++i) {
      const int row = (k_begin + n * kBlockN + (c0 + i) * kBoxRows) % page_size;
      Tensor g = local_tile(m(_, _, hk, page[i]), Shape<Int<kBoxRows>, Int<kHeadDim>>{},
                            make_coord(row / kBoxRows, _0{}));
      Tensor sb = make_tensor(make_smem_ptr(smem + stage * (kBlockN * kHeadDim) + (c0 + i) * (kBoxRows * kAtomCols)),
                              SmemLayoutBox{});
      auto part = tma_partition(tma, _0{}, Layout<_1>{}, group_modes<0, 2>(sb), group_modes<0, 2>(g));
      cute::copy(tma.with(barrier), get<0>(part), get<1>(part));
    }
  }
  template <class Tma, class M, class Barrier>
  CUTLASS_DEVICE void load(Tma const& tma, M const& m, Element* smem, int n, int stage, Barrier& barrier) const {
    if constexpr (kChunk == kBoxes) {
      load_chunk(tma, m, smem, n, 0, stage, barrier);
    } else {
#pragma unroll 1
      for (int c0 = 0; c0 < kBoxes; c0 += kChunk) load_chunk(tma, m, smem, n, c0, stage, barrier);
    }
  }
  /// Issues the TMA loads of K block n into stage `stage`, completing (transaction bytes) on `barrier`.
  template <class Barrier>
  CUTLASS_DEVICE void load_k(int n, int stage, Barrier& barrier) const { load(tma_k, mK, smem_k, n, stage, barrier); }
  /// Issues the TMA loads of V block n into stage `stage`, completing on `barrier`.
  template <class Barrier>
  CUTLASS_DEVICE void load_v(int n, int stage, Barrier& barrier) const { load(tma_v, mV, smem_v, n, stage, barrier); }
};

/// K/V blocks of one (entry, K/V head) from a paged cache whose pages hold no whole TMA box of 16 keys (any page
/// size that is not a multiple of 16: 1, 5, 24, …), gathered by the 32 lanes of the producer warp with cp.async, as
/// FlashAttention-3's PagedKVManager does for pages other than its key block: the same load_k / load_v calls as the
/// TMA sources, each called by every lane of the warp. Key j of the tile's range is key k_begin + j of the sequence,
/// row (k_begin + j) % page_size of page table_row[(k_begin + j) / page_size] (clamped as in PagedKVSource). A key
/// row of kHeadDim 16-bit elements is kHeadDim / 8 chunks of 16 bytes; lane l copies chunk l % (kHeadDim / 8) of
/// rows l / (kHeadDim / 8), + 32 / (kHeadDim / 8), … of the block into the stage's swizzled layout (a 16-byte chunk
/// is contiguous in the 128-byte swizzle), reading the page table once per row (eight rows' entries at a time), and
/// zero-fills the chunks past head_dim (a head dim below the tile's; TMA zero-fills them in the other sources).
/// Each lane then arrives on the stage's full barrier when its copies have landed (cp.async.mbarrier.arrive.noinc:
/// the barrier counts 32 arrivals, tma_pipeline_params' gather_lanes).
/// k / v: element 0 of K/V head hk in page 0; strides in elements; smem_k / smem_v: the stages (SmemLayoutKV:
/// (kBlockN, kHeadDim, stages)).
template <int kBlockN, int kHeadDim, class SmemLayoutKV, class Element>
struct PagedGatherKVSource {
  static constexpr int kChunks = kHeadDim * int(sizeof(Element)) / 16;  // 16-byte chunks per key row
  static_assert(32 % kChunks == 0 && kBlockN % (32 / kChunks) == 0, "paged gather: whole rows per pass of the warp");
  static constexpr int kRowsPerPass = 32 / kChunks;
  const Element* k;
  const Element* v;
  int64_t k_page_stride, k_row_stride, v_page_stride, v_row_stride;
  Element* smem_k;
  Element* smem_v;
  const int* table_row;
  int pages_per_seq, page_size, num_pages, k_begin, head_dim;

  /// This lane's copies of key block n into stage `stage`, then its arrival on `barrier` when they complete. Rows go
  /// in batches of kBatch: their table entries are loaded together (independent loads), then their copies issued.
  CUTLASS_DEVICE void gather(const Element* base, int64_t page_stride, int64_t row_stride, Element* smem, int n,
                             int stage, uint64_t& barrier) const {
    using namespace cute;
    constexpr int kRowsPerLane = kBlockN / kRowsPerPass;
    constexpr int kBatch = kRowsPerLane < 8 ? kRowsPerLane : 8;
    static_assert(kRowsPerLane % kBatch == 0, "paged gather: whole batches of rows");
    const int lane = int(threadIdx.x % 32);
    const int col = (lane % kChunks) * (16 / int(sizeof(Element)));
    const uint32_t src_bytes = col < head_dim ? 16u : 0u;  // head_dim is a multiple of 8: chunks wholly in or out
    const Element* base_col = base + (src_bytes ? col : 0);
    Tensor s = make_tensor(make_smem_ptr(smem), SmemLayoutKV{});
    const int r0 = lane / kChunks;
    const int key = k_begin + n * kBlockN + r0;
    int page_idx = key / page_size;  // this lane's next row: (page_idx, row)
    int row = key - page_idx * page_size;
    CUTLASS_PRAGMA_NO_UNROLL
    for (int b = 0; b < kRowsPerLane; b += kBatch) {
      int page[kBatch], prow[kBatch];
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < kBatch; ++i) {
        page[i] = table_row[min(page_idx, pages_per_seq - 1)];
        prow[i] = row;
        row += kRowsPerPass;  // the next row of this lane: kRowsPerPass keys on, at most that many pages on
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < kRowsPerPass; ++j) {
          if (row >= page_size) {
            row -= page_size;
            ++page_idx;
          }
        }
      }
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < kBatch; ++i) {
        const int pg = min(max(page[i], 0), num_pages - 1);
        const Element* src = base_col + int64_t(pg) * page_stride + int64_t(prow[i]) * row_stride;
        const uint32_t dst = cast_smem_ptr_to_uint(&s(r0 + (b + i) * kRowsPerPass, col, stage));
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
      }
    }
    cutlass::arch::cpasync_barrier_arrive_noinc(&barrier);
  }
  /// Every lane: K block n into stage `stage`, completing on `barrier` (32 lane arrivals).
  template <class Barrier>
  CUTLASS_DEVICE void load_k(int n, int stage, Barrier& barrier) const {
    gather(k, k_page_stride, k_row_stride, smem_k, n, stage, barrier);
  }
  /// Every lane: V block n into stage `stage`, completing on `barrier`.
  template <class Barrier>
  CUTLASS_DEVICE void load_v(int n, int stage, Barrier& barrier) const {
    gather(v, v_page_stride, v_row_stride, smem_v, n, stage, barrier);
  }
};

}  // namespace fmha::kernel
