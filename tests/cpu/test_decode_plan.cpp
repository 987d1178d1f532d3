// The decode family's split-KV plan and tile order (src/kernels/kernel/decode_plan.hpp), on the CPU: for random
// problems every (entry, query row of every query head and new token, key) is attended by exactly one tile, splits
// past an entry's keys are empty, and the split heuristic and workspace sizes behave as documented.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/kernel/decode_plan.hpp"

namespace {

using fmha::kernel::DecodePlanInfo;
using fmha::kernel::DecodeShape;
using fmha::kernel::make_decode_plan;

/// Counts, over all tiles of the plan, how often each (entry, token, query head, key) is attended; every one of
/// the entry's keys must be attended once by every query row, nothing else ever.
void expect_exact_cover(const DecodeShape& s, const std::vector<int>& seqlens_k) {
  const DecodePlanInfo p = make_decode_plan(s);
  const int group = s.heads_q / s.heads_kv;
  ASSERT_GE(p.splits, 1);
  ASSERT_GE(1LL * p.splits * p.keys_per_split, s.max_seqlen_k);
  ASSERT_EQ(p.keys_per_split % s.block_n, 0);
  ASSERT_EQ(p.num_tiles, s.batch * s.heads_kv * p.m_blocks * p.splits);
  std::map<std::tuple<int, int, int>, std::vector<int>> seen;  // (b, token, head) → count per key
  for (int t = 0; t < p.num_tiles; ++t) {
    const auto w = fmha::kernel::decode_tile_of(p, s.heads_kv, t);
    ASSERT_TRUE(w.b >= 0 && w.b < s.batch && w.hk >= 0 && w.hk < s.heads_kv && w.m_block >= 0 &&
                w.m_block < p.m_blocks && w.split >= 0 && w.split < p.splits) << "tile " << t;
    const auto range = fmha::kernel::split_key_range(p, w.split, seqlens_k[w.b]);
    ASSERT_LE(range.begin, range.end + 0) << "tile " << t;
    for (int r = w.m_block * s.block_m; r < std::min(p.rows_per_head, (w.m_block + 1) * s.block_m); ++r) {
      const auto row = fmha::kernel::packed_row(r, w.hk, group);
      ASSERT_EQ(row.head / group, w.hk);
      auto& keys = seen[{w.b, row.token, row.head}];
      keys.resize(size_t(seqlens_k[w.b]), 0);
      for (int j = range.begin; j < range.end; ++j) ++keys[size_t(j)];
    }
  }
  for (int b = 0; b < s.batch; ++b)
    for (int tok = 0; tok < s.new_tokens; ++tok)
      for (int h = 0; h < s.heads_q; ++h) {
        auto it = seen.find({b, tok, h});
        ASSERT_NE(it, seen.end()) << "entry " << b << " token " << tok << " head " << h << " never attended";
        for (int j = 0; j < seqlens_k[b]; ++j)
          ASSERT_EQ(it->second[size_t(j)], 1) << "entry " << b << " token " << tok << " head " << h << " key " << j;
      }
  EXPECT_EQ(seen.size(), size_t(s.batch) * s.new_tokens * s.heads_q);
}

TEST(DecodePlan, EveryRowSeesEveryKeyOnceForRandomProblems) {
  std::mt19937 g(7);
  const int ratios[] = {1, 4, 5, 8, 32};
  for (int it = 0; it < 300; ++it) {
    DecodeShape s;
    s.batch = 1 + int(g() % 9);
    s.heads_kv = 1 + int(g() % 4);
    s.heads_q = s.heads_kv * ratios[g() % 5];
    s.new_tokens = 1 + int(g() % 16);
    s.max_seqlen_k = int(g() % 5000);
    s.cta_slots = 1 + int(g() % 132);
    s.block_m = g() % 2 ? 64 : 128;
    s.block_n = g() % 2 ? 64 : 128;  // the decode kernels' blocks at head-dim tiles 128 and 64
    s.splits = g() % 3 == 0 ? int(g() % 140) : 0;  // forced counts, 0 and above the key blocks included
    std::vector<int> lens(size_t(s.batch));
    for (int& l : lens) l = s.max_seqlen_k == 0 ? 0 : int(g() % (s.max_seqlen_k + 1));  // ≤ the plan's bound
    SCOPED_TRACE("iteration " + std::to_string(it));
    expect_exact_cover(s, lens);
  }
}

TEST(DecodePlan, SplitHeuristic) {
  DecodeShape s;
  s.heads_q = 32, s.heads_kv = 8, s.max_seqlen_k = 4096, s.cta_slots = 132;
  s.batch = 64;  // 512 tiles already fill 132 CTA slots: one split, no workspace
  DecodePlanInfo p = make_decode_plan(s);
  EXPECT_EQ(p.splits, 1);
  EXPECT_EQ(p.workspace_bytes(), 0u);
  s.batch = 1, s.max_seqlen_k = 131072;  // 8 tiles for 132 CTA slots: many splits, at least kMinKeysPerSplit keys each
  p = make_decode_plan(s);
  EXPECT_GE(p.splits, 8);
  EXPECT_LE(p.splits, fmha::kernel::kMaxSplits);
  EXPECT_GE(p.keys_per_split, fmha::kernel::kMinKeysPerSplit);
  EXPECT_GE(fmha::kernel::decode_wave_efficiency(p.num_tiles, s.cta_slots), 0.8);
  s.max_seqlen_k = 300;  // too short to split usefully
  EXPECT_EQ(make_decode_plan(s).splits, 1);
  s.max_seqlen_k = 0;
  EXPECT_EQ(make_decode_plan(s).splits, 1);
  // A forced count is kept, except that no split may be empty for every entry: 1000 keys are 8 blocks.
  s.max_seqlen_k = 1000, s.splits = 3;
  EXPECT_EQ(make_decode_plan(s).splits, 3);
  s.splits = 50;
  EXPECT_EQ(make_decode_plan(s).splits, 8);
}

TEST(DecodePlan, PackedRowsAndWorkspace) {
  DecodeShape s;
  s.batch = 3, s.heads_q = 40, s.heads_kv = 8, s.new_tokens = 16, s.head_dim = 128, s.max_seqlen_k = 9000;
  s.cta_slots = 132, s.block_m = 64, s.splits = 4;
  const DecodePlanInfo p = make_decode_plan(s);
  EXPECT_EQ(p.rows_per_head, 5 * 16);
  EXPECT_EQ(p.m_blocks, 2);  // 80 rows of one K/V head need two CTAs of 64 rows
  EXPECT_EQ(p.workspace_o_bytes, size_t(4) * 3 * 16 * 40 * 128 * 4);
  EXPECT_EQ(p.workspace_lse_bytes, size_t(4) * 3 * 16 * 40 * 4);
  EXPECT_EQ(p.workspace_bytes() % 256, 0u);
  EXPECT_GE(p.workspace_bytes(), p.workspace_o_bytes + p.workspace_lse_bytes);
  const auto row = fmha::kernel::packed_row(13, 2, 5);  // row 13 of K/V head 2: token 2 of query head 13
  EXPECT_EQ(row.token, 2);
  EXPECT_EQ(row.head, 13);
  const auto empty = fmha::kernel::split_key_range(p, 3, 100);  // split 3 starts past 100 keys
  EXPECT_EQ(empty.begin, empty.end);
}

}  // namespace
