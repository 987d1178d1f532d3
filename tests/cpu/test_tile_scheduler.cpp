// CPU tests of the forward kernel's tile schedulers (src/kernels/kernel/tile_scheduler.hpp, the same code the kernel
// runs): for random shapes, varlen batches with empty entries, GQA, both masks, both schedulers and SM counts from 1
// to 132, every CTA's walk over the tile order visits every tile index once and every work tile of the problem
// (query block, head, entry) exactly once; the paired order and the L2 sections are exercised where they apply.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/kernel/tile_scheduler.hpp"

namespace {

using fmha::FwdParams;
using fmha::kernel::FwdTileOrder;
using fmha::kernel::FwdTileScheduler;
using fmha::kernel::TileCoord;

struct Problem {
  int batch = 1, heads_q = 1, heads_kv = 1, head_dim = 128;
  std::vector<int> seqlens_q;  ///< per entry (dense: all equal)
  int seqlen_k = 0;
  bool causal = false, varlen = false, persistent = false;
  int sm_count = 132, block_m = 128;

  std::string str() const {
    std::ostringstream s;
    s << "b=" << batch << " h=" << heads_q << "/" << heads_kv << " d=" << head_dim << " k=" << seqlen_k
      << (causal ? " causal" : "") << (varlen ? " varlen" : "") << (persistent ? " persistent" : " individual")
      << " sms=" << sm_count << " block_m=" << block_m << " q=";
    for (int q : seqlens_q) s << q << ":";
    return s.str();
  }
};

struct Walk {
  FwdTileOrder order;
  int grid = 0;
  int indices = 0;                                      // tile indices walked by all CTAs together
  std::map<std::tuple<int, int, int>, int> visits;      // (b, h, m_block) inside its entry -> times run
  int outside = 0;                                      // tiles past their entry's end (skipped by the kernel)
};

template <bool MayPair>
Walk walk(const Problem& pr) {
  alignas(16) static char dummy[16];
  FwdParams a;
  a.batch = pr.batch, a.heads_q = pr.heads_q, a.heads_kv = pr.heads_kv, a.head_dim = pr.head_dim;
  a.seqlen_q = 0;
  for (int q : pr.seqlens_q) a.seqlen_q = std::max(a.seqlen_q, q);
  a.seqlen_k = pr.seqlen_k;
  a.mask = pr.causal ? fmha::MaskType::kCausal : fmha::MaskType::kNone;
  a.cu_seqlens_q = a.cu_seqlens_k = pr.varlen ? reinterpret_cast<const int*>(dummy) : nullptr;
  a.scheduler = pr.persistent ? fmha::TileScheduler::kPersistent : fmha::TileScheduler::kIndividual;
  a.sm_count = pr.sm_count;
  Walk w;
  w.order = fmha::kernel::make_fwd_tile_order(a, pr.block_m, 2);
  w.grid = fmha::kernel::fwd_grid(w.order, a);
  using S = FwdTileScheduler<MayPair>;
  std::vector<int> index_seen(size_t(w.order.num_tiles), 0);
  for (int cta = 0; cta < w.grid; ++cta) {
    for (int t = S::first(w.order, [&] { return cta; }); t < w.order.num_tiles; t = S::next(w.order, t, [&] { return w.grid; })) {
      EXPECT_GE(t, 0);
      ++index_seen[size_t(t)];
      ++w.indices;
      const TileCoord c = S::decode(w.order, t);
      EXPECT_TRUE(c.b >= 0 && c.b < pr.batch && c.h >= 0 && c.h < pr.heads_q) << pr.str() << " t=" << t;
      EXPECT_TRUE(c.m_block >= 0 && c.m_block <= w.order.m_blocks) << pr.str() << " t=" << t;
      if (c.m_block < w.order.m_blocks && c.m_block * pr.block_m < pr.seqlens_q[size_t(c.b)])
        ++w.visits[{c.b, c.h, c.m_block}];
      else
        ++w.outside;
    }
  }
  for (size_t t = 0; t < index_seen.size(); ++t)
    EXPECT_EQ(index_seen[t], 1) << pr.str() << ": tile index " << t << " walked " << index_seen[t] << " times";
  return w;
}

/// Every work tile of the problem is run exactly once (and nothing else is).
template <bool MayPair>
Walk check_once(const Problem& pr) {
  Walk w = walk<MayPair>(pr);
  int expected = 0;
  for (int b = 0; b < pr.batch; ++b) {
    const int blocks = (pr.seqlens_q[size_t(b)] + pr.block_m - 1) / pr.block_m;
    for (int h = 0; h < pr.heads_q; ++h)
      for (int m = 0; m < blocks; ++m) {
        ++expected;
        auto it = w.visits.find({b, h, m});
        EXPECT_TRUE(it != w.visits.end() && it->second == 1)
            << pr.str() << ": tile (b=" << b << ", h=" << h << ", m=" << m << ") run "
            << (it == w.visits.end() ? 0 : it->second) << " times";
      }
  }
  EXPECT_EQ(int(w.visits.size()), expected) << pr.str();
  return w;
}

Walk check(const Problem& pr) { return pr.causal ? check_once<true>(pr) : check_once<false>(pr); }

TEST(TileScheduler, RandomShapesVisitEveryTileOnce) {
  std::mt19937 rng(20261201);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int sms[] = {1, 2, 3, 7, 16, 64, 131, 132};
  int paired = 0, sectioned = 0, cases = 0;
  for (int i = 0; i < 400; ++i) {
    Problem pr;
    pr.batch = uni(1, 8);
    pr.heads_kv = uni(1, 8);
    pr.heads_q = pr.heads_kv * uni(1, 6);  // GQA ratios 1..6
    pr.head_dim = std::vector<int>{32, 64, 128}[size_t(uni(0, 2))];
    pr.causal = uni(0, 1) == 1;
    pr.varlen = uni(0, 3) == 0;
    pr.persistent = uni(0, 1) == 1;
    pr.sm_count = i % 3 == 0 ? uni(1, 132) : sms[i % 8];
    pr.block_m = uni(0, 1) ? 128 : 192;
    const int len = uni(1, 3) == 1 ? uni(1, 300) : uni(1, 9000);
    pr.seqlen_k = uni(0, 1) ? len : uni(1, 16384);
    for (int b = 0; b < pr.batch; ++b)
      pr.seqlens_q.push_back(pr.varlen ? (uni(0, 4) == 0 ? 0 : uni(1, len)) : len);  // empty varlen entries
    if (pr.varlen) pr.seqlens_q[0] = len;  // the longest entry sets seqlen_q
    const Walk w = check(pr);
    paired += w.order.pair_order;
    sectioned += w.order.section_bh < pr.batch * pr.heads_q;
    ++cases;
    if (::testing::Test::HasFailure()) break;  // one case's messages are enough
  }
  EXPECT_EQ(cases, 400);
  EXPECT_GT(paired, 10) << "the paired order was barely exercised";
  EXPECT_GT(sectioned, 10) << "L2 sections were barely exercised";
}

TEST(TileScheduler, OrderIsLongestFirstInSectionsAndPairsBalance) {
  // The order itself, not only the coverage (properties of the documented order, on random problems):
  //  * plain order: the (batch, head) pair of tile t lies in section ⌊pair / section_bh⌋, and sections come one after
  //    the other (non-decreasing in t); inside a section query blocks run from the last to the first
  //    (longest-first under a causal mask), every pair of the section taking one block per round;
  //  * paired order: slots 2u and 2u + 1 hold one (batch, head) pair, blocks m and m_blocks − 1 − m (their causal
  //    lengths add up to about the same), the longer first; units of odd middle blocks come after every pair.
  std::mt19937 rng(7);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int paired = 0, plain_sectioned = 0;
  for (int i = 0; i < 300; ++i) {
    Problem pr;
    pr.batch = uni(1, 6);
    pr.heads_kv = uni(1, 4);
    pr.heads_q = pr.heads_kv * uni(1, 8);
    pr.head_dim = 128;
    pr.causal = uni(0, 1) == 1;
    pr.persistent = uni(0, 1) == 1;
    pr.sm_count = uni(1, 40);
    pr.block_m = 128;
    const int len = uni(1, 12000);
    pr.seqlen_k = uni(0, 1) ? len : uni(4096, 16384);
    pr.seqlens_q.assign(size_t(pr.batch), len);
    Walk w = check(pr);
    const FwdTileOrder& o = w.order;
    auto decode = [&](int t) {
      return pr.causal ? FwdTileScheduler<true>::decode(o, t) : FwdTileScheduler<false>::decode(o, t);
    };
    if (o.pair_order) {
      ++paired;
      const int bh_count = o.batch * o.heads_q, half = o.m_blocks / 2;
      for (int u = 0; 2 * u + 1 < o.num_tiles; ++u) {
        const TileCoord a = decode(2 * u), b = decode(2 * u + 1);
        ASSERT_TRUE(a.b == b.b && a.h == b.h) << pr.str() << " unit " << u << ": one (batch, head) per unit";
        if (u < half * bh_count) {
          ASSERT_EQ(a.m_block + b.m_block, o.m_blocks - 1) << pr.str() << " unit " << u;
          ASSERT_GT(a.m_block, b.m_block) << pr.str() << " unit " << u << ": the longer block first";
        } else {
          ASSERT_TRUE(a.m_block == half && b.m_block == o.m_blocks) << pr.str() << " unit " << u << ": middle";
        }
      }
      continue;
    }
    plain_sectioned += o.section_bh < o.batch * o.heads_q;
    int last_section = 0;
    for (int t = 0; t < o.num_tiles; ++t) {
      const TileCoord c = decode(t);
      const int bh = c.b * o.heads_q + c.h, section = bh / o.section_bh;
      ASSERT_GE(section, last_section) << pr.str() << " t=" << t << ": sections run one after the other";
      last_section = section;
      const int first = section * o.section_bh;
      const int n_bh = std::min(o.section_bh, o.batch * o.heads_q - first);
      const int r = t - first * o.m_blocks;  // the tile's place inside its section
      ASSERT_EQ(bh - first, r % n_bh) << pr.str() << " t=" << t << ": pairs fastest inside a section";
      ASSERT_EQ(c.m_block, o.m_blocks - 1 - r / n_bh) << pr.str() << " t=" << t << ": longest first";
    }
  }
  EXPECT_GT(paired, 20);
  EXPECT_GT(plain_sectioned, 20);
}

TEST(TileScheduler, PairedOrderWithOddBlockCountsAndManySections) {
  // Dense causal on the persistent scheduler: paired units; 8k keys at d 128 give 4 heads per 16 MiB section.
  for (int q : {8192, 8192 + 128, 8192 + 1, 128, 129}) {
    for (int sms : {1, 5, 132}) {
      Problem pr;
      pr.batch = 3, pr.heads_q = 12, pr.heads_kv = 3, pr.head_dim = 128, pr.seqlen_k = q;
      pr.seqlens_q = {q, q, q};
      pr.causal = pr.persistent = true;
      pr.sm_count = sms;
      const Walk w = check(pr);
      const int units = (w.order.m_blocks + 1) / 2 * pr.batch * pr.heads_q;
      EXPECT_EQ(w.order.pair_order, units >= sms) << pr.str();
      if (w.order.pair_order) {
        EXPECT_EQ(w.order.num_tiles, 2 * units) << pr.str();
        EXPECT_EQ(w.outside, w.order.m_blocks % 2 == 1 ? pr.batch * pr.heads_q : 0) << pr.str();
      }
      if (q >= 8192) EXPECT_LT(w.order.section_bh, pr.batch * pr.heads_q) << pr.str();
    }
  }
}

TEST(TileScheduler, OneSectionWhereSectionsWereNotMeasured) {
  Problem pr;
  pr.batch = 4, pr.heads_q = pr.heads_kv = 32, pr.head_dim = 128, pr.seqlen_k = 16384;
  pr.seqlens_q = {16384, 16384, 16384, 16384};
  pr.causal = true, pr.persistent = true, pr.sm_count = 100000;  // too few units to pair: one section
  Walk w = check(pr);
  EXPECT_FALSE(w.order.pair_order);
  EXPECT_EQ(w.order.section_bh, 4 * 32);
  pr.persistent = false;  // one CTA per tile: sections
  w = check(pr);
  EXPECT_EQ(w.order.section_bh, 2);  // 16 MiB / (2 · 16384 · 128 · 2 bytes) = 2 heads
  pr.varlen = true;  // varlen: one section
  w = check(pr);
  EXPECT_EQ(w.order.section_bh, 4 * 32);
  EXPECT_EQ(w.grid, w.order.num_tiles);
}

TEST(TileScheduler, GridPerScheduler) {
  Problem pr;
  pr.batch = 2, pr.heads_q = pr.heads_kv = 4, pr.seqlen_k = 1000, pr.seqlens_q = {1000, 1000};
  pr.persistent = true, pr.sm_count = 5;
  EXPECT_EQ(check(pr).grid, 5);
  pr.sm_count = 1000;
  EXPECT_EQ(check(pr).grid, 2 * 4 * 8);  // fewer tiles than SMs: one CTA per tile
  pr.persistent = false, pr.sm_count = 5;
  EXPECT_EQ(check(pr).grid, 2 * 4 * 8);
  pr.seqlens_q = {0, 0};
  EXPECT_EQ(check(pr).order.num_tiles, 0);  // nothing to launch
}

}  // namespace
