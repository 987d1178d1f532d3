// The split-KV plan and tile order of the decode family (kernel/decode_kernel.cuh): which CTA attends
// which query rows against which key range, and how many key splits a problem gets. Like the forward's tile
// scheduler (tile_scheduler.hpp) it compiles with g++ (no CuTe, no device intrinsics), so that
// tests/cpu/test_decode_plan.cpp checks on the CPU that every (entry, query row, key) is attended exactly once.
//
// Decode tiles pack the query rows that share one K/V head: with GQA group g = heads_q / heads_kv and n new tokens,
// K/V head hk serves g · n rows, row r = token r / g of query head hk · g + r % g, so the cache is read once per K/V
// head instead of once per query head. Those rows fill tiles of block_m rows (m_blocks = ceil(g · n / block_m),
// several CTAs per K/V head only above block_m). The keys of an entry are cut into `splits` ranges of keys_per_split
// (a multiple of block_n) from a bound fixed on the host (max_seqlen_k), so the grid and workspace do not depend on
// the lengths, which the kernel reads on the device (CUDA graphs replay with other lengths up to the bound): a split
// that starts past an entry's keys is empty and contributes O = 0, LSE = −inf to the combine.
//
// The number of splits (FlashAttention's num_splits heuristic, in spirit): one split when the (entry, K/V head, row
// block) tiles already fill the CTA slots (SMs · CTAs per SM); otherwise the fewest splits whose waves are nearly as
// full as the best count's, with at least kMinKeysPerSplit keys per split and at most kMaxSplits.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

// Host and device (no CUTLASS here: the API layer compiles this with g++, also in builds without kernels).
#if defined(__CUDACC__)
#define FMHA_DECODE_HD __host__ __device__ __forceinline__
#else
#define FMHA_DECODE_HD inline
#endif

namespace fmha::kernel {

/// What the plan depends on (all host values).
struct DecodeShape {
  int batch = 1;
  int heads_q = 1;
  int heads_kv = 1;
  int head_dim = 128;
  int new_tokens = 1;     ///< query tokens per entry (1 … 16)
  int max_seqlen_k = 0;   ///< bound on every entry's key count (cache + appended tokens) for which the plan holds
  int cta_slots = 264;    ///< CTAs resident at once to fill (SMs · tiles::kDecodeCtasPerSm)
  int block_m = 64;       ///< query rows per tile
  int block_n = 128;      ///< keys per key block; splits are whole blocks
  int splits = 0;         ///< 0: the heuristic; else the caller's count (clamped to the key blocks)
};

/// The plan: grid, split bound and workspace, fixed on the host.
struct DecodePlanInfo {
  int rows_per_head = 0;   ///< g · n: query rows that share one K/V head
  int m_blocks = 0;        ///< row blocks per (entry, K/V head)
  int splits = 1;          ///< key ranges per (entry, K/V head, row block)
  int keys_per_split = 0;  ///< a multiple of block_n; splits · keys_per_split ≥ max_seqlen_k
  int num_tiles = 0;       ///< batch · heads_kv · m_blocks · splits (the grid of one CTA per tile)
  std::size_t workspace_o_bytes = 0;    ///< fp32 partial O [splits][batch][n][heads_q][head_dim] (0 with one split)
  std::size_t workspace_lse_bytes = 0;  ///< fp32 partial LSE [splits][batch][n][heads_q] (0 with one split)
  /// Bytes the caller provides: both regions, each starting 256-byte aligned.
  std::size_t workspace_bytes() const {
    auto up = [](std::size_t x) { return (x + 255) / 256 * 256; };
    return up(workspace_o_bytes) + up(workspace_lse_bytes);
  }
};

constexpr int kMinKeysPerSplit = 256;  ///< fewer keys per split would spend more on the combine than they save
constexpr int kMaxSplits = 128;

/// Wave efficiency of running `tiles` one-CTA tiles on `slots` resident CTAs: tiles / (full waves · slots).
inline double decode_wave_efficiency(long long tiles, int slots) {
  const long long waves = (tiles + slots - 1) / slots;
  return waves == 0 ? 0.0 : double(tiles) / double(waves * slots);
}

/// The plan of `s` (see the file comment). Needs sensible values (the API validates them first): batch, heads,
/// new_tokens, cta_slots, block_m, block_n ≥ 1, heads_kv divides heads_q, max_seqlen_k ≥ 0.
inline DecodePlanInfo make_decode_plan(const DecodeShape& s) {
  DecodePlanInfo p;
  const int group = s.heads_q / s.heads_kv;
  p.rows_per_head = group * s.new_tokens;
  p.m_blocks = (p.rows_per_head + s.block_m - 1) / s.block_m;
  const int key_blocks = std::max(1, (s.max_seqlen_k + s.block_n - 1) / s.block_n);
  const long long base = 1LL * s.batch * s.heads_kv * p.m_blocks;
  int splits = 1;
  if (s.splits > 0) {
    splits = std::min(s.splits, key_blocks);
  } else if (base < (long long)s.cta_slots * 8 / 10) {
    const int cap = std::max(1, std::min({kMaxSplits, key_blocks,
                                          std::max(1, s.max_seqlen_k / kMinKeysPerSplit)}));
    double best = 0.0;
    for (int c = 1; c <= cap; ++c) best = std::max(best, decode_wave_efficiency(base * c, s.cta_slots));
    for (int c = 1; c <= cap; ++c)
      if (decode_wave_efficiency(base * c, s.cta_slots) >= 0.85 * best) {
        splits = c;
        break;
      }
  }
  // Whole key blocks per split, and no split that is empty for every entry.
  const int blocks_per_split = (key_blocks + splits - 1) / splits;
  p.splits = (key_blocks + blocks_per_split - 1) / blocks_per_split;
  p.keys_per_split = blocks_per_split * s.block_n;
  p.num_tiles = int(base * p.splits);
  if (p.splits > 1) {
    const std::size_t rows = std::size_t(p.splits) * s.batch * s.new_tokens * s.heads_q;
    p.workspace_o_bytes = rows * s.head_dim * sizeof(float);
    p.workspace_lse_bytes = rows * sizeof(float);
  }
  return p;
}

/// One decode tile: key split `split` of row block m_block of K/V head hk of entry b.
struct DecodeTile {
  int split, m_block, hk, b;
};

/// The tile of index t ∈ [0, num_tiles): splits fastest (the CTAs of one (entry, K/V head) run side by side and
/// share its cache lines in L2), then row blocks, K/V heads, entries.
FMHA_DECODE_HD DecodeTile decode_tile_of(DecodePlanInfo const& p, int heads_kv, int t) {
  DecodeTile w;
  w.split = t % p.splits;
  t /= p.splits;
  w.m_block = t % p.m_blocks;
  t /= p.m_blocks;
  w.hk = t % heads_kv;
  w.b = t / heads_kv;
  return w;
}

/// Keys [begin, end) of split `split` for an entry with seqlen_k keys (read on the device); empty (begin ≥ end)
/// for a split past the entry's keys.
struct KeyRangeOfSplit {
  int begin, end;
};
FMHA_DECODE_HD KeyRangeOfSplit split_key_range(DecodePlanInfo const& p, int split, int seqlen_k) {
  const long long b = 1LL * split * p.keys_per_split, e = b + p.keys_per_split;
  return {int(b < seqlen_k ? b : seqlen_k), int(e < seqlen_k ? e : seqlen_k)};
}

/// Query row r of a tile's packed rows (r < rows_per_head): token r / group of query head hk · group + r % group.
struct PackedRow {
  int token, head;
};
FMHA_DECODE_HD PackedRow packed_row(int r, int hk, int group) { return {r / group, hk * group + r % group}; }

}  // namespace fmha::kernel
