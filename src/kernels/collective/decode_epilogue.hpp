// The decode epilogue: a finished tile's packed query rows (row i = token i / group of query head hk · group +
// i % group, kernel/decode_plan.hpp) written to their (entry, token, head) places. With one key split O goes to the
// output in the input type and LSE to lse [batch][n][heads_q]; with several, the split's normalised O goes in fp32
// to the workspace's partial O [split][batch · n · heads_q][head_dim] and its LSE to the partial LSE
// [split][batch · n · heads_q], which the split-KV combine (api/combine.h) reduces. Both straight from the
// accumulator registers (pairs of adjacent columns): decode's outputs are a few rows per K/V head, so no staging.
// The same interface as FwdEpilogue (fwd_epilogue.hpp), so that the attention kernel's body calls either.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/array.h>

#include "kernels/collective/fragment.hpp"

namespace fmha::kernel {

template <class Config>
struct DecodeEpilogue {
  using Element = typename Config::Element;
  static constexpr int kBlockM = Config::kBlockM;

  /// Packed row i of tile w as its (entry, token, head) row index (b · n + t) · heads_q + h.
  template <class Params, class Tile>
  CUTLASS_DEVICE static int64_t row_index(Params const& p, Tile const& w, int i) {
    const int t = i / p.group;
    const int h = w.hk * p.group + (i - t * p.group);
    return (int64_t(w.b) * p.new_tokens + t) * p.heads_q + h;
  }

  /// Packed row i's LSE, from `writer` (one thread per row), for rows inside the tile's sq packed rows.
  template <class Params, class Tile>
  CUTLASS_DEVICE static void store_lse(Params const& p, Tile const& w, bool writer, int i, float lse) {
    if (!writer || i >= w.sq) return;
    const int64_t row = row_index(p, w, i);
    if (p.plan.splits > 1) p.lse_part[int64_t(w.split) * p.rows_total + row] = lse;
    else if (p.lse != nullptr) p.lse[row] = lse;
  }

  /// O(r, c) · inv[r] of this thread's accumulator rows (the FwdEpilogue::store_o interface; the staging and the
  /// warpgroup arguments are unused here).
  template <class Params, class Tile, class TensorO, class TensorAcc, class TensorOc, class TiledMma, class TensorSO,
            int kRows>
  CUTLASS_DEVICE static void store_o(Params const& p, Tile const& w, TensorO const& O, TensorAcc const& /*tOrO*/,
                                     float const (&inv)[kRows], TensorOc const& tOcO, TiledMma const& /*mma_pv*/,
                                     TensorSO& /*sO*/, Element* /*smem_o*/, int /*tid*/, int /*tid_wg*/, int /*wg*/,
                                     int /*wg_barrier*/) {
    using namespace cute;
    Tensor Oc = make_tensor(tOcO.data(), acc_rowcol(tOcO.layout()));
    static_assert(decltype(size<1>(O))::value % 2 == 0, "decode epilogue: columns come in adjacent pairs");
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const int i = w.m_block * kBlockM + get<0>(Oc(r, 0));
      if (i >= w.sq) continue;
      const int64_t row = row_index(p, w, i);
      if (p.plan.splits > 1) {
        float* dst = p.o_part + (int64_t(w.split) * p.rows_total + row) * p.head_dim;
        CUTLASS_PRAGMA_UNROLL
        for (int c = 0; c < size<1>(O); c += 2) {
          const int col = get<1>(Oc(r, c));  // columns col, col + 1 (the accumulator's adjacent pair)
          if (col < p.head_dim)
            *reinterpret_cast<float2*>(dst + col) = make_float2(O(r, c) * inv[r], O(r, c + 1) * inv[r]);
        }
      } else {
        const int t = i / p.group;
        const int h = w.hk * p.group + (i - t * p.group);
        Element* dst = p.o + int64_t(w.b) * p.o_batch_stride + int64_t(t) * p.o_token_stride +
                       int64_t(h) * p.o_head_stride;
        CUTLASS_PRAGMA_UNROLL
        for (int c = 0; c < size<1>(O); c += 2) {
          const int col = get<1>(Oc(r, c));
          if (col < p.head_dim) {
            cutlass::AlignedArray<Element, 2> pair;  // one 4-byte store
            pair[0] = static_cast<Element>(O(r, c) * inv[r]);
            pair[1] = static_cast<Element>(O(r, c + 1) * inv[r]);
            *reinterpret_cast<cutlass::AlignedArray<Element, 2>*>(dst + col) = pair;
          }
        }
      }
    }
  }
};

}  // namespace fmha::kernel
