// Test and benchmark harness for decode (host only): builds a decode problem on the device from host data (caches
// contiguous, strided or paged over a shuffled page pool, NaN in every cache row past each sequence's length and in
// every slot or page no entry uses), poisons O, LSE and the workspace with NaN, runs fmha::decode and checks O and
// LSE against the CPU reference's gen (reference/attention.h) under the scale-aware rule with k = 2
// (reference/compare.h), and the caches after the append bit for bit. Shared by the GPU tests
// (tests/gpu/test_decode.cpp) and the fmha_gen tool.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "fmha/decode.h"
#include "reference/compare.h"

namespace fmha::testing {

/// One decode problem: `batch` entries with `new_tokens` query tokens each, against caches of `capacity` rows per
/// slot (contiguous) or of pages of `page_size` rows (paged, page_size > 0).
struct DecodeCase {
  std::string name;
  DType dtype = DType::kBF16;
  int batch = 2, heads_q = 8, heads_kv = 2, head_dim = 128, new_tokens = 1;
  int capacity = 1024;          ///< rows per sequence (paged: rounded up to whole pages)
  int extra_slots = 0;          ///< slots (or page-table rows) beyond batch, NaN-filled; with remap entries spread over them
  std::vector<int> seqlens;     ///< [batch]: cached tokens per entry before the call
  bool append = true;           ///< new K/V given (false: cache-only)
  bool remap = false;           ///< cache_batch_idx given
  /// With remap: the slot of each entry ([batch], distinct, < batch + extra_slots); empty = slots reversed.
  std::vector<int> slot_of;
  int splits = 0;               ///< 0: the heuristic
  int sm_count = 0;             ///< 0: all
  int64_t row_pad = 0;          ///< extra elements per cache row (strided caches)
  int page_size = 0;            ///< > 0: a paged cache (pages shuffled over a pool with 5 spare pages)
  float scale = 0.f;            ///< softmax scale; 0 = 1/sqrt(head_dim)
  /// Device values out of range, uploaded instead of seqlens / the slots (with remap) to test the clamps: the
  /// expected result is the reference's with the clamped values.
  std::vector<int> device_seqlens, device_slots;
  uint32_t seed = 1;
  /// Optional initialisation: called with "q", "new-k", "new-v", "cache-k" or "cache-v" and that tensor's values
  /// (q, new K/V: every element in [b][t][h][d] order; caches: the valid rows in (entry, row, K/V head, dim) order);
  /// the harness rounds them to the dtype. Default: Gaussian(0, 1) from `seed`.
  std::function<void(const std::string& tensor, std::vector<float>& values)> fill;
  int warmup = 0;               ///< untimed calls after the checked one
  /// Calls after the checked one (with check), each on the inputs as they were before the first call (the caches
  /// re-uploaded, so the rows the append writes hold NaN again; O, LSE and the workspace poisoned anew), whose O,
  /// LSE and caches must equal the checked call's bit for bit: a difference is an attention CTA reading a row
  /// before the append wrote it, a read of uninitialised workspace, or a run-to-run nondeterminism. Counted in
  /// DecodeOutcome::repeat_mismatches.
  int repeats = 0;
  int iterations = 0;           ///< timed calls (one CUDA-event pair each); 0 = no timing
  /// Called on the stream before each timed call, outside the timed interval (e.g. an L2 flush).
  std::function<void(cudaStream_t)> before_timed;
};

/// Outcome of one run.
struct DecodeOutcome {
  Status status;                 ///< of decode_plan / decode, or of a CUDA call of the harness
  DecodePlan plan;
  std::string kernel;            ///< decode_kernel_name of the call
  bool checked = false;
  ref::CompareResult o;          ///< O against the references (k = 2, scale-aware)
  ref::CompareResult lse;        ///< LSE against the references
  size_t k_cache_diffs = 0;      ///< K cache elements that differ from the expected append (0 when checked and right)
  size_t v_cache_diffs = 0;
  int repeat_mismatches = 0;     ///< of the case's repeats, the calls whose O, LSE or caches differed from the first
  std::vector<double> times_ms;  ///< one per timed call
  double bytes = 0;              ///< bytes of the seed's bandwidth formula (docs/numerics.md, gen_bytes)
  bool ok() const {
    return status.is_ok() &&
           (!checked || (o.ok && lse.ok && k_cache_diffs == 0 && v_cache_diffs == 0 && repeat_mismatches == 0));
  }
  std::string summary() const;   ///< one line: status, or the failing checks
};

/// Builds the inputs of `c` on the current device, runs fmha::decode on `stream` once (checked when `check`), then
/// the case's warmup and timed calls. Throws std::invalid_argument when the case itself is inconsistent (seqlens
/// not of length batch, a length past the capacity).
DecodeOutcome run_decode_case(const DecodeCase& c, bool check = true, cudaStream_t stream = nullptr);

}  // namespace fmha::testing
