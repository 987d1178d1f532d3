// The backward (include/fmha/bwd.h) against the GPU backward reference (testing/gpu_reference.h, fp64, given fmha's
// own O and LSE) under the library's comparison rule (k = 3 against the kernel-emulating reference) on every element
// of dQ, dK and dV, through the harness of src/testing/bwd_runner.h:
//   fp16 and bf16; head dims 64 and 128 and predicated ones (40, 96); masks none and causal q-begin / q-end with more
//   queries than keys and more keys than queries; MHA, GQA 4 and 5, MQA; varlen with empty entries and entries of
//   one row; seqlen_q = 1 and seqlen_q = seqlen_k = 1; NaN in every row past each entry, in the padding of strided
//   rows and in rows past the packed tensors (must never reach a gradient); gradients and workspace poisoned with
//   NaN; large logits; the deterministic option bit for bit over repeated calls, also over many waves of CTAs; 40
//   varlen entries; the two-pass algorithm on the same cases, bit for bit over repeated calls. (Argument errors without a GPU:
//   tests/cpu/test_api_bwd.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
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

}  // namespace
