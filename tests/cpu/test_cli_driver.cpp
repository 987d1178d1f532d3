// CLI core: the shared main loop run_tool (tools/cli/common/driver.h), with a fake tool and no GPU needed.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/device.h"
#include "common/driver.h"
#include "common/problem.h"

namespace fmha::cli {
namespace {

// A fake forward tool: derives the problem and reports one unverified result per run, or fails on --b=13.
struct FakeTool {
  OptionTable table{"fmha_fake", "A fake tool for the driver tests."};
  std::vector<std::vector<std::string>> seen;  // args of every run, in order
  ToolSpec spec;

  explicit FakeTool(bool gpu_needed) {
    add_problem_options(table);
    add_common_options(table);
    spec.name = "fmha_fake";
    spec.options = &table;
    spec.needs_gpu = [gpu_needed](const ParsedOptions& o) { return gpu_needed && !o.flag("list-kernels"); };
    spec.run = [this](const ParsedOptions& o, Reporter& rep) {
      seen.push_back(o.args());
      const FwdProblemResult p = derive_fwd_problem(problem_input_from(o), ProblemDefaults::forward());
      if (!p.ok()) throw std::runtime_error(p.error);
      if (p.args.b == 13) throw std::runtime_error("unlucky batch");
      RunRecord r;
      r.kernel = std::string("fake ") + p.args.mask_word();
      r.tag = ResultTag::kUnverified;
      r.tflops = 1.0;
      r.problem = {{"b", p.args.b}, {"d", p.args.d}};
      rep.report(r);
    };
  }
};

struct Outcome {
  int rc;
  std::string out, err;
};

Outcome run(FakeTool& tool, const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int rc = run_tool("./fmha_fake", args, tool.spec, out, err);
  return {rc, out.str(), err.str()};
}

TEST(CliDriver, HelpPrintsTableAndExitsZero) {
  FakeTool tool(true);
  const Outcome r = run(tool, {"--help"});
  EXPECT_EQ(r.rc, kExitOk);
  EXPECT_NE(r.out.find("fmha_fake: A fake tool"), std::string::npos);
  EXPECT_NE(r.out.find("--varlen-q=<int:int:...>"), std::string::npos);
  EXPECT_TRUE(tool.seen.empty());
}

TEST(CliDriver, BadArgumentIsUsageErrorBeforeAnyRun) {
  FakeTool tool(false);
  const Outcome r = run(tool, {"--d=64,x"});  // the second expanded run is bad: nothing may run
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_EQ(r.err, "Error: --d: expected an integer ≥ 1, got \"x\"\n");
  EXPECT_TRUE(tool.seen.empty());
  EXPECT_EQ(run(tool, {"--bogus"}).rc, kExitUsage);
}

TEST(CliDriver, CommaListsRunInOrderWithReproLines) {
  FakeTool tool(false);
  const Outcome r = run(tool, {"--mask=causal,residual", "--d=64,128"});
  EXPECT_EQ(r.rc, kExitOk) << r.err;
  ASSERT_EQ(tool.seen.size(), 4u);
  EXPECT_EQ(tool.seen[1], (std::vector<std::string>{"--mask=causal", "--d=128"}));
  EXPECT_EQ(tool.seen[2], (std::vector<std::string>{"--mask=residual", "--d=64"}));
  EXPECT_NE(r.out.find("       repro: ./fmha_fake --mask=causal --d=64\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("       repro: ./fmha_fake --mask=residual --d=128\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" [--] fake Causal"), std::string::npos) << r.out;
}

TEST(CliDriver, FailedRunDoesNotStopTheOthersButFailsTheProcess) {
  FakeTool tool(false);
  const Outcome r = run(tool, {"--b=12,13,14"});
  EXPECT_EQ(r.rc, kExitFailure);
  EXPECT_EQ(tool.seen.size(), 3u);
  EXPECT_NE(r.err.find("Error: unlucky batch"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("repro: ./fmha_fake --b=13"), std::string::npos);
}

TEST(CliDriver, DerivationErrorFailsTheRun) {
  FakeTool tool(false);
  const Outcome r = run(tool, {"--varlen", "--q=4", "--varlen-q=4"});
  EXPECT_EQ(r.rc, kExitFailure);
  EXPECT_NE(r.err.find("Error: Can't provide --q and --varlen-q"), std::string::npos) << r.err;
}

TEST(CliDriver, NoGpuExits77UnlessListingKernels) {
  if (gpu_available(nullptr)) GTEST_SKIP() << "a Hopper GPU is present";
  FakeTool tool(true);
  Outcome r = run(tool, {"--b=1"});
  EXPECT_EQ(r.rc, kExitSkipped);
  EXPECT_EQ(r.err.rfind("no CUDA GPU: ", 0), 0u) << r.err;
  EXPECT_TRUE(tool.seen.empty());
  r = run(tool, {"--list-kernels"});
  EXPECT_EQ(r.rc, kExitOk) << r.err;
  EXPECT_EQ(tool.seen.size(), 1u);
}

TEST(CliDriver, JsonWrittenOncePerProcess) {
  FakeTool tool(false);
  const std::string path = ::testing::TempDir() + "cli_driver_test.json";
  const Outcome r = run(tool, {"--d=64,128", "--json=" + path});
  ASSERT_EQ(r.rc, kExitOk) << r.err;
  std::ifstream f(path);
  const nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["tool"], "fmha_fake");
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][1]["problem"]["d"], 128);
  EXPECT_EQ(j["runs"][0]["command"], "./fmha_fake --d=64 --json=" + path);
  std::remove(path.c_str());
  EXPECT_EQ(run(tool, {"--json=a.json,b.json"}).rc, kExitUsage);
}

TEST(CliDriver, WarningsPrintOnceBeforeTheGpuCheck) {
  FakeTool tool(false);
  tool.spec.warnings = [](const ParsedOptions& o) {
    return std::vector<std::string>{"note for every run", "d is " + std::to_string(*o.find_int("d"))};
  };
  Outcome r = run(tool, {"--d=64,128"});
  ASSERT_EQ(r.rc, kExitOk) << r.err;
  const std::string once = "Warning: note for every run\n";
  ASSERT_NE(r.err.find(once), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(once, r.err.find(once) + 1), std::string::npos) << "printed twice:\n" << r.err;
  EXPECT_NE(r.err.find("Warning: d is 64\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Warning: d is 128\n"), std::string::npos) << r.err;
  if (gpu_available(nullptr)) return;
  FakeTool gpu_tool(true);  // without a GPU the warnings still come, ahead of the no-GPU message
  gpu_tool.spec.warnings = tool.spec.warnings;
  r = run(gpu_tool, {"--d=64"});
  EXPECT_EQ(r.rc, kExitSkipped);
  EXPECT_EQ(r.err.rfind("Warning: note for every run\n", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("no CUDA GPU: "), std::string::npos) << r.err;
}

TEST(CliDriver, TooManyRunsRefused) {
  FakeTool tool(false);
  tool.spec.max_runs = 3;
  const Outcome r = run(tool, {"--d=1,2", "--h=1,2"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_NE(r.err.find("4 runs"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace fmha::cli
