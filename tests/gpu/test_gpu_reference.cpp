// The GPU reference (src/testing/gpu_reference.h) against the CPU reference (reference/attention.h) on small
// problems of every kind the tests use: dense and varlen with empty entries, no mask and causal (both alignments,
// fewer and more queries than keys), MHA / GQA / MQA, head dims 8 … 256 and a V head dim unlike Q's, fp16 and bf16,
// both row-sum models, NaN in memory past the lengths. Both compute in fp64 and return fp32, so they agree to a few
// fp32 rounding steps; a wrong mask bound, head mapping, stride or rounding model shows as a large difference. The
// backward reference (gpu_reference_bwd) is checked the same way on the same shapes.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gpu/gpu_env.h"
#include "reference/attention.h"
#include "reference/dtype.h"
#include "testing/gpu_reference.h"

namespace {

using fmha::CausalAlign;
using fmha::DType;
using fmha::MaskType;
using fmha::testing::GpuRefOperand;
using fmha::testing::GpuRefOutputs;
using fmha::testing::GpuRefProblem;

struct RefCase {
  std::string name;
  DType dtype;
  int hq, hk, dqk, dv;
  std::vector<int> sq, sk;
  bool varlen;
  MaskType mask;
  CausalAlign align;
  bool sum_rounded_p;
  int last_rows = 0;  ///< > 0: only the last rows of each entry are computed (GpuRefProblem::last_rows)
};

uint16_t bits(DType t, float x) {
  return t == DType::kFP16 ? fmha::ref::float_to_half_bits(x) : fmha::ref::float_to_bf16_bits(x);
}

/// |got − want| ≤ 1e-5 · max(1, |want|) elementwise (both are fp64 results rounded to fp32; exp and log of the two
/// libraries differ in the last fp64 bits, which can flip one fp16/bf16 rounding of a P). Returns "" when all agree.
std::string compare(const char* what, const std::vector<float>& got, const std::vector<float>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    const float g = got[i], w = want[i];
    if (std::isinf(w) && g == w) continue;
    if (!(std::fabs(g - w) <= 1e-5f * std::max(1.f, std::fabs(w))))
      return std::string(what) + "[" + std::to_string(i) + "]: GPU " + std::to_string(g) + ", CPU " + std::to_string(w);
  }
  return "";
}

/// Fills the valid rows of a [rows][heads · d] tensor (entry b's rows from cu[b] when packed, else from b · dense)
/// with 2 · Normal(0, 1) rounded to the case's dtype; the other rows keep their NaN.
void fill_rows(const RefCase& c, std::vector<float>& t, const std::vector<int>& lens, const std::vector<int>& cu,
               int dense, int heads, int d, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  for (size_t b = 0; b < lens.size(); ++b)
    for (int i = 0; i < lens[b]; ++i)
      for (int x = 0; x < heads * d; ++x)
        t[size_t((c.varlen ? cu[b] : int(b) * dense) + i) * heads * d + x] = fmha::ref::round_to(c.dtype, 2.f * normal(rng));
}

void run(const RefCase& c) {
  const int B = int(c.sq.size());
  const int sq_max = *std::max_element(c.sq.begin(), c.sq.end()), sk_max = *std::max_element(c.sk.begin(), c.sk.end());
  const std::vector<int> cu_q = fmha::ref::cumulative(c.sq), cu_k = fmha::ref::cumulative(c.sk);
  // Two rows of NaN past the end of every tensor, and NaN past each dense entry's length: never read.
  const int rows_q = (c.varlen ? cu_q[B] : B * sq_max) + 2, rows_k = (c.varlen ? cu_k[B] : B * sk_max) + 2;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> q(size_t(rows_q) * c.hq * c.dqk, nan), k(size_t(rows_k) * c.hk * c.dqk, nan),
      v(size_t(rows_k) * c.hk * c.dv, nan);
  std::mt19937 rng(std::hash<std::string>{}(c.name));
  auto fill = [&](std::vector<float>& t, const std::vector<int>& lens, const std::vector<int>& cu, int dense, int heads,
                  int d) { fill_rows(c, t, lens, cu, dense, heads, d, rng); };
  fill(q, c.sq, cu_q, sq_max, c.hq, c.dqk);
  fill(k, c.sk, cu_k, sk_max, c.hk, c.dqk);
  fill(v, c.sk, cu_k, sk_max, c.hk, c.dv);

  // CPU: both models.
  fmha::ref::AttnShape s;
  s.batch = B, s.heads_q = c.hq, s.heads_kv = c.hk, s.head_dim_qk = c.dqk, s.head_dim_v = c.dv;
  s.seqlens_q = c.sq, s.seqlens_k = c.sk, s.mask = c.mask, s.align = c.align, s.dtype = c.dtype;
  s.row_sum_rounded_p = c.sum_rounded_p;
  const size_t n_o = size_t(rows_q) * c.hq * c.dv, n_l = size_t(rows_q) * c.hq;
  std::vector<float> oe(n_o, 0.f), ok(n_o, 0.f), le(n_l, 0.f), lk(n_l, 0.f);
  auto view = [&](const std::vector<float>& t, int S, int H, int D) {
    return c.varlen ? fmha::ref::packed(t.data(), H, D, nullptr) : fmha::ref::bshd(t.data(), S, H, D);
  };
  auto cq = view(q, sq_max, c.hq, c.dqk), ck = view(k, sk_max, c.hk, c.dqk), cv = view(v, sk_max, c.hk, c.dv);
  if (c.varlen) cq.cu_seqlens = cu_q.data(), ck.cu_seqlens = cv.cu_seqlens = cu_k.data();
  for (int m = 0; m < 2; ++m) {
    s.rounding = m ? fmha::ref::Rounding::kKernel : fmha::ref::Rounding::kExact;
    auto mo = c.varlen ? fmha::ref::packed((m ? ok : oe).data(), c.hq, c.dv, cu_q.data())
                       : fmha::ref::bshd((m ? ok : oe).data(), sq_max, c.hq, c.dv);
    auto ml = c.varlen ? fmha::ref::packed((m ? lk : le).data(), c.hq, 1, cu_q.data())
                       : fmha::ref::bshd((m ? lk : le).data(), sq_max, c.hq, 1);
    fmha::ref::fwd(s, cq, ck, cv, mo, ml);
  }

  // GPU.
  auto upload = [&](const std::vector<float>& t) {
    std::vector<uint16_t> b(t.size());
    for (size_t i = 0; i < t.size(); ++i) b[i] = bits(c.dtype, t[i]);
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, b.size() * 2), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, b.data(), b.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    return p;
  };
  void* dq = upload(q);
  void* dk = upload(k);
  void* dvv = upload(v);
  float* out = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&out), (2 * n_o + 2 * n_l) * 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(out, 0, (2 * n_o + 2 * n_l) * 4), cudaSuccess);
  GpuRefProblem g;
  g.dtype = c.dtype, g.heads_q = c.hq, g.heads_kv = c.hk, g.head_dim_qk = c.dqk, g.head_dim_v = c.dv;
  g.seqlens_q = c.sq, g.seqlens_k = c.sk, g.mask = c.mask, g.align = c.align, g.row_sum_rounded_p = c.sum_rounded_p;
  g.last_rows = c.last_rows;
  for (int b = 0; b < B; ++b) {
    g.row0_q.push_back(c.varlen ? cu_q[b] : int64_t(b) * sq_max);
    g.row0_k.push_back(c.varlen ? cu_k[b] : int64_t(b) * sk_max);
  }
  const GpuRefOutputs go{out, out + 2 * n_o, out + n_o, out + 2 * n_o + n_l};
  const fmha::Status st = fmha::testing::gpu_reference_fwd(g, GpuRefOperand{dq, int64_t(c.hq) * c.dqk, c.dqk},
                                                           GpuRefOperand{dk, int64_t(c.hk) * c.dqk, c.dqk},
                                                           GpuRefOperand{dvv, int64_t(c.hk) * c.dv, c.dv}, go);
  ASSERT_TRUE(st.is_ok()) << st.message();
  std::vector<float> all(2 * n_o + 2 * n_l);
  ASSERT_EQ(cudaMemcpy(all.data(), out, all.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (void* p : {dq, dk, dvv, static_cast<void*>(out)}) cudaFree(p);
  const std::vector<float> goe(all.begin(), all.begin() + n_o), gok(all.begin() + n_o, all.begin() + 2 * n_o),
      gle(all.begin() + 2 * n_o, all.begin() + 2 * n_o + n_l), glk(all.begin() + 2 * n_o + n_l, all.end());
  if (c.last_rows > 0) {  // rows the GPU reference was told to skip keep the buffer's zeros: clear them on the CPU
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < c.sq[b] - c.last_rows; ++i) {
        const size_t row = size_t(c.varlen ? cu_q[b] + i : b * sq_max + i);
        for (auto* v : {&oe, &ok}) std::fill_n(v->begin() + row * c.hq * c.dv, size_t(c.hq) * c.dv, 0.f);
        for (auto* v : {&le, &lk}) std::fill_n(v->begin() + row * c.hq, c.hq, 0.f);
      }
  }
  EXPECT_EQ(compare("O exact", goe, oe), "");
  EXPECT_EQ(compare("O kernel model", gok, ok), "");
  EXPECT_EQ(compare("LSE exact", gle, le), "");
  EXPECT_EQ(compare("LSE kernel model", glk, lk), "");
  // The two models differ (P rounded to 8 or 11 bits): a reference that ignored the model would pass the above
  // only if the CPU one did too, so check that the difference is there.
  bool differs = false;
  for (size_t i = 0; i < n_o && !differs; ++i) differs = goe[i] != gok[i];
  EXPECT_TRUE(differs) << "the exact and kernel-rounding models gave the same O";
}

/// The backward reference (gpu_reference_bwd) against ref::bwd on the same inputs: Q, K, V, dO random, O the CPU
/// forward's kernel-model output as stored (rounded to the dtype), LSE its exact one; both models of dQ, dK, dV.
void run_bwd(const RefCase& c) {
  const int B = int(c.sq.size());
  const int sq_max = *std::max_element(c.sq.begin(), c.sq.end()), sk_max = *std::max_element(c.sk.begin(), c.sk.end());
  const std::vector<int> cu_q = fmha::ref::cumulative(c.sq), cu_k = fmha::ref::cumulative(c.sk);
  const int rows_q = (c.varlen ? cu_q[B] : B * sq_max) + 2, rows_k = (c.varlen ? cu_k[B] : B * sk_max) + 2;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> q(size_t(rows_q) * c.hq * c.dqk, nan), k(size_t(rows_k) * c.hk * c.dqk, nan),
      v(size_t(rows_k) * c.hk * c.dv, nan), d_o(size_t(rows_q) * c.hq * c.dv, nan);
  std::mt19937 rng(std::hash<std::string>{}(c.name + "bwd"));
  auto fill = [&](std::vector<float>& t, const std::vector<int>& lens, const std::vector<int>& cu, int dense, int heads,
                  int d) { fill_rows(c, t, lens, cu, dense, heads, d, rng); };
  fill(q, c.sq, cu_q, sq_max, c.hq, c.dqk);
  fill(k, c.sk, cu_k, sk_max, c.hk, c.dqk);
  fill(v, c.sk, cu_k, sk_max, c.hk, c.dv);
  fill(d_o, c.sq, cu_q, sq_max, c.hq, c.dv);
  fmha::ref::AttnShape s;
  s.batch = B, s.heads_q = c.hq, s.heads_kv = c.hk, s.head_dim_qk = c.dqk, s.head_dim_v = c.dv;
  s.seqlens_q = c.sq, s.seqlens_k = c.sk, s.mask = c.mask, s.align = c.align, s.dtype = c.dtype;
  auto view = [&](const float* t, int S, int H, int D, const int* cu) {
    auto w = c.varlen ? fmha::ref::packed(t, H, D, cu) : fmha::ref::bshd(t, S, H, D);
    return w;
  };
  auto mut = [&](float* t, int S, int H, int D, const int* cu) {
    return c.varlen ? fmha::ref::packed(t, H, D, cu) : fmha::ref::bshd(t, S, H, D);
  };
  const size_t n_o = size_t(rows_q) * c.hq * c.dv, n_l = size_t(rows_q) * c.hq;
  std::vector<float> o(n_o, 0.f), lse(n_l, 0.f), o_exact_unused(n_o, 0.f);
  {
    std::vector<float> lse_k(n_l, 0.f);
    s.rounding = fmha::ref::Rounding::kKernel;
    fmha::ref::fwd(s, view(q.data(), sq_max, c.hq, c.dqk, cu_q.data()), view(k.data(), sk_max, c.hk, c.dqk, cu_k.data()),
                   view(v.data(), sk_max, c.hk, c.dv, cu_k.data()), mut(o.data(), sq_max, c.hq, c.dv, cu_q.data()),
                   mut(lse_k.data(), sq_max, c.hq, 1, cu_q.data()));
    s.rounding = fmha::ref::Rounding::kExact;
    fmha::ref::fwd(s, view(q.data(), sq_max, c.hq, c.dqk, cu_q.data()), view(k.data(), sk_max, c.hk, c.dqk, cu_k.data()),
                   view(v.data(), sk_max, c.hk, c.dv, cu_k.data()),
                   mut(o_exact_unused.data(), sq_max, c.hq, c.dv, cu_q.data()),
                   mut(lse.data(), sq_max, c.hq, 1, cu_q.data()));
    for (float& x : o) x = fmha::ref::round_to(c.dtype, x);  // O as a kernel stores it
  }
  const size_t n_dq = size_t(rows_q) * c.hq * c.dqk, n_dk = size_t(rows_k) * c.hk * c.dqk,
               n_dv = size_t(rows_k) * c.hk * c.dv;
  std::vector<float> want[2][3];  // [model][dQ, dK, dV]
  for (int m = 0; m < 2; ++m) {
    want[m][0].assign(n_dq, 0.f), want[m][1].assign(n_dk, 0.f), want[m][2].assign(n_dv, 0.f);
    s.rounding = m ? fmha::ref::Rounding::kKernel : fmha::ref::Rounding::kExact;
    fmha::ref::bwd(s, view(q.data(), sq_max, c.hq, c.dqk, cu_q.data()), view(k.data(), sk_max, c.hk, c.dqk, cu_k.data()),
                   view(v.data(), sk_max, c.hk, c.dv, cu_k.data()), view(o.data(), sq_max, c.hq, c.dv, cu_q.data()),
                   view(d_o.data(), sq_max, c.hq, c.dv, cu_q.data()), view(lse.data(), sq_max, c.hq, 1, cu_q.data()),
                   mut(want[m][0].data(), sq_max, c.hq, c.dqk, cu_q.data()),
                   mut(want[m][1].data(), sk_max, c.hk, c.dqk, cu_k.data()),
                   mut(want[m][2].data(), sk_max, c.hk, c.dv, cu_k.data()));
  }
  auto upload = [&](const std::vector<float>& t) {
    std::vector<uint16_t> b(t.size());
    for (size_t i = 0; i < t.size(); ++i) b[i] = bits(c.dtype, t[i]);
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, b.size() * 2), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, b.data(), b.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    return p;
  };
  void *gq = upload(q), *gk = upload(k), *gv = upload(v), *go = upload(o), *gdo = upload(d_o);
  float* glse = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&glse), n_l * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(glse, lse.data(), n_l * 4, cudaMemcpyHostToDevice), cudaSuccess);
  const size_t total = 2 * (n_dq + n_dk + n_dv);
  float* out = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&out), total * 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(out, 0, total * 4), cudaSuccess);
  fmha::testing::GpuRefBwdOutputs gout;
  gout.dq_exact = out, gout.dk_exact = out + n_dq, gout.dv_exact = out + n_dq + n_dk;
  gout.dq_kernel = gout.dv_exact + n_dv, gout.dk_kernel = gout.dq_kernel + n_dq, gout.dv_kernel = gout.dk_kernel + n_dk;
  GpuRefProblem g;
  g.dtype = c.dtype, g.heads_q = c.hq, g.heads_kv = c.hk, g.head_dim_qk = c.dqk, g.head_dim_v = c.dv;
  g.seqlens_q = c.sq, g.seqlens_k = c.sk, g.mask = c.mask, g.align = c.align;
  for (int b = 0; b < B; ++b) {
    g.row0_q.push_back(c.varlen ? cu_q[b] : int64_t(b) * sq_max);
    g.row0_k.push_back(c.varlen ? cu_k[b] : int64_t(b) * sk_max);
  }
  const fmha::Status st = fmha::testing::gpu_reference_bwd(
      g, GpuRefOperand{gq, int64_t(c.hq) * c.dqk, c.dqk}, GpuRefOperand{gk, int64_t(c.hk) * c.dqk, c.dqk},
      GpuRefOperand{gv, int64_t(c.hk) * c.dv, c.dv}, GpuRefOperand{go, int64_t(c.hq) * c.dv, c.dv},
      GpuRefOperand{gdo, int64_t(c.hq) * c.dv, c.dv}, glse, gout);
  ASSERT_TRUE(st.is_ok()) << st.message();
  std::vector<float> all(total);
  ASSERT_EQ(cudaMemcpy(all.data(), out, total * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (void* p : {gq, gk, gv, go, gdo, static_cast<void*>(glse), static_cast<void*>(out)}) cudaFree(p);
  size_t at = 0;
  const char* names[2][3] = {{"dQ exact", "dK exact", "dV exact"}, {"dQ kernel model", "dK kernel model", "dV kernel model"}};
  bool differs = false;
  for (int m = 0; m < 2; ++m)
    for (int t = 0; t < 3; ++t) {
      const std::vector<float> got(all.begin() + at, all.begin() + at + want[m][t].size());
      at += want[m][t].size();
      EXPECT_EQ(compare(names[m][t], got, want[m][t]), "");
      if (m == 1 && t == 2)
        for (size_t i = 0; i < got.size() && !differs; ++i) differs = got[i] != all[n_dq + n_dk + i];
    }
  EXPECT_TRUE(differs) << "the exact and kernel-rounding models gave the same dV";
}

class GpuReferenceTest : public ::testing::TestWithParam<RefCase> {};

TEST_P(GpuReferenceTest, MatchesCpuReference) {
  FMHA_REQUIRE_GPU();
  run(GetParam());
}

class GpuReferenceBwdTest : public ::testing::TestWithParam<RefCase> {};

TEST_P(GpuReferenceBwdTest, MatchesCpuReference) {
  FMHA_REQUIRE_GPU();
  run_bwd(GetParam());
}

std::vector<RefCase> cases() {
  const auto N = MaskType::kNone, C = MaskType::kCausal;
  const auto QB = CausalAlign::kQBegin, QE = CausalAlign::kQEnd;
  const auto BF = DType::kBF16, FP = DType::kFP16;
  return {
      {"dense_d64_bf16", BF, 4, 4, 64, 64, {77, 77}, {130, 130}, false, N, QB, false},
      {"dense_d128_fp16_sum_rounded", FP, 2, 2, 128, 128, {64}, {300}, false, N, QB, true},
      {"causal_qbegin_more_keys", BF, 2, 1, 64, 64, {50}, {200}, false, C, QB, false},
      {"causal_qend_more_keys", FP, 2, 1, 64, 64, {50}, {200}, false, C, QE, false},
      {"causal_qend_more_queries", BF, 3, 3, 32, 32, {200}, {60}, false, C, QE, true},
      {"causal_qbegin_more_queries", FP, 1, 1, 96, 96, {150}, {40}, false, C, QB, false},
      {"varlen_empty_entries_gqa", BF, 6, 2, 64, 64, {0, 33, 100, 1, 0}, {5, 0, 250, 64, 0}, true, C, QE, false},
      {"varlen_mqa_d256", FP, 4, 1, 256, 256, {17, 90}, {300, 45}, true, N, QB, false},
      {"mla_shape_192_128", BF, 2, 2, 192, 128, {40}, {129}, false, C, QE, false},
      {"d8_many_heads", FP, 16, 4, 8, 8, {31}, {257}, false, N, QB, false},
      // Only the last 16 rows of each entry (the harness's check_rows), causal q-end, an empty entry.
      {"last_rows_varlen", BF, 4, 2, 64, 64, {0, 100, 7}, {50, 300, 7}, true, C, QE, false, 16},
      // More entries than a grid's z extent (65535): the reference launches in chunks.
      {"batch_66000", FP, 1, 1, 8, 8, std::vector<int>(66000, 1), std::vector<int>(66000, 3), false, N, QB, false},
  };
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuReferenceTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<RefCase>& i) { return i.param.name; });

/// The backward reference on the same shapes, except the forward-only ones (last_rows, the 66000-entry batch).
std::vector<RefCase> bwd_cases() {
  std::vector<RefCase> v;
  for (const RefCase& c : cases())
    if (c.last_rows == 0 && c.sq.size() < 1000) v.push_back(c);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuReferenceBwdTest, ::testing::ValuesIn(bwd_cases()),
                         [](const ::testing::TestParamInfo<RefCase>& i) { return i.param.name; });

}  // namespace
