// Forward attention kernel for sm_90a: one producer warp issues TMA loads of Q, K and V into a multi-stage shared
// memory pipeline (mbarriers); two or three consumer warpgroups each own 64 query rows of the tile and compute S = Q·Kᵀ
// and O += P·V with wgmma, with an fp32 online softmax in exp2 form (scale folded into the exponent).
//
// Technique: FlashAttention-3 (Shah et al., 2024, "FlashAttention-3: Fast and Accurate Attention with Asynchrony
// and Low-precision"): warp specialisation with register reallocation (setmaxnreg), and inside a warpgroup the
// softmax of key block n-1 runs while the P·V GEMM of block n is on the tensor cores (both GEMMs are issued
// together, then the warpgroup waits only for S = Q·K(n-1)ᵀ).
// Key blocks are walked from the last to the first, so the blocks that need masking (causal diagonal, the partial
// tail) come first and the rest run the unmasked fast path.
//
// Warp roles (384 threads for 128-row tiles: head-dim tile 128, and short problems at 32 and 64; 512 for 192-row
// tiles at 32 and 64):
//   warpgroup 0: producer; thread 0 issues every TMA load; registers given away (24 per thread)
//   warpgroup 1 + w (w = 0, 1[, 2]): consumer w, query rows [64·w, 64·w + 64) of the tile
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/cutlass.h>
#include <cutlass/fast_math.h>
#include <cutlass/gemm/collective/builders/sm90_common.inl>
#include <cutlass/numeric_conversion.h>
#include <cutlass/pipeline/pipeline.hpp>

#include "kernels/collective/fragment.hpp"
#include "kernels/collective/fwd_epilogue.hpp"
#include "kernels/collective/kv_source.hpp"
#include "kernels/collective/online_softmax.hpp"
#include "kernels/collective/tma_pipeline.hpp"
#include "kernels/collective/warpgroup_gemm.hpp"
#include "kernels/fusion/mask.hpp"
#include "kernels/fwd_tiles.h"
#include "kernels/kernel/tile_scheduler.hpp"

namespace fmha::kernel {

using namespace cute;

/// Compile-time configuration of one forward kernel: tile sizes, MMA atoms and shared-memory layouts.
/// Single source of truth for tile sizes (the host reads kBlockM / kBlockN from here too).
/// BlockM_: query rows per tile, 64 per consumer warpgroup (tiles::fwd_block_m by default; 128 for the short
/// problems of tiles::fwd_block_m_for). The other parameters keep the forward's values by default; the decode
/// family (decode_kernel.cuh, tiles::decode_block_n) sets them: BlockN_ keys per key block, StagesQ_ Q buffers,
/// CtasPerSm_ CTAs resident per SM (the register budget and the kernel's launch bounds follow it), StageO_ whether
/// shared memory holds the epilogue's O staging (an epilogue that stores from registers needs none).
template <class Element_, int HeadDim_, int BlockM_ = tiles::fwd_block_m(HeadDim_),
          int BlockN_ = tiles::fwd_block_n(HeadDim_), int StagesQ_ = 2, int CtasPerSm_ = 1, bool StageO_ = true>
struct FwdConfig {
  using Element = Element_;
  static constexpr int kHeadDim = HeadDim_;
  static constexpr int kBlockM = BlockM_;  // 64 rows per consumer warpgroup
  static constexpr int kBlockN = BlockN_;
  static constexpr int kStages = tiles::fwd_stages(HeadDim_);
  static constexpr int kCtasPerSm = CtasPerSm_;
  // Two Q buffers: in the persistent kernel the producer loads the next tile's Q (and then its first K/V blocks)
  // while the consumers still run the current tile; with one it had to wait until they released Q at the end of the
  // tile's mainloop, so every tile began with a Q and K load latency (docs/perf-log.md, v6: +1–3.5 % at 512–2k;
  // d 128 causal 8k–16k, one CTA per tile, lost ~2 %).
  // At head-dim tile 128 the shared storage is then exactly the 227 KB limit. (Decode: one, loaded by the consumers,
  // whose previous tile's wgmmas on it are complete before they load the next.)
  static constexpr int kStagesQ = StagesQ_;
  static_assert(kBlockM == 64 || kBlockM == 128 || kBlockM == 192,
                "attention kernel: 1, 2 or 3 consumer warpgroups of 64 rows");
  static constexpr int kConsumerWGs = kBlockM / 64;
  static constexpr int kThreads = 128 * (kConsumerWGs + 1);
  // setmaxnreg budgets: 128 · (producer + consumers · kConsumerRegs) · kCtasPerSm ≤ 64K registers per SM.
  // One consumer warpgroup (decode) leaves registers to spare: the producer keeps 56, enough for the paged K/V
  // source's page-table reads and box addresses without spilling (it spilled at 24); with two CTAs per SM the
  // consumers get 200 (S of a 64-key block is 32 registers, O 64).
  static constexpr int kProducerRegs = kConsumerWGs == 1 ? 56 : 24;
  static constexpr int kConsumerRegs = kConsumerWGs == 3 ? 160 : kCtasPerSm == 2 ? 200 : 240;
  static_assert(kProducerRegs % 8 == 0 && kConsumerRegs % 8 == 0, "setmaxnreg takes multiples of 8");
  // The launch gives every thread the same share (65536 / (kThreads · kCtasPerSm), rounded down to 8); setmaxnreg
  // only moves registers between warpgroups, so the sum may not exceed the launch-time pool.
  static constexpr int kLaunchRegs = 65536 / (kThreads * kCtasPerSm) / 8 * 8;
  static_assert(kProducerRegs + kConsumerWGs * kConsumerRegs <= (kConsumerWGs + 1) * kLaunchRegs,
                "forward kernel: register budget over the launch-time pool");

  using BlkM = Int<kBlockM>;
  using BlkN = Int<kBlockN>;
  using HD = Int<kHeadDim>;

  using MmaQK = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, BlkN, HD>>(), Layout<Shape<Int<kConsumerWGs>, _1, _1>>{}));
  using MmaPV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<_64, HD, BlkN>, GMMA::Major::K, GMMA::Major::MN>(),
      Layout<Shape<Int<kConsumerWGs>, _1, _1>>{}));

  // Softmax row sums on the tensor cores (tiles::fwd_mma_row_sum: the three-warpgroup kernels; the kernel's
  // kMmaRowSum). Every P·V wgmma batch also issues L += P·B: m64n8k16 wgmmas with P from registers against one
  // (8 columns, 16 keys) tile B in shared memory (K-major, no swizzle; ones in the even columns, zeros in the odd
  // ones), used for every 16-key step. The fp32 accumulator L's even columns then hold each row's sum of the block's
  // P as rounded for P·V, which one add per row and block folds into the running sum kept in L's odd columns
  // (fold_row_sums); this replaces the softmax's FADD per score and the final quad
  // shuffles (FlashAttention-3 adds the fp32 P instead). The sum is of the rounded P, the same P that weighs V
  // (docs/numerics.md: LSE moves by that rounding).
  // kOnesTile: whether either mask's kernel of this configuration uses it (then shared memory holds the ones tile).
  static constexpr bool kOnesTile = tiles::fwd_mma_row_sum(kBlockM, false) || tiles::fwd_mma_row_sum(kBlockM, true);
  using MmaSum = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<_64, _8, BlkN>, GMMA::Major::K, GMMA::Major::K>(),
      Layout<Shape<Int<kConsumerWGs>, _1, _1>>{}));
  using SmemLayoutOnes = decltype(tile_to_shape(GMMA::Layout_K_INTER_Atom<Element>{}, Shape<_8, _16>{}));

  using SmemAtomQ = decltype(cutlass::gemm::collective::detail::ss_smem_selector<GMMA::Major::K, Element, BlkM, HD>());
  using SmemAtomK = decltype(cutlass::gemm::collective::detail::ss_smem_selector<GMMA::Major::K, Element, BlkN, HD>());
  using SmemLayoutQ = decltype(tile_to_shape(SmemAtomQ{}, Shape<BlkM, HD, Int<kStagesQ>>{}));
  using SmemLayoutK = decltype(tile_to_shape(SmemAtomK{}, Shape<BlkN, HD, Int<kStages>>{}));
  using SmemLayoutV = SmemLayoutK;
  // V viewed as the B operand of O = P·V: (head dim, keys, stage), head dim contiguous (MN-major).
  using SmemLayoutVt = decltype(composition(
      SmemLayoutV{}, make_ordered_layout(Shape<HD, BlkN, Int<kStages>>{}, Step<_2, _1, _3>{})));
  // Epilogue. At head-dim tiles up to 64, O goes with stmatrix into a swizzled 64-row staging slice per consumer
  // warpgroup, and one thread stores the slice with TMA (dense problems; varlen entries use 16-byte stores from the
  // same slice). At 128, O goes into a padded row-major staging tile and every thread stores 16-byte chunks: there
  // the TMA store ran 2.5–3.6 % slower at 2k–16k keys non-causal; at 64 it gained 1.5–4.6 % at 512–2k keys and
  // causal, and lost up to 1.8 % at 4k–16k non-causal (three runs; docs/perf-log.md, v7).
  static constexpr bool kTmaStoreO = kHeadDim <= 64;
  // Swizzled staging, like Q: (row in the slice, head dim, warpgroup); the TMA store's source.
  using SmemAtomO = decltype(cutlass::gemm::collective::detail::ss_smem_selector<GMMA::Major::K, Element, _64, HD>());
  using SmemLayoutOSwizzled = decltype(tile_to_shape(SmemAtomO{}, Shape<_64, HD, Int<kConsumerWGs>>{}));
  // The same buffer as the (tile rows, head dim) view the MMA partitions: tile row 64·w + r is (r, ·, w).
  using SmemLayoutOTile = decltype(composition(
      SmemLayoutOSwizzled{},
      Layout<Shape<Shape<_64, Int<kConsumerWGs>>, HD>, Stride<Stride<_1, Int<64 * kHeadDim>>, _64>>{}));
  // Row-major staging (tile rows, head dim), rows padded by 8 elements (16 bytes) against bank conflicts.
  using SmemLayoutOPadded = Layout<Shape<BlkM, HD>, Stride<Int<kHeadDim + 8>, _1>>;
  using SmemLayoutO = std::conditional_t<kTmaStoreO, SmemLayoutOSwizzled, SmemLayoutOPadded>;
  static constexpr bool kStageO = StageO_;
  // Without the staging, `o` still holds one consumer thread's P fragment (64 · kBlockN / 128 elements): the target
  // of the mainloop's never-taken store (attention_body).
  static constexpr int kPSinkElems = kBlockN / 2;

  using PipelineQ = cutlass::PipelineTmaAsync<kStagesQ>;
  using PipelineKV = cutlass::PipelineTmaAsync<kStages>;

  struct SharedStorage {
    cute::array_aligned<Element, cosize_v<SmemLayoutQ>, 1024> q;
    cute::array_aligned<Element, cosize_v<SmemLayoutK>, 1024> k;
    cute::array_aligned<Element, cosize_v<SmemLayoutV>, 1024> v;
    cute::array_aligned<Element, (kStageO ? cosize_v<SmemLayoutO> : kPSinkElems), (kTmaStoreO ? 1024 : 128)> o;
    typename PipelineQ::SharedStorage pipe_q;
    typename PipelineKV::SharedStorage pipe_k;
    typename PipelineKV::SharedStorage pipe_v;
    // Last, so that the other members keep their offsets in the kernels without it.
    std::conditional_t<kOnesTile, cute::array_aligned<Element, cosize_v<SmemLayoutOnes>, 128>, char> ones;
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));
  static_assert(kSmemBytes <= 227 * 1024, "forward kernel: shared memory over the sm_90 limit of 227 KiB");
  // An SM has 228 KiB, of which the runtime reserves 1 KiB per CTA.
  static_assert(kCtasPerSm * (kSmemBytes + 1024) <= 228 * 1024,
                "forward kernel: kCtasPerSm CTAs' shared memory over the SM's 228 KiB");
  static_assert(kHeadDim % 16 == 0 && kHeadDim <= 256, "forward kernel: head-dim tile must be a multiple of 16");

  static constexpr uint32_t kBytesQ = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kBytesKV = kBlockN * kHeadDim * sizeof(Element);

  // Global tensors as seen by TMA: (rows, head dim, heads, batch).
  using GmemShape = Shape<int32_t, int32_t, int32_t, int32_t>;
  using GmemStride = Stride<int64_t, _1, int64_t, int64_t>;
  using GmemTensor = decltype(make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)),
                                          make_layout(GmemShape{}, GmemStride{})));
  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, take<0, 2>(SmemLayoutQ{}), Shape<BlkM, HD>{},
                                      _1{}));
  using TmaKV = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, take<0, 2>(SmemLayoutK{}), Shape<BlkN, HD>{},
                                       _1{}));
  using GmemTensorO = decltype(make_tensor(make_gmem_ptr(static_cast<Element*>(nullptr)),
                                           make_layout(GmemShape{}, GmemStride{})));
  // O of one warpgroup's 64 rows (used where kTmaStoreO); rows past seqlen_q and columns past head_dim lie outside
  // the tensor and are not written (dense problems only: a varlen entry's end is not a tensor bound).
  using TmaO = decltype(make_tma_copy(SM90_TMA_STORE{}, GmemTensorO{}, take<0, 2>(SmemLayoutOSwizzled{}),
                                      Shape<_64, HD>{}, _1{}));
};

/// Kernel parameters (passed by value as a __grid_constant__; TMA descriptors live inside).
template <class Config>
struct FwdKernelParams {
  using Element = typename Config::Element;
  typename Config::TmaQ tma_q;
  typename Config::TmaO tma_o;  // set where Config::kTmaStoreO; used for dense problems
  typename Config::GmemShape shape_o;
  typename Config::TmaKV tma_k;
  typename Config::TmaKV tma_v;
  typename Config::GmemShape shape_q;
  typename Config::GmemShape shape_k;
  Element* o;
  int64_t o_row_stride, o_head_stride, o_batch_stride;
  float* lse;
  const int* cu_q;  // null: dense
  const int* cu_k;
  int total_q;
  FwdTileOrder order;  // extents and tile order (tile_scheduler.hpp): batch, heads_q, group, head_dim, seqlen_q / _k, …
  float scale;       // softmax scale
  float scale_log2;  // scale · log2(e)
  bool causal_qend;
  // Q, K and V as plain strided pointers (elements), for exact_rows only (the mainloop loads through TMA).
  const Element* q;
  const Element* k;
  const Element* v;
  int64_t q_row_stride, q_head_stride, q_batch_stride;
  int64_t k_row_stride, k_head_stride, k_batch_stride;
  int64_t v_row_stride, v_head_stride, v_batch_stride;
#ifdef FMHA_TIMELINE
  unsigned long long* timeline;  // diagnostic: per (CTA < kTimelineCtas, warpgroup) event stamps, see FMHA_TL
#endif
};

/// Work tile: one kBlockM-row block of one head of one batch entry, with the entry's geometry.
struct FwdTile {
  int m_block, h, b;
  int q_off, k_off;  // first row of the entry in Q/O and in K/V (varlen), else 0
  int sq, sk;
};

/// The tile of index t (FwdTileScheduler over p.order) with its entry's rows and lengths (varlen: from the
/// cumulative lengths). MayPair: the kernel is causal.
template <bool MayPair, class Config>
CUTLASS_DEVICE FwdTile decode_tile(FwdKernelParams<Config> const& p, int t) {
  FwdTile w;
  FwdTileScheduler<MayPair>::decode_into(p.order, t, w);
  if (p.cu_q) {
    w.q_off = p.cu_q[w.b];
    w.sq = p.cu_q[w.b + 1] - w.q_off;
    w.k_off = p.cu_k[w.b];
    w.sk = p.cu_k[w.b + 1] - w.k_off;
  } else {
    w.q_off = 0;
    w.k_off = 0;
    w.sq = p.order.seqlen_q;
    w.sk = p.order.seqlen_k;
  }
  return w;
}

// Lazy rescaling (collective/online_softmax.hpp): a warp whose rows all kept their max skips the O rescale (warp
// vote; the four threads of a row agree, and a factor of 1 leaves O unchanged, so the vote only makes the branch
// uniform), placed before the turn wait instead of between the two GEMM issues.
//
// Early second Q·Kᵀ (kEarlyQK): at the start of a tile, S = Q·Kᵀ of the second key block is issued together with
// the first's, so that it runs on the tensor cores during the first block's (masked) softmax instead of after it
// (perf-log v9). It needs a second S accumulator in the tile prologue, so it is on where registers allow: the
// two-warpgroup kernels at head-dim tiles up to 64 (+0.8–2.5 % at causal 512–1k, perf-log v10). At head-dim tile 128
// the causal ping-pong kernel spilled and the non-causal one lost 4–6 % at 8k–16k.
//
// Row maxima in the three-warpgroup kernels (OnlineSoftmax's kRowMaxFirst): kMaxChains = 8 independent partial
// maxima per row (perf-log v11; 16 made ptxas spill in every kernel).

#ifdef FMHA_TIMELINE
// Diagnostic timeline (never in a release build): thread 0 of each warpgroup of the first kTimelineCtas CTAs writes
// (event << 56 | clock64) stamps, the first kTimelineSlots of each, into p.timeline; the host (fwd_launch.cuh) writes
// them to $FMHA_TIMELINE_FILE (scripts/timeline.py reads them).
constexpr int kTimelineCtas = 8, kTimelineSlots = 8192;
#define FMHA_TL(ev)                                                                                              \
  do {                                                                                                           \
    if (tl_on && tl_n < kTimelineSlots) tl_ptr[tl_n++] = (static_cast<unsigned long long>(ev) << 56) | clock64(); \
  } while (0)
#else
#define FMHA_TL(ev) \
  do {              \
  } while (0)
#endif

/// Operands of one query row for exact_rows: its Q row, and key j of its tile's key range in K and in V (k(j),
/// v(j)); here for strided tensors from the range's first key (a family with another cache layout, e.g. decode's
/// paged one, supplies its own type with the same members).
template <class Element>
struct ExactRow {
  const Element* q;
  const Element* k0;
  const Element* v0;
  int64_t k_row_stride, v_row_stride;
  CUTLASS_DEVICE const Element* k(int j) const { return k0 + int64_t(j) * k_row_stride; }
  CUTLASS_DEVICE const Element* v(int j) const { return v0 + int64_t(j) * v_row_stride; }
};

/// The forward family of the attention kernel (attention_body below): dense or varlen Q, K, V through TMA, the
/// forward tile schedulers, the residual or causal mask, the forward epilogue. Another family (decode:
/// decode_kernel.cuh) supplies the same members with its own parts, so that both run one mainloop:
///   Params, Tile, Mask, Epilogue; kCausal (row sums, tile pairing); kQFromProducer (the producer loads Q by TMA;
///   else the consumers load it with the family's load_q); first / next / num_tiles (the tile loop), tile(p, t),
///   mask(p, w); prefetch(p) (TMA descriptors); q_source / kv_source (the producer's loads of tile w);
///   kv_tail_dirty (keys past a tile's range may hold anything, so V's rows there are zeroed before P·V);
///   head_dim / exact_row (exact_rows); kKVGather (the K/V source is a gather by the 32 lanes of the producer warp
///   with cp.async, each lane arriving on the stage's barrier when its copies land: the producer loop then runs on
///   the whole warp, and the consumers fence the async proxy after each K/V wait; else thread 0 issues TMA).
template <class Config, bool Causal>
struct FwdFamily {
  using Params = FwdKernelParams<Config>;
  using Tile = FwdTile;
  using Mask = FwdMask<Config::kBlockM, Config::kBlockN, Causal>;
  using Scheduler = FwdTileScheduler<Causal>;
  using Epilogue = FwdEpilogue<Config>;
  using Element = typename Config::Element;
  static constexpr bool kCausal = Causal;
  static constexpr bool kQFromProducer = true;
  static constexpr bool kKVGather = false;

  CUTLASS_DEVICE static int first(Params const& p) { return Scheduler::first(p.order, [] { return int(blockIdx.x); }); }
  CUTLASS_DEVICE static int next(Params const& p, int t) {
    return Scheduler::next(p.order, t, [] { return int(gridDim.x); });
  }
  CUTLASS_DEVICE static int num_tiles(Params const& p) { return p.order.num_tiles; }
  CUTLASS_DEVICE static Tile tile(Params const& p, int t) { return decode_tile<Causal>(p, t); }
  CUTLASS_DEVICE static Mask mask(Params const& p, Tile const& w) {
    return Mask::make(w.sk, p.causal_qend, w.m_block * Config::kBlockM, w.sq);
  }
  CUTLASS_DEVICE static void prefetch(Params const& p) {
    prefetch_tma_descriptors(p.tma_q, p.tma_k, p.tma_v);
    if constexpr (Config::kTmaStoreO) prefetch_tma_descriptors(p.tma_o);
  }
  /// The producer's Q source of tile w (rows m_block · BlockM … of query head h of entry b).
  template <class SQ>
  CUTLASS_DEVICE static auto q_source(Params const& p, Tile const& w, SQ const& sQ) {
    Tensor mQ = p.tma_q.get_tma_tensor(p.shape_q);
    const int bq = p.cu_q ? 0 : w.b;
    Tensor gQ = local_tile(domain_offset(make_coord(w.q_off, _0{}), mQ(_, _, w.h, bq)),
                           Shape<Int<Config::kBlockM>, Int<Config::kHeadDim>>{}, make_coord(w.m_block, _0{}));
    return make_dense_q_source(p.tma_q, gQ, sQ);
  }
  /// The producer's K/V source of tile w (the entry's keys of K/V head h / group).
  template <class SK, class SV>
  CUTLASS_DEVICE static auto kv_source(Params const& p, Tile const& w, SK const& sK, SV const& sV) {
    Tensor mK = p.tma_k.get_tma_tensor(p.shape_k);
    Tensor mV = p.tma_v.get_tma_tensor(p.shape_k);
    const int bq = p.cu_q ? 0 : w.b;
    const int hk = w.h / p.order.group;
    Tensor gK = local_tile(domain_offset(make_coord(w.k_off, _0{}), mK(_, _, hk, bq)),
                           Shape<Int<Config::kBlockN>, Int<Config::kHeadDim>>{}, make_coord(_, _0{}));
    Tensor gV = local_tile(domain_offset(make_coord(w.k_off, _0{}), mV(_, _, hk, bq)),
                           Shape<Int<Config::kBlockN>, Int<Config::kHeadDim>>{}, make_coord(_, _0{}));
    return make_dense_kv_source(p.tma_k, p.tma_v, gK, gV, sK, sV);
  }
  /// Dense tensors end at the entry's keys (TMA fills past them with zeros); varlen keys run into the next entry.
  CUTLASS_DEVICE static bool kv_tail_dirty(Params const& p) { return p.cu_k != nullptr; }
  CUTLASS_DEVICE static int head_dim(Params const& p) { return p.order.head_dim; }
  CUTLASS_DEVICE static ExactRow<Element> exact_row(Params const& p, Tile const& w, int i) {
    const int hk = w.h / p.order.group;
    const bool varlen = p.cu_q != nullptr;
    ExactRow<Element> r;
    r.q = p.q + (varlen ? 0 : int64_t(w.b) * p.q_batch_stride) + int64_t(w.q_off + i) * p.q_row_stride +
          int64_t(w.h) * p.q_head_stride;
    r.k0 = p.k + (varlen ? 0 : int64_t(w.b) * p.k_batch_stride) + int64_t(w.k_off) * p.k_row_stride +
           int64_t(hk) * p.k_head_stride;
    r.v0 = p.v + (varlen ? 0 : int64_t(w.b) * p.v_batch_stride) + int64_t(w.k_off) * p.v_row_stride +
           int64_t(hk) * p.v_head_stride;
    r.k_row_stride = p.k_row_stride;
    r.v_row_stride = p.v_row_stride;
    return r;
  }
};

/// The slow path for rows whose |max · scale_log2| reached OnlineSoftmax::kFastLimit (collective/online_softmax.hpp):
/// this thread's kRows rows of tile `w` (tile rows get<0>(Oc(r, 0)), columns get<1>(Oc(r, c))) are recomputed
/// from global memory in two passes over their visible keys, the max and then P = exp2((s − max) · scale_log2), exactly
/// 1 at the max whatever its magnitude; O(r, c) receives the normalised result and lse[r] the row's LSE (−inf and
/// O = 0 for a row that sees no key). Slow (each of the four threads of a row recomputes every score of it in fp32),
/// and only reached when a warp holds such a row, which no input with |scale · q · k| below about 4.6e7 produces.
/// The family (FwdFamily, DecodeFamily) supplies the operands of tile row i: Family::exact_row(p, w, i).
template <class Config, class Family, class Mask, class TensorO, class TensorOc, int kRows>
CUTLASS_DEVICE void exact_rows(typename Family::Params const& p, typename Family::Tile const& w, Mask const& mask,
                               TensorO& O, TensorOc const& Oc, float (&lse)[kRows]) {
  using Element = typename Config::Element;
  const int d = Family::head_dim(p);
  CUTLASS_PRAGMA_UNROLL  // O(r, c) are registers: indices must be compile-time constants
  for (int r = 0; r < kRows; ++r) {
    const int i = w.m_block * Config::kBlockM + get<0>(Oc(r, 0));
    lse[r] = -INFINITY;
    if (i >= w.sq) continue;  // padding rows are never stored
    const auto row = Family::exact_row(p, w, i);
    const Element* q = row.q;
    auto score = [&](int j) {
      const Element* kj = row.k(j);
      float acc = 0.f;
      for (int x = 0; x < d; ++x) acc = fmaf(float(q[x]), float(kj[x]), acc);
      return acc;
    };
    float m = -INFINITY;
    for (int j = Mask::kKeyBegin; j < w.sk; ++j)
      if (mask.visible(i, j)) m = fmaxf(m, score(j));
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < size<1>(O); ++c) O(r, c) = 0.f;
    if (m == -INFINITY) continue;
    float sum = 0.f;
    for (int j = Mask::kKeyBegin; j < w.sk; ++j) {
      if (!mask.visible(i, j)) continue;
      const float pj = exp2f((score(j) - m) * p.scale_log2);
      sum += pj;
      const Element* vj = row.v(j);
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < size<1>(O); ++c) {
        const int col = get<1>(Oc(r, c));
        if (col < d) O(r, c) = fmaf(pj, float(vj[col]), O(r, c));
      }
    }
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < size<1>(O); ++c) O(r, c) /= sum;
    lse[r] = m * p.scale + logf(sum);
  }
}

/// The attention kernel's body, shared by the families (FwdFamily here; DecodeFamily in decode_kernel.cuh): the
/// producer warp's TMA loads, the consumers' mainloop with the online softmax, and the family's epilogue.
/// PingPong: the consumer warpgroups take turns issuing their GEMMs (named barriers), so that one warpgroup's
/// softmax runs while the others' GEMMs occupy the tensor cores (FlashAttention-3, section 3.1); without it the
/// warpgroups issue independently (needs two or more consumer warpgroups).
template <class Config, bool PingPong, class Family>
CUTLASS_DEVICE void attention_body(typename Family::Params const& p) {
  using Element = typename Config::Element;
  using SharedStorage = typename Config::SharedStorage;
  using PipelineQ = typename Config::PipelineQ;
  using PipelineKV = typename Config::PipelineKV;
  constexpr int kBlockM = Config::kBlockM;
  constexpr int kBlockN = Config::kBlockN;
  constexpr int kHeadDim = Config::kHeadDim;
  using Mask = typename Family::Mask;
  static_assert(!PingPong || Config::kConsumerWGs >= 2, "attention kernel: ping-pong needs two consumer warpgroups");
  // Row sums on the tensor cores (FwdConfig, "Softmax row sums on the tensor cores").
  constexpr bool kMmaRowSum = tiles::fwd_mma_row_sum(kBlockM, Family::kCausal);
  static_assert(!kMmaRowSum || Config::kOnesTile, "forward kernel: row sums on the tensor cores need the ones tile");

  extern __shared__ __align__(1024) char smem_raw[];
  SharedStorage& ss = *reinterpret_cast<SharedStorage*>(smem_raw);

  const int warp_group = threadIdx.x / 128;
  const int warp_idx = cutlass::canonical_warp_idx_sync();
  const bool is_producer_thread = threadIdx.x == 0;
#ifdef FMHA_TIMELINE
  static_assert(Config::kConsumerWGs + 1 <= 4, "timeline: the buffer holds 4 warpgroup streams per CTA");
  const bool tl_on = p.timeline != nullptr && blockIdx.x < kTimelineCtas && threadIdx.x % 128 == 0;
  unsigned long long* tl_ptr = tl_on ? p.timeline + (size_t(blockIdx.x) * 4 + warp_group) * kTimelineSlots : nullptr;
  int tl_n = 0;
#endif

  if (is_producer_thread) Family::prefetch(p);

  const auto pq = tma_pipeline_params<PipelineQ>(Config::kBytesQ, 128 * Config::kConsumerWGs);
  // A gathering K/V source (Family::kKVGather): the producer warp's 32 lanes fill the stages.
  constexpr bool kGather = Family::kKVGather;
  const auto pkv = tma_pipeline_params<PipelineKV>(Config::kBytesKV, 128 * Config::kConsumerWGs, kGather ? 32 : 0);
  PipelineQ pipe_q(ss.pipe_q, pq, Shape<_1, _1, _1>{});
  PipelineKV pipe_k(ss.pipe_k, pkv, Shape<_1, _1, _1>{});
  PipelineKV pipe_v(ss.pipe_v, pkv, Shape<_1, _1, _1>{});
  if constexpr (kMmaRowSum) {
    static_assert(cosize_v<typename Config::SmemLayoutOnes> == 128, "forward kernel: the ones tile is 8 x 16");
    // Ones in the even columns, zeros in the odd ones: the odd columns of L keep the running sum (adding 0 leaves
    // them exact), the even ones take each block's sum.
    Tensor sOnes = make_tensor(make_smem_ptr(ss.ones.data()), typename Config::SmemLayoutOnes{});  // (8, 16)
    if (threadIdx.x < 128) sOnes(threadIdx.x % 8, threadIdx.x / 8) = Element(threadIdx.x % 2 == 0 ? 1.f : 0.f);
    cutlass::arch::fence_view_async_shared();  // generic-proxy stores, read by wgmma (async proxy)
  }
  __syncthreads();

  Tensor sQ = make_tensor(make_smem_ptr(ss.q.data()), typename Config::SmemLayoutQ{});
  Tensor sK = make_tensor(make_smem_ptr(ss.k.data()), typename Config::SmemLayoutK{});
  Tensor sV = make_tensor(make_smem_ptr(ss.v.data()), typename Config::SmemLayoutV{});
  Tensor sVt = make_tensor(make_smem_ptr(ss.v.data()), typename Config::SmemLayoutVt{});
  // kTmaStoreO: (64, HD, WG); else (BlockM, HD)
  Tensor sO = make_tensor(make_smem_ptr(ss.o.data()), typename Config::SmemLayoutO{});
  // Where the mainloop's never-taken branch would store P (see the mainloop): the O staging, or in kernels without
  // it the kPSinkElems elements that `o` keeps for this.
  Element* const p_sink = ss.o.data();

  if (warp_group == 0) {
    // ------------------------------------------------------------------------------------------------ producer
    cutlass::arch::warpgroup_reg_dealloc<Config::kProducerRegs>();
    if (kGather ? warp_idx != 0 : !is_producer_thread) return;
    auto q_state = cutlass::make_producer_start_state<PipelineQ>();
    auto k_state = cutlass::make_producer_start_state<PipelineKV>();
    auto v_state = cutlass::make_producer_start_state<PipelineKV>();
    for (int t = Family::first(p); t < Family::num_tiles(p); t = Family::next(p, t)) {
      const typename Family::Tile w = Family::tile(p, t);
      if (w.m_block * kBlockM >= w.sq) continue;
      const Mask mask = Family::mask(p, w);
      const int n_blocks = mask.n_blocks();
      if (n_blocks == 0) continue;
      const auto kv = Family::kv_source(p, w, sK, sV);

      auto load_k = [&](int n) {
        pipe_k.producer_acquire(k_state);
        FMHA_TL(20);
        kv.load_k(n, k_state.index(), *pipe_k.producer_get_barrier(k_state));
        ++k_state;
      };
      auto load_v = [&](int n) {
        pipe_v.producer_acquire(v_state);
        FMHA_TL(21);
        kv.load_v(n, v_state.index(), *pipe_v.producer_get_barrier(v_state));
        ++v_state;
      };
      if constexpr (Family::kQFromProducer) {
        const auto q_src = Family::q_source(p, w, sQ);
        pipe_q.producer_acquire(q_state);
        q_src.load_q(q_state.index(), *pipe_q.producer_get_barrier(q_state));
        ++q_state;
      }
      int n = n_blocks - 1;
      load_k(n);
      for (; n > 0; --n) {
        load_k(n - 1);
        load_v(n);
      }
      load_v(0);
    }
    // A gathering producer warp's last copies may still be in flight: they land before its threads exit.
    if constexpr (kGather) cute::cp_async_wait<0>();
    return;
  }

  // -------------------------------------------------------------------------------------------------- consumers
  cutlass::arch::warpgroup_reg_alloc<Config::kConsumerRegs>();
  const int tid = threadIdx.x - 128;  // 0 .. 128·kConsumerWGs-1 over the consumer warpgroups
  const int wg = tid / 128;           // which 64-row slice of the tile
  const int tid_wg = tid % 128;
  typename Config::MmaQK mma_qk;
  typename Config::MmaPV mma_pv;
  auto thr_qk = mma_qk.get_thread_slice(tid);
  auto thr_pv = mma_pv.get_thread_slice(tid);

  Tensor tSrQ = thr_qk.partition_fragment_A(sQ);   // (MMA, 1, K, Q stage)
  Tensor tSrK = thr_qk.partition_fragment_B(sK);   // (MMA, 1, K, stage)
  Tensor tOrV = thr_pv.partition_fragment_B(sVt);  // (MMA, 1, K, stage)
  Tensor tSrS = partition_fragment_C(mma_qk, Shape<Int<kBlockM>, Int<kBlockN>>{});
  Tensor tOrO = partition_fragment_C(mma_pv, Shape<Int<kBlockM>, Int<kHeadDim>>{});
  // P = softmax numerator in the input type, as the register A operand of O += P·V.
  Tensor tOrP = thr_pv.partition_fragment_A(
      make_tensor(make_smem_ptr(static_cast<Element*>(nullptr)), Layout<Shape<Int<kBlockM>, Int<kBlockN>>>{}));
  static_assert(decltype(size(tOrP))::value == decltype(size(tSrS))::value, "P fragment must mirror S accumulator");
  static_assert(Config::kStageO || decltype(size(tOrP))::value <= Config::kPSinkElems,
                "attention kernel: the P sink without O staging holds one thread's P fragment");
  // Row sums on the tensor cores (kMmaRowSum): L's even columns take one key block's row sums, its odd columns the
  // running sum (fold_row_sums). Unused (and compiled away) in the kernels without it.
  typename Config::MmaSum mma_sum;
  Tensor tLrL = partition_fragment_C(mma_sum, Shape<Int<kBlockM>, _8>{});
  Tensor L = make_tensor(tLrL.data(), acc_rowcol(tLrL.layout()));

  // Coordinates (row within tile, column within block) of every accumulator element of this thread.
  Tensor tScS = thr_qk.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{}));
  Tensor tOcO = thr_pv.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  Tensor S = make_tensor(tSrS.data(), acc_rowcol(tSrS.layout()));
  Tensor Sc = make_tensor(tScS.data(), acc_rowcol(tScS.layout()));
  Tensor O = make_tensor(tOrO.data(), acc_rowcol(tOrO.layout()));
  constexpr int kRows = decltype(size<0>(S))::value;  // 2 rows per thread
  constexpr int kCols = decltype(size<1>(S))::value;

  auto q_state = cutlass::PipelineState<Config::kStagesQ>();
  auto k_state = cutlass::PipelineState<Config::kStages>();
  auto v_state = cutlass::PipelineState<Config::kStages>();
  const float scale_log2 = p.scale_log2;
  constexpr int kWGs = Config::kConsumerWGs;
  constexpr bool kEarlyQK = kWGs == 2 && kHeadDim <= 64;
  constexpr int kMaxChains = 8;
  constexpr bool kRowMaxFirst = kWGs == 3;
  using Softmax = OnlineSoftmax<kRows, kCols, kRowMaxFirst, kMaxChains, kMmaRowSum>;
  using Epilogue = typename Family::Epilogue;
  static_assert(!kEarlyQK || Config::kStages >= 2,
                "forward kernel: the early second Q·Kᵀ holds two K stages at once (one stage would deadlock)");
  const int wg_barrier = 1 + wg;  // named barrier of this warpgroup's epilogue (ids 1 .. kWGs)
  // Ping-pong turn barriers (ids 4 .. 3 + kWGs, 256 threads each; CUTLASS user ids, hardware ids 8 higher): a warpgroup waits for its turn before issuing
  // GEMMs and hands the turn to the next one (round robin) after issuing. The last warpgroup hands the first turn
  // to warpgroup 0.
  auto turn_wait = [&] {
    if constexpr (PingPong) cutlass::arch::NamedBarrier::sync(256, 4 + wg);
  };
  auto turn_pass = [&] {
    if constexpr (PingPong) cutlass::arch::NamedBarrier::arrive(256, 4 + (wg + 1) % kWGs);
  };
  if (wg == kWGs - 1) turn_pass();  // a no-op without PingPong

  for (int t = Family::first(p); t < Family::num_tiles(p); t = Family::next(p, t)) {
    const typename Family::Tile w = Family::tile(p, t);
    if (w.m_block * kBlockM >= w.sq) continue;
    const Mask mask = Family::mask(p, w);
    const int n_blocks = mask.n_blocks();
    FMHA_TL(1);

    float row_max[kRows], row_sum[kRows];  // the online softmax's state (Softmax)
    Softmax::reset(row_max, row_sum);
    unsigned beyond = 0;  // bit r: row r's max reached the exact form's range (Softmax::kFastLimit; exact_rows)
    // With the early second Q·Kᵀ (kEarlyQK) O is cleared just before the first P·V, so that its registers are not
    // live while the prologue holds two S accumulators.
    const bool early_qk = kEarlyQK && n_blocks >= 2;
    if (!early_qk) clear(tOrO);
    if constexpr (kMmaRowSum) {
      if (!early_qk) clear(tLrL);
    }

    // Masks the block (when needed), updates the running max and (without kMmaRowSum) sum, and turns S into
    // unnormalised P. Returns through `corr` the factor by which earlier O and sums must be rescaled.
    auto softmax_block = [&](decltype(S)& Sx, int n, bool need_mask, float (&corr)[kRows]) {
      if (need_mask) {  // Mask::visible on this thread's scores (coordinates from the identity tensor Sc)
        const int i0 = w.m_block * kBlockM;
        CUTLASS_PRAGMA_UNROLL
        for (int r = 0; r < kRows; ++r)
          CUTLASS_PRAGMA_UNROLL
          for (int c = 0; c < kCols; ++c) {
            const int i = i0 + get<0>(Sc(r, c));
            const int j = n * kBlockN + get<1>(Sc(r, c));
            if (!mask.visible(i, j)) Sx(r, c) = -INFINITY;
          }
      }
      Softmax::update(row_max, row_sum, Sx, scale_log2, corr, beyond);
    };
    auto convert_p = [&](decltype(tSrS) const& acc) {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(acc); ++i) tOrP(i) = static_cast<Element>(acc(i));
    };
    // After a K or V stage's wait, with a gathering source: its rows were written by cp.async (generic proxy) and are
    // read by wgmma (async proxy). A no-op for TMA sources.
    auto kv_fence = [] {
      if constexpr (kGather) cutlass::arch::fence_view_async_shared();
    };
    // Keys past the entry's end may hold anything (the next entry's rows, or NaN): P is 0 there, but 0·NaN = NaN,
    // so the rows of V past the end are zeroed before P·V. Dense tensors need nothing: TMA fills them with zeros.
    auto zero_v_tail = [&](int n, int stage) {
      const int valid = w.sk - n * kBlockN;
      if (!Family::kv_tail_dirty(p) || valid >= kBlockN) return;
      for (int idx = tid_wg; idx < (kBlockN - valid) * kHeadDim; idx += 128) {
        sV(valid + idx / kHeadDim, idx % kHeadDim, stage) = Element(0);
      }
      cutlass::arch::fence_view_async_shared();
      cutlass::arch::NamedBarrier::sync(128, wg_barrier);
    };

    // Rescales O by the factor of the latest softmax block: before the turn wait, only in warps where some row
    // changed its max (lazy rescaling). No wgmma in flight touches O: the previous block ended with
    // warpgroup_wait<0>.
    auto rescale_o = [&](float const (&corr)[kRows]) {
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < kRows; ++r)
        CUTLASS_PRAGMA_UNROLL
        for (int c = 0; c < size<1>(O); ++c) O(r, c) *= corr[r];
    };
    // With kMmaRowSum: O += P·V from a V stage and L += P·1, in one wgmma batch, not waited for. (The kernels without
    // it call wg_gemm directly: routing them through this lambda changed their register allocation.)
    auto pv_sum_gemm = [&](int stage) {
      if constexpr (kMmaRowSum) {
        Tensor sOnes = make_tensor(make_smem_ptr(ss.ones.data()), typename Config::SmemLayoutOnes{});
        Tensor tLrOnes = mma_sum.get_thread_slice(tid).partition_fragment_B(sOnes);  // (MMA, 1, 1)
        Tensor tV = tOrV(_, _, _, stage);
        warpgroup_fence_operand(tOrP);
        warpgroup_fence_operand(tOrO);
        warpgroup_fence_operand(tLrL);
        warpgroup_arrive();
        CUTLASS_PRAGMA_UNROLL
        for (int k = 0; k < size<2>(tOrP); ++k) cute::gemm(mma_pv, tOrP(_, _, k), tV(_, _, k), tOrO);
        // Even columns of L += this block's sums, odd columns += 0; the same tile serves every 16-key step.
        CUTLASS_PRAGMA_UNROLL
        for (int k = 0; k < size<2>(tOrP); ++k) cute::gemm(mma_sum, tOrP(_, _, k), tLrOnes(_, _, 0), tLrL);
        warpgroup_commit_batch();
        warpgroup_fence_operand(tLrL);
        warpgroup_fence_operand(tOrO);
        warpgroup_fence_operand(tOrP);
      }
    };
    // With kMmaRowSum, once a P·V batch is done: the even column of L holds the sums of that block's P (relative to
    // the max the block was exponentiated with), the odd column the running sum, and the softmax since has produced
    // the factor `corr` to the new max: odd = (odd + even) · corr, even = 0, so the even column never grows past one
    // block (the tensor cores' fp32 accumulation truncates: accumulated over a whole row, the sum lost up to 9e-4 at
    // 270k keys, E07b). No register beyond L's four (a separate fp32 running sum made ptxas spill more, v12).
    auto fold_row_sums = [&](float const (&corr)[kRows]) {
      if constexpr (kMmaRowSum) {
        warpgroup_fence_operand(tLrL);  // read L only after the wgmma wait
        CUTLASS_PRAGMA_UNROLL
        for (int r = 0; r < kRows; ++r) {
          L(r, 1) = (L(r, 1) + L(r, 0)) * corr[r];
          L(r, 0) = 0.f;
        }
        warpgroup_fence_operand(tLrL);
      }
    };

    if (n_blocks > 0) {
      if constexpr (Family::kQFromProducer) {
        pipe_q.consumer_wait(q_state);
      } else {
        // The consumers load the tile's query rows themselves (the family's layout of Q is not a TMA box). With
        // two buffers, the stage was last read by the wgmmas of two tiles ago, which every warp has waited for;
        // with one (decode), by this warpgroup's previous tile: every warp waits here until all have passed that
        // tile's last Q·Kᵀ wait (any warp's rows of the buffer may be written by any other).
        if constexpr (Config::kStagesQ == 1)
          cutlass::arch::NamedBarrier::sync(128 * Config::kConsumerWGs, 1 + Config::kConsumerWGs);
        Family::load_q(p, w, sQ(_, _, q_state.index()), tid);
        cutlass::arch::fence_view_async_shared();  // generic-proxy stores, read by wgmma (async proxy)
        cutlass::arch::NamedBarrier::sync(128 * Config::kConsumerWGs, 1 + Config::kConsumerWGs);
      }
      FMHA_TL(2);
      int n = n_blocks - 1;
      float corr[kRows];
      // The last key block alone: S = Q·K(n)ᵀ waited for at once, then its softmax.
      auto first_block = [&] {
        pipe_k.consumer_wait(k_state);
        kv_fence();
        turn_wait();
        wg_gemm<true, -1>(mma_qk, tSrQ(_, _, _, q_state.index()), tSrK(_, _, _, k_state.index()), tSrS);
        turn_pass();
        warpgroup_wait<0>();
        pipe_k.consumer_release(k_state);
        ++k_state;
        softmax_block(S, n, true, corr);
        convert_p(tSrS);
      };
      if constexpr (kEarlyQK) {
        if (early_qk) {
          // S2 = Q·K(n)ᵀ and S = Q·K(n-1)ᵀ issued together; the softmax of block n runs while the second Q·Kᵀ is
          // on the tensor cores. Then O = P(n)·V(n) is issued alone and the softmax of block n-1 runs behind it,
          // as in the mainloop, which goes on from block n-1.
          Tensor tSrS2 = partition_fragment_C(mma_qk, Shape<Int<kBlockM>, Int<kBlockN>>{});
          Tensor S2 = make_tensor(tSrS2.data(), acc_rowcol(tSrS2.layout()));
          pipe_k.consumer_wait(k_state);
          auto k_second = k_state;
          ++k_second;
          pipe_k.consumer_wait(k_second);
          kv_fence();
          turn_wait();
          wg_gemm<true, -1>(mma_qk, tSrQ(_, _, _, q_state.index()), tSrK(_, _, _, k_state.index()), tSrS2);
          wg_gemm<true, -1>(mma_qk, tSrQ(_, _, _, q_state.index()), tSrK(_, _, _, k_second.index()), tSrS);
          turn_pass();
          warpgroup_wait<1>();
          pipe_k.consumer_release(k_state);
          ++k_state;
          softmax_block(S2, n, true, corr);
          convert_p(tSrS2);
          clear(tOrO);
          if constexpr (kMmaRowSum) clear(tLrL);
          pipe_v.consumer_wait(v_state);
          kv_fence();
          zero_v_tail(n, v_state.index());
          turn_wait();
          if constexpr (kMmaRowSum) pv_sum_gemm(v_state.index());
          else wg_gemm<false, -1, true>(mma_pv, tOrP, tOrV(_, _, _, v_state.index()), tOrO);
          turn_pass();
          warpgroup_wait<1>();
          pipe_k.consumer_release(k_state);
          ++k_state;
          softmax_block(S, n - 1, mask.needs_mask(n - 1), corr);
          // Closes the basic block before the wait, as in the mainloop below (never taken). This tail repeats the
          // mainloop's on purpose: shared through a lambda, it changed ptxas's code for these kernels.
          if ((kMmaRowSum ? corr[0] : row_sum[0]) < 0.f) {
            CUTLASS_PRAGMA_UNROLL
            for (int i = 0; i < size(tOrP); ++i) p_sink[i] = tOrP(i);
          }
          warpgroup_wait<0>();
          fold_row_sums(corr);
          pipe_v.consumer_release(v_state);
          ++v_state;
          convert_p(tSrS);
          --n;
        } else {
          first_block();
        }
      } else {
        first_block();
      }
      FMHA_TL(3);
      for (; n > 0; --n) {
        // S = Q·K(n-1)ᵀ and O += P(n)·V(n) issued together; once S is done, the softmax of block n-1 runs
        // while P·V is still on the tensor cores.
        pipe_k.consumer_wait(k_state);
        pipe_v.consumer_wait(v_state);
        kv_fence();
        FMHA_TL(4);
        zero_v_tail(n, v_state.index());
        {
          bool need = false;
          CUTLASS_PRAGMA_UNROLL
          for (int r = 0; r < kRows; ++r) need |= corr[r] != 1.f;
          if (__any_sync(0xffffffffu, need)) rescale_o(corr);
        }
        turn_wait();
        wg_gemm<true, -1>(mma_qk, tSrQ(_, _, _, q_state.index()), tSrK(_, _, _, k_state.index()), tSrS);
        if constexpr (kMmaRowSum) pv_sum_gemm(v_state.index());
        else wg_gemm<false, -1, true>(mma_pv, tOrP, tOrV(_, _, _, v_state.index()), tOrO);
        turn_pass();
        FMHA_TL(5);
        warpgroup_wait<1>();
        FMHA_TL(6);
        pipe_k.consumer_release(k_state);
        ++k_state;
        softmax_block(S, n - 1, mask.needs_mask(n - 1), corr);
        // ptxas issues a wgmma wait as early as its basic block allows, so a wait after the softmax in the same
        // block runs before it and serialises softmax and P·V. A never-taken branch (it also keeps P live, so that
        // no softmax temporary takes one of P's registers while the P·V reads them) closes the block first.
        // It cannot be taken: row_sum is a sum of exp2 results, each >= +0 or NaN, and corr[0] (kMmaRowSum) an exp2
        // result or 1, and NaN < 0 is false. (Were it taken, the store would land in warpgroup 0's O staging rows,
        // at head-dim tiles <= 64 possibly while the TMA store of its previous tile still reads them; without O
        // staging in the P sink that `o` keeps.) Re-check the
        // SASS after touching this:
        // WARPGROUP.DEPBAR.LE gsb0, 0x0 must follow the block's MUFU.EX2 instructions.
        if ((kMmaRowSum ? corr[0] : row_sum[0]) < 0.f) {
          CUTLASS_PRAGMA_UNROLL
          for (int i = 0; i < size(tOrP); ++i) p_sink[i] = tOrP(i);
        }
        FMHA_TL(7);
        warpgroup_wait<0>();
        FMHA_TL(8);
        fold_row_sums(corr);
        pipe_v.consumer_release(v_state);
        ++v_state;
        convert_p(tSrS);
      }
      FMHA_TL(9);
      rescale_o(corr);
      pipe_v.consumer_wait(v_state);
      kv_fence();
      zero_v_tail(0, v_state.index());
      turn_wait();
      if constexpr (kMmaRowSum) pv_sum_gemm(v_state.index());
      else wg_gemm<false, -1, true>(mma_pv, tOrP, tOrV(_, _, _, v_state.index()), tOrO);
      turn_pass();
      warpgroup_wait<0>();
      if constexpr (kMmaRowSum) {
        // The last block: its P is relative to the final max, so no factor.
        CUTLASS_PRAGMA_UNROLL
        for (int r = 0; r < kRows; ++r) L(r, 1) += L(r, 0);
      }
      pipe_v.consumer_release(v_state);
      ++v_state;
      if constexpr (Family::kQFromProducer) pipe_q.consumer_release(q_state);
      ++q_state;
      FMHA_TL(10);
    }

    // ------------------------------------------------------------------------------------------------ epilogue
    float inv[kRows];
    // Rows past the fast exponent's range (rare: Softmax::kFastLimit): the warp recomputes all its rows exactly.
    float lse_exact[kRows];
    // Padding rows (past the entry: another entry's queries, or TMA's zero fill) never send a warp there.
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < kRows; ++r)
      if (w.m_block * kBlockM + get<0>(Sc(r, 0)) >= w.sq) beyond &= ~(1u << r);
    const bool exact = __any_sync(0xffffffff, beyond != 0);
    if (exact) {
      Tensor Oc = make_tensor(tOcO.data(), acc_rowcol(tOcO.layout()));
      exact_rows<Config, Family>(p, w, mask, O, Oc, lse_exact);
    }
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < kRows; ++r) {
      // With kMmaRowSum the odd column of L holds the whole row's sum; else the quad's four threads add theirs.
      float sum;
      if constexpr (kMmaRowSum) sum = L(r, 1);
      else sum = quad_allreduce_sum(row_sum[r]);
      float lse;
      Softmax::finish_row(row_max[r], sum, scale_log2, inv[r], lse);
      if (exact) inv[r] = 1.f, lse = lse_exact[r];
      Epilogue::store_lse(p, w, (tid_wg % 4) == 0, w.m_block * kBlockM + get<0>(Sc(r, 0)), lse);
    }
    Epilogue::store_o(p, w, O, tOrO, inv, tOcO, mma_pv, sO, ss.o.data(), tid, tid_wg, wg, wg_barrier);
    FMHA_TL(11);
  }
  FMHA_TL(12);
  // The shared memory must outlive the last TMA store's reads.
  if constexpr (Config::kTmaStoreO)
    if (tid_wg == 0) tma_store_wait<0>();
}

/// The forward kernel: Causal picks the causal mask (either alignment) instead of none / residual; PingPong as in
/// attention_body.
template <class Config, bool Causal, bool PingPong>
__global__ void __launch_bounds__(Config::kThreads, 1) fwd_kernel(CUTE_GRID_CONSTANT FwdKernelParams<Config> const p) {
  attention_body<Config, PingPong, FwdFamily<Config, Causal>>(p);
}

#undef FMHA_TL

}  // namespace fmha::kernel
