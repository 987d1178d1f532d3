// Tile schedulers of the forward kernel: which work tile (query block, query head, batch entry) each CTA runs, in
// which order. The device half (FwdTileScheduler) is what the kernel's producer and consumers iterate with; the host
// half (make_fwd_tile_order, fwd_grid) builds the order's parameters and the grid from the problem. Both halves
// compile with g++ too (no CuTe, no device intrinsics), so that tests/cpu/test_tile_scheduler.cpp can check on the
// CPU that every tile of a problem is visited exactly once, for any grid.
//
// Two schedulers share one tile order:
//   * one CTA per tile (TileScheduler::kIndividual): grid = number of tiles; the hardware hands tiles to SMs as
//     others finish, so unequal causal tiles balance by themselves;
//   * persistent (TileScheduler::kPersistent): grid = min(tiles, SMs); CTA c runs tiles c, c + grid, … (a static
//     round robin), and its producer loads the next tile while the consumers finish the current one.
// The order: longest-first within L2-sized sections of (batch, head) pairs, optionally paired for causal problems
// (FwdTileOrder, FwdTileScheduler::decode).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <cutlass/fast_math.h>

#include "fmha/fwd.h"

namespace fmha::kernel {

/// One work tile: query block m_block (of the kernel's BlockM rows) of query head h of batch entry b. A varlen
/// entry shorter than the longest has tiles past its end (m_block · BlockM ≥ its length): the kernel skips them.
struct TileCoord {
  int m_block, h, b;
};

/// Parameters of the tile order, built on the host by make_fwd_tile_order and read by FwdTileScheduler.
///
/// The (batch, head) pairs are cut into sections of section_bh consecutive pairs, sized so that one section's K and
/// V fit in a share of the L2 cache; the sections run one after the other. Inside a section the tile index runs over
/// (batch, head) fastest and query blocks from the last to the first, so the longest causal tiles start first
/// (longest-processing-time-first), and the CTAs that run at the same time read the K/V of a few heads only (L2
/// reuse; the same idea as FlashAttention-3's L2-sized head sections in its tile scheduler). section_bh = batch ·
/// heads gives one section: (batch, head) fastest over the whole problem. section_bh is in [1, batch · heads], so
/// section_bh · m_blocks ≤ num_tiles ≤ 2^30 fits an int.
///
/// Paired order (pair_order, perf-log v9): the order runs over units of two slots, t = 2·u + s. Unit u holds query
/// blocks m_blocks − 1 − q and q of one (batch, head) pair (2·q + 1 < m_blocks), the longer first: under a causal
/// mask their key blocks add up to about the same for every q, so a static round robin over units balances the
/// CTAs inside L2 sections too (the longest-first order only balances when every wave holds one block height, that
/// is with one section). When m_blocks is odd the middle block's unit has it once: its second slot decodes to
/// m_block = m_blocks, past the entry, which the kernel skips; those units come after every pair, in (batch, head)
/// order, so that they (half as long) fill the last waves. num_tiles = 2 · ceil(m_blocks / 2) · batch · heads.
///
/// The struct also carries the problem's extents that the kernel cuts its tiles from (group, head_dim, seqlen_q,
/// seqlen_k), in this order: the kernel parameters embed it, and the order of these fields is the order the
/// kernel's parameter block had before the scheduler became a type (their offsets, and with them the kernels' SASS,
/// stayed the same).
struct FwdTileOrder {
  int batch, heads_q;
  int group;               ///< heads_q / heads_kv: query head h reads K/V head h / group
  int head_dim;            ///< the problem's head dim (≤ the kernel's head-dim tile)
  int seqlen_q, seqlen_k;  ///< dense lengths, or the varlen maxima
  int m_blocks;    ///< query blocks per (batch, head): ceil(seqlen_q / BlockM), seqlen_q the (varlen maximum) length
  int num_tiles;   ///< tile indices (slots with pair_order), ≤ 2^30
  int section_bh;  ///< (batch, head) pairs per L2 section (≥ 1)
  // decode's divisors, precomputed on the host (integer division by a run-time value is ~25 dependent instructions
  // with a MUFU.RCP; a FastDivmod is a multiply-high and a shift): units per section, (batch, head) pairs of a full
  // section and of the last one, query heads.
  cutlass::FastDivmod div_section, div_bh_full, div_bh_last, div_heads;
  bool pair_order;  ///< causal pairs of query blocks per CTA (dense causal, persistent)
};

/// Iteration over the tile order. MayPair: the kernel is causal (only causal problems walk the paired order; false
/// compiles the pairing away).
template <bool MayPair>
struct FwdTileScheduler {
  /// The tile of index t ∈ [0, o.num_tiles).
  CUTLASS_HOST_DEVICE static TileCoord decode(FwdTileOrder const& o, int t) {
    TileCoord w;
    decode_into(o, t, w);
    return w;
  }

  /// decode, writing m_block, h and b of `w` (any type with those int members: the kernel's tile with its entry
  /// geometry fills them in place, which keeps its code as it was before the scheduler became a type).
  template <class Tile>
  CUTLASS_HOST_DEVICE static void decode_into(FwdTileOrder const& o, int t, Tile& w) {
    const bool pairs = MayPair && o.pair_order;
    const int bh_count = o.batch * o.heads_q;
    const int slot = pairs ? (t & 1) : 0;
    const int u = pairs ? (t >> 1) : t;
    const int half = o.m_blocks >> 1;  // full pairs per (batch, head)
    int bh;
    if (pairs && u >= half * bh_count) {
      // The middle block of an odd count: one unit per (batch, head), after every pair (half as long as a pair,
      // they fill the last waves).
      bh = u - half * bh_count;
      w.m_block = slot == 0 ? half : o.m_blocks;
    } else {
      // section = u / units per section (section_bh · units per (batch, head)), r = the rest; then (batch, head)
      // fastest: bh = bh0 + r mod n_bh, q = r / n_bh, where n_bh = section_bh except in a partial last section.
      int section, r, q, bh_in;
      o.div_section(section, r, u);
      const int bh0 = section * o.section_bh;
      (bh0 + o.section_bh > bh_count ? o.div_bh_last : o.div_bh_full)(q, bh_in, r);
      bh = bh0 + bh_in;
      w.m_block = pairs && slot == 1 ? q : o.m_blocks - 1 - q;
    }
    o.div_heads(w.b, w.h, bh);
  }

  /// The first tile index of the CTA whose index `cta()` returns: the round robin over tiles (cta, + grid, …), or
  /// with pair_order over units of two slots: CTA c takes slots 2·u and 2·u + 1 of units u = c, c + grid, …. The
  /// index is a callable for the reason given at next (the kernel passes a lambda reading blockIdx.x).
  template <class Cta>
  CUTLASS_HOST_DEVICE static int first(FwdTileOrder const& o, Cta cta) {
    return MayPair && o.pair_order ? 2 * cta() : cta();
  }

  /// The tile index after t. `grid()` returns the number of CTAs; it is called only where the step needs it (the
  /// kernel passes a lambda reading gridDim.x: a special-register read that the compiler does not move, so reading
  /// it where the step does not need it changed the kernels' code). No overflow: t < num_tiles ≤ 2^30 and the
  /// persistent grid has at most one CTA per SM (the paired order is persistent only).
  template <class Grid>
  CUTLASS_HOST_DEVICE static int next(FwdTileOrder const& o, int t, Grid grid) {
    if (MayPair && o.pair_order) return (t & 1) ? t + 2 * grid() - 1 : t + 1;
    return t + grid();
  }
};

// --------------------------------------------------------------------------------------------------- host half

/// The L2 share one tile-order section's K and V may take, in MiB (a third of the H100/H200's 50 MB L2).
constexpr int kFwdL2SectionMiB = 16;

/// (batch, head) pairs per section of the tile order: as many query heads as share K and V of at most
/// kFwdL2SectionMiB, at least one, at most all. K and V bytes per query head = 2 · seqlen_k · head_dim · element
/// size / (heads_q / heads_kv). One section (all pairs) for varlen problems (their entries differ in length, and
/// sections sized by the longest entry were not measured) and for causal problems that do not walk the paired
/// order on the persistent scheduler: with the longest-first order only one section balances the static round
/// robin (sections measured −5–8 % at causal 512–2k, v5). Dense causal problems on the one-CTA-per-tile scheduler
/// get sections (v15: the hardware balances them; at d 128 causal 8k DRAM reads fell from 1.13 to 0.20 GB, +4.0 to
/// +7.6 % sustained at causal 8k–16k).
inline int fwd_l2_section_bh(const FwdParams& a, std::size_t element_bytes, bool pair_order) {
  const int64_t bh_count = int64_t(a.batch) * a.heads_q;
  const bool causal_sections = pair_order || a.scheduler == TileScheduler::kIndividual;
  if ((a.mask == MaskType::kCausal && !causal_sections) || a.cu_seqlens_q != nullptr) return int(bh_count);
  const int group = a.heads_q / a.heads_kv;
  const double kv_bytes_per_head = 2.0 * std::max(a.seqlen_k, 1) * a.head_dim * double(element_bytes) / group;
  const double budget = double(kFwdL2SectionMiB) * 1024 * 1024;
  const int64_t n = std::max<int64_t>(1, int64_t(budget / kv_bytes_per_head));
  return int(std::min(n, bh_count));
}

/// Whether a problem walks the paired tile order: dense causal problems on the persistent scheduler (one CTA per
/// tile leaves the balance to the hardware, and varlen entries differ in their block counts) with at least as many
/// units as CTAs (with fewer, pairing would run two tiles in series on one CTA while others idle), while the paired
/// slot count 2 · ceil(m_blocks / 2) · batch · heads stays within 2^30 (an int with room). Measured on the H200
/// (v9): +3–6 % at causal 512–1k in most runs, −1.5 to +4.5 % at d 128 causal 2k–4k.
inline bool fwd_pair_order(const FwdParams& a, int m_blocks) {
  const int64_t units = (int64_t(m_blocks) + 1) / 2 * a.batch * a.heads_q;
  return a.mask == MaskType::kCausal && a.cu_seqlens_q == nullptr && a.scheduler == TileScheduler::kPersistent &&
         units >= a.sm_count && 2 * units <= (int64_t(1) << 30);
}

/// The tile order of a problem for a kernel with `block_m` query rows per tile and K/V elements of
/// `element_bytes`. `a` is validated, with scheduler resolved (not kAuto) and sm_count > 0 (the API layer does
/// both). The divisors: units per section (section_bh · units per (batch, head): ⌊m_blocks / 2⌋ paired, m_blocks
/// plain; at least 1, as a paired problem with one query block per head has no full pair and never divides),
/// (batch, head) pairs of a full and of the last section, query heads; every dividend is < num_tiles ≤ 2^30, inside
/// FastDivmod's exact range. num_tiles is 0 when the problem has no query rows (nothing to launch).
inline FwdTileOrder make_fwd_tile_order(const FwdParams& a, int block_m, std::size_t element_bytes) {
  FwdTileOrder o{};
  o.batch = a.batch;
  o.heads_q = a.heads_q;
  o.group = a.heads_q / a.heads_kv;
  o.head_dim = a.head_dim;
  o.seqlen_q = a.seqlen_q;
  o.seqlen_k = a.seqlen_k;
  o.m_blocks = (a.seqlen_q + block_m - 1) / block_m;
  o.pair_order = fwd_pair_order(a, o.m_blocks);
  // ≤ 2^30, checked by fwd_validate (plain order) and fwd_pair_order (paired slots, one per tile and one per odd
  // middle block)
  o.num_tiles = (o.pair_order ? 2 * ((o.m_blocks + 1) / 2) : o.m_blocks) * a.batch * a.heads_q;
  o.section_bh = fwd_l2_section_bh(a, element_bytes, o.pair_order);
  const int bh_count = o.batch * o.heads_q;
  const int per_bh = o.pair_order ? o.m_blocks / 2 : o.m_blocks;
  const int sections = (bh_count + o.section_bh - 1) / o.section_bh;
  o.div_section = cutlass::FastDivmod(std::max(1, o.section_bh * per_bh));
  o.div_bh_full = cutlass::FastDivmod(o.section_bh);
  o.div_bh_last = cutlass::FastDivmod(bh_count - (sections - 1) * o.section_bh);
  o.div_heads = cutlass::FastDivmod(o.heads_q);
  return o;
}

/// CTAs to launch for the order `o` under the resolved scheduler of `a`: one per tile, or min(tiles, a.sm_count)
/// for the persistent scheduler.
inline int fwd_grid(const FwdTileOrder& o, const FwdParams& a) {
  return a.scheduler == TileScheduler::kPersistent ? std::min(o.num_tiles, a.sm_count) : o.num_tiles;
}

}  // namespace fmha::kernel
