// fmha CPU reference: comparison policy (see compare.h).
#include "reference/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>

#include "reference/dtype.h"

namespace fmha::ref {
namespace {

/// 0 finite, 1 NaN, 2 +inf, 3 −inf.
int fp_class(float x) {
  if (std::isnan(x)) return 1;
  if (std::isinf(x)) return x > 0 ? 2 : 3;
  return 0;
}

void check_arrays(const char* fn, int64_t n, std::initializer_list<const float*> arrays) {
  if (n < 0) throw std::invalid_argument(std::string(fn) + ": n: expected >= 0, got " + std::to_string(n));
  if (n == 0) return;
  for (const float* p : arrays)
    if (!p) throw std::invalid_argument(std::string(fn) + ": arrays: expected non-null with n > 0, got null");
}

std::string fmt(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

/// "index i (out=…, ref=…)".
std::string element(int64_t i, const float* out, const float* ref) {
  return "index " + std::to_string(i) + " (out=" + fmt(out[i]) + ", ref=" + fmt(ref[i]) + ")";
}

/// "max_abs=… mean_abs=… max_rel=… worst index i (out=…, ref=…)", shared by both rules. max_index is the element of
/// max_abs; the worst element reported is r.worst_index (a non-finite mismatch when there is one).
std::string summary(const CompareResult& r, int64_t max_index, const float* out, const float* ref) {
  std::ostringstream m;
  m << "max_abs=" << fmt(r.max_abs);
  if (max_index >= 0 && max_index != r.worst_index) m << " at " << element(max_index, out, ref);
  m << " mean_abs=" << fmt(r.mean_abs) << " max_rel=" << fmt(r.max_rel);
  if (r.worst_index >= 0) m << " worst " << element(r.worst_index, out, ref);
  return m.str();
}

}  // namespace

CompareResult compare_scaled(const float* out, const float* ref_kernel, const float* ref_exact, int64_t n, double k,
                             double floor_abs) {
  check_arrays("compare_scaled", n, {out, ref_kernel, ref_exact});
  if (!(k >= 0.0)) throw std::invalid_argument("compare_scaled: k: expected >= 0, got " + fmt(k));
  if (!(floor_abs >= 0.0))
    throw std::invalid_argument("compare_scaled: floor_abs: expected >= 0, got " + fmt(floor_abs));
  CompareResult r;
  r.n = n;
  int64_t first_bad = -1, worst = -1, finite_count = 0;
  double sum = 0.0, kernel_err = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const int c_out = fp_class(out[i]), c_ref = fp_class(ref_exact[i]);
    if (c_out != c_ref) {
      if (first_bad < 0) first_bad = i;
      ++r.nonfinite_mismatches;
      continue;
    }
    if (c_ref != 0) continue;  // matching inf/NaN
    const double e = ref_exact[i];
    const double diff = std::fabs(double(out[i]) - e);
    ++finite_count;
    sum += diff;
    if (worst < 0 || diff > r.max_abs) r.max_abs = diff, worst = i;
    if (e != 0.0) r.max_rel = std::max(r.max_rel, diff / std::fabs(e));
    if (std::isfinite(ref_kernel[i])) kernel_err = std::max(kernel_err, std::fabs(double(ref_kernel[i]) - e));
  }
  r.mean_abs = finite_count ? sum / double(finite_count) : 0.0;
  r.worst_index = first_bad >= 0 ? first_bad : worst;
  const double bound = k * kernel_err + floor_abs;
  r.ok = r.nonfinite_mismatches == 0 && r.max_abs <= bound;
  std::ostringstream m;
  m << (r.ok ? "PASS" : "FAIL") << " (scaled, n=" << n << "): ";
  if (r.nonfinite_mismatches)
    m << r.nonfinite_mismatches << " inf/NaN position mismatch(es), first at index " << first_bad << "; ";
  m << summary(r, worst, out, ref_exact) << "; bound " << fmt(k) << " * " << fmt(kernel_err) << " + " << fmt(floor_abs)
    << " = " << fmt(bound);
  r.message = m.str();
  return r;
}

CompareResult compare_fixed(const float* out, const float* ref, int64_t n, double max_thresh, double mean_thresh) {
  check_arrays("compare_fixed", n, {out, ref});
  CompareResult r;
  r.n = n;
  int64_t first_nan = -1, worst = -1;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    if (out[i] == ref[i]) continue;
    const double diff = std::fabs(double(out[i]) - double(ref[i]));
    if (!std::isfinite(diff)) ++r.nonfinite_mismatches;
    if (std::isnan(diff)) {
      if (first_nan < 0) first_nan = i;
      continue;
    }
    sum += diff;
    if (worst < 0 || diff > r.max_abs) r.max_abs = diff, worst = i;
    if (ref[i] != 0.0f) r.max_rel = std::max(r.max_rel, diff / std::fabs(double(ref[i])));
  }
  r.mean_abs = n ? sum / double(n) : 0.0;
  r.worst_index = first_nan >= 0 ? first_nan : worst;
  r.ok = first_nan < 0 && r.max_abs < max_thresh && r.mean_abs < mean_thresh;
  std::ostringstream m;
  m << (r.ok ? "PASS" : "FAIL") << " (fixed, n=" << n << "): ";
  if (first_nan >= 0) m << "NaN difference, first at index " << first_nan << "; ";
  m << summary(r, worst, out, ref) << "; thresholds max < " << fmt(max_thresh) << ", mean < " << fmt(mean_thresh);
  r.message = m.str();
  return r;
}

FixedThresholds seed_thresholds(DType input, bool backward) {
  if (dtype_size(input) == 1) return {backward ? 1.0 : 1e-1, 1e-1};
  return {1e-2, 1e-3};
}

double default_floor(DType out_type, double magnitude) { return 2.0 * ulp(out_type, magnitude); }

}  // namespace fmha::ref
