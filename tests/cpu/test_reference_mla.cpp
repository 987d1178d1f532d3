// Tests of the MLA decode reference (reference/attention.h: mla_decode) and the MLA FLOP/byte counts.
//
// MLA decode is checked against the standard forward reference on the equivalent problem (K = [latent | rope],
// V = latent, one shared K/V head), paged against unpaged, and split + combine against unsplit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

/// Unpaged MLA problem: q [B][H][W], cache [B][capacity][W] with NaN past each entry's length.
struct MlaCase {
  MlaDecodeShape s;
  std::vector<float> q, cache;
  int width() const { return s.d_latent + s.d_rope; }
};

MlaCase make_case(std::vector<int> lens, int heads, int dl, int dr, int capacity, std::mt19937& g) {
  MlaCase c;
  c.s.batch = int(lens.size()), c.s.heads = heads, c.s.d_latent = dl, c.s.d_rope = dr, c.s.capacity = capacity;
  c.s.seqlens = lens;
  const int W = dl + dr;
  c.q = random_vec(size_t(c.s.batch) * heads * W, g);
  c.cache.assign(size_t(c.s.batch) * capacity * W, kNaN);
  for (int b = 0; b < c.s.batch; ++b) {
    const std::vector<float> rows = random_vec(size_t(lens[b]) * W, g);
    std::copy(rows.begin(), rows.end(), c.cache.begin() + size_t(b) * capacity * W);
  }
  return c;
}

void run_mla(const MlaCase& c, const MlaDecodeShape& s, const float* cache, std::vector<float>& o,
             std::vector<float>& lse, int key_begin = 0, int key_end = INT32_MAX) {
  o.assign(size_t(s.batch) * s.heads * s.d_latent, kNaN);
  lse.assign(size_t(s.batch) * s.heads, kNaN);
  mla_decode(s, c.q.data(), cache, o.data(), lse.data(), key_begin, key_end);
}

/// The same problem through fwd: Sq = 1, heads_kv = 1, K = the whole W-wide cache row, V = its first d_latent.
void run_as_fwd(const MlaCase& c, std::vector<float>& o, std::vector<float>& lse) {
  const int B = c.s.batch, H = c.s.heads, W = c.width(), DL = c.s.d_latent;
  AttnShape a;
  a.batch = B, a.heads_q = H, a.heads_kv = 1, a.head_dim_qk = W, a.head_dim_v = DL;
  a.seqlens_q.assign(size_t(B), 1), a.seqlens_k = c.s.seqlens, a.scale = c.s.scale;
  a.dtype = c.s.dtype, a.rounding = c.s.rounding;
  ConstView kv;
  kv.data = c.cache.data(), kv.stride_batch = int64_t(c.s.capacity) * W, kv.stride_row = W, kv.stride_head = 0;
  o.assign(size_t(B) * H * DL, kNaN);
  lse.assign(size_t(B) * H, kNaN);
  fwd(a, bshd<const float>(c.q.data(), 1, H, W), kv, kv, bshd(o.data(), 1, H, DL), bshd(lse.data(), 1, H, 1));
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, double tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(b[i])) {
      EXPECT_EQ(a[i], b[i]) << what << " at " << i;
    } else {
      EXPECT_NEAR(a[i], b[i], tol * (1 + std::fabs(b[i]))) << what << " at " << i;
    }
  }
}

TEST(ReferenceMla, EqualsForwardWithLatentAsKeyAndValue) {
  std::mt19937 g(31);
  for (Rounding r : {Rounding::kExact, Rounding::kKernel}) {
    MlaCase c = make_case({1, 7, 0, 4}, 4, 32, 8, 8, g);
    c.s.rounding = r, c.s.dtype = DType::kFP16;
    std::vector<float> o1, l1, o2, l2;
    run_mla(c, c.s, c.cache.data(), o1, l1);
    run_as_fwd(c, o2, l2);
    expect_close(o1, o2, 1e-6, "O");
    expect_close(l1, l2, 1e-6, "LSE");
    for (int h = 0; h < c.s.heads; ++h) EXPECT_EQ(l1[2 * c.s.heads + h], kNegInf);  // empty entry
  }
}

TEST(ReferenceMla, EqualsForwardAtTheRealShape) {
  std::mt19937 g(32);
  MlaCase c = make_case({3, 1}, 2, 512, 64, 4, g);
  c.s.scale = 1.0 / std::sqrt(192.0);  // the seed's explicit scale
  std::vector<float> o1, l1, o2, l2;
  run_mla(c, c.s, c.cache.data(), o1, l1);
  run_as_fwd(c, o2, l2);
  expect_close(o1, o2, 1e-6, "O");
  expect_close(l1, l2, 1e-6, "LSE");
  // Entry 1 has a single key: O is its latent row exactly.
  for (int h = 0; h < 2; ++h)
    for (int d = 0; d < 512; ++d) EXPECT_EQ(o1[(size_t(2) + h) * 512 + d], c.cache[size_t(4) * 576 + d]);
}

TEST(ReferenceMla, DefaultScaleIsInverseSqrtOfTheFullRow) {
  std::mt19937 g(33);
  MlaCase c = make_case({5}, 2, 16, 4, 5, g);
  std::vector<float> o1, l1, o2, l2;
  run_mla(c, c.s, c.cache.data(), o1, l1);
  MlaDecodeShape s = c.s;
  s.scale = 1.0 / std::sqrt(20.0);
  run_mla(c, s, c.cache.data(), o2, l2);
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(l1, l2);
}

TEST(ReferenceMla, PagedEqualsUnpaged) {
  std::mt19937 g(34);
  for (int page_size : {1, 2, 3, 16, 64, 128}) {
    MlaCase c = make_case({0, 9, 130, 1}, 3, 16, 8, 130, g);
    const int W = c.width(), pps = (c.s.capacity + page_size - 1) / page_size, num_pages = c.s.batch * pps;
    MlaDecodeShape ps = c.s;
    ps.capacity = 0, ps.page_size = page_size, ps.pages_per_seq = pps;
    ps.page_table.resize(size_t(num_pages));
    std::iota(ps.page_table.begin(), ps.page_table.end(), 0);
    std::shuffle(ps.page_table.begin(), ps.page_table.end(), g);
    std::vector<float> paged(size_t(num_pages) * page_size * W, kNaN);
    for (int b = 0; b < c.s.batch; ++b)
      for (int t = 0; t < c.s.seqlens[b]; ++t) {
        const int64_t page = ps.page_table[size_t(b) * pps + t / page_size];
        std::copy_n(c.cache.begin() + (int64_t(b) * c.s.capacity + t) * W, W,
                    paged.begin() + (page * page_size + t % page_size) * W);
      }
    std::vector<float> o1, l1, o2, l2;
    run_mla(c, c.s, c.cache.data(), o1, l1);
    run_mla(c, ps, paged.data(), o2, l2);
    EXPECT_EQ(o1, o2) << "page_size " << page_size;
    EXPECT_EQ(l1, l2) << "page_size " << page_size;
  }
}

TEST(ReferenceMla, SplitPlusCombineEqualsUnsplit) {
  std::mt19937 g(35);
  MlaCase c = make_case({5, 0, 9, 1}, 3, 16, 8, 9, g);
  const int rows = c.s.batch * c.s.heads, DL = c.s.d_latent, kmax = 9;
  std::vector<float> o, lse;
  run_mla(c, c.s, c.cache.data(), o, lse);
  for (int n_splits : {1, 2, 3, 17}) {
    std::vector<float> o_parts, lse_parts, op, lp;
    for (int sp = 0; sp < n_splits; ++sp) {
      run_mla(c, c.s, c.cache.data(), op, lp, sp * kmax / n_splits, (sp + 1) * kmax / n_splits);
      o_parts.insert(o_parts.end(), op.begin(), op.end());
      lse_parts.insert(lse_parts.end(), lp.begin(), lp.end());
    }
    std::vector<float> oc(o.size(), kNaN), lc(lse.size(), kNaN);
    combine_splits(n_splits, rows, DL, o_parts.data(), lse_parts.data(), oc.data(), lc.data());
    expect_close(oc, o, 2e-6, "O, splits " + std::to_string(n_splits));
    expect_close(lc, lse, 2e-6, "LSE, splits " + std::to_string(n_splits));
  }
}

TEST(ReferenceMla, KernelRoundingDiffersFromExactByABoundedAmount) {
  std::mt19937 g(36);
  MlaCase c = make_case({6, 3}, 4, 32, 8, 6, g);
  std::vector<float> oe, le, ok, lk;
  run_mla(c, c.s, c.cache.data(), oe, le);
  c.s.rounding = Rounding::kKernel;
  for (DType t : {DType::kFP16, DType::kFP8E4M3}) {
    c.s.dtype = t;
    run_mla(c, c.s, c.cache.data(), ok, lk);
    double max_diff = 0.0;
    for (size_t x = 0; x < oe.size(); ++x) max_diff = std::max(max_diff, double(std::fabs(ok[x] - oe[x])));
    EXPECT_GT(max_diff, 0.0) << to_string(t);
    EXPECT_LT(max_diff, 4 * ulp(t, 1.0)) << to_string(t);
  }
}

TEST(ReferenceMla, InvalidArgumentsThrow) {
  std::mt19937 g(37);
  MlaCase c = make_case({3, 4}, 2, 8, 4, 4, g);
  std::vector<float> o, l;
  MlaDecodeShape s = c.s;
  s.capacity = 3;
  EXPECT_THROW(run_mla(c, s, c.cache.data(), o, l), std::invalid_argument);
  s = c.s;
  s.capacity = 0, s.page_size = 2, s.pages_per_seq = 2, s.page_table = {0, 1, 2};
  try {
    run_mla(c, s, c.cache.data(), o, l);
    ADD_FAILURE() << "short page table accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("page_table.size()"), std::string::npos) << e.what();
  }
  s = c.s;
  s.seqlens = {3};
  EXPECT_THROW(run_mla(c, s, c.cache.data(), o, l), std::invalid_argument);
}

TEST(Flops, MlaDecodeFormulas) {
  // 2 · B · K · H · (2·512 + 64) and in·B·H·576 + in·B·K·576 + out·B·H·512.
  EXPECT_EQ(mla_decode_flops(2, 10, 128), 2.0 * 2 * 10 * 128 * 1088);
  EXPECT_EQ(mla_decode_bytes(2, 10, 128, DType::kFP16), 2.0 * 2 * 128 * 576 + 2.0 * 2 * 10 * 576 + 2.0 * 2 * 128 * 512);
  EXPECT_EQ(mla_decode_bytes(1, 4, 2, DType::kFP8E4M3, DType::kFP16, 8, 4), 1.0 * 2 * 12 + 1.0 * 4 * 12 + 2.0 * 2 * 8);
}

}  // namespace
