// Test and benchmark harness for the backward (host only): builds Q, K, V and dO on the device (rows past each entry
// and the padding of strided rows NaN), runs fmha::fwd for O and LSE (the GPU forward reference where no forward
// kernel takes the head dims, e.g. 192 / 128), then fmha::bwd with dQ, dK, dV and the workspace
// poisoned with NaN inside guard bands (testing/device_buffer.h), and checks the gradients against the GPU backward
// reference (testing/gpu_reference.h, gpu_reference_bwd, given fmha's own O and LSE) under the scale-aware rule with
// k = 3 (reference/compare.h), every element of every row. Shared by the GPU tests and the fmha_bwd tool.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fmha/bwd.h"
#include "reference/compare.h"

namespace fmha::testing {

/// One backward problem. Dense when !varlen (then every entry has seqlens_q[0] / seqlens_k[0] rows).
struct BwdCase {
  DType dtype = DType::kBF16;
  int batch = 1;
  int heads_q = 1;
  int heads_kv = 1;
  int head_dim = 128;    ///< of Q and K
  int head_dim_v = 0;    ///< of V, O and dO; 0 = head_dim. Where it differs (192 / 128) no forward kernel exists:
                         ///< O (rounded to the dtype) and LSE come from the GPU forward reference (exact model)
  std::vector<int> seqlens_q;  ///< [batch] (dense: all equal)
  std::vector<int> seqlens_k;  ///< [batch]
  bool varlen = false;
  MaskType mask = MaskType::kNone;
  CausalAlign align = CausalAlign::kQBegin;
  float scale = 0.f;
  bool deterministic = false;
  BwdAlgorithm algorithm = BwdAlgorithm::kOnePass;  ///< the two-pass one promises repeatable bits without `deterministic`
  int row_pad = 0;     ///< extra elements after each row of every tensor (strided views); filled with NaN
  int extra_rows = 0;  ///< varlen: rows past cu[batch] in every tensor; filled with NaN
  float input_scale = 1.f;  ///< Q, K, V, dO are Gaussian(0, input_scale) (large values: large logits)
  uint64_t seed = 1;
  /// Optional custom initialisation: called with "q", "k", "v" or "do" and the tensor's valid elements in
  /// (entry, row, head, dim) order; the harness rounds them to the dtype afterwards. Overrides the Gaussian.
  std::function<void(const std::string& tensor, std::vector<float>& values)> fill;
  /// No forward: O and LSE are zeros instead of the forward's (timing only; nothing can be checked).
  bool skip_forward = false;
  /// Backward calls after the checked one, each on re-poisoned gradients and workspace; with `deterministic` or the
  /// two-pass algorithm every one must reproduce the first bit for bit (BwdOutcome::repeat_mismatches).
  int repeats = 0;
  int iterations = 0;  ///< timed backward calls (one CUDA-event pair each); 0 = no timing
};

/// Outcome of one run.
struct BwdOutcome {
  Status status;  ///< of fmha::fwd / fmha::bwd (or of a CUDA call of the harness)
  bool checked = false;
  ref::CompareResult dq, dk, dv;  ///< against the GPU reference, scaled rule k = 3
  bool untouched = true;          ///< memory outside the valid rows and columns of dQ, dK, dV kept its poison
  bool all_written = true;        ///< every valid element of dQ, dK, dV was written
  std::string write_problem;      ///< the first element that broke `untouched` or `all_written`
  int repeat_mismatches = 0;      ///< repeated calls whose gradients differ in any bit from the first call's
  std::vector<double> times_ms;   ///< one per timed call
  bool ok() const {
    return status.is_ok() && (!checked || (dq.ok && dk.ok && dv.ok && untouched && all_written)) &&
           repeat_mismatches == 0;
  }
  std::string summary() const;
};

/// Builds the inputs of `c` on the current device, runs the forward and the backward on `stream`, and checks the
/// gradients when `check` is true.
BwdOutcome run_bwd_case(const BwdCase& c, bool check = true, cudaStream_t stream = nullptr);

}  // namespace fmha::testing
