// Test and benchmark harness for the forward kernel (host only): builds a problem on the device from host data,
// poisons every output with NaN inside guard bands (testing/device_buffer.h), runs fmha::fwd and checks O and LSE
// against the GPU reference (testing/gpu_reference.h) or the CPU reference (reference/attention.h) under the
// scale-aware rule with k = 2 (reference/compare.h). Shared by the GPU tests and the fmha_fwd tool.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fmha/fwd.h"
#include "reference/compare.h"

namespace fmha::testing {

/// Which reference run_fwd_case checks against: the GPU reference (testing/gpu_reference.h, every row in
/// seconds; the default) or the CPU reference (reference/attention.h, on all host cores).
enum class RefImpl { kGpu, kCpu };

/// One forward problem. Dense when !varlen (then every entry has seqlens_q[0] / seqlens_k[0] rows).
struct FwdCase {
  DType dtype = DType::kBF16;
  int batch = 1;
  int heads_q = 1;
  int heads_kv = 1;
  int head_dim = 128;
  std::vector<int> seqlens_q;  ///< [batch] (dense: all equal)
  std::vector<int> seqlens_k;  ///< [batch]
  bool varlen = false;
  MaskType mask = MaskType::kNone;
  CausalAlign align = CausalAlign::kQBegin;
  float scale = 0.f;
  TileScheduler scheduler = TileScheduler::kAuto;
  Toggle pingpong = Toggle::kAuto;
  int sm_count = 0;       ///< SMs for the persistent scheduler; 0 = all
  int row_pad = 0;        ///< extra elements after each row of Q, K, V, O (strided views); filled with NaN
  int extra_rows = 0;     ///< varlen: rows past cu[batch] in every tensor (E04); filled with NaN
  float q_value = 0.f;    ///< init 'c': constant value for Q
  char init = 'r';        ///< 'r' Gaussian(0,1); 'c' constant q_value for Q, Gaussian K/V; 'z' all zeros
  uint64_t seed = 1;
  RefImpl reference = RefImpl::kGpu;
  int check_rows = 0;     ///< rows checked per (entry, head): 0 = all; else the last check_rows rows of each entry
  int check_heads = 0;    ///< query heads checked: 0 = all; else heads spread over [0, heads_q)
  /// Optional custom initialisation: called with "q", "k" or "v" and the tensor's valid elements in
  /// (entry, row, head, dim) order; the harness rounds them to the dtype afterwards. Overrides `init`.
  std::function<void(const std::string& tensor, std::vector<float>& values)> fill;
  int warmup = 0;         ///< untimed launches after the checked one
  int iterations = 0;     ///< timed launches (one CUDA-event pair each); 0 = no timing
  int ring_sets = 1;      ///< input/output buffer sets the timed launches rotate through (defeats L2 reuse)
};

/// Outcome of one run.
struct FwdOutcome {
  Status status;                 ///< status of fmha::fwd (or of a CUDA call of the harness)
  bool checked = false;
  ref::CompareResult o;          ///< O against the reference (valid rows and columns of the checked heads)
  ref::CompareResult lse;        ///< LSE against the exact reference
  ref::CompareResult o_fixed;    ///< O against the kernel-rounding reference, seed thresholds (docs/seed.md §6)
  ref::CompareResult lse_fixed;  ///< LSE against the exact reference, seed thresholds
  std::vector<double> times_ms;  ///< one per timed iteration
  bool untouched = true;         ///< memory outside the valid rows/columns of O and LSE still holds the NaN poison
  bool all_written = true;       ///< every valid element of O and LSE was overwritten (no poison left)
  std::string write_problem;     ///< the first element that broke `untouched` or `all_written`, empty when none
  std::vector<uint16_t> o_bits;  ///< the whole O buffer as returned (for determinism checks)
  std::vector<float> lse_all;    ///< the whole LSE buffer as returned
  bool ok() const { return status.is_ok() && (!checked || (o.ok && lse.ok && untouched && all_written)); }
  std::string summary() const;
};

/// The FwdParams that run_fwd_case launches for `c`, on the given buffers (cu_q / cu_k are used only for varlen
/// cases). Buffers hold rows × (heads · head_dim + row_pad) elements, rows = Σ lengths + extra_rows (varlen) or
/// batch × max length (dense); LSE is [batch][heads][max Sq] (dense) or [heads][rows] (varlen).
FwdParams make_fwd_params(const FwdCase& c, const void* q, const void* k, const void* v, void* o, float* lse,
                          const int* cu_q, const int* cu_k);

/// Builds the inputs of `c` on the current device, runs fmha::fwd on `stream`, and checks when `check` is true.
FwdOutcome run_fwd_case(const FwdCase& c, bool check = true, cudaStream_t stream = nullptr);

}  // namespace fmha::testing
