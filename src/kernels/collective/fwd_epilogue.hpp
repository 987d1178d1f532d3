// The forward's epilogue: a finished tile's O (the accumulator times each row's normaliser, in the input type) and
// LSE, written by each consumer warpgroup for its 64 rows. At head-dim tiles ≤ 64 (Config::kTmaStoreO) O goes
// through a swizzled shared-memory slice per warpgroup with stmatrix and leaves by one TMA store per warpgroup
// (dense problems; the store tensor's bounds clip rows past seqlen_q and columns past head_dim) or 16-byte stores
// (varlen); at 128, through a padded slice and 16-byte stores. The decode / split-KV epilogue (fp32 partial O and
// LSE per split) will sit beside it and share the LSE addressing.
#pragma once

#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "kernels/collective/fragment.hpp"

namespace fmha::kernel {

template <class Config>
struct FwdEpilogue {
  using Element = typename Config::Element;
  static constexpr int kBlockM = Config::kBlockM;
  static constexpr int kHeadDim = Config::kHeadDim;

  /// Row i (within the entry) of tile w's LSE, when p.lse is set, `writer` (one thread per row) and the row is
  /// inside the entry: dense [batch][heads_q][seqlen_q], varlen [heads_q][total_q].
  template <class Params, class Tile>
  CUTLASS_DEVICE static void store_lse(Params const& p, Tile const& w, bool writer, int i, float lse) {
    if (p.lse != nullptr && writer && i < w.sq) {
      const int64_t idx = p.cu_q ? int64_t(w.h) * p.total_q + w.q_off + i
                                 : (int64_t(w.b) * p.order.heads_q + w.h) * p.order.seqlen_q + i;
      p.lse[idx] = lse;
    }
  }

  /// O(r, c) · inv[r] of this thread's accumulator rows (O: the (rows, columns) view of tOrO, tOcO its coordinates
  /// in the tile) into the output, for warpgroup wg (threads tid_wg = 0 … 127 of it, tid over the consumers) of tile
  /// w. sO is the shared-memory staging layout of Config::SmemLayoutO over smem_o; wg_barrier the warpgroup's named
  /// barrier. At kTmaStoreO the warpgroup's previous TMA store must have finished reading its slice: waited for here.
  template <class Params, class Tile, class TensorO, class TensorAcc, class TensorOc, class TiledMma, class TensorSO,
            int kRows>
  CUTLASS_DEVICE static void store_o(Params const& p, Tile const& w, TensorO const& O, TensorAcc const& tOrO,
                                     float const (&inv)[kRows], TensorOc const& tOcO, TiledMma const& mma_pv,
                                     TensorSO& sO, Element* smem_o, int tid, int tid_wg, int wg, int wg_barrier) {
    using namespace cute;
    static_assert(Config::kStageO, "forward epilogue: stores O through the shared-memory staging (FwdConfig StageO)");
    if constexpr (Config::kTmaStoreO) {
      // This warpgroup's staging slice may still be read by the TMA store of its previous tile.
      if (tid_wg == 0) tma_store_wait<0>();
      cutlass::arch::NamedBarrier::sync(128, wg_barrier);
      Tensor sOt = make_tensor(make_smem_ptr(smem_o), typename Config::SmemLayoutOTile{});  // (BlockM, HD)
      Tensor sOw = sO(_, _, wg);  // (64, head dim)
      {
        // O / row_sum in the input type, in the accumulator's layout, then to shared memory with stmatrix.
        Tensor tOrOut = make_tensor<Element>(tOrO.layout());
        Tensor Out = make_tensor(tOrOut.data(), acc_rowcol(tOrO.layout()));
        CUTLASS_PRAGMA_UNROLL
        for (int r = 0; r < kRows; ++r)
          CUTLASS_PRAGMA_UNROLL
          for (int c = 0; c < size<1>(O); ++c) Out(r, c) = static_cast<Element>(O(r, c) * inv[r]);
        auto smem_copy_o = make_tiled_copy_C(Copy_Atom<SM90_U32x4_STSM_N, Element>{}, mma_pv);
        auto thr_copy_o = smem_copy_o.get_thread_slice(tid);
        copy(smem_copy_o, thr_copy_o.retile_S(tOrOut), thr_copy_o.partition_D(sOt));
      }
      const int row0 = w.m_block * kBlockM + 64 * wg;  // first row of this warpgroup's slice
      if (p.cu_q == nullptr) {
        // Dense: one TMA store per warpgroup, issued by one thread; the warpgroup goes on to its next tile while the
        // copy engine writes O (the store tensor's bounds clip rows past seqlen_q and columns past head_dim).
        cutlass::arch::fence_view_async_shared();
        cutlass::arch::NamedBarrier::sync(128, wg_barrier);
        if (tid_wg == 0 && row0 < w.sq) {
          Tensor mO = p.tma_o.get_tma_tensor(p.shape_o);
          Tensor gO = local_tile(mO(_, _, w.h, w.b), Shape<_64, Int<kHeadDim>>{}, make_coord(row0 / 64, _0{}));
          auto tma_slice = p.tma_o.get_slice(_0{});
          copy(p.tma_o, tma_slice.partition_S(sOw), tma_slice.partition_D(gO));
          tma_store_arrive();
        }
      } else {
        // Varlen: 16-byte stores of the rows inside the entry.
        cutlass::arch::NamedBarrier::sync(128, wg_barrier);
        constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
        Element* o_base = p.o + int64_t(w.h) * p.o_head_stride;
        for (int idx = tid_wg; idx < 64 * kChunks; idx += 128) {
          const int row = idx / kChunks;
          const int col = (idx % kChunks) * 8;
          const int i = row0 + row;
          if (i < w.sq && col < p.order.head_dim) {
            const uint4 val = *reinterpret_cast<const uint4*>(&sOw(row, col));
            *reinterpret_cast<uint4*>(o_base + int64_t(w.q_off + i) * p.o_row_stride + col) = val;
          }
        }
      }
    } else {
      Tensor Oc = make_tensor(tOcO.data(), acc_rowcol(tOcO.layout()));
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < kRows; ++r)
        CUTLASS_PRAGMA_UNROLL
        for (int c = 0; c < size<1>(O); ++c)
          sO(get<0>(Oc(r, c)), get<1>(Oc(r, c))) = static_cast<Element>(O(r, c) * inv[r]);
      cutlass::arch::NamedBarrier::sync(128, wg_barrier);
      constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
      Element* o_base = p.o + (p.cu_q ? 0 : int64_t(w.b) * p.o_batch_stride) + int64_t(w.h) * p.o_head_stride;
      for (int idx = tid_wg; idx < 64 * kChunks; idx += 128) {
        const int row = wg * 64 + idx / kChunks;
        const int col = (idx % kChunks) * 8;
        const int i = w.m_block * kBlockM + row;
        if (i < w.sq && col < p.order.head_dim) {
          const uint4 val = *reinterpret_cast<const uint4*>(&sO(row, col));
          *reinterpret_cast<uint4*>(o_base + int64_t(w.q_off + i) * p.o_row_stride + col) = val;
        }
      }
      cutlass::arch::NamedBarrier::sync(128, wg_barrier);
    }
  }
};

}  // namespace fmha::kernel
