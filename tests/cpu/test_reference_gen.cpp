// Tests of the generation (decode) reference (reference/attention.h: gen) and of gen_bytes.
//
// Expected outputs come from a direct softmax written in this file over the keys the test itself gathers from the
// cache (before the append) plus the new token; cache contents are checked element by element.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu/test_util.h"
#include "reference/attention.h"
#include "reference/dtype.h"
#include "reference/flops.h"

namespace {

using namespace fmha;
using namespace fmha::ref;

using testutil::kNaN;
using testutil::kNegInf;
using testutil::random_vec;

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

/// Direct softmax of one query row over the given key/value rows, in double.
struct RowRef {
  std::vector<double> o;
  double lse;
};
RowRef naive_row(const float* q, const std::vector<const float*>& ks, const std::vector<const float*>& vs, int d,
                 double scale) {
  RowRef r{std::vector<double>(size_t(d), 0.0), -std::numeric_limits<double>::infinity()};
  if (ks.empty()) return r;
  std::vector<double> t;
  for (const float* k : ks) {
    double s = 0.0;
    for (int x = 0; x < d; ++x) s += double(q[x]) * k[x];
    t.push_back(scale * s);
  }
  const double m = *std::max_element(t.begin(), t.end());
  double sum = 0.0;
  for (size_t j = 0; j < ks.size(); ++j) {
    const double p = std::exp(t[j] - m);
    sum += p;
    for (int x = 0; x < d; ++x) r.o[x] += p * vs[j][x];
  }
  for (double& x : r.o) x /= sum;
  r.lse = m + std::log(sum);
  return r;
}

/// A contiguous cache [slots][capacity][heads_kv][head_dim] whose rows past each entry's length are NaN.
struct GenCase {
  GenShape s;
  int slots = 0;
  std::vector<float> q, new_k, new_v, cache_k, cache_v;
  int64_t row() const { return int64_t(s.heads_kv) * s.head_dim; }
  int64_t at(int c, int t) const { return (int64_t(c) * s.capacity + t) * row(); }
};

GenCase make_setup(std::vector<int> lens, int slots, int H, int HK, int D, int capacity, std::mt19937& g) {
  GenCase u;
  u.s.batch = int(lens.size()), u.s.heads_q = H, u.s.heads_kv = HK, u.s.head_dim = D, u.s.capacity = capacity;
  u.s.seqlens_kv = lens;
  u.slots = slots;
  std::vector<int> perm(static_cast<size_t>(slots));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), g);
  u.s.cache_batch_idx.assign(perm.begin(), perm.begin() + u.s.batch);
  u.q = random_vec(size_t(u.s.batch) * H * D, g);
  u.new_k = random_vec(size_t(u.s.batch) * HK * D, g);
  u.new_v = random_vec(size_t(u.s.batch) * HK * D, g);
  u.cache_k.assign(size_t(slots) * capacity * HK * D, kNaN);
  u.cache_v = u.cache_k;
  for (int b = 0; b < u.s.batch; ++b)
    for (int t = 0; t < lens[b]; ++t)
      for (int64_t x = 0; x < u.row(); ++x) {
        u.cache_k[u.at(u.s.cache_batch_idx[b], t) + x] = random_vec(1, g)[0];
        u.cache_v[u.at(u.s.cache_batch_idx[b], t) + x] = random_vec(1, g)[0];
      }
  return u;
}

/// Checks O/LSE of every (entry, head) against naive_row over the keys of `before` (+ the new token if appended).
void expect_matches_naive(const GenCase& u, const std::vector<float>& before_k, const std::vector<float>& before_v,
                          const std::vector<float>& o, const std::vector<float>& lse) {
  const GenShape& s = u.s;
  const int group = s.heads_q / s.heads_kv, D = s.head_dim;
  const double scale = 1.0 / std::sqrt(double(D));
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads_q; ++h) {
      const int hk = h / group, c = s.cache_batch_idx[b];
      std::vector<const float*> ks, vs;
      for (int t = 0; t < s.seqlens_kv[b]; ++t) {
        ks.push_back(&before_k[u.at(c, t) + hk * D]);
        vs.push_back(&before_v[u.at(c, t) + hk * D]);
      }
      if (s.append) {
        ks.push_back(&u.new_k[(size_t(b) * s.heads_kv + hk) * D]);
        vs.push_back(&u.new_v[(size_t(b) * s.heads_kv + hk) * D]);
      }
      const RowRef r = naive_row(&u.q[(size_t(b) * s.heads_q + h) * D], ks, vs, D, scale);
      const size_t row = size_t(b) * s.heads_q + h;
      if (ks.empty()) {
        EXPECT_EQ(lse[row], kNegInf) << "entry " << b;
        for (int x = 0; x < D; ++x) EXPECT_EQ(o[row * D + x], 0.0f) << "entry " << b;
        continue;
      }
      EXPECT_NEAR(lse[row], r.lse, 1e-6) << "entry " << b << " head " << h;
      for (int x = 0; x < D; ++x) EXPECT_NEAR(o[row * D + x], r.o[x], 1e-6) << "entry " << b << " head " << h;
    }
}

TEST(ReferenceGen, AppendWritesNewTokenAtRemappedSlotAndPosition) {
  std::mt19937 g(21);
  GenCase u = make_setup({0, 3, 7, 5}, 6, 4, 2, 16, 8, g);
  const std::vector<float> before_k = u.cache_k, before_v = u.cache_v;
  std::vector<float> o(u.q.size(), kNaN), lse(size_t(u.s.batch) * u.s.heads_q, kNaN);
  gen(u.s, u.q.data(), u.new_k.data(), u.new_v.data(), u.cache_k.data(), u.cache_v.data(), o.data(), lse.data());
  for (int c = 0; c < u.slots; ++c)
    for (int t = 0; t < u.s.capacity; ++t) {
      int writer = -1;
      for (int b = 0; b < u.s.batch; ++b)
        if (u.s.cache_batch_idx[b] == c && u.s.seqlens_kv[b] == t) writer = b;
      for (int64_t x = 0; x < u.row(); ++x) {
        const float want_k = writer >= 0 ? u.new_k[writer * u.row() + x] : before_k[u.at(c, t) + x];
        const float want_v = writer >= 0 ? u.new_v[writer * u.row() + x] : before_v[u.at(c, t) + x];
        ASSERT_TRUE(same_bits(u.cache_k[u.at(c, t) + x], want_k)) << "slot " << c << " pos " << t << " x " << x;
        ASSERT_TRUE(same_bits(u.cache_v[u.at(c, t) + x], want_v)) << "slot " << c << " pos " << t << " x " << x;
      }
    }
  expect_matches_naive(u, before_k, before_v, o, lse);
}

TEST(ReferenceGen, CacheOnlyDoesNotTouchTheCache) {
  std::mt19937 g(22);
  GenCase u = make_setup({0, 3, 8, 5}, 5, 6, 3, 8, 8, g);
  u.s.append = false;
  const std::vector<float> before_k = u.cache_k, before_v = u.cache_v;
  std::vector<float> o(u.q.size(), kNaN), lse(size_t(u.s.batch) * u.s.heads_q, kNaN);
  gen(u.s, u.q.data(), nullptr, nullptr, u.cache_k.data(), u.cache_v.data(), o.data(), lse.data());
  ASSERT_EQ(std::memcmp(before_k.data(), u.cache_k.data(), before_k.size() * sizeof(float)), 0);
  ASSERT_EQ(std::memcmp(before_v.data(), u.cache_v.data(), before_v.size() * sizeof(float)), 0);
  expect_matches_naive(u, before_k, before_v, o, lse);
}

TEST(ReferenceGen, PerSequenceLengthsAndAppendToEmptyCache) {
  std::mt19937 g(23);
  GenCase u = make_setup({0, 1, 0, 4}, 4, 4, 1, 8, 6, g);
  const std::vector<float> before_k = u.cache_k, before_v = u.cache_v;
  std::vector<float> o(u.q.size(), kNaN), lse(size_t(u.s.batch) * u.s.heads_q, kNaN);
  gen(u.s, u.q.data(), u.new_k.data(), u.new_v.data(), u.cache_k.data(), u.cache_v.data(), o.data(), lse.data());
  expect_matches_naive(u, before_k, before_v, o, lse);
  const int D = u.s.head_dim;
  for (int b : {0, 2}) {  // empty cache + append: one key, so O is exactly the new V row
    for (int h = 0; h < u.s.heads_q; ++h) {
      for (int x = 0; x < D; ++x) EXPECT_EQ(o[(size_t(b) * u.s.heads_q + h) * D + x], u.new_v[size_t(b) * D + x]);
      double s = 0.0;
      for (int x = 0; x < D; ++x) s += double(u.q[(size_t(b) * u.s.heads_q + h) * D + x]) * u.new_k[size_t(b) * D + x];
      EXPECT_NEAR(lse[size_t(b) * u.s.heads_q + h], s / std::sqrt(double(D)), 1e-6);
    }
  }
}

TEST(ReferenceGen, PagedEqualsContiguous) {
  std::mt19937 g(25);
  for (int page_size : {1, 2, 3, 16, 64, 128}) {
    for (bool append : {true, false}) {
      GenCase u = make_setup({0, 5, 37, 130}, 5, 2, 1, 8, 131, g);
      u.s.append = append;
      const int pps = (u.s.capacity + page_size - 1) / page_size, num_pages = u.slots * pps;
      GenShape ps = u.s;
      ps.capacity = 0, ps.page_size = page_size, ps.pages_per_seq = pps;
      ps.page_table.resize(size_t(num_pages));
      std::iota(ps.page_table.begin(), ps.page_table.end(), 0);
      std::shuffle(ps.page_table.begin(), ps.page_table.end(), g);
      auto paged_at = [&](int c, int t) {
        return (int64_t(ps.page_table[size_t(c) * pps + t / page_size]) * page_size + t % page_size) * u.row();
      };
      std::vector<float> pk(size_t(num_pages) * page_size * u.row(), kNaN), pv = pk;
      for (int c = 0; c < u.slots; ++c)
        for (int t = 0; t < u.s.capacity; ++t)
          for (int64_t x = 0; x < u.row(); ++x) {
            pk[paged_at(c, t) + x] = u.cache_k[u.at(c, t) + x];
            pv[paged_at(c, t) + x] = u.cache_v[u.at(c, t) + x];
          }
      std::vector<float> o1(u.q.size(), kNaN), l1(size_t(u.s.batch) * u.s.heads_q, kNaN), o2 = o1, l2 = l1;
      gen(u.s, u.q.data(), u.new_k.data(), u.new_v.data(), u.cache_k.data(), u.cache_v.data(), o1.data(), l1.data());
      gen(ps, u.q.data(), u.new_k.data(), u.new_v.data(), pk.data(), pv.data(), o2.data(), l2.data());
      EXPECT_EQ(o1, o2) << "page_size " << page_size << " append " << append;
      EXPECT_EQ(l1, l2) << "page_size " << page_size << " append " << append;
      for (int c = 0; c < u.slots; ++c)
        for (int t = 0; t < u.s.capacity; ++t)
          for (int64_t x = 0; x < u.row(); ++x) {
            ASSERT_TRUE(same_bits(pk[paged_at(c, t) + x], u.cache_k[u.at(c, t) + x])) << page_size << " " << c;
            ASSERT_TRUE(same_bits(pv[paged_at(c, t) + x], u.cache_v[u.at(c, t) + x])) << page_size << " " << c;
          }
    }
  }
}

TEST(ReferenceGen, KernelRoundingStoresAndReadsTheElementType) {
  std::mt19937 g(26);
  GenCase u = make_setup({2, 4}, 2, 2, 2, 8, 6, g);
  u.s.dtype = DType::kFP8E5M2, u.s.rounding = Rounding::kKernel;
  GenCase e = u;
  e.s.rounding = Rounding::kExact;
  std::vector<float> ok(u.q.size()), lk(4), oe(u.q.size()), le(4);
  gen(u.s, u.q.data(), u.new_k.data(), u.new_v.data(), u.cache_k.data(), u.cache_v.data(), ok.data(), lk.data());
  gen(e.s, e.q.data(), e.new_k.data(), e.new_v.data(), e.cache_k.data(), e.cache_v.data(), oe.data(), le.data());
  for (int b = 0; b < 2; ++b)
    for (int64_t x = 0; x < u.row(); ++x) {
      const int64_t at = u.at(u.s.cache_batch_idx[b], u.s.seqlens_kv[b]) + x;
      EXPECT_EQ(u.cache_k[at], round_to(DType::kFP8E5M2, u.new_k[b * u.row() + x]));
      EXPECT_EQ(e.cache_k[at], e.new_k[b * u.row() + x]);
    }
  double max_diff = 0.0;
  for (size_t x = 0; x < ok.size(); ++x) max_diff = std::max(max_diff, double(std::fabs(ok[x] - oe[x])));
  EXPECT_GT(max_diff, 0.0);
  EXPECT_LT(max_diff, 4 * ulp(DType::kFP8E5M2, 1.0));
}

TEST(ReferenceGen, InvalidArgumentsThrow) {
  std::mt19937 g(27);
  GenCase u = make_setup({2, 3}, 3, 2, 1, 4, 4, g);
  std::vector<float> o(u.q.size()), lse(4);
  auto run = [&](const GenShape& s) {
    gen(s, u.q.data(), u.new_k.data(), u.new_v.data(), u.cache_k.data(), u.cache_v.data(), o.data(), lse.data());
  };
  auto expect_error = [&](const GenShape& s, const std::string& needle) {
    try {
      run(s);
      ADD_FAILURE() << "no exception, expected one naming " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  GenShape s = u.s;
  s.cache_batch_idx = {1, 1};
  expect_error(s, "cache_batch_idx[1]");  // two entries appending into one slot
  s.append = false;
  EXPECT_NO_THROW(run(s));  // reading one slot twice is fine
  s = u.s;
  s.capacity = 3;
  expect_error(s, "capacity");  // entry 1 needs 3 + 1 tokens
  s = u.s;
  s.seqlens_kv = {1};
  expect_error(s, "seqlens_kv.size(): expected batch = 2, got 1");
  s = u.s;
  s.heads_kv = 2, s.heads_q = 3;
  expect_error(s, "heads_q % heads_kv");
  s = u.s;
  s.capacity = 0, s.page_size = 2, s.pages_per_seq = 2, s.page_table = {0, 1, 2, 3};
  s.cache_batch_idx = {0, 2};
  expect_error(s, "page_table.size()");
}

/// n new tokens per entry (speculative decoding): gen equals the forward reference with the causal q-end mask over
/// the slot's keys after the append (append), or over the cache alone whose last n tokens are the queries' own
/// (cache-only); per-sequence lengths including 0, GQA, remapped slots.
TEST(ReferenceGen, SpeculativeTokensEqualCausalQEndForward) {
  std::mt19937 g(11);
  for (bool append : {true, false})
    for (int n : {1, 2, 4, 16}) {
      const int H = 8, HK = 2, D = 16, cap = 64;
      const std::vector<int> lens = append ? std::vector<int>{0, 5, 30} : std::vector<int>{n, 3 + n, 40};
      GenCase u = make_setup(lens, 4, H, HK, D, cap, g);
      u.s.append = append;
      u.s.new_tokens = n;
      const int B = u.s.batch;
      u.q = random_vec(size_t(B) * n * H * D, g);
      u.new_k = random_vec(size_t(B) * n * HK * D, g);
      u.new_v = random_vec(size_t(B) * n * HK * D, g);
      std::vector<float> o(size_t(B) * n * H * D, kNaN), lse(size_t(B) * n * H, kNaN);
      gen(u.s, u.q.data(), u.new_k.data(), u.new_v.data(), u.cache_k.data(), u.cache_v.data(), o.data(), lse.data());
      for (int b = 0; b < B; ++b) {
        const int c = u.s.cache_batch_idx[b], sk = lens[b] + (append ? n : 0);
        // The slot's keys after the append, gathered as a dense [sk][HK][D] tensor for ref::fwd.
        std::vector<float> k(size_t(sk) * HK * D), v(k.size());
        for (int t = 0; t < sk; ++t)
          for (int64_t x = 0; x < u.row(); ++x) {
            k[size_t(t) * u.row() + x] = u.cache_k[u.at(c, t) + x];
            v[size_t(t) * u.row() + x] = u.cache_v[u.at(c, t) + x];
          }
        AttnShape f;
        f.heads_q = H, f.heads_kv = HK, f.head_dim_qk = f.head_dim_v = D;
        f.seqlens_q = {n}, f.seqlens_k = {sk};
        f.mask = MaskType::kCausal, f.align = CausalAlign::kQEnd;
        std::vector<float> fo(size_t(n) * H * D), fl(size_t(n) * H);
        const float* qb = u.q.data() + size_t(b) * n * H * D;
        fwd(f, bshd(qb, n, H, D), bshd(static_cast<const float*>(k.data()), sk, HK, D),
            bshd(static_cast<const float*>(v.data()), sk, HK, D), bshd(fo.data(), n, H, D), bshd(fl.data(), n, H, 1));
        for (size_t i = 0; i < fo.size(); ++i)
          ASSERT_TRUE(same_bits(o[size_t(b) * n * H * D + i], fo[i]))
              << "append " << append << " n " << n << " entry " << b << " element " << i;
        for (size_t i = 0; i < fl.size(); ++i)
          ASSERT_TRUE(same_bits(lse[size_t(b) * n * H + i], fl[i])) << "append " << append << " n " << n;
      }
    }
}

/// Split-KV windows of gen, merged by combine_splits, give the unsplit result; windows past a sequence's keys are
/// empty (O = 0, LSE = −inf) and contribute nothing.
TEST(ReferenceGen, SplitWindowsCombineToUnsplit) {
  std::mt19937 g(12);
  const int n = 3, H = 4, HK = 2, D = 8;
  GenCase u = make_setup({7, 0, 25}, 3, H, HK, D, 40, g);
  u.s.new_tokens = n;
  u.s.append = true;
  const int B = u.s.batch, rows = B * n * H;
  u.q = random_vec(size_t(rows) * D, g);
  u.new_k = random_vec(size_t(B) * n * HK * D, g);
  u.new_v = random_vec(size_t(B) * n * HK * D, g);
  std::vector<float> o(size_t(rows) * D), lse(rows);
  GenCase first = u;
  gen(first.s, u.q.data(), u.new_k.data(), u.new_v.data(), first.cache_k.data(), first.cache_v.data(), o.data(),
      lse.data());
  const int bounds[] = {0, 5, 16, 33, 60};  // the last window is past every sequence
  const int splits = 4;
  std::vector<float> po(size_t(splits) * rows * D), pl(size_t(splits) * rows);
  for (int sp = 0; sp < splits; ++sp) {
    GenCase w = u;
    gen(w.s, u.q.data(), u.new_k.data(), u.new_v.data(), w.cache_k.data(), w.cache_v.data(),
        po.data() + size_t(sp) * rows * D, pl.data() + size_t(sp) * rows, bounds[sp], bounds[sp + 1]);
  }
  for (int r = 0; r < rows; ++r) EXPECT_EQ(pl[size_t(3) * rows + r], kNegInf) << "row " << r;
  std::vector<float> co(size_t(rows) * D), cl(rows);
  combine_splits(splits, rows, D, po.data(), pl.data(), co.data(), cl.data());
  for (int r = 0; r < rows; ++r) {
    if (lse[r] == kNegInf) {
      EXPECT_EQ(cl[r], kNegInf);
      continue;
    }
    EXPECT_NEAR(cl[r], lse[r], 1e-5) << "row " << r;
    for (int x = 0; x < D; ++x) EXPECT_NEAR(co[size_t(r) * D + x], o[size_t(r) * D + x], 1e-5) << "row " << r;
  }
}

TEST(ReferenceGen, SpeculativeTokenArgumentsThrow) {
  std::mt19937 g(13);
  GenCase u = make_setup({3, 10}, 2, 2, 1, 8, 12, g);
  std::vector<float> o(64 * 8), lse(64);
  auto run = [&](const GenShape& s) {
    GenCase w = u;
    gen(s, u.q.data(), u.new_k.data(), u.new_v.data(), w.cache_k.data(), w.cache_v.data(), o.data(), lse.data());
  };
  GenShape s = u.s;
  s.new_tokens = 0;
  try {
    run(s);
    ADD_FAILURE() << "new_tokens = 0 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("new_tokens: expected >= 1, got 0"), std::string::npos) << e.what();
  }
  s = u.s;
  s.new_tokens = 3;  // entry 1: 10 + 3 tokens > capacity 12
  u.q = random_vec(size_t(2) * 3 * 2 * 8, g), u.new_k = random_vec(size_t(2) * 3 * 8, g), u.new_v = u.new_k;
  try {
    run(s);
    ADD_FAILURE() << "an append past the capacity accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("capacity"), std::string::npos) << e.what();
  }
  s.append = false;  // cache-only reads 10 tokens: fits
  EXPECT_NO_THROW(run(s));
}

TEST(Flops, GenBytesFormula) {
  // D · (in·H·B + out·H·B + 2·in·H_K·B + 2·in·H_K·Σ(len+1)) with lens {3, 5}, H 4, H_K 2, D 8, e5m2 in, fp16 out.
  EXPECT_EQ(gen_bytes({3, 5}, 4, 2, 8, DType::kFP8E5M2),
            8.0 * (1 * 4 * 2 + 2 * 4 * 2 + 2 * 1 * 2 * 2 + 2 * 1 * 2 * 10));
  EXPECT_EQ(gen_bytes({0}, 1, 1, 128, DType::kFP16, DType::kFP32), 128.0 * (2 + 4 + 4 + 4));
}

}  // namespace
