// fmha CPU reference: the comparison policy used to check kernel outputs (docs/numerics.md, "Comparison policy").
//
// Two rules:
//  * compare_scaled: the library's own rule. Non-finite positions must match the exact reference; finite errors are
//    bounded by k times the error of a kernel-emulating reference (Rounding::kKernel) plus a small absolute floor.
//    k = 2 for forward / decode outputs, 3 for backward outputs; floor = default_floor(out_type, max |ref_exact|).
//  * compare_fixed: the seed's rule (docs/seed.md §6), with fixed thresholds (seed_thresholds); --tolerance=seed.
// Plain C++, no CUDA. All arrays are flat float arrays of n elements in the same order.
#pragma once

#include <cstdint>
#include <string>

#include "fmha/types.h"

namespace fmha::ref {

/// Outcome of a comparison.
struct CompareResult {
  bool ok = true;                    ///< the rule passed
  double max_abs = 0.0;              ///< largest |out − ref| over the elements the rule measures (see each rule)
  double mean_abs = 0.0;             ///< mean |out − ref| (see each rule for the denominator)
  double max_rel = 0.0;              ///< largest |out − ref| / |ref| over measured elements with ref ≠ 0
  int64_t worst_index = -1;          ///< first non-finite mismatch if any, else the element of max_abs; −1 if none
  int64_t n = 0;                     ///< number of elements compared
  /// elements whose inf/NaN status disagrees (scaled rule) / whose difference is NaN or inf (fixed rule)
  int64_t nonfinite_mismatches = 0;
  std::string message;               ///< one line: PASS/FAIL, errors, worst element (index, out, ref) and the bound
};

/// The library's scale-aware rule.
///   out        kernel output, n floats
///   ref_kernel reference computed with Rounding::kKernel (emulates the kernel's input/P rounding), n floats
///   ref_exact  reference computed with Rounding::kExact, n floats
///   k          multiplier on the kernel-model error (2 forward/decode, 3 backward); must be ≥ 0
///   floor_abs  absolute slack (≥ 0), usually default_floor(out_type, max |ref_exact|)
/// Passes iff
///   (1) for every i, out[i] is NaN ⇔ ref_exact[i] is NaN, +inf ⇔ +inf, −inf ⇔ −inf (each disagreement counts in
///       nonfinite_mismatches and fails), and
///   (2) max over i with finite ref_exact[i] of |out[i] − ref_exact[i]|  ≤  k · E + floor_abs, where
///       E = max over i with finite ref_exact[i] and finite ref_kernel[i] of |ref_kernel[i] − ref_exact[i]|.
/// mean_abs averages over the elements with finite ref_exact (0 if none). Any pointer may be null when n == 0.
/// Throws std::invalid_argument for n < 0, k < 0, floor_abs < 0 (or NaN), or a null array with n > 0.
CompareResult compare_scaled(const float* out, const float* ref_kernel, const float* ref_exact, int64_t n, double k,
                             double floor_abs);

/// The seed's rule (docs/seed.md §6): elements with out[i] == ref[i] are skipped (so matching ±inf pass; NaN never equals);
/// otherwise diff = |out[i] − ref[i]|. Passes iff no diff is NaN, max diff < max_thresh and Σ diff / n < mean_thresh
/// (mean over all n elements, skipped ones counting 0). An infinite diff (inf vs finite, +inf vs −inf) fails the max.
/// n == 0 passes. Throws std::invalid_argument for n < 0 or a null array with n > 0.
CompareResult compare_fixed(const float* out, const float* ref, int64_t n, double max_thresh, double mean_thresh);

/// The seed's fixed thresholds (absolute, unitless like the data).
struct FixedThresholds {
  double max;
  double mean;
};

/// Thresholds by the size of the *input* element type (docs/seed.md §6): 1-byte (e4m3, e5m2) max 1e-1 / mean 1e-1, but
/// max 1.0 for backward outputs; 2-byte (fp16, bf16) max 1e-2 / mean 1e-3. fp32 inputs (no seed counterpart) use
/// the 2-byte thresholds.
FixedThresholds seed_thresholds(DType input, bool backward);

/// Absolute floor for compare_scaled: 2 ulps of the output type at the given magnitude,
///   2 · ulp(out_type, magnitude) = 2 · 2^(max(floor(log2 magnitude), emin) − mantissa_bits)   (see dtype.h, ulp),
/// i.e. four times the half-ulp error of the final rounding of a value of that magnitude. Pass the largest |value|
/// of the exact reference. Example: fp16 at magnitude 1 → 2^-9 ≈ 1.95e-3; bf16 at 1 → 2^-6 ≈ 1.56e-2.
/// A non-finite magnitude gives +inf.
double default_floor(DType out_type, double magnitude);

}  // namespace fmha::ref
