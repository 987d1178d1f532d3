// Where the producer's operands come from. A K/V source issues the load of key block n of the current tile into a
// shared-memory pipeline stage, completing on that stage's mbarrier; a Q source the load of the tile's query rows.
// The forward reads dense tensors with TMA (DenseKVSource, DenseQSource); decode reads contiguous caches with the
// dense source and paged ones with PagedKVSource (collective/paged_kv_source.hpp), with the same calls, so the
// producer loop and the mainloop stay as they are.
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
