// Tests of the forward reference (reference/attention.h: visible_keys, fwd, combine_splits) and fwd/bwd FLOP counts.
//
// Expected values are computed independently in this file (hand-written visibility tables, a direct softmax in
// double) or by an equivalent formulation (varlen vs separate batches, GQA vs repeated K/V, strided vs contiguous,
// split + combine vs unsplit).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "reference/attention.h"
#include "reference/dtype.h"
#include "reference/flops.h"

namespace {

using namespace fmha;
using namespace fmha::ref;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<float> random_vec(size_t n, std::mt19937& g, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(g);
  return v;
}

double dot(const float* a, const float* b, int n) {
  double s = 0.0;
  for (int d = 0; d < n; ++d) s += double(a[d]) * double(b[d]);
  return s;
}

// ---------------------------------------------------------------------------------------------------------------
// Masks: hand-written visibility tables
// ---------------------------------------------------------------------------------------------------------------

struct VisCase {
  MaskType mask;
  CausalAlign align;
  int sq, sk;
  std::vector<std::string> rows;  // rows[i][j] == '1' iff query i sees key j
};

const std::vector<VisCase>& vis_cases() {
  static const std::vector<VisCase> cases = {
      {MaskType::kCausal, CausalAlign::kQBegin, 3, 5, {"10000", "11000", "11100"}},
      {MaskType::kCausal, CausalAlign::kQEnd, 3, 5, {"11100", "11110", "11111"}},
      {MaskType::kCausal, CausalAlign::kQBegin, 5, 3, {"100", "110", "111", "111", "111"}},
      {MaskType::kCausal, CausalAlign::kQEnd, 5, 3, {"000", "000", "100", "110", "111"}},
      {MaskType::kCausal, CausalAlign::kQEnd, 3, 3, {"100", "110", "111"}},
      {MaskType::kNone, CausalAlign::kQEnd, 3, 5, {"11111", "11111", "11111"}},
      {MaskType::kResidual, CausalAlign::kQBegin, 5, 3, {"111", "111", "111", "111", "111"}},
      {MaskType::kCausal, CausalAlign::kQEnd, 2, 0, {"", ""}},
  };
  return cases;
}

std::string case_name(const VisCase& c) {
  return std::string(to_string(c.mask)) + "/" + to_string(c.align) + " sq=" + std::to_string(c.sq) +
         " sk=" + std::to_string(c.sk);
}

TEST(ReferenceFwd, VisibleKeysMatchesHandWrittenTables) {
  for (const VisCase& c : vis_cases()) {
    for (int i = 0; i < c.sq; ++i) {
      const KeyRange r = visible_keys(c.mask, c.align, c.sq, c.sk, i);
      for (int j = 0; j < c.sk; ++j) {
        const bool seen = j >= r.lo && j < r.hi;
        EXPECT_EQ(seen, c.rows[i][j] == '1') << case_name(c) << " row " << i << " key " << j;
      }
      if (c.rows[i].find('1') == std::string::npos) {
        EXPECT_LE(r.hi, r.lo) << case_name(c) << " row " << i;
      }
    }
  }
}

// With V = identity (d_v = Sk), O row i is P row i: check P against the table and against a direct softmax.
TEST(ReferenceFwd, ProbabilitiesFollowTablesSumToOneAndMatchLse) {
  std::mt19937 g(1);
  for (const VisCase& c : vis_cases()) {
    const int H = 2, HK = 1, D = 8, DV = std::max(c.sk, 1);
    AttnShape s;
    s.heads_q = H, s.heads_kv = HK, s.head_dim_qk = D, s.head_dim_v = DV;
    s.seqlens_q = {c.sq}, s.seqlens_k = {c.sk}, s.mask = c.mask, s.align = c.align;
    std::vector<float> q = random_vec(size_t(c.sq) * H * D, g), k = random_vec(size_t(c.sk) * HK * D, g);
    std::vector<float> v(size_t(c.sk) * DV, 0.0f);
    for (int j = 0; j < c.sk; ++j) v[size_t(j) * DV + j] = 1.0f;
    std::vector<float> o(size_t(c.sq) * H * DV, kNaN), lse(size_t(c.sq) * H, kNaN);
    fwd(s, bshd<const float>(q.data(), c.sq, H, D), bshd<const float>(k.data(), c.sk, HK, D),
        bshd<const float>(v.data(), c.sk, HK, DV), bshd(o.data(), c.sq, H, DV), bshd(lse.data(), c.sq, H, 1));
    const double scale = 1.0 / std::sqrt(double(D));
    for (int i = 0; i < c.sq; ++i) {
      for (int h = 0; h < H; ++h) {
        const float* orow = &o[(size_t(i) * H + h) * DV];
        const float* qrow = &q[(size_t(i) * H + h) * D];
        double denom = 0.0, psum = 0.0;
        for (int j = 0; j < c.sk; ++j)
          if (c.rows[i][j] == '1') denom += std::exp(scale * dot(qrow, &k[size_t(j) * D], D));
        const float row_lse = lse[size_t(i) * H + h];
        if (denom == 0.0) {
          for (int d = 0; d < DV; ++d) EXPECT_EQ(orow[d], 0.0f) << case_name(c) << " row " << i;
          EXPECT_EQ(row_lse, kNegInf) << case_name(c) << " row " << i;
          continue;
        }
        EXPECT_NEAR(row_lse, std::log(denom), 1e-6) << case_name(c) << " row " << i;
        for (int j = 0; j < c.sk; ++j) {
          psum += orow[j];
          if (c.rows[i][j] != '1') {
            EXPECT_EQ(orow[j], 0.0f) << case_name(c) << " row " << i << " key " << j;
          } else {
            const double p = std::exp(scale * dot(qrow, &k[size_t(j) * D], D)) / denom;
            EXPECT_NEAR(orow[j], p, 1e-6) << case_name(c) << " row " << i << " key " << j;
            EXPECT_GT(orow[j], 0.0f);
          }
        }
        EXPECT_NEAR(psum, 1.0, 1e-6) << case_name(c) << " row " << i;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Varlen, GQA, strides
// ---------------------------------------------------------------------------------------------------------------

struct Problem {
  AttnShape s;
  std::vector<int> cu_q, cu_k;
  std::vector<float> q, k, v;  // packed [total][heads][dim]
};

Problem make_packed(std::vector<int> lq, std::vector<int> lk, int H, int HK, int D, int DV, std::mt19937& g) {
  Problem p;
  p.s.batch = int(lq.size());
  p.s.heads_q = H, p.s.heads_kv = HK, p.s.head_dim_qk = D, p.s.head_dim_v = DV;
  p.s.seqlens_q = lq, p.s.seqlens_k = lk;
  p.cu_q = cumulative(lq), p.cu_k = cumulative(lk);
  p.q = random_vec(size_t(p.cu_q.back()) * H * D, g, -2.0f, 2.0f);
  p.k = random_vec(size_t(p.cu_k.back()) * HK * D, g, -2.0f, 2.0f);
  p.v = random_vec(size_t(p.cu_k.back()) * HK * DV, g);
  return p;
}

/// Runs fwd on a packed problem; returns O [total_q][H][DV] and LSE [total_q][H].
void run_packed(const Problem& p, std::vector<float>& o, std::vector<float>& lse, int key_begin = 0,
                int key_end = INT32_MAX) {
  const AttnShape& s = p.s;
  o.assign(size_t(p.cu_q.back()) * s.heads_q * s.head_dim_v, kNaN);
  lse.assign(size_t(p.cu_q.back()) * s.heads_q, kNaN);
  fwd(s, packed<const float>(p.q.data(), s.heads_q, s.head_dim_qk, p.cu_q.data()),
      packed<const float>(p.k.data(), s.heads_kv, s.head_dim_qk, p.cu_k.data()),
      packed<const float>(p.v.data(), s.heads_kv, s.head_dim_v, p.cu_k.data()),
      packed(o.data(), s.heads_q, s.head_dim_v, p.cu_q.data()), packed(lse.data(), s.heads_q, 1, p.cu_q.data()),
      key_begin, key_end);
}

const std::pair<MaskType, CausalAlign> kMasks[] = {{MaskType::kNone, CausalAlign::kQBegin},
                                                   {MaskType::kResidual, CausalAlign::kQBegin},
                                                   {MaskType::kCausal, CausalAlign::kQBegin},
                                                   {MaskType::kCausal, CausalAlign::kQEnd}};

TEST(ReferenceFwd, VarlenEqualsIndependentBatches) {
  std::mt19937 g(2);
  const int H = 4, HK = 2, D = 16, DV = 8;
  for (auto [mask, align] : kMasks) {
    Problem p = make_packed({3, 0, 5, 2, 1, 6}, {4, 2, 0, 6, 1, 3}, H, HK, D, DV, g);
    p.s.mask = mask, p.s.align = align;
    std::vector<float> o, lse;
    run_packed(p, o, lse);
    for (int b = 0; b < p.s.batch; ++b) {
      const int sq = p.s.seqlens_q[b], sk = p.s.seqlens_k[b];
      AttnShape one = p.s;
      one.batch = 1, one.seqlens_q = {sq}, one.seqlens_k = {sk};
      // Independent dense copies of this entry only.
      std::vector<float> qb(p.q.begin() + size_t(p.cu_q[b]) * H * D, p.q.begin() + size_t(p.cu_q[b + 1]) * H * D);
      std::vector<float> kb(p.k.begin() + size_t(p.cu_k[b]) * HK * D, p.k.begin() + size_t(p.cu_k[b + 1]) * HK * D);
      std::vector<float> vb(p.v.begin() + size_t(p.cu_k[b]) * HK * DV,
                            p.v.begin() + size_t(p.cu_k[b + 1]) * HK * DV);
      std::vector<float> ob(size_t(sq) * H * DV, kNaN), lb(size_t(sq) * H, kNaN);
      fwd(one, bshd<const float>(qb.data(), sq, H, D), bshd<const float>(kb.data(), sk, HK, D),
          bshd<const float>(vb.data(), sk, HK, DV), bshd(ob.data(), sq, H, DV), bshd(lb.data(), sq, H, 1));
      for (size_t x = 0; x < ob.size(); ++x)
        ASSERT_EQ(ob[x], o[size_t(p.cu_q[b]) * H * DV + x]) << "mask " << to_string(mask) << " entry " << b;
      for (size_t x = 0; x < lb.size(); ++x) ASSERT_EQ(lb[x], lse[size_t(p.cu_q[b]) * H + x]);
    }
  }
}

TEST(ReferenceFwd, GqaEqualsRepeatedKv) {
  std::mt19937 g(3);
  for (int HK : {1, 2, 3}) {
    const int H = 6, D = 8, DV = 12, group = H / HK;
    for (auto [mask, align] : kMasks) {
      Problem p = make_packed({4, 2}, {3, 7}, H, HK, D, DV, g);
      p.s.mask = mask, p.s.align = align;
      Problem mha = p;
      mha.s.heads_kv = H;
      const int total_k = p.cu_k.back();
      mha.k.assign(size_t(total_k) * H * D, 0.0f);
      mha.v.assign(size_t(total_k) * H * DV, 0.0f);
      for (int t = 0; t < total_k; ++t)
        for (int h = 0; h < H; ++h) {
          for (int d = 0; d < D; ++d) mha.k[(size_t(t) * H + h) * D + d] = p.k[(size_t(t) * HK + h / group) * D + d];
          for (int d = 0; d < DV; ++d)
            mha.v[(size_t(t) * H + h) * DV + d] = p.v[(size_t(t) * HK + h / group) * DV + d];
        }
      std::vector<float> o1, l1, o2, l2;
      run_packed(p, o1, l1);
      run_packed(mha, o2, l2);
      EXPECT_EQ(o1, o2) << "heads_kv " << HK << " mask " << to_string(mask);
      EXPECT_EQ(l1, l2);
    }
  }
}

TEST(ReferenceFwd, CallerStridesGiveIdenticalResults) {
  std::mt19937 g(4);
  const int H = 3, D = 8, B = 2, S = 5;
  AttnShape s;
  s.batch = B, s.heads_q = H, s.heads_kv = H, s.head_dim_qk = D, s.head_dim_v = D;
  s.seqlens_q = {S, 3}, s.seqlens_k = {4, S}, s.mask = MaskType::kCausal, s.align = CausalAlign::kQEnd;
  std::vector<float> q = random_vec(size_t(B) * S * H * D, g), k = random_vec(q.size(), g), v = random_vec(q.size(), g);
  std::vector<float> o(q.size(), kNaN), lse(size_t(B) * S * H, kNaN);
  fwd(s, bshd<const float>(q.data(), S, H, D), bshd<const float>(k.data(), S, H, D),
      bshd<const float>(v.data(), S, H, D), bshd(o.data(), S, H, D), bshd(lse.data(), S, H, 1));

  // (a) Fused QKV buffer [B][S][3][H][D] with NaN-poisoned padding columns: row stride 3·H·D + 4.
  const int64_t pitch = 3 * H * D + 4;
  std::vector<float> fused(size_t(B) * S * pitch, kNaN);
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < S; ++i)
      for (int x = 0; x < H * D; ++x) {
        const size_t src = (size_t(b) * S + i) * H * D + x, row = (size_t(b) * S + i) * pitch;
        fused[row + x] = q[src], fused[row + H * D + x] = k[src], fused[row + 2 * H * D + x] = v[src];
      }
  auto fused_view = [&](int part) {
    ConstView w;
    w.data = fused.data() + part * H * D;
    w.stride_row = pitch, w.stride_head = D, w.stride_batch = S * pitch;
    return w;
  };
  // Output with a padded row stride; the padding must stay untouched.
  const int64_t opitch = H * D + 3;
  std::vector<float> o2(size_t(B) * S * opitch, 7.0f), lse2(size_t(B) * H * S, 7.0f);
  MutView ov;
  ov.data = o2.data(), ov.stride_row = opitch, ov.stride_head = D, ov.stride_batch = S * opitch;
  MutView lv;  // LSE in the seed's [B][H][S] layout
  lv.data = lse2.data(), lv.stride_row = 1, lv.stride_head = S, lv.stride_batch = int64_t(H) * S;
  fwd(s, fused_view(0), fused_view(1), fused_view(2), ov, lv);
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < S; ++i) {
      for (int x = 0; x < H * D; ++x) {
        const size_t ref = (size_t(b) * S + i) * H * D + x, got = (size_t(b) * S + i) * opitch + x;
        if (i < s.seqlens_q[b]) EXPECT_EQ(o2[got], o[ref]) << b << " " << i << " " << x;
        else EXPECT_EQ(o2[got], 7.0f) << "row past seqlens_q written";
      }
      for (int x = H * D; x < opitch; ++x) EXPECT_EQ(o2[(size_t(b) * S + i) * opitch + x], 7.0f) << "padding written";
      for (int h = 0; h < H && i < s.seqlens_q[b]; ++h) {
        EXPECT_EQ(lse2[(size_t(b) * H + h) * S + i], lse[(size_t(b) * S + i) * H + h]);
      }
    }

  // (b) BHSD layout (the seed's backward layout) for all tensors.
  auto bhsd = [&](std::vector<float>& src) {
    std::vector<float> t(src.size());
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < S; ++i)
        for (int h = 0; h < H; ++h)
          for (int d = 0; d < D; ++d)
            t[((size_t(b) * H + h) * S + i) * D + d] = src[((size_t(b) * S + i) * H + h) * D + d];
    return t;
  };
  std::vector<float> qt = bhsd(q), kt = bhsd(k), vt = bhsd(v), ot(o.size(), kNaN);
  auto view_of = [&](float* data) {
    MutView w;
    w.data = data, w.stride_row = D, w.stride_head = int64_t(S) * D, w.stride_batch = int64_t(H) * S * D;
    return w;
  };
  auto cview = [&](std::vector<float>& t) {
    MutView m = view_of(t.data());
    return ConstView{m.data, m.stride_batch, m.stride_row, m.stride_head, nullptr};
  };
  fwd(s, cview(qt), cview(kt), cview(vt), view_of(ot.data()), MutView{});
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < s.seqlens_q[b]; ++i)
      for (int h = 0; h < H; ++h)
        for (int d = 0; d < D; ++d)
          EXPECT_EQ(ot[((size_t(b) * H + h) * S + i) * D + d], o[((size_t(b) * S + i) * H + h) * D + d]);
}

// ---------------------------------------------------------------------------------------------------------------
// Split-KV
// ---------------------------------------------------------------------------------------------------------------

TEST(ReferenceFwd, SplitKvPlusCombineEqualsUnsplit) {
  std::mt19937 g(5);
  const int H = 2, HK = 1, D = 8, DV = 6;
  for (auto [mask, align] : kMasks) {
    Problem p = make_packed({4, 3, 2, 3}, {5, 0, 9, 1}, H, HK, D, DV, g);
    p.s.mask = mask, p.s.align = align;
    std::vector<float> o, lse;
    run_packed(p, o, lse);
    const int rows = p.cu_q.back() * H, kmax = 9;
    for (int n_splits : {1, 2, 3, 17}) {
      std::vector<float> o_parts, lse_parts, op, lp;
      for (int sp = 0; sp < n_splits; ++sp) {
        run_packed(p, op, lp, sp * kmax / n_splits, (sp + 1) * kmax / n_splits);
        o_parts.insert(o_parts.end(), op.begin(), op.end());
        lse_parts.insert(lse_parts.end(), lp.begin(), lp.end());
      }
      std::vector<float> oc(o.size(), kNaN), lc(lse.size(), kNaN);
      combine_splits(n_splits, rows, DV, o_parts.data(), lse_parts.data(), oc.data(), lc.data());
      for (int r = 0; r < rows; ++r) {
        if (lse[r] == kNegInf) {
          EXPECT_EQ(lc[r], kNegInf) << "row " << r;
          for (int d = 0; d < DV; ++d) EXPECT_EQ(oc[size_t(r) * DV + d], 0.0f);
          continue;
        }
        EXPECT_NEAR(lc[r], lse[r], 1e-6 * (1 + std::fabs(lse[r]))) << "splits " << n_splits << " row " << r;
        for (int d = 0; d < DV; ++d)
          EXPECT_NEAR(oc[size_t(r) * DV + d], o[size_t(r) * DV + d], 2e-6)
              << "mask " << to_string(mask) << "/" << to_string(align) << " splits " << n_splits << " row " << r;
      }
    }
  }
}

TEST(ReferenceFwd, CombineSplitsHandValuesAndEmptySplits) {
  // Split 0: row sum 2, O = [1, 0]; split 1: row sum 6, O = [0, 1]; split 2: empty (garbage O must not be read).
  const float o_parts[] = {1.0f, 0.0f, 0.0f, 1.0f, kNaN, kNaN};
  const float lse_parts[] = {float(std::log(2.0)), float(std::log(6.0)), kNegInf};
  float o[2], lse;
  combine_splits(3, 1, 2, o_parts, lse_parts, o, &lse);
  EXPECT_NEAR(o[0], 0.25, 1e-7);
  EXPECT_NEAR(o[1], 0.75, 1e-7);
  EXPECT_NEAR(lse, std::log(8.0), 1e-6);
  // Every split empty: O = 0, LSE = −inf, never NaN.
  const float empty_lse[] = {kNegInf, kNegInf, kNegInf};
  combine_splits(3, 1, 2, o_parts, empty_lse, o, &lse);
  EXPECT_EQ(o[0], 0.0f);
  EXPECT_EQ(o[1], 0.0f);
  EXPECT_EQ(lse, kNegInf);
  // A NaN partial LSE poisons its row (it is not silently dropped).
  const float nan_lse[] = {0.0f, kNaN, kNegInf};
  combine_splits(3, 1, 2, o_parts, nan_lse, o, &lse);
  EXPECT_TRUE(std::isnan(lse));
  EXPECT_THROW(combine_splits(0, 1, 2, o_parts, lse_parts, o, &lse), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------------------------
// Rounding model, scale, argument checks
// ---------------------------------------------------------------------------------------------------------------

TEST(ReferenceFwd, KernelRoundingRoundsPBeforePv) {
  // One query, two keys, d 1, scale 1: scores 0 and −1, so P = [1, e^-1] before normalisation. V = identity.
  const float q[] = {1.0f}, k[] = {0.0f, -1.0f}, v[] = {1.0f, 0.0f, 0.0f, 1.0f};
  AttnShape s;
  s.head_dim_qk = 1, s.head_dim_v = 2, s.seqlens_q = {1}, s.seqlens_k = {2}, s.scale = 1.0;
  s.rounding = Rounding::kKernel, s.dtype = DType::kFP8E4M3;
  float o[2], lse;
  fwd(s, bshd<const float>(q, 1, 1, 1), bshd<const float>(k, 2, 1, 1), bshd<const float>(v, 2, 1, 2),
      bshd(o, 1, 1, 2), bshd(&lse, 1, 1, 1));
  const double sum = 1.0 + std::exp(-1.0);
  EXPECT_NEAR(o[0], 1.0 / sum, 1e-7);
  EXPECT_NEAR(o[1], 0.375 / sum, 1e-7);  // e^-1 = 0.3679 → e4m3 0.375; the row sum stays unrounded
  EXPECT_NEAR(lse, std::log(sum), 1e-7);
  s.rounding = Rounding::kExact;
  fwd(s, bshd<const float>(q, 1, 1, 1), bshd<const float>(k, 2, 1, 1), bshd<const float>(v, 2, 1, 2),
      bshd(o, 1, 1, 2), bshd(&lse, 1, 1, 1));
  EXPECT_NEAR(o[1], std::exp(-1.0) / sum, 1e-7);
}

TEST(ReferenceFwd, KernelRoundingWithRoundedRowSumNormalisesByTheRoundedP) {
  // As above, with the row sum of the rounded P (a kernel that sums P on the tensor cores): P = [1, 0.375] in e4m3.
  const float q[] = {1.0f}, k[] = {0.0f, -1.0f}, v[] = {1.0f, 0.0f, 0.0f, 1.0f};
  AttnShape s;
  s.head_dim_qk = 1, s.head_dim_v = 2, s.seqlens_q = {1}, s.seqlens_k = {2}, s.scale = 1.0;
  s.rounding = Rounding::kKernel, s.dtype = DType::kFP8E4M3, s.row_sum_rounded_p = true;
  float o[2], lse;
  fwd(s, bshd<const float>(q, 1, 1, 1), bshd<const float>(k, 2, 1, 1), bshd<const float>(v, 2, 1, 2),
      bshd(o, 1, 1, 2), bshd(&lse, 1, 1, 1));
  EXPECT_NEAR(o[0], 1.0 / 1.375, 1e-7);
  EXPECT_NEAR(o[1], 0.375 / 1.375, 1e-7);
  EXPECT_NEAR(lse, std::log(1.375), 1e-7);  // not ln(1 + e^-1) = 0.3133
  // kExact ignores the flag.
  s.rounding = Rounding::kExact;
  fwd(s, bshd<const float>(q, 1, 1, 1), bshd<const float>(k, 2, 1, 1), bshd<const float>(v, 2, 1, 2),
      bshd(o, 1, 1, 2), bshd(&lse, 1, 1, 1));
  EXPECT_NEAR(lse, std::log(1.0 + std::exp(-1.0)), 1e-7);
  EXPECT_NEAR(o[1], std::exp(-1.0) / (1.0 + std::exp(-1.0)), 1e-7);
}

TEST(ReferenceFwd, KernelRoundingDiffersFromExactByABoundedAmount) {
  std::mt19937 g(6);
  Problem p = make_packed({6, 5}, {7, 9}, 4, 2, 16, 16, g);
  p.s.mask = MaskType::kCausal, p.s.align = CausalAlign::kQEnd;
  std::vector<float> oe, le, ok, lk;
  run_packed(p, oe, le);
  p.s.rounding = Rounding::kKernel;
  p.s.dtype = DType::kFP32;
  run_packed(p, ok, lk);
  // The fp32 kernel model only takes P to fp32 before P·V.
  for (size_t x = 0; x < oe.size(); ++x) EXPECT_NEAR(ok[x], oe[x], 4 * std::ldexp(1.0, -24));
  for (DType t : {DType::kFP16, DType::kBF16, DType::kFP8E4M3}) {
    p.s.dtype = t;
    run_packed(p, ok, lk);
    double max_diff = 0.0;
    for (size_t x = 0; x < oe.size(); ++x) max_diff = std::max(max_diff, double(std::fabs(ok[x] - oe[x])));
    const double u = ulp(t, 1.0);  // relative precision of the type near 1
    EXPECT_GT(max_diff, 0.0) << to_string(t);
    EXPECT_LT(max_diff, 4 * u) << to_string(t);
    // Rounding is on read: pre-rounded inputs give the same kernel-model result, bit for bit.
    Problem r = p;
    round_all(t, r.q.data(), r.q.size()), round_all(t, r.k.data(), r.k.size()), round_all(t, r.v.data(), r.v.size());
    std::vector<float> o2, l2;
    run_packed(r, o2, l2);
    EXPECT_EQ(o2, ok) << to_string(t);
  }
}

TEST(ReferenceFwd, DefaultScaleIsInverseSqrtHeadDimQk) {
  std::mt19937 g(8);
  Problem p = make_packed({3}, {4}, 2, 2, 12, 5, g);
  std::vector<float> o1, l1, o2, l2;
  run_packed(p, o1, l1);
  EXPECT_EQ(p.s.softmax_scale(), 1.0 / std::sqrt(12.0));
  p.s.scale = 1.0 / std::sqrt(12.0);
  run_packed(p, o2, l2);
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(l1, l2);
  p.s.scale = 0.5;
  run_packed(p, o2, l2);
  EXPECT_NE(o1, o2);
}

TEST(ReferenceFwd, InvalidArgumentsThrowWithNamedArgument) {
  std::mt19937 g(9);
  Problem p = make_packed({2, 2}, {2, 2}, 9, 3, 4, 4, g);
  std::vector<float> o, lse;
  auto expect_error = [&](Problem bad, const std::string& needle) {
    try {
      run_packed(bad, o, lse);
      ADD_FAILURE() << "no exception, expected one naming " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  Problem bad = p;
  bad.s.heads_kv = 6;
  expect_error(bad, "heads_q % heads_kv: expected 0, got 3");
  bad = p;
  bad.s.seqlens_q = {2};
  expect_error(bad, "seqlens_q.size(): expected batch = 2, got 1");
  bad = p;
  bad.s.seqlens_k = {2, -1};
  expect_error(bad, "seqlens_k[1]");
  bad = p;
  bad.s.head_dim_v = 0;
  expect_error(bad, "head_dim_v");
  EXPECT_THROW(run_packed(p, o, lse, 3, 2), std::invalid_argument);
  EXPECT_NO_THROW(run_packed(p, o, lse));
}

// ---------------------------------------------------------------------------------------------------------------
// FLOP counts (docs/seed.md §7)
// ---------------------------------------------------------------------------------------------------------------

TEST(Flops, ForwardAndBackwardFormulas) {
  // 4 · Σ(Sq·Sk) · D · H · c with Σ = 2·4 + 3·5 = 23, D 8, H 2.
  EXPECT_EQ(fwd_flops({2, 3}, {4, 5}, 2, 8, 8, false), 4.0 * 23 * 8 * 2);
  EXPECT_EQ(fwd_flops({2, 3}, {4, 5}, 2, 8, 8, true), 2.0 * 23 * 8 * 2);
  // MLA shape: 2 · Σ · H · c · (192 + 128).
  EXPECT_EQ(fwd_flops({1}, {10}, 1, 192, 128, false), 2.0 * 10 * 320);
  // Backward: 2 · c · Sq · Sk · (3D + 2Dv) · H · B.
  EXPECT_EQ(bwd_flops(2, 3, 4, 2, 8, 8, false), 2.0 * 3 * 4 * 40 * 2 * 2);
  EXPECT_EQ(bwd_flops(2, 3, 4, 2, 8, 8, true), 3 * 4 * 40 * 2 * 2.0);
  EXPECT_THROW(fwd_flops({1, 2}, {1}, 1, 8, 8, false), std::invalid_argument);
  EXPECT_EQ(per_second_tera(2e12, 1000.0), 2.0);
  EXPECT_TRUE(std::isinf(per_second_tera(1.0, 0.0)));
}

}  // namespace
