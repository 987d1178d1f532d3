// fmha CLI core: result output, repro lines, JSON and exit codes (see report.h).
#include "common/report.h"

#include "common/device.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>

namespace fmha::cli {

const char* tag_text(ResultTag tag) {
  switch (tag) {
    case ResultTag::kOk: return " [OK]  ";
    case ResultTag::kUnverified: return " [--] ";
    case ResultTag::kFail: return "[FAIL] ";
    case ResultTag::kNotSupported: return "[NSUP] ";
  }
  return "[FAIL] ";
}

const char* tag_status(ResultTag tag) {
  switch (tag) {
    case ResultTag::kOk: return "ok";
    case ResultTag::kUnverified: return "unverified";
    case ResultTag::kFail: return "fail";
    case ResultTag::kNotSupported: return "not_supported";
  }
  return "fail";
}

std::string format_result_line(ResultTag tag, const std::string& name, const std::vector<Measure>& values) {
  std::ostringstream os;
  os << tag_text(tag) << std::left << std::setw(32) << name << " :";
  for (const auto& m : values) os << ' ' << m.value << ' ' << m.unit;
  return os.str();
}

std::string format_verbose_line(double time_ms, int64_t smem_bytes, bool microseconds) {
  std::ostringstream os;
  os << "       t=";
  if (microseconds) {
    os << time_ms * 1e3 << " us";
  } else {
    os << time_ms << "ms";
  }
  if (smem_bytes >= 0) os << ", smem=" << smem_bytes << "b";
  return os.str();
}

std::string shell_quote(const std::string& arg) {
  static const char* kSafe =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+=:,./-";
  if (!arg.empty() && arg.find_first_not_of(kSafe) == std::string::npos) return arg;
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string format_command(const std::string& program, const std::vector<std::string>& args) {
  std::string out = shell_quote(program);
  for (const auto& a : args) out += ' ' + shell_quote(a);
  return out;
}

std::string format_repro_line(const std::string& program, const std::vector<std::string>& args) {
  return "       repro: " + format_command(program, args);
}

std::string format_check_failure(const TensorCheck& c) {
  std::ostringstream os;
  os << "failed " << c.tensor << ": max diff " << c.max_diff << " mean " << c.mean_diff;
  return os.str();
}

void ExitTracker::add(ResultTag tag) {
  ++total_;
  if (tag == ResultTag::kFail) ++failed_;
}

Reporter::Reporter(std::string tool, std::string program, std::ostream& out, std::ostream& err)
    : tool_(std::move(tool)), program_(std::move(program)), out_(out), err_(err) {}

void Reporter::begin_run(const std::vector<std::string>& args, bool verbose, bool time_in_us) {
  args_ = args;
  verbose_ = verbose;
  time_in_us_ = time_in_us;
}

void Reporter::report(const RunRecord& r) {
  bool any_check_failed = false;
  for (const auto& c : r.checks) {
    if (!c.passed) {
      err_ << format_check_failure(c) << "\n";
      any_check_failed = true;
    }
  }
  if (any_check_failed) err_ << "Reference check failed\n";
  if (!r.message.empty() && (r.tag == ResultTag::kFail || r.tag == ResultTag::kNotSupported)) {
    err_ << r.message << "\n";
  }
  err_.flush();

  std::vector<Measure> values;
  if (r.tflops) values.push_back({*r.tflops, "TFLOPS/s"});
  if (r.tbps) values.push_back({*r.tbps, "TB/s"});
  out_ << format_result_line(r.tag, r.kernel, values) << "\n";
  if (verbose_) out_ << format_verbose_line(r.time_ms_median, r.smem_bytes, time_in_us_) << "\n";
  out_ << format_repro_line(program_, args_) << "\n";
  out_.flush();

  exits_.add(r.tag);
  runs_.push_back(record_json(r));
}

void Reporter::report_error(const std::string& message) {
  err_ << "Error: " << message << "\n";
  err_.flush();
  out_ << format_repro_line(program_, args_) << "\n";
  out_.flush();
  exits_.add_failure();
  RunRecord r;
  r.tag = ResultTag::kFail;
  r.message = message;
  runs_.push_back(record_json(r));
}


void Reporter::set_context(const std::string& key, nlohmann::json value) { context_[key] = std::move(value); }

namespace {

// JSON has no inf/nan: write null for them (nlohmann would too, but explicitly is clearer to readers).
nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

nlohmann::json Reporter::record_json(const RunRecord& r) const {
  nlohmann::json j;
  j["tool"] = tool_;
  j["args"] = args_;
  j["command"] = format_command(program_, args_);
  j["kernel"] = r.kernel;
  j["status"] = tag_status(r.tag);
  j["passed"] = r.tag != ResultTag::kFail;
  j["verified"] = r.verified;
  j["problem"] = r.problem;
  j["time_ms_median"] = number(r.time_ms_median);
  j["time_ms_mean"] = number(r.time_ms_mean);
  j["time_ms_min"] = number(r.time_ms_min);
  j["iterations"] = r.iterations;
  j["tflops"] = r.tflops ? number(*r.tflops) : nlohmann::json(nullptr);
  j["tbps"] = r.tbps ? number(*r.tbps) : nlohmann::json(nullptr);
  j["smem_bytes"] = r.smem_bytes >= 0 ? nlohmann::json(r.smem_bytes) : nlohmann::json(nullptr);
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& c : r.checks) {
    checks.push_back({{"tensor", c.tensor},
                      {"max_diff", number(c.max_diff)},
                      {"mean_diff", number(c.mean_diff)},
                      {"max_tol", number(c.max_tol)},
                      {"mean_tol", number(c.mean_tol)},
                      {"passed", c.passed}});
  }
  j["checks"] = checks;
  j["message"] = r.message;
  if (!r.extra.empty()) j["extra"] = r.extra;
  return j;
}

nlohmann::json Reporter::json() const {
  nlohmann::json doc;
  doc["tool"] = tool_;
  doc["program"] = program_;
  doc["context"] = context_;
  doc["runs"] = runs_;
  doc["failed"] = exits_.failed();
  doc["total"] = exits_.total();
  return doc;
}

std::string Reporter::write_json(const std::string& path) const {
  std::ofstream f(path, std::ios::out | std::ios::trunc);
  if (!f) return "--json: cannot open \"" + path + "\" for writing: " + std::strerror(errno);
  f << json().dump(2) << "\n";
  f.close();
  if (!f) return "--json: writing \"" + path + "\" failed: " + std::strerror(errno);
  return "";
}

double set_times(RunRecord& record, const std::vector<double>& times_ms) {
  if (times_ms.empty()) return 0.0;
  const TimingStats t = summarize_times(times_ms);
  record.time_ms_median = t.median_ms, record.time_ms_mean = t.mean_ms, record.time_ms_min = t.min_ms;
  record.iterations = t.count;
  return t.mean_ms;
}

bool set_failed_status(RunRecord& record, const fmha::Status& status) {
  if (status.is_ok()) return false;
  record.tag = status.code() == fmha::StatusCode::kNotSupported ? ResultTag::kNotSupported : ResultTag::kFail;
  record.message = status.message();
  return true;
}

}  // namespace fmha::cli
