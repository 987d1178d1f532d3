// fmha CLI core: result lines, repro lines, failure messages, the --json writer and the process exit code.
//
// Console format (docs/seed.md §2.0):
//   <tag><name padded to 32> : <value> <unit>[ <value> <unit>]
//          t=<time>ms, smem=<bytes>b                  (only with --verbose)
//          repro: <program> <the run's arguments>       (always: reruns exactly this one case)
// Tags: " [OK]  " verified and passed, " [--] " ran, not verified, "[FAIL] " failed, "[NSUP] " not supported.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fmha/status.h"

namespace fmha::cli {

/// Process exit codes of every tool.
enum ExitCode : int {
  kExitOk = 0,        ///< every run passed (or was not supported)
  kExitFailure = 1,   ///< at least one run failed (verification, launch or CUDA error)
  kExitUsage = 2,     ///< bad command line: unknown option, malformed value, inconsistent options
  kExitSkipped = 77,  ///< no usable GPU; the test harness counts this as skipped
};

/// Outcome of one kernel run.
enum class ResultTag {
  kOk,            ///< " [OK]  ": ran, verified, passed
  kUnverified,    ///< " [--] ": ran, not verified (no --verify)
  kFail,          ///< "[FAIL] ": verification failed, or the launch / a CUDA call failed
  kNotSupported,  ///< "[NSUP] ": the kernel cannot run this problem (can_implement false); not a failure
};

/// The tag text exactly as printed, including its padding (7 characters for OK/FAIL/NSUP, 6 for "--").
const char* tag_text(ResultTag tag);
/// The tag's JSON status word: "ok", "unverified", "fail", "not_supported".
const char* tag_status(ResultTag tag);

/// One value of a result line, e.g. {412.5, "TFLOPS/s"}.
struct Measure {
  double value = 0.0;
  std::string unit;
};

/// `<tag><name padded to 32> : <v1> <u1>[ <v2> <u2>...]`. Values use the default stream format (6 significant
/// digits; inf/nan print as such). No trailing newline.
std::string format_result_line(ResultTag tag, const std::string& name, const std::vector<Measure>& values);

/// The --verbose line: `       t=<time_ms>ms, smem=<bytes>b`, or with `microseconds` (MLA decode)
/// `       t=<time in us> us, smem=<bytes>b`. A negative smem_bytes omits the smem part.
std::string format_verbose_line(double time_ms, int64_t smem_bytes, bool microseconds = false);

/// Quotes one argument for a POSIX shell when it holds anything beyond [A-Za-z0-9_@%+=:,./-].
std::string shell_quote(const std::string& arg);
/// `program` followed by the shell-quoted args, separated by spaces.
std::string format_command(const std::string& program, const std::vector<std::string>& args);
/// `       repro: <format_command(program, args)>`.
std::string format_repro_line(const std::string& program, const std::vector<std::string>& args);

/// One tensor's comparison against the reference (docs/seed.md §6 metrics).
struct TensorCheck {
  std::string tensor;      ///< "O", "LSE", "dQ", ...
  double max_diff = 0.0;   ///< max |a − ref| over elements that differ
  double mean_diff = 0.0;  ///< Σ|a − ref| / N
  double max_tol = 0.0;    ///< threshold the max was held to (0 = not recorded)
  double mean_tol = 0.0;   ///< threshold the mean was held to (0 = not recorded)
  bool passed = true;
};

/// The seed's failure message: `failed <tensor>: max diff <m> mean <n>`.
std::string format_check_failure(const TensorCheck& check);

/// Everything known about one kernel run; Reporter::report prints it and collects it for --json.
struct RunRecord {
  std::string kernel;              ///< display name (the result line's name)
  ResultTag tag = ResultTag::kUnverified;
  bool verified = false;           ///< the reference comparison ran
  std::optional<double> tflops;    ///< TFLOP/s; printed as "<x> TFLOPS/s"
  std::optional<double> tbps;      ///< TB/s; printed as "<x> TB/s" (after TFLOPS when both are set)
  double time_ms_median = 0.0;     ///< per-iteration time, milliseconds
  double time_ms_mean = 0.0;
  double time_ms_min = 0.0;
  int iterations = 0;              ///< timed iterations behind the times
  int64_t smem_bytes = -1;         ///< dynamic shared memory per CTA; −1 = unknown
  std::vector<TensorCheck> checks; ///< empty when not verified
  nlohmann::json problem = nlohmann::json::object();  ///< shape: b, h, h_k, q, k, d, mask, dtype, ...
  nlohmann::json extra = nlohmann::json::object();    ///< anything else (e.g. per-kernel time breakdown)
  std::string message;             ///< why a run failed or is not supported ("" otherwise)
};

/// Fills record's time fields (median, mean, min, iterations) from the timed samples in milliseconds; returns the
/// mean, or 0 when there are none (a rate over it then prints as inf, as the seed's does).
double set_times(RunRecord& record, const std::vector<double>& times_ms);

/// A run whose library call failed: tags the record NSUP (kNotSupported) or FAIL with the status's message.
/// Returns false (and leaves the record alone) when `status` is ok.
bool set_failed_status(RunRecord& record, const fmha::Status& status);

/// Counts outcomes into a process exit code: kExitFailure once any run failed, else kExitOk.
class ExitTracker {
 public:
  /// Records one result (kFail counts as a failure, the other tags do not).
  void add(ResultTag tag);
  /// Records a failure that produced no result line (an exception, a failed setup).
  void add_failure() {
    ++failed_;
    ++total_;
  }
  /// Failures recorded so far.
  int failed() const { return failed_; }
  /// Results and failures recorded so far.
  int total() const { return total_; }
  /// kExitOk or kExitFailure.
  int code() const { return failed_ ? kExitFailure : kExitOk; }

 private:
  int failed_ = 0;
  int total_ = 0;
};

/// Prints results, collects them for --json and tracks the exit code for one process (all expanded runs).
/// Results go to `out`, failure details to `err`. Not thread-safe.
class Reporter {
 public:
  /// `tool`: the tool's name ("fmha_fwd", recorded in JSON); `program`: argv[0], used in repro lines.
  Reporter(std::string tool, std::string program, std::ostream& out, std::ostream& err);

  /// Starts one expanded run: its arguments (for repro lines and JSON) and whether --verbose is on.
  void begin_run(const std::vector<std::string>& args, bool verbose, bool time_in_us = false);
  /// Prints the result (failure details to err first, then result, verbose and repro lines) and records it.
  void report(const RunRecord& record);
  /// Records a failure without a kernel result (e.g. a CUDA error while preparing): prints "Error: <message>" and
  /// a repro line, adds a "fail" entry with an empty kernel name to the JSON.
  void report_error(const std::string& message);

  /// Adds a top-level field to the JSON document (e.g. "device": {...}).
  void set_context(const std::string& key, nlohmann::json value);
  /// The whole JSON document: {"tool", "program", "context", "runs": [...], "failed", "total"}.
  nlohmann::json json() const;
  /// Writes json() to `path` (pretty-printed). Returns "" or a message naming the file and the reason.
  std::string write_json(const std::string& path) const;

  /// The exit-code accumulator (a tool may add failures that produced no result line).
  const ExitTracker& exits() const { return exits_; }
  ExitTracker& exits() { return exits_; }
  /// kExitOk when no run failed, else kExitFailure.
  int exit_code() const { return exits_.code(); }

 private:
  nlohmann::json record_json(const RunRecord& r) const;

  std::string tool_;
  std::string program_;
  std::ostream& out_;
  std::ostream& err_;
  std::vector<std::string> args_;
  bool verbose_ = false;
  bool time_in_us_ = false;
  nlohmann::json runs_ = nlohmann::json::array();
  nlohmann::json context_ = nlohmann::json::object();
  ExitTracker exits_;
};

}  // namespace fmha::cli
