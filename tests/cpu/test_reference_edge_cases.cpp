// Edge cases of docs/edge-cases.md at the reference level (E01, E03, E04, E05).
// Expected values are exact properties (zeros, −inf, a single V row) or a direct softmax computed in this file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cpu/test_util.h"
#include "reference/attention.h"
#include "reference/dtype.h"

namespace {

using namespace fmha;
using namespace fmha::ref;

using testutil::kNaN;
using testutil::kNegInf;
using testutil::random_vec;

/// Direct softmax of query row q over keys [0, n) of a view (head hk); writes O and returns LSE.
double naive(const float* q, ConstView k, ConstView v, int b, int hk, int n, int d, int dv, double scale,
             std::vector<double>& o) {
  o.assign(size_t(dv), 0.0);
  if (n == 0) return -std::numeric_limits<double>::infinity();
  std::vector<double> t(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) {
    double s = 0.0;
    for (int x = 0; x < d; ++x) s += double(q[x]) * k.at(b, j, hk, x);
    t[j] = scale * s;
  }
  const double m = *std::max_element(t.begin(), t.end());
  double sum = 0.0;
  for (int j = 0; j < n; ++j) {
    const double p = std::exp(t[j] - m);
    sum += p;
    for (int x = 0; x < dv; ++x) o[x] += p * v.at(b, j, hk, x);
  }
  for (double& x : o) x /= sum;
  return m + std::log(sum);
}

// E01: Sq 8, Sk 3, causal q-end. Rows 0..4 see no key (O = 0 exactly, LSE = −inf); row i ≥ 5 sees keys 0..i−5.
// Also q-begin on the same shapes, and the varlen layout equal to the dense one.
TEST(EdgeCases, E01_CausalWithMoreQueriesThanKeys) {
  std::mt19937 g(41);
  const int B = 2, SQ = 8, SK = 3, H = 8, D = 128;
  std::vector<float> q = random_vec(size_t(B) * SQ * H * D, g), k = random_vec(size_t(B) * SK * H * D, g),
                     v = random_vec(k.size(), g);
  for (CausalAlign align : {CausalAlign::kQEnd, CausalAlign::kQBegin}) {
    for (Rounding r : {Rounding::kExact, Rounding::kKernel}) {
      AttnShape s;
      s.batch = B, s.heads_q = H, s.heads_kv = H, s.head_dim_qk = D, s.head_dim_v = D;
      s.seqlens_q = {SQ, SQ}, s.seqlens_k = {SK, SK}, s.mask = MaskType::kCausal, s.align = align;
      s.dtype = DType::kBF16, s.rounding = r;
      const ConstView qv = bshd<const float>(q.data(), SQ, H, D), kv = bshd<const float>(k.data(), SK, H, D),
                      vv = bshd<const float>(v.data(), SK, H, D);
      std::vector<float> o(q.size(), kNaN), lse(size_t(B) * SQ * H, kNaN);
      fwd(s, qv, kv, vv, bshd(o.data(), SQ, H, D), bshd(lse.data(), SQ, H, 1));
      // Varlen: the same two entries packed (dense rows are contiguous, so the buffers are reused).
      const std::vector<int> cu_q = cumulative(s.seqlens_q), cu_k = cumulative(s.seqlens_k);
      std::vector<float> ov(q.size(), kNaN), lv(lse.size(), kNaN);
      fwd(s, packed<const float>(q.data(), H, D, cu_q.data()), packed<const float>(k.data(), H, D, cu_k.data()),
          packed<const float>(v.data(), H, D, cu_k.data()), packed(ov.data(), H, D, cu_q.data()),
          packed(lv.data(), H, 1, cu_q.data()));
      EXPECT_EQ(o, ov);
      EXPECT_EQ(lse, lv);
      const double scale = 1.0 / std::sqrt(double(D));
      for (int b = 0; b < B; ++b)
        for (int i = 0; i < SQ; ++i)
          for (int h = 0; h < H; ++h) {
            const int seen = align == CausalAlign::kQEnd ? std::max(0, i - (SQ - SK) + 1) : std::min(SK, i + 1);
            const float* orow = &o[((size_t(b) * SQ + i) * H + h) * D];
            const float l = lse[(size_t(b) * SQ + i) * H + h];
            if (seen == 0) {
              for (int d = 0; d < D; ++d) ASSERT_EQ(orow[d], 0.0f) << "row " << i;
              ASSERT_EQ(l, kNegInf) << "row " << i;
              continue;
            }
            ASSERT_TRUE(std::isfinite(l)) << "row " << i;
            if (r == Rounding::kKernel) continue;
            std::vector<double> want;
            const double wl = naive(&q[((size_t(b) * SQ + i) * H + h) * D], kv, vv, b, h, seen, D, D, scale, want);
            EXPECT_NEAR(l, wl, 1e-6) << "row " << i;
            for (int d = 0; d < D; ++d) EXPECT_NEAR(orow[d], want[d], 1e-6) << "row " << i;
          }
    }
  }
}

// E03 (a): batch 4, q lengths 0:1:0:1, k lengths 0:3:0:5, heads 9/3, d 64, bf16, causal q-end, scale 1.
TEST(EdgeCases, E03a_VarlenEmptyEntriesAndSingleQueries) {
  std::mt19937 g(42);
  const int H = 9, HK = 3, D = 64;
  AttnShape s;
  s.batch = 4, s.heads_q = H, s.heads_kv = HK, s.head_dim_qk = D, s.head_dim_v = D;
  s.seqlens_q = {0, 1, 0, 1}, s.seqlens_k = {0, 3, 0, 5}, s.mask = MaskType::kCausal, s.align = CausalAlign::kQEnd;
  s.scale = 1.0, s.dtype = DType::kBF16;
  const std::vector<int> cu_q = cumulative(s.seqlens_q), cu_k = cumulative(s.seqlens_k);
  std::vector<float> q = random_vec(size_t(cu_q.back()) * H * D, g), k = random_vec(size_t(cu_k.back()) * HK * D, g),
                     v = random_vec(k.size(), g);
  for (Rounding r : {Rounding::kExact, Rounding::kKernel}) {
    s.rounding = r;
    // Output with one guard row before and after the two real rows: empty entries must produce nothing.
    std::vector<float> o(size_t(cu_q.back() + 2) * H * D, 5.0f), lse(size_t(cu_q.back() + 2) * H, 5.0f);
    const ConstView qv = packed<const float>(q.data(), H, D, cu_q.data()),
                    kv = packed<const float>(k.data(), HK, D, cu_k.data()),
                    vv = packed<const float>(v.data(), HK, D, cu_k.data());
    fwd(s, qv, kv, vv, packed(o.data() + H * D, H, D, cu_q.data()), packed(lse.data() + H, H, 1, cu_q.data()));
    for (int x = 0; x < H * D; ++x) {
      EXPECT_EQ(o[x], 5.0f);
      EXPECT_EQ(o[o.size() - 1 - x], 5.0f);
    }
    for (int x = 0; x < H; ++x) {
      EXPECT_EQ(lse[x], 5.0f);
      EXPECT_EQ(lse[lse.size() - 1 - x], 5.0f);
    }
    for (int b : {1, 3}) {
      EXPECT_EQ(visible_keys(s.mask, s.align, 1, s.seqlens_k[b], 0).hi, s.seqlens_k[b]);
      for (int h = 0; h < H; ++h) {
        const size_t row = size_t(1 + cu_q[b]) * H + h;  // +1 guard row
        std::vector<double> want;
        const double wl = naive(&q[(size_t(cu_q[b]) * H + h) * D], kv, vv, b, h / 3, s.seqlens_k[b], D, D, 1.0, want);
        const double tol = r == Rounding::kExact ? 1e-6 : 4 * ulp(DType::kBF16, 1.0);
        EXPECT_NEAR(lse[row], wl, tol * (1 + std::fabs(wl))) << "entry " << b << " head " << h;
        for (int d = 0; d < D; ++d) EXPECT_NEAR(o[row * D + d], want[d], tol) << "entry " << b << " head " << h;
      }
    }
  }
}

// E03 (b): batch 4, q = k lengths 0:0:0:1, heads 21/7, d 120, bf16. One query, one key: O is that key's V row.
TEST(EdgeCases, E03b_FewerTokensThanEntriesOddGqaAndHeadDim) {
  std::mt19937 g(43);
  const int H = 21, HK = 7, D = 120;
  std::vector<float> q = random_vec(size_t(H) * D, g), k = random_vec(size_t(HK) * D, g), v = random_vec(k.size(), g);
  for (MaskType mask : {MaskType::kNone, MaskType::kCausal}) {
    for (Rounding r : {Rounding::kExact, Rounding::kKernel}) {
      AttnShape s;
      s.batch = 4, s.heads_q = H, s.heads_kv = HK, s.head_dim_qk = D, s.head_dim_v = D;
      s.seqlens_q = {0, 0, 0, 1}, s.seqlens_k = {0, 0, 0, 1}, s.mask = mask, s.align = CausalAlign::kQEnd;
      s.dtype = DType::kBF16, s.rounding = r;
      const std::vector<int> cu = cumulative(s.seqlens_q);
      std::vector<float> o(size_t(H) * D, kNaN), lse(size_t(H), kNaN);
      fwd(s, packed<const float>(q.data(), H, D, cu.data()), packed<const float>(k.data(), HK, D, cu.data()),
          packed<const float>(v.data(), HK, D, cu.data()), packed(o.data(), H, D, cu.data()),
          packed(lse.data(), H, 1, cu.data()));
      auto rd = [&](float x) { return r == Rounding::kKernel ? round_to(DType::kBF16, x) : x; };
      for (int h = 0; h < H; ++h) {
        const int hk = h / 3;
        double sc = 0.0;
        for (int d = 0; d < D; ++d) {
          EXPECT_EQ(o[size_t(h) * D + d], rd(v[size_t(hk) * D + d])) << "head " << h << " d " << d;
          sc += double(rd(q[size_t(h) * D + d])) * rd(k[size_t(hk) * D + d]);
        }
        EXPECT_NEAR(lse[h], sc / std::sqrt(double(D)), 1e-6) << "head " << h;
      }
    }
  }
}

// E04: cu_seqlens 0,144,432,944 in buffers of 946 rows whose two trailing rows are NaN. Shrunk to heads 2/2, d 16
// (the row structure is what matters). Contract: the reference never reads the trailing input rows and leaves the
// trailing output rows untouched.
TEST(EdgeCases, E04_TensorsLongerThanTheLastCumulativeLength) {
  std::mt19937 g(44);
  const int H = 2, D = 16, ROWS = 946;
  const std::vector<int> cu = {0, 144, 432, 944};
  AttnShape s;
  s.batch = 3, s.heads_q = H, s.heads_kv = H, s.head_dim_qk = D, s.head_dim_v = D;
  s.seqlens_q = {144, 288, 512}, s.seqlens_k = s.seqlens_q, s.dtype = DType::kBF16;
  std::vector<float> q = random_vec(size_t(ROWS) * H * D, g), k = random_vec(q.size(), g), v = random_vec(q.size(), g);
  std::vector<float> q_exact(q.begin(), q.begin() + 944 * H * D), k_exact(k.begin(), k.begin() + 944 * H * D),
      v_exact(v.begin(), v.begin() + 944 * H * D);
  for (size_t x = size_t(944) * H * D; x < q.size(); ++x) q[x] = k[x] = v[x] = kNaN;
  std::vector<float> o(q.size(), 9.0f), lse(size_t(ROWS) * H, 9.0f), o2(q_exact.size(), kNaN), l2(944 * H, kNaN);
  fwd(s, packed<const float>(q.data(), H, D, cu.data()), packed<const float>(k.data(), H, D, cu.data()),
      packed<const float>(v.data(), H, D, cu.data()), packed(o.data(), H, D, cu.data()),
      packed(lse.data(), H, 1, cu.data()));
  fwd(s, packed<const float>(q_exact.data(), H, D, cu.data()), packed<const float>(k_exact.data(), H, D, cu.data()),
      packed<const float>(v_exact.data(), H, D, cu.data()), packed(o2.data(), H, D, cu.data()),
      packed(l2.data(), H, 1, cu.data()));
  for (size_t x = 0; x < o2.size(); ++x) {
    ASSERT_TRUE(std::isfinite(o[x])) << x;
    ASSERT_EQ(o[x], o2[x]) << x;
  }
  for (size_t x = 0; x < l2.size(); ++x) ASSERT_EQ(lse[x], l2[x]) << x;
  for (size_t x = o2.size(); x < o.size(); ++x) EXPECT_EQ(o[x], 9.0f) << "trailing output row written";
  for (size_t x = l2.size(); x < lse.size(); ++x) EXPECT_EQ(lse[x], 9.0f) << "trailing LSE written";
}

// E05: batch 2, heads 1/1, d 64, fp16, Sk 1 and 3 in buffers of capacity 3, q = 0.5, NaN past each length.
// Entry 0 has one key, so its output is that key's V row exactly. Checked through fwd, gen and mla_decode.
TEST(EdgeCases, E05_NaNPastTheValidKeys) {
  std::mt19937 g(45);
  const int D = 64, CAP = 3;
  const std::vector<int> lens = {1, 3};
  std::vector<float> q(size_t(2) * CAP * D, 0.5f), k(q.size(), kNaN), v(q.size(), kNaN);
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < lens[b]; ++t)
      for (int d = 0; d < D; ++d) {
        k[(size_t(b) * CAP + t) * D + d] = round_to(DType::kFP16, random_vec(1, g)[0]);
        v[(size_t(b) * CAP + t) * D + d] = round_to(DType::kFP16, random_vec(1, g)[0]);
      }
  const double scale = 1.0 / std::sqrt(double(D));
  double s0 = 0.0;
  for (int d = 0; d < D; ++d) s0 += 0.5 * k[d];
  auto check = [&](const float* o, const float* lse, int stride_b, const char* who) {
    for (int d = 0; d < D; ++d) EXPECT_EQ(o[d], v[d]) << who << " d " << d;  // entry 0: exactly V row 0
    EXPECT_NEAR(lse[0], scale * s0, 1e-6) << who;
    for (int d = 0; d < D; ++d) EXPECT_TRUE(std::isfinite(o[stride_b + d])) << who << " entry 1";
  };
  for (Rounding r : {Rounding::kExact, Rounding::kKernel}) {
    // fwd, dense buffers of capacity 3 (query lengths 1 and 3).
    AttnShape s;
    s.batch = 2, s.head_dim_qk = D, s.head_dim_v = D, s.seqlens_q = lens, s.seqlens_k = lens;
    s.dtype = DType::kFP16, s.rounding = r;
    std::vector<float> o(q.size(), kNaN), lse(size_t(2) * CAP, kNaN);
    fwd(s, bshd<const float>(q.data(), CAP, 1, D), bshd<const float>(k.data(), CAP, 1, D),
        bshd<const float>(v.data(), CAP, 1, D), bshd(o.data(), CAP, 1, D), bshd(lse.data(), CAP, 1, 1));
    check(o.data(), lse.data(), CAP * D, "fwd");
    // gen, cache-only, per-sequence lengths.
    GenShape gs;
    gs.batch = 2, gs.head_dim = D, gs.seqlens_kv = lens, gs.append = false, gs.capacity = CAP;
    gs.dtype = DType::kFP16, gs.rounding = r;
    std::vector<float> kc = k, vc = v, og(size_t(2) * D, kNaN), lg(2, kNaN);
    gen(gs, q.data(), nullptr, nullptr, kc.data(), vc.data(), og.data(), lg.data());
    check(og.data(), lg.data(), D, "gen");
    // mla_decode with d_latent 64, d_rope 0: the cache rows are K and V at once.
    MlaDecodeShape ms;
    ms.batch = 2, ms.heads = 1, ms.d_latent = D, ms.d_rope = 0, ms.seqlens = lens, ms.capacity = CAP;
    ms.dtype = DType::kFP16, ms.rounding = r;
    std::vector<float> cache = v, om(size_t(2) * D, kNaN), lm(2, kNaN);
    mla_decode(ms, q.data(), cache.data(), om.data(), lm.data());
    for (int d = 0; d < D; ++d) EXPECT_EQ(om[d], v[d]) << "mla d " << d;
    for (int d = 0; d < D; ++d) EXPECT_TRUE(std::isfinite(om[D + d])) << "mla entry 1";
  }
}

}  // namespace
