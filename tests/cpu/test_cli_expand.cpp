// CLI core: comma expansion into runs (tools/cli/common/expand.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/expand.h"

namespace fmha::cli {
namespace {

using Runs = std::vector<std::vector<std::string>>;

TEST(CliExpand, NoCommasGivesOneRun) {
  EXPECT_EQ(expand_runs({"--b=1", "--verify"}), (Runs{{"--b=1", "--verify"}}));
  EXPECT_EQ(count_runs({"--b=1", "--verify"}), 1u);
}

TEST(CliExpand, EmptyCommandLineIsOneEmptyRun) {
  EXPECT_EQ(expand_runs({}), (Runs{{}}));
  EXPECT_EQ(count_runs({}), 1u);
}

TEST(CliExpand, OneListKeepsPrefixAndPosition) {
  EXPECT_EQ(expand_runs({"--verify", "--mask=causal,residual", "--d=128"}),
            (Runs{{"--verify", "--mask=causal", "--d=128"}, {"--verify", "--mask=residual", "--d=128"}}));
}

TEST(CliExpand, CrossProductFirstListSlowest) {
  const Runs runs = expand_runs({"--mask=causal,residual", "--d=64,128"});
  EXPECT_EQ(runs, (Runs{{"--mask=causal", "--d=64"},
                        {"--mask=causal", "--d=128"},
                        {"--mask=residual", "--d=64"},
                        {"--mask=residual", "--d=128"}}));
  EXPECT_EQ(count_runs({"--mask=causal,residual", "--d=64,128"}), 4u);
}

TEST(CliExpand, ThreeListsWithUnevenCounts) {
  const Runs runs = expand_runs({"--a=1,2", "--x", "--b=p,q,r", "--c=7,8"});
  ASSERT_EQ(runs.size(), 12u);
  EXPECT_EQ(count_runs({"--a=1,2", "--x", "--b=p,q,r", "--c=7,8"}), 12u);
  EXPECT_EQ(runs.front(), (std::vector<std::string>{"--a=1", "--x", "--b=p", "--c=7"}));
  EXPECT_EQ(runs[1], (std::vector<std::string>{"--a=1", "--x", "--b=p", "--c=8"}));
  EXPECT_EQ(runs[2], (std::vector<std::string>{"--a=1", "--x", "--b=q", "--c=7"}));
  EXPECT_EQ(runs[6], (std::vector<std::string>{"--a=2", "--x", "--b=p", "--c=7"}));
  EXPECT_EQ(runs.back(), (std::vector<std::string>{"--a=2", "--x", "--b=r", "--c=8"}));
  // Every run is distinct.
  for (size_t i = 0; i < runs.size(); ++i) {
    for (size_t j = i + 1; j < runs.size(); ++j) EXPECT_NE(runs[i], runs[j]) << i << " " << j;
  }
}

TEST(CliExpand, ColonListsAreNotSplit) {
  EXPECT_EQ(expand_runs({"--varlen-q=128:0:256,17", "--varlen-k=1:2"}),
            (Runs{{"--varlen-q=128:0:256", "--varlen-k=1:2"}, {"--varlen-q=17", "--varlen-k=1:2"}}));
}

TEST(CliExpand, EmptyPiecesAreKept) {
  EXPECT_EQ(expand_runs({"--mask=causal,"}), (Runs{{"--mask=causal"}, {"--mask="}}));
  EXPECT_EQ(expand_runs({"--mask=,no"}), (Runs{{"--mask="}, {"--mask=no"}}));
}

TEST(CliExpand, OnlyFirstEqualsIsThePrefix) {
  EXPECT_EQ(expand_runs({"--kernel-filter=a=1,b=2"}),
            (Runs{{"--kernel-filter=a=1"}, {"--kernel-filter=b=2"}}));
}

TEST(CliExpand, ArgumentWithoutEqualsSplitsWhole) {
  EXPECT_EQ(expand_runs({"--verify,--verbose"}), (Runs{{"--verify"}, {"--verbose"}}));
}

TEST(CliExpand, SeedVarlenTestRunsTwice) {
  // TEST_VARLEN_00 of the seed: `--mask=causal,residual` gives two complete runs.
  const std::vector<std::string> args = {"--verify",   "--varlen",          "--mask=causal,residual", "--d=128",
                                         "--h=8",      "--h_k=4",           "--varlen-q=128",         "--varlen-k=128"};
  const Runs runs = expand_runs(args);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0][2], "--mask=causal");
  EXPECT_EQ(runs[1][2], "--mask=residual");
  for (const auto& r : runs) EXPECT_EQ(r.size(), args.size());
}

TEST(CliExpand, Split) {
  EXPECT_EQ(split("a,,b", ','), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(split("", ','), (std::vector<std::string>{""}));
  EXPECT_EQ(split("abc", ','), (std::vector<std::string>{"abc"}));
}

}  // namespace
}  // namespace fmha::cli
