// CLI core: problem defaults derivation (docs/seed.md §2.1, §2.5) and FLOP formulas (tools/cli/common/problem.h).
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "common/options.h"
#include "common/problem.h"

namespace fmha::cli {
namespace {

FwdProblemArgs derive_ok(const FwdProblemInput& in, const ProblemDefaults& d = ProblemDefaults::forward()) {
  const FwdProblemResult r = derive_fwd_problem(in, d);
  EXPECT_TRUE(r.ok()) << r.error;
  return r.args;
}

std::string derive_error(const FwdProblemInput& in, const ProblemDefaults& d = ProblemDefaults::forward()) {
  const FwdProblemResult r = derive_fwd_problem(in, d);
  EXPECT_FALSE(r.ok()) << "expected an error";
  return r.error;
}

// Parses a forward tool's command line and derives the problem, as fmha_fwd will.
FwdProblemResult from_command_line(const std::vector<std::string>& args,
                                   ProblemFamily family = ProblemFamily::kForward) {
  OptionTable t("fmha_test", "Test.");
  ProblemOptionSet set;
  set.family = family;
  set.d_vo = family == ProblemFamily::kBackward;
  set.causal_type = family == ProblemFamily::kForward;
  add_problem_options(t, set);
  add_common_options(t);
  const ParseResult p = t.parse(args);
  EXPECT_TRUE(p.ok()) << p.error;
  return derive_fwd_problem(problem_input_from(p.options), family == ProblemFamily::kForward
                                                                ? ProblemDefaults::forward()
                                                                : ProblemDefaults::backward());
}

TEST(CliDefaults, NoOptionsIsTheSeedDefaultProblem) {
  const FwdProblemArgs p = derive_ok({});
  EXPECT_EQ(p.b, 64);
  EXPECT_EQ(p.h, 16);
  EXPECT_EQ(p.h_k, 16);
  EXPECT_EQ(p.q, 256);
  EXPECT_EQ(p.k, 256);
  EXPECT_EQ(p.d, 128);
  EXPECT_EQ(p.d_v, 128);
  EXPECT_EQ(p.seqlens_q, std::vector<int>(64, 256));
  EXPECT_EQ(p.seqlens_k, std::vector<int>(64, 256));
  EXPECT_FALSE(p.varlen);
  EXPECT_EQ(p.mask, fmha::MaskType::kNone);
  EXPECT_EQ(p.align, fmha::CausalAlign::kQBegin);
  EXPECT_STREQ(p.mask_word(), "None");
  EXPECT_TRUE(p.warnings.empty());
}

TEST(CliDefaults, HeadDimSetsHeads) {
  FwdProblemInput in;
  in.d = 64;
  FwdProblemArgs p = derive_ok(in);
  EXPECT_EQ(p.h, 32);
  EXPECT_EQ(p.h_k, 32);
  in.d = 4096;  // 2048 / 4096 = 0 → at least 1
  EXPECT_EQ(derive_ok(in).h, 1);
  in.d = 64;
  in.h = 4;
  p = derive_ok(in);
  EXPECT_EQ(p.h, 4);
  EXPECT_EQ(p.h_k, 4);
}

TEST(CliDefaults, QAndKDefaultToEachOther) {
  FwdProblemInput in;
  in.q = 512;
  FwdProblemArgs p = derive_ok(in);
  EXPECT_EQ(p.k, 512);
  EXPECT_EQ(p.b, 32);
  in = {};
  in.k = 1024;
  p = derive_ok(in);
  EXPECT_EQ(p.q, 1024);
  EXPECT_EQ(p.b, 16);
  in.q = 1013;  // TEST_CAUSAL_01: both given, b = 16384 / k
  p = derive_ok(in);
  EXPECT_EQ(p.q, 1013);
  EXPECT_EQ(p.k, 1024);
  EXPECT_EQ(p.b, 16);
}

TEST(CliDefaults, BatchIsAtLeastOne) {
  FwdProblemInput in;
  in.k = 20000;
  EXPECT_EQ(derive_ok(in).b, 1);
  in.k = 0;  // no division by zero
  EXPECT_EQ(derive_ok(in).b, 1);
}

TEST(CliDefaults, GivenBatchIsKept) {
  FwdProblemInput in;
  in.b = 3;
  in.q = 100;
  const FwdProblemArgs p = derive_ok(in);
  EXPECT_EQ(p.b, 3);
  EXPECT_EQ(p.seqlens_q, std::vector<int>(3, 100));
}

TEST(CliDefaults, VarlenListsSetBatchAndTotals) {
  FwdProblemInput in;
  in.varlen = true;
  in.varlen_q = std::vector<int>{256, 256, 256, 256};
  in.varlen_k = std::vector<int>{256, 0, 1280, 512};  // TEST_VARLEN_07
  const FwdProblemArgs p = derive_ok(in);
  EXPECT_EQ(p.b, 4);
  EXPECT_EQ(p.q, 1024);
  EXPECT_EQ(p.k, 2048);
  EXPECT_EQ(p.seqlens_q, (std::vector<int>{256, 256, 256, 256}));
  EXPECT_EQ(p.seqlens_k, (std::vector<int>{256, 0, 1280, 512}));
  EXPECT_EQ(p.max_seqlen_k(), 1280);
  EXPECT_EQ(p.total_k(), 2048);
  EXPECT_EQ(p.sum_qk(), 256LL * (256 + 0 + 1280 + 512));
  EXPECT_TRUE(p.varlen);
  EXPECT_EQ(p.mask, fmha::MaskType::kResidual);  // varlen without --mask
}

TEST(CliDefaults, OnlyVarlenQGivesKTheSum) {
  FwdProblemInput in;
  in.varlen = true;
  in.varlen_q = std::vector<int>{100, 300};
  const FwdProblemArgs p = derive_ok(in);
  EXPECT_EQ(p.b, 2);
  EXPECT_EQ(p.q, 400);
  EXPECT_EQ(p.k, 400);
  EXPECT_EQ(p.seqlens_q, (std::vector<int>{100, 300}));
  EXPECT_EQ(p.seqlens_k, (std::vector<int>{400, 400}));
}

TEST(CliDefaults, OnlyVarlenKGivesQTheSum) {
  FwdProblemInput in;
  in.varlen = true;
  in.varlen_k = std::vector<int>{2, 5};
  const FwdProblemArgs p = derive_ok(in);
  EXPECT_EQ(p.b, 2);
  EXPECT_EQ(p.q, 7);
  EXPECT_EQ(p.seqlens_q, (std::vector<int>{7, 7}));
  EXPECT_EQ(p.seqlens_k, (std::vector<int>{2, 5}));
}

TEST(CliDefaults, VarlenWithoutListsGivesEveryEntryQAndK) {
  FwdProblemInput in;
  in.varlen = true;
  in.b = 2;
  in.q = 512;
  in.k = 384;
  const FwdProblemArgs p = derive_ok(in);
  EXPECT_EQ(p.seqlens_q, (std::vector<int>{512, 512}));
  EXPECT_EQ(p.seqlens_k, (std::vector<int>{384, 384}));
}

TEST(CliDefaults, ScalarWithListIsAnError) {
  FwdProblemInput in;
  in.varlen = true;
  in.q = 128;
  in.varlen_q = std::vector<int>{128};
  EXPECT_EQ(derive_error(in), "Can't provide --q and --varlen-q");
  in = {};
  in.varlen = true;
  in.k = 128;
  in.varlen_k = std::vector<int>{128};
  EXPECT_EQ(derive_error(in), "Can't provide --k and --varlen-k");
}

TEST(CliDefaults, ListLengthMustMatchBatch) {
  FwdProblemInput in;
  in.varlen = true;
  in.b = 4;
  in.varlen_q = std::vector<int>{1, 2};
  EXPECT_EQ(derive_error(in), "Invalid --varlen-q length: expected 4 entries (--b=4), got 2");
  in = {};
  in.varlen = true;
  in.varlen_q = std::vector<int>{1, 2, 3};
  in.varlen_k = std::vector<int>{1, 2};
  EXPECT_EQ(derive_error(in), "Invalid --varlen-k length: expected 3 entries (the other list's length), got 2");
  in.b = 3;
  EXPECT_EQ(derive_error(in), "Invalid --varlen-k length: expected 3 entries (--b=3), got 2");
}

TEST(CliDefaults, ListsAreIgnoredWithoutVarlen) {
  FwdProblemInput in;
  in.q = 128;
  in.varlen_q = std::vector<int>{1, 2, 3};  // not read without --varlen: no error, no effect
  const FwdProblemArgs p = derive_ok(in);
  EXPECT_EQ(p.q, 128);
  EXPECT_EQ(p.b, 128);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("--varlen-q"), std::string::npos);
}

TEST(CliDefaults, MaskAndAlignment) {
  FwdProblemInput in;
  in.mask = "causal";
  EXPECT_EQ(derive_ok(in).mask, fmha::MaskType::kCausal);
  in.causal_type = "qend";
  EXPECT_EQ(derive_ok(in).align, fmha::CausalAlign::kQEnd);
  in.varlen = true;
  EXPECT_EQ(derive_ok(in).mask, fmha::MaskType::kCausal);  // varlen does not override causal
  in.mask = "residual";
  EXPECT_EQ(derive_ok(in).mask, fmha::MaskType::kResidual);
  in.varlen = false;
  in.mask = "no";
  EXPECT_EQ(derive_ok(in).mask, fmha::MaskType::kNone);
  in.mask = "none";
  EXPECT_EQ(derive_ok(in).mask, fmha::MaskType::kNone);
  in.mask = "diagonal";
  EXPECT_EQ(derive_error(in), "--mask: expected one of no|residual|causal, got \"diagonal\"");
  in.mask = "causal";
  in.causal_type = "bottom";
  EXPECT_EQ(derive_error(in), "--causal-type: expected one of qbegin|qend, got \"bottom\"");
}

TEST(CliDefaults, HeadsMustDivide) {
  FwdProblemInput in;
  in.h = 8;
  in.h_k = 3;
  EXPECT_EQ(derive_error(in), "--h_k: expected a divisor of --h=8, got 3");
  in.h_k = 2;
  EXPECT_EQ(derive_ok(in).h_k, 2);
}

TEST(CliDefaults, NonPositiveValuesNamed) {
  FwdProblemInput in;
  in.b = 0;
  EXPECT_EQ(derive_error(in), "--b: expected an integer ≥ 1, got 0");
  in = {};
  in.d = 0;
  EXPECT_EQ(derive_error(in), "--d: expected an integer ≥ 1, got 0");
  in = {};
  in.q = -1;
  EXPECT_EQ(derive_error(in), "--q: expected an integer ≥ 0, got -1");
}

TEST(CliDefaults, MlaPrefillHeadsFromLatentDim) {
  FwdProblemInput in;
  in.d = 192;
  in.d_v = 128;
  in.h_default_dim = 128;
  const FwdProblemArgs p = derive_ok(in);
  EXPECT_EQ(p.h, 16);
  EXPECT_EQ(p.d, 192);
  EXPECT_EQ(p.d_v, 128);
}

TEST(CliDefaults, BackwardFallbackIs1024) {
  const FwdProblemArgs p = derive_ok({}, ProblemDefaults::backward());
  EXPECT_EQ(p.q, 1024);
  EXPECT_EQ(p.k, 1024);
  EXPECT_EQ(p.b, 16);
  EXPECT_EQ(p.h, 16);
}

TEST(CliDefaults, BackwardVarlenDrawsSeededLengths) {
  FwdProblemInput in;
  in.varlen = true;
  in.b = 64;
  in.q = 512;
  in.k = 512;
  const FwdProblemArgs a = derive_ok(in, ProblemDefaults::backward());
  const FwdProblemArgs b = derive_ok(in, ProblemDefaults::backward());
  EXPECT_EQ(a.seqlens_q, b.seqlens_q);  // deterministic
  EXPECT_EQ(a.seqlens_k, b.seqlens_k);
  ASSERT_EQ(a.seqlens_q.size(), 64u);
  EXPECT_NE(a.seqlens_q, a.seqlens_k);  // independent streams
  EXPECT_GT(std::set<int>(a.seqlens_q.begin(), a.seqlens_q.end()).size(), 10u);
  double mean = 0;
  for (int x : a.seqlens_q) {
    EXPECT_GE(x, 0);
    mean += x / 64.0;
  }
  EXPECT_NEAR(mean, 512, 3 * 256 / 8.0);  // N(512, 256) mean over 64 draws: ±3σ/√64 (clamping shifts it up a bit)
  EXPECT_EQ(a.mask, fmha::MaskType::kResidual);

  ProblemDefaults other = ProblemDefaults::backward();
  other.varlen_seed += 100;
  EXPECT_NE(derive_ok(in, other).seqlens_q, a.seqlens_q);
}

TEST(CliDefaults, BackwardVarlenListsAreExact) {
  FwdProblemInput in;
  in.varlen = true;
  in.varlen_q = std::vector<int>{177, 366, 479};
  in.varlen_k = std::vector<int>{257, 0, 766};
  const FwdProblemArgs p = derive_ok(in, ProblemDefaults::backward());
  EXPECT_EQ(p.seqlens_q, (std::vector<int>{177, 366, 479}));
  EXPECT_EQ(p.seqlens_k, (std::vector<int>{257, 0, 766}));
}

TEST(CliDefaults, FromCommandLineSeedTests) {
  // TEST_BASIC
  FwdProblemResult r = from_command_line({"--b=1", "--h=4", "--q=512", "--k=512", "--d=128", "--verify", "--mask=no"});
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.args.b, 1);
  EXPECT_EQ(r.args.h, 4);
  EXPECT_EQ(r.args.mask, fmha::MaskType::kNone);
  // TEST_VARLEN_06
  r = from_command_line({"--verify", "--varlen", "--mask=causal", "--d=128", "--h=8", "--h_k=2",
                         "--varlen-q=256:256:256:256", "--varlen-k=256:768:512:512"});
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.args.b, 4);
  EXPECT_EQ(r.args.h_k, 2);
  EXPECT_EQ(r.args.seqlens_k, (std::vector<int>{256, 768, 512, 512}));
  EXPECT_EQ(r.args.mask, fmha::MaskType::kCausal);
  // TEST_VARLEN_18
  r = from_command_line({"--verify", "--varlen", "--mask=causal", "--causal-type=qend", "--d=128", "--h=4",
                         "--h_k=4", "--varlen-q=128", "--varlen-k=128"});
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.args.b, 1);
  EXPECT_EQ(r.args.align, fmha::CausalAlign::kQEnd);
  // The derivation error through the option layer.
  r = from_command_line({"--varlen", "--q=5", "--varlen-q=5"});
  EXPECT_EQ(r.error, "Can't provide --q and --varlen-q");
  // TEST_BWD_MLA_BASIC
  r = from_command_line({"--b=1", "--h=4", "--q=512", "--k=512", "--d=192", "--d_vo=128", "--verify", "--mask=no"},
                        ProblemFamily::kBackward);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.args.d, 192);
  EXPECT_EQ(r.args.d_v, 128);
  EXPECT_EQ(r.args.align, fmha::CausalAlign::kQBegin);
}

TEST(CliDefaults, ProblemOptionsRangeCheckedAtParse) {
  OptionTable t("x", "y");
  add_problem_options(t);
  EXPECT_EQ(t.parse({"--b=0"}).error, "--b: expected an integer ≥ 1, got \"0\"");
  EXPECT_EQ(t.parse({"--varlen-q=3:-2"}).error,
            "--varlen-q: expected a ':'-separated list of integers ≥ 0, got \"3:-2\"");
  EXPECT_EQ(t.parse({"--mask=full"}).error, "--mask: expected one of \"\"|no|none|residual|causal, got \"full\"");
  EXPECT_FALSE(t.has("d_vo"));
  EXPECT_TRUE(t.has("causal-type"));
}

TEST(CliDefaults, FlopFormulas) {
  FwdProblemArgs p = derive_ok({});
  const double full = 4.0 * 64 * 256 * 256 * 128 * 16;
  EXPECT_DOUBLE_EQ(fwd_flops(p), full);
  p.mask = fmha::MaskType::kCausal;
  EXPECT_DOUBLE_EQ(fwd_flops(p), full / 2);
  EXPECT_DOUBLE_EQ(mla_fwd_flops(p, 128, 64), 2.0 * 64 * 256 * 256 * 16 * 0.5 * (192 + 128));

  FwdProblemInput in;
  in.varlen = true;
  in.varlen_q = std::vector<int>{3, 2};
  in.varlen_k = std::vector<int>{2, 5};
  in.h = 4;
  in.d = 64;
  p = derive_ok(in);
  EXPECT_DOUBLE_EQ(fwd_flops(p), 4.0 * (3 * 2 + 2 * 5) * 64 * 4);
  // Backward: max lengths times B for varlen.
  EXPECT_DOUBLE_EQ(bwd_flops(p), 2.0 * 3 * 5 * (3 * 64 + 2 * 64) * 4 * 2);

  EXPECT_DOUBLE_EQ(tflops_per_s(1e12, 1000.0), 1.0);
  EXPECT_DOUBLE_EQ(tbytes_per_s(2e12, 500.0), 4.0);
  EXPECT_TRUE(std::isinf(tflops_per_s(1e12, 0.0)));  // --iterations=0 prints inf, as the seed does
}

TEST(CliProblem, LibraryMessagesUseOptionNames) {
  EXPECT_EQ(with_option_names("heads_q % heads_kv: expected 0, got 3 (heads_q=9, heads_kv=6)"),
            "--h % --h_k: expected 0, got 3 (--h=9, --h_k=6)");
  EXPECT_EQ(with_option_names("head_dim: expected ≤ 128, got 136"), "--d: expected ≤ 128, got 136");
  EXPECT_EQ(with_option_names("batch × heads_q × ceil(seqlen_q / 192): expected ≤ 2^30 work tiles, got 7"),
            "--b × --h × ceil(--q / 192): expected ≤ 2^30 work tiles, got 7");
  // Whole words only: other identifiers, and names that merely contain a field name, stay.
  EXPECT_EQ(with_option_names("q_row_stride: expected a positive multiple of 8, got 4 (total_q=5, head_dims)"),
            "q_row_stride: expected a positive multiple of 8, got 4 (total_q=5, head_dims)");
  EXPECT_EQ(with_option_names("seqlen_k: expected ≥ 0; softmax_scale; sm_count"), "--k: expected ≥ 0; --scale; --sm-count");
}

}  // namespace
}  // namespace fmha::cli
