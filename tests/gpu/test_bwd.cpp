// The backward (include/fmha/bwd.h) against the GPU backward reference (testing/gpu_reference.h, fp64, given fmha's
// own O and LSE) under the library's comparison rule (k = 3 against the kernel-emulating reference) on every element
// of dQ, dK and dV, through the harness of src/testing/bwd_runner.h:
//   fp16 and bf16; head dims 64 and 128 and predicated ones (40, 96); masks none and causal q-begin / q-end with more
//   queries than keys and more keys than queries; MHA, GQA 4 and 5, MQA; varlen with empty entries and entries of
//   one row; seqlen_q = 1 and seqlen_q = seqlen_k = 1; NaN in every row past each entry, in the padding of strided
//   rows and in rows past the packed tensors (must never reach a gradient); gradients and workspace poisoned with
//   NaN; large logits; the deterministic option bit for bit over repeated calls, also over many waves of CTAs; 40
//   varlen entries; the edge cases E15–E18 (one key per entry, empty leading entries, LSE below −88.7 with a key
//   tail, 200 deterministic calls); the two-pass algorithm on the same cases, bit for bit over repeated calls; the
//   MLA prefill head dims 192 / 128 (two passes) on a covering set of the same kinds. (Argument errors without a GPU:
//   tests/cpu/test_api_bwd.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "fmha/bwd.h"
#include "gpu/gpu_env.h"
#include "testing/bwd_runner.h"

namespace {

using fmha::CausalAlign;
using fmha::DType;
using fmha::MaskType;
using fmha::testing::BwdCase;

struct NamedCase {
  std::string name;
  BwdCase c;
};

void check_case(const NamedCase& n) {
  FMHA_REQUIRE_GPU();
  const fmha::testing::BwdOutcome r = fmha::testing::run_bwd_case(n.c);
  ASSERT_TRUE(r.status.is_ok()) << n.name << ": " << r.status.message();
  ASSERT_TRUE(r.checked);
  EXPECT_TRUE(r.dq.ok) << n.name << ": dQ " << r.dq.message;
  EXPECT_TRUE(r.dk.ok) << n.name << ": dK " << r.dk.message;
  EXPECT_TRUE(r.dv.ok) << n.name << ": dV " << r.dv.message;
  EXPECT_TRUE(r.untouched) << n.name << ": " << r.write_problem;
  EXPECT_TRUE(r.all_written) << n.name << ": " << r.write_problem;
  EXPECT_EQ(r.repeat_mismatches, 0) << n.name << ": deterministic calls whose gradients differ from the first";
}

NamedCase make(std::string name, DType t, int b, int hq, int hk, int d, std::vector<int> sq, std::vector<int> sk,
               bool varlen, MaskType mask = MaskType::kNone, CausalAlign align = CausalAlign::kQBegin) {
  NamedCase n;
  n.name = std::move(name);
  BwdCase& c = n.c;
  c.dtype = t, c.batch = b, c.heads_q = hq, c.heads_kv = hk, c.head_dim = d;
  c.seqlens_q = std::move(sq), c.seqlens_k = std::move(sk), c.varlen = varlen, c.mask = mask, c.align = align;
  c.seed = std::hash<std::string>{}(n.name);
  return n;
}

class BwdCaseTest : public ::testing::TestWithParam<NamedCase> {};

TEST_P(BwdCaseTest, MatchesReference) { check_case(GetParam()); }

std::vector<NamedCase> cases() {
  const DType bf = DType::kBF16, fp = DType::kFP16;
  const MaskType N = MaskType::kNone, C = MaskType::kCausal;
  const CausalAlign QB = CausalAlign::kQBegin, QE = CausalAlign::kQEnd;
  std::vector<NamedCase> v;
  v.push_back(make("dense_bf16_d128", bf, 2, 4, 4, 128, {256, 256}, {384, 384}, false));
  v.push_back(make("dense_fp16_d64", fp, 2, 4, 4, 64, {200, 200}, {300, 300}, false));
  v.push_back(make("causal_qbegin_bf16_d128", bf, 2, 2, 2, 128, {333, 333}, {333, 333}, false, C, QB));
  v.push_back(make("causal_qbegin_more_keys_fp16_d64", fp, 1, 2, 2, 64, {100}, {300}, false, C, QB));
  v.push_back(make("causal_qend_more_keys_bf16_d64", bf, 1, 2, 2, 64, {100}, {300}, false, C, QE));
  v.push_back(make("causal_qend_more_queries_fp16_d128", fp, 1, 2, 1, 128, {300}, {100}, false, C, QE));
  v.push_back(make("causal_qbegin_more_queries_bf16_d128", bf, 1, 2, 2, 128, {300}, {100}, false, C, QB));
  v.push_back(make("gqa4_bf16_d128", bf, 1, 8, 2, 128, {190}, {700}, false));
  v.push_back(make("gqa5_causal_fp16_d64", fp, 2, 10, 2, 64, {129, 129}, {257, 257}, false, C, QE));
  v.push_back(make("mqa_bf16_d64", bf, 1, 6, 1, 64, {64}, {1000}, false));
  v.push_back(make("predicated_d96_fp16", fp, 1, 2, 2, 96, {150}, {150}, false, C, QB));
  v.push_back(make("predicated_d40_bf16", bf, 2, 3, 1, 40, {70, 70}, {90, 90}, false));
  v.push_back(make("seqlen_q_1_bf16_d128", bf, 2, 4, 2, 128, {1, 1}, {300, 300}, false, C, QE));
  v.push_back(make("seqlen_1_1_fp16_d64", fp, 3, 2, 2, 64, {1, 1, 1}, {1, 1, 1}, false));
  {
    NamedCase n = make("varlen_empty_entries_gqa_bf16_d128", bf, 5, 6, 2, 128, {0, 33, 200, 1, 0}, {5, 0, 250, 64, 0},
                       true, C, QE);
    n.c.extra_rows = 70;  // NaN rows past the packed entries
    v.push_back(n);
  }
  {
    NamedCase n = make("varlen_fp16_d64_strided", fp, 3, 4, 4, 64, {130, 7, 64}, {129, 300, 65}, true, C, QB);
    n.c.row_pad = 8;  // NaN between the rows' heads
    v.push_back(n);
  }
  v.push_back(make("varlen_noncausal_bf16_d64", bf, 4, 2, 1, 64, {17, 128, 90, 300}, {300, 45, 129, 1}, true));
  {
    NamedCase n = make("large_logits_bf16_d128", bf, 1, 2, 2, 128, {200}, {200}, false, C, QB);
    n.c.input_scale = 4.f;  // |scale · q·k| in the hundreds: one key dominates most rows
    v.push_back(n);
  }
  {
    NamedCase n = make("deterministic_gqa_causal_bf16_d128", bf, 2, 4, 2, 128, {500, 500}, {500, 500}, false, C, QE);
    n.c.deterministic = true;
    n.c.repeats = 10;
    v.push_back(n);
  }
  {
    NamedCase n = make("deterministic_varlen_fp16_d64", fp, 3, 4, 1, 64, {300, 0, 129}, {260, 10, 400}, true);
    n.c.deterministic = true;
    n.c.repeats = 10;
    v.push_back(n);
  }
  {
    // 1024 CTAs (eight waves on 132 SMs): the ordered dQ accumulation across CTAs that are not all resident.
    NamedCase n = make("deterministic_multiwave_bf16_d64", bf, 2, 16, 16, 64, {4096, 4096}, {4096, 4096}, false, C,
                       QB);
    n.c.deterministic = true;
    n.c.repeats = 3;
    v.push_back(n);
  }
  {
    // 40 entries of 0 … 300 rows (a fixed pseudo-random pattern), NaN rows past the last.
    std::vector<int> sq, sk;
    for (int b = 0; b < 40; ++b) sq.push_back((b * 97 + 13) % 301), sk.push_back((b * 53 + 7) % 289);
    NamedCase n = make("varlen_40_entries_gqa_fp16_d128", fp, 40, 4, 2, 128, sq, sk, true, C, QE);
    n.c.extra_rows = 10;
    v.push_back(n);
  }
  // The edge cases of other libraries' backward (E15–E18, with the right answers).
  for (CausalAlign al : {QB, QE}) {
    // E15: one key per sequence, so each row that sees it has P = 1 and dS = 0: dQ = dK = 0, dV = the sum of dO
    // over the rows that see the key (dO = 1).
    NamedCase n = make(std::string("E15_one_key_per_entry_") + (al == QB ? "qbegin" : "qend"), fp, 3, 1, 1, 32,
                       {76, 34, 146}, {1, 1, 1}, true, C, al);
    n.c.input_scale = 3.f;
    n.c.fill = [seed = n.c.seed](const std::string& t, std::vector<float>& x) {
      std::mt19937 rng(uint32_t(seed) + uint32_t(t.size()) * 7 + uint32_t(t[0]));
      std::normal_distribution<float> g(0.f, 3.f);
      for (float& e : x) e = t == "do" ? 1.f : g(rng);
    };
    v.push_back(n);
  }
  for (MaskType m : {N, C}) {
    // E16: empty leading entries (no rows, then one key and no rows), then 1023 rows against 2045 keys; K/V hold
    // exactly the 2046 rows the lengths name.
    v.push_back(make(std::string("E16_empty_leading_entries_") + (m == C ? "causal" : "none"), bf, 3, 32, 32, 128,
                     {0, 0, 1023}, {0, 1, 2045}, true, m, QE));
  }
  for (DType t : {bf, fp})
    for (int L : {192, 1000})
      for (MaskType m : {N, C}) {
        // E17: every scaled logit about −120 (q·k ≈ −120 · √64 through column 0), so LSE < −88.7 and exp(−LSE)
        // overflows fp32: the key tail past seqlen_k must still get P = 0.
        NamedCase n = make(std::string("E17_very_negative_lse_") + (t == bf ? "bf16_" : "fp16_") + std::to_string(L) +
                               (m == C ? "_causal" : "_none"),
                           t, 1, 1, 1, 64, {L}, {L}, false, m, QB);
        n.c.fill = [seed = n.c.seed](const std::string& name, std::vector<float>& x) {
          std::mt19937 rng(uint32_t(seed) + uint32_t(name[0]));
          std::normal_distribution<float> g(0.f, 1.f);
          const bool qk = name == "q" || name == "k";
          for (size_t e = 0; e < x.size(); ++e) {
            x[e] = g(rng) * (qk ? 0.1f : 1.f);
            if (e % 64 == 0 && name == "q") x[e] = 1.f;
            if (e % 64 == 0 && name == "k") x[e] = -120.f * 8.f;
          }
        };
        v.push_back(n);
      }
  {
    // E18: the deterministic option over 200 calls (workspace and gradients NaN-poisoned before each, so that an
    // unzeroed counter shows): (a) dense causal GQA 32/8 d 128, 2 × 2048; (b) varlen causal GQA 12/4 d 64 with an
    // empty entry and one of 6 rows; (c) varlen, queries 1, 64, 300 against keys 512, 64, 1000 (tiles with no work).
    NamedCase a = make("E18a_deterministic_200_dense_causal_gqa_bf16_d128", bf, 2, 32, 8, 128, {2048, 2048},
                       {2048, 2048}, false, C, QE);
    NamedCase b = make("E18b_deterministic_200_varlen_causal_gqa_bf16_d64", bf, 4, 12, 4, 64, {0, 300, 1024, 6},
                       {0, 300, 1024, 6}, true, C, QB);
    NamedCase c = make("E18c_deterministic_200_varlen_idle_tiles_bf16_d128", bf, 3, 12, 4, 128, {1, 64, 300},
                       {512, 64, 1000}, true, C, QE);
    for (NamedCase* n : {&a, &b, &c}) {
      n->c.deterministic = true;
      n->c.repeats = 200;
      v.push_back(*n);
    }
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Bwd, BwdCaseTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<NamedCase>& i) { return i.param.name; });

// The two-pass algorithm (the main kernel without dQ, then the dQ kernel) on every case but the multi-wave one
// (whose point is the one-pass ordering), each repeated twice bit for bit: two passes are repeatable by
// construction.
std::vector<NamedCase> two_pass_cases() {
  std::vector<NamedCase> v;
  for (NamedCase n : cases()) {
    if (n.name.rfind("deterministic_multiwave", 0) == 0) continue;
    n.name = "two_pass_" + n.name;
    n.c.algorithm = fmha::BwdAlgorithm::kTwoPass;
    n.c.repeats = std::max(2, std::min(n.c.repeats, 20));
    v.push_back(n);
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(TwoPass, BwdCaseTest, ::testing::ValuesIn(two_pass_cases()),
                         [](const ::testing::TestParamInfo<NamedCase>& i) { return i.param.name; });

// The MLA prefill head dims 192 / 128 (two passes; O and LSE from the GPU forward reference, as no forward kernel
// takes them yet): both dtypes, every mask and alignment, GQA, varlen with empty entries and NaN rows past them,
// strided rows, seqlen_q = 1, large logits, repeated calls bit for bit, many waves of CTAs, and kAuto (which
// resolves to two passes there).
std::vector<NamedCase> mla_cases() {
  const DType bf = DType::kBF16, fp = DType::kFP16;
  const MaskType N = MaskType::kNone, C = MaskType::kCausal;
  const CausalAlign QB = CausalAlign::kQBegin, QE = CausalAlign::kQEnd;
  auto mla = [](std::string name, DType t, int b, int hq, int hk, std::vector<int> sq, std::vector<int> sk,
                bool varlen, MaskType mask = MaskType::kNone, CausalAlign align = CausalAlign::kQBegin) {
    NamedCase n = make("mla_" + name, t, b, hq, hk, 192, std::move(sq), std::move(sk), varlen, mask, align);
    n.c.head_dim_v = 128;
    n.c.algorithm = fmha::BwdAlgorithm::kTwoPass;
    n.c.repeats = 2;
    return n;
  };
  std::vector<NamedCase> v;
  v.push_back(mla("dense_bf16", bf, 2, 4, 4, {256, 256}, {384, 384}, false));
  v.push_back(mla("dense_fp16", fp, 1, 4, 4, {200}, {300}, false));
  v.push_back(mla("causal_qbegin_bf16", bf, 2, 2, 2, {333, 333}, {333, 333}, false, C, QB));
  v.push_back(mla("causal_qbegin_more_keys_fp16", fp, 1, 2, 2, {100}, {300}, false, C, QB));
  v.push_back(mla("causal_qend_more_keys_bf16", bf, 1, 2, 2, {100}, {300}, false, C, QE));
  v.push_back(mla("causal_qend_more_queries_fp16", fp, 1, 2, 1, {300}, {100}, false, C, QE));
  v.push_back(mla("gqa4_causal_bf16", bf, 1, 8, 2, {190}, {700}, false, C, QE));
  v.push_back(mla("gqa5_fp16", fp, 2, 10, 2, {129, 129}, {257, 257}, false));
  v.push_back(mla("seqlen_q_1_bf16", bf, 2, 4, 2, {1, 1}, {300, 300}, false, C, QE));
  v.push_back(mla("seqlen_1_1_fp16", fp, 3, 2, 2, {1, 1, 1}, {1, 1, 1}, false));
  {
    NamedCase n = mla("varlen_empty_entries_gqa_bf16", bf, 5, 6, 2, {0, 33, 200, 1, 0}, {5, 0, 250, 64, 0}, true, C, QE);
    n.c.extra_rows = 70;  // NaN rows past the packed entries
    v.push_back(n);
  }
  {
    NamedCase n = mla("varlen_strided_fp16", fp, 3, 4, 4, {130, 7, 64}, {129, 300, 65}, true, C, QB);
    n.c.row_pad = 8;  // NaN between the rows' heads
    v.push_back(n);
  }
  v.push_back(mla("varlen_noncausal_bf16", bf, 4, 2, 1, {17, 128, 90, 300}, {300, 45, 129, 1}, true));
  v.push_back(mla("residual_fp16", fp, 2, 2, 2, {77, 77}, {333, 333}, false, MaskType::kResidual));
  {
    NamedCase n = mla("large_logits_bf16", bf, 1, 2, 2, {200}, {200}, false, C, QB);
    n.c.input_scale = 4.f;
    v.push_back(n);
  }
  {
    // 512 key-block CTAs and 512 row-block CTAs (about four waves each on 132 SMs), 20 calls bit for bit.
    NamedCase n = mla("multiwave_causal_bf16", bf, 2, 16, 16, {2048, 2048}, {2048, 2048}, false, C, QE);
    n.c.repeats = 20;  // two passes: repeatable without the deterministic option
    v.push_back(n);
  }
  {
    NamedCase n = mla("auto_causal_fp16", fp, 1, 4, 1, {257}, {257}, false, C, QB);
    n.c.algorithm = fmha::BwdAlgorithm::kAuto;  // resolves to two passes at 192 / 128
    v.push_back(n);
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Mla, BwdCaseTest, ::testing::ValuesIn(mla_cases()),
                         [](const ::testing::TestParamInfo<NamedCase>& i) { return i.param.name; });

}  // namespace
