// fmha CLI core: the shared main loop of every tool.
//
// run_tool() does, in order:
//   1. expand the command line's comma lists into runs (expand.h), refusing more than ToolSpec::max_runs;
//   2. parse every run with the tool's OptionTable; the first bad argument prints "Error: <message>" and the
//      process exits kExitUsage (2) before anything runs;
//   3. --help (in any run): print the table's help to `out`, exit 0;
//   3b. ToolSpec::check, when set, validates each run's problem (no GPU needed); a failure exits kExitUsage;
//       ToolSpec::warnings, when set, prints each run's warnings ("Warning: <message>", each distinct one once);
//   4. if any run needs the GPU (ToolSpec::needs_gpu; by default every run except --list-kernels ones), apply the
//      no-GPU policy: "no CUDA GPU: <reason>" and exit 77;
//   5. for each run: Reporter::begin_run (repro args, --verbose), then ToolSpec::run; an exception escaping it is
//      reported as a failed run (Reporter::report_error) and the next run still goes;
//   6. write --json if given, and return the exit code: 0 when every run passed (NSUP counts as passed),
//      1 when any failed or the JSON could not be written.
// A tool's main is then: build its OptionTable, fill a ToolSpec, `return run_tool(argc, argv, spec);`.
#pragma once

#include <cstddef>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "common/options.h"
#include "common/report.h"

namespace fmha::cli {

/// Describes a tool for run_tool.
struct ToolSpec {
  std::string name;                   ///< "fmha_fwd": recorded in JSON
  const OptionTable* options = nullptr;
  /// Does one expanded run: print its header, run its kernel variants and report each with reporter.report().
  /// Throw (CudaError, std::runtime_error, ...) to fail the run with that message.
  std::function<void(const ParsedOptions& options, Reporter& reporter)> run;
  /// Optional problem check run for every run before the GPU check (no GPU needed): returns "" when the run's
  /// problem is valid, else the message; any message ends the process with kExitUsage before anything runs.
  std::function<std::string(const ParsedOptions& options)> check;
  /// Optional notes on a run's command line (e.g. "--varlen-q is ignored without --varlen"), printed to stderr as
  /// "Warning: <message>" before the GPU check, so that they show on any machine; a message repeated by several
  /// runs of a comma list prints once.
  std::function<std::vector<std::string>(const ParsedOptions& options)> warnings;
  /// Whether a run needs the GPU; default: true unless it has --list-kernels.
  std::function<bool(const ParsedOptions& options)> needs_gpu;
  /// Whether the --verbose line prints the time in microseconds ("t=<x> us", MLA decode) instead of ms.
  bool verbose_time_in_us = false;
  /// Refuse command lines that expand into more runs than this (a usage error).
  size_t max_runs = 10000;
};

/// Runs a tool over argv as described in the file comment. `out`/`err` default to std::cout/std::cerr.
/// Returns the process exit code (ExitCode values).
int run_tool(int argc, const char* const* argv, const ToolSpec& tool);
/// The same, with explicit argument vector (program name excluded) and streams; `program` is argv[0] for repro
/// lines. This is what the unit tests call.
int run_tool(const std::string& program, const std::vector<std::string>& args, const ToolSpec& tool,
             std::ostream& out, std::ostream& err);

}  // namespace fmha::cli
