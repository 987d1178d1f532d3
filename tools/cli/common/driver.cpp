// fmha CLI core: shared main loop (see driver.h).
#include "common/driver.h"

#include <algorithm>
#include <exception>
#include <iostream>
#include <optional>

#include "common/device.h"
#include "common/expand.h"

namespace fmha::cli {

int run_tool(int argc, const char* const* argv, const ToolSpec& tool) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  const std::string program = argc > 0 && argv[0] ? argv[0] : tool.name;
  return run_tool(program, args, tool, std::cout, std::cerr);
}

int run_tool(const std::string& program, const std::vector<std::string>& args, const ToolSpec& tool,
             std::ostream& out, std::ostream& err) {
  if (!tool.options || !tool.run) {
    err << "Error: " << tool.name << ": ToolSpec needs an option table and a run function\n";
    return kExitFailure;
  }
  const OptionTable& table = *tool.options;

  // 1-2: expand and parse everything before running anything.
  const size_t n_runs = count_runs(args);
  if (n_runs > tool.max_runs) {
    err << "Error: the comma lists expand into " << n_runs << " runs; at most " << tool.max_runs
        << " are allowed\n";
    return kExitUsage;
  }
  const auto runs = expand_runs(args);
  std::vector<ParsedOptions> parsed;
  parsed.reserve(runs.size());
  for (const auto& run_args : runs) {
    ParseResult r = table.parse(run_args);
    if (!r.ok()) {
      err << "Error: " << r.error << "\n";
      return kExitUsage;
    }
    parsed.push_back(std::move(r.options));
  }

  // 3: --help.
  for (const auto& p : parsed) {
    if (p.help_requested()) {
      out << table.help_text();
      return kExitOk;
    }
  }

  // One --json file per process: every run must name the same one (a comma list in the path is an error).
  std::optional<std::string> json_path;
  if (table.has("json")) {
    for (const auto& p : parsed) {
      const auto path = p.find_string("json");
      if (path && json_path && *path != *json_path) {
        err << "Error: --json: expected one file for all runs, got \"" << *json_path << "\" and \"" << *path
            << "\"\n";
        return kExitUsage;
      }
      if (path) json_path = path;
    }
  }

  // 3b: problem checks that need no GPU (shape derivation, the library's own validation): a bad problem is a
  // usage error, reported before the GPU check so that it shows on any machine.
  if (tool.check) {
    for (const auto& p : parsed) {
      const std::string why = tool.check(p);
      if (!why.empty()) {
        err << "Error: " << why << "\n";
        return kExitUsage;
      }
    }
  }

  if (tool.warnings) {
    std::vector<std::string> printed;
    for (const auto& p : parsed) {
      for (const std::string& w : tool.warnings(p)) {
        if (std::find(printed.begin(), printed.end(), w) != printed.end()) continue;
        err << "Warning: " << w << "\n";
        printed.push_back(w);
      }
    }
  }

  // 4: no-GPU policy, checked once.
  bool any_gpu = false;
  for (const auto& p : parsed) {
    const bool needs = tool.needs_gpu ? tool.needs_gpu(p) : !(p.declared("list-kernels") && p.flag("list-kernels"));
    any_gpu = any_gpu || needs;
  }
  if (any_gpu) {
    if (const int rc = check_gpu_or_skip(err)) return rc;
  }

  // 5: the runs.
  Reporter reporter(tool.name, program, out, err);
  for (const auto& p : parsed) {
    const bool verbose = p.declared("verbose") && p.flag("verbose");
    reporter.begin_run(p.args(), verbose, tool.verbose_time_in_us);
    try {
      tool.run(p, reporter);
    } catch (const std::exception& e) {
      reporter.report_error(e.what());
    } catch (...) {
      reporter.report_error("unknown exception");
    }
  }

  // 6: JSON and exit code.
  int rc = reporter.exit_code();
  if (json_path) {
    const std::string why = reporter.write_json(*json_path);
    if (!why.empty()) {
      err << "Error: " << why << "\n";
      rc = kExitFailure;
    }
  }
  return rc;
}

}  // namespace fmha::cli
