// CLI core: result lines, repro lines, failure messages, JSON and exit codes (tools/cli/common/report.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/report.h"

namespace fmha::cli {
namespace {

TEST(CliReport, TagsAreTheSeedsTexts) {
  EXPECT_STREQ(tag_text(ResultTag::kOk), " [OK]  ");
  EXPECT_STREQ(tag_text(ResultTag::kUnverified), " [--] ");
  EXPECT_STREQ(tag_text(ResultTag::kFail), "[FAIL] ");
  EXPECT_STREQ(tag_text(ResultTag::kNotSupported), "[NSUP] ");
  EXPECT_STREQ(tag_status(ResultTag::kNotSupported), "not_supported");
}

TEST(CliReport, ResultLinePadsNameTo32) {
  const std::string line =
      format_result_line(ResultTag::kOk, "tma ws 256x128 acc fp32 persistent", {{412.5, "TFLOPS/s"}});
  EXPECT_EQ(line, " [OK]  tma ws 256x128 acc fp32 persistent : 412.5 TFLOPS/s");
  const std::string shortname = format_result_line(ResultTag::kUnverified, "tma", {{1.25, "TB/s"}});
  EXPECT_EQ(shortname, " [--] tma" + std::string(29, ' ') + " : 1.25 TB/s");
  EXPECT_EQ(shortname.find(" : "), 6u + 32u);
}

TEST(CliReport, ResultLineWithTwoValuesAndNonFinite) {
  EXPECT_EQ(format_result_line(ResultTag::kFail, "128x128 fp16 persistent", {{100, "TFLOPS/s"}, {2.5, "TB/s"}}),
            "[FAIL] 128x128 fp16 persistent          : 100 TFLOPS/s 2.5 TB/s");
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(format_result_line(ResultTag::kOk, "x", {{inf, "TFLOPS/s"}}),
            " [OK]  x" + std::string(31, ' ') + " : inf TFLOPS/s");
}

TEST(CliReport, VerboseLine) {
  EXPECT_EQ(format_verbose_line(0.125, 229376), "       t=0.125ms, smem=229376b");
  EXPECT_EQ(format_verbose_line(0.0125, 1024, true), "       t=12.5 us, smem=1024b");
  EXPECT_EQ(format_verbose_line(2.0, -1), "       t=2ms");
}

TEST(CliReport, ReproLineQuotesOnlyWhenNeeded) {
  EXPECT_EQ(format_repro_line("./fmha_fwd", {"--b=1", "--varlen-q=1:2", "--mask=causal"}),
            "       repro: ./fmha_fwd --b=1 --varlen-q=1:2 --mask=causal");
  EXPECT_EQ(shell_quote("--kernel-filter=tma.*(a|b)"), "'--kernel-filter=tma.*(a|b)'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(format_command("fmha_bwd", {}), "fmha_bwd");
}

TEST(CliReport, CheckFailureMessage) {
  TensorCheck c;
  c.tensor = "O";
  c.max_diff = 0.5;
  c.mean_diff = 0.001;
  EXPECT_EQ(format_check_failure(c), "failed O: max diff 0.5 mean 0.001");
}

RunRecord ok_record() {
  RunRecord r;
  r.kernel = "tma ws 256x128 acc fp32 individual";
  r.tag = ResultTag::kOk;
  r.verified = true;
  r.tflops = 500.0;
  r.time_ms_median = 0.25;
  r.time_ms_mean = 0.26;
  r.time_ms_min = 0.24;
  r.iterations = 3;
  r.smem_bytes = 1000;
  r.problem = {{"b", 1}, {"h", 4}, {"q", 512}, {"k", 512}, {"d", 128}, {"mask", "none"}};
  r.checks.push_back({"O", 1e-4, 1e-6, 1e-2, 1e-3, true});
  r.checks.push_back({"LSE", 0.0, 0.0, 1e-2, 1e-3, true});
  return r;
}

TEST(CliReport, ReporterPrintsResultVerboseAndRepro) {
  std::ostringstream out, err;
  Reporter rep("fmha_fwd", "./fmha_fwd", out, err);
  rep.begin_run({"--b=1", "--verbose"}, true);
  rep.report(ok_record());
  EXPECT_EQ(out.str(),
            " [OK]  tma ws 256x128 acc fp32 individual : 500 TFLOPS/s\n"
            "       t=0.25ms, smem=1000b\n"
            "       repro: ./fmha_fwd --b=1 --verbose\n");
  EXPECT_EQ(err.str(), "");
  EXPECT_EQ(rep.exit_code(), kExitOk);
}

TEST(CliReport, ReporterWithoutVerboseHasNoTimeLine) {
  std::ostringstream out, err;
  Reporter rep("fmha_fwd", "fmha_fwd", out, err);
  rep.begin_run({"--b=1"}, false);
  rep.report(ok_record());
  EXPECT_EQ(out.str().find("t="), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("repro: fmha_fwd --b=1\n"), std::string::npos);
}

TEST(CliReport, FailedCheckPrintsSeedMessagesAndFailsExit) {
  std::ostringstream out, err;
  Reporter rep("fmha_fwd", "fmha_fwd", out, err);
  rep.begin_run({"--verify"}, false);
  RunRecord r = ok_record();
  r.tag = ResultTag::kFail;
  r.checks[0] = {"O", 0.5, 0.01, 1e-2, 1e-3, false};
  rep.report(r);
  EXPECT_EQ(err.str(), "failed O: max diff 0.5 mean 0.01\nReference check failed\n");
  EXPECT_EQ(out.str().rfind("[FAIL] ", 0), 0u) << out.str();
  EXPECT_EQ(rep.exit_code(), kExitFailure);
  EXPECT_EQ(rep.exits().failed(), 1);
}

TEST(CliReport, NotSupportedIsNotAFailure) {
  std::ostringstream out, err;
  Reporter rep("fmha_gen", "fmha_gen", out, err);
  rep.begin_run({"--d=64"}, false);
  RunRecord r;
  r.kernel = "UMMA_I 128x64x128";
  r.tag = ResultTag::kNotSupported;
  r.message = "d: expected 128, got 64";
  rep.report(r);
  EXPECT_EQ(err.str(), "d: expected 128, got 64\n");
  EXPECT_EQ(out.str().rfind("[NSUP] UMMA_I 128x64x128", 0), 0u);
  EXPECT_EQ(rep.exit_code(), kExitOk);
}

TEST(CliReport, ReportErrorFailsTheProcess) {
  std::ostringstream out, err;
  Reporter rep("fmha_fwd", "fmha_fwd", out, err);
  rep.begin_run({"--b=2"}, false);
  rep.report_error("cudaMalloc(8 bytes): out of memory");
  EXPECT_EQ(err.str(), "Error: cudaMalloc(8 bytes): out of memory\n");
  EXPECT_EQ(out.str(), "       repro: fmha_fwd --b=2\n");
  EXPECT_EQ(rep.exit_code(), kExitFailure);
  const nlohmann::json j = rep.json();
  EXPECT_EQ(j["runs"][0]["status"], "fail");
  EXPECT_EQ(j["runs"][0]["message"], "cudaMalloc(8 bytes): out of memory");
}

TEST(CliReport, ExitTrackerAccumulates) {
  ExitTracker t;
  EXPECT_EQ(t.code(), kExitOk);
  t.add(ResultTag::kOk);
  t.add(ResultTag::kUnverified);
  t.add(ResultTag::kNotSupported);
  EXPECT_EQ(t.code(), kExitOk);
  t.add(ResultTag::kFail);
  t.add(ResultTag::kOk);
  EXPECT_EQ(t.code(), kExitFailure);
  EXPECT_EQ(t.failed(), 1);
  EXPECT_EQ(t.total(), 5);
  ExitTracker u;
  u.add_failure();
  EXPECT_EQ(u.code(), kExitFailure);
  EXPECT_EQ(kExitSkipped, 77);
}

TEST(CliReport, JsonHasOneObjectPerRunWithAllFields) {
  std::ostringstream out, err;
  Reporter rep("fmha_fwd", "./fmha_fwd", out, err);
  rep.set_context("device", {{"name", "test"}, {"sm_count", 132}});
  rep.begin_run({"--b=1", "--mask=causal"}, false);
  rep.report(ok_record());
  rep.begin_run({"--b=1", "--mask=residual"}, false);
  RunRecord r2 = ok_record();
  r2.tag = ResultTag::kUnverified;
  r2.verified = false;
  r2.checks.clear();
  r2.tflops.reset();
  r2.tbps = 3.0;
  r2.time_ms_median = std::numeric_limits<double>::quiet_NaN();
  r2.extra = {{"kernel_ms", {{"main", 0.2}, {"convert", 0.01}}}};
  rep.report(r2);

  const nlohmann::json j = rep.json();
  EXPECT_EQ(j["tool"], "fmha_fwd");
  EXPECT_EQ(j["context"]["device"]["sm_count"], 132);
  EXPECT_EQ(j["total"], 2);
  EXPECT_EQ(j["failed"], 0);
  ASSERT_EQ(j["runs"].size(), 2u);
  const auto& a = j["runs"][0];
  EXPECT_EQ(a["tool"], "fmha_fwd");
  EXPECT_EQ(a["args"], nlohmann::json({"--b=1", "--mask=causal"}));
  EXPECT_EQ(a["command"], "./fmha_fwd --b=1 --mask=causal");
  EXPECT_EQ(a["kernel"], "tma ws 256x128 acc fp32 individual");
  EXPECT_EQ(a["status"], "ok");
  EXPECT_EQ(a["passed"], true);
  EXPECT_EQ(a["verified"], true);
  EXPECT_EQ(a["problem"]["q"], 512);
  EXPECT_EQ(a["problem"]["mask"], "none");
  EXPECT_DOUBLE_EQ(a["time_ms_median"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(a["time_ms_mean"].get<double>(), 0.26);
  EXPECT_EQ(a["iterations"], 3);
  EXPECT_DOUBLE_EQ(a["tflops"].get<double>(), 500.0);
  EXPECT_TRUE(a["tbps"].is_null());
  EXPECT_EQ(a["smem_bytes"], 1000);
  ASSERT_EQ(a["checks"].size(), 2u);
  EXPECT_EQ(a["checks"][0]["tensor"], "O");
  EXPECT_DOUBLE_EQ(a["checks"][0]["max_diff"].get<double>(), 1e-4);
  EXPECT_DOUBLE_EQ(a["checks"][0]["mean_tol"].get<double>(), 1e-3);
  EXPECT_EQ(a["checks"][0]["passed"], true);
  EXPECT_FALSE(a.contains("extra"));
  const auto& b = j["runs"][1];
  EXPECT_EQ(b["status"], "unverified");
  EXPECT_EQ(b["verified"], false);
  EXPECT_TRUE(b["tflops"].is_null());
  EXPECT_DOUBLE_EQ(b["tbps"].get<double>(), 3.0);
  EXPECT_TRUE(b["time_ms_median"].is_null());  // NaN → null
  EXPECT_DOUBLE_EQ(b["extra"]["kernel_ms"]["main"].get<double>(), 0.2);
}

TEST(CliReport, WriteJsonRoundTripsAndReportsBadPath) {
  std::ostringstream out, err;
  Reporter rep("fmha_bwd", "fmha_bwd", out, err);
  rep.begin_run({"--b=1"}, false);
  rep.report(ok_record());
  const std::string path = ::testing::TempDir() + "cli_report_test.json";
  ASSERT_EQ(rep.write_json(path), "");
  std::ifstream f(path);
  const nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j, rep.json());
  std::remove(path.c_str());

  const std::string why = rep.write_json("/nonexistent-dir/x/out.json");
  EXPECT_NE(why.find("--json"), std::string::npos) << why;
  EXPECT_NE(why.find("/nonexistent-dir/x/out.json"), std::string::npos) << why;
}

}  // namespace
}  // namespace fmha::cli
