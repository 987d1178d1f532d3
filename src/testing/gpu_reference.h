// GPU reference for the tests: the forward attention of the CPU reference (reference/attention.h, ref::fwd) as a
// plain CUDA kernel, so that large test cases compare every row of O and LSE instead of a sample.
//
// Deliberately simple (one CTA per query row and head; scores recomputed in each pass; fp64 arithmetic
// throughout), so that it is obviously the definition: S = scale · Q·Kᵀ over the keys the mask lets the row see,
// P = exp(S − max S), O = Σ P·V / Σ P, LSE = max S + ln Σ P. One launch computes both models of the CPU reference:
//  * exact (ref::Rounding::kExact): P in fp64;
//  * kernel rounding (ref::Rounding::kKernel): P taken to fp32 and rounded to the element type before P·V, the
//    row sum over the unrounded P, or over the rounded P with `row_sum_rounded_p` (a kernel that sums P on the
//    tensor cores).
// The inputs are read as stored (fp16 or bf16), so both models see the same, already rounded, inputs, as the CPU
// reference does when given the values a kernel reads. A row that sees no key gives O = 0 and LSE = −inf.
// tests/gpu/test_gpu_reference.cpp checks it against the CPU reference on small shapes of every kind.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "fmha/status.h"
#include "fmha/types.h"

namespace fmha::testing {

/// A device tensor of one operand of a (possibly varlen) problem: element (entry b, row i, head h, dim d) is at
/// data + row0[b]·row_stride + i·row_stride + h·head_stride + d, with row0 the first row of entry b
/// (b · max length for a dense tensor, cu_seqlens[b] for a packed one). Strides in elements.
struct GpuRefOperand {
  const void* data = nullptr;
  int64_t row_stride = 0;
  int64_t head_stride = 0;
};

/// One forward problem for gpu_reference_fwd. Host vectors; lengths ≥ 0, heads_kv divides heads_q.
struct GpuRefProblem {
  DType dtype = DType::kBF16;  ///< fp16 or bf16 (the operands' storage)
  int heads_q = 1, heads_kv = 1;
  int head_dim_qk = 64, head_dim_v = 64;  ///< each 1 … 256
  std::vector<int> seqlens_q, seqlens_k;   ///< [batch]
  std::vector<int64_t> row0_q, row0_k;     ///< [batch] first row of each entry in Q (and O) / in K and V
  MaskType mask = MaskType::kNone;
  CausalAlign align = CausalAlign::kQBegin;
  double scale = 0.0;              ///< 0 = 1/sqrt(head_dim_qk)
  bool row_sum_rounded_p = false;  ///< the kernel model's row sum adds the rounded P
  int last_rows = 0;               ///< > 0: only the last last_rows query rows of each entry are computed
};

/// The references' outputs, fp32 on the device, indexed by (row of Q as in row0_q, head): O at
/// ((row0_q[b] + i) · heads_q + h) · head_dim_v + d, LSE at (row0_q[b] + i) · heads_q + h. Rows of Q that belong
/// to no entry are not written. Any pointer may be null (that output is skipped).
struct GpuRefOutputs {
  float* o_exact = nullptr;
  float* lse_exact = nullptr;
  float* o_kernel = nullptr;
  float* lse_kernel = nullptr;
};

/// Computes both reference models of `p` on the current device, on `stream`, and returns when they are done (it
/// synchronises the stream). Returns
/// kInvalidArgument naming the argument for a bad problem (dtype, head dims, lengths, heads, row0 sizes) and
/// kCudaError for a failed launch.
Status gpu_reference_fwd(const GpuRefProblem& p, GpuRefOperand q, GpuRefOperand k, GpuRefOperand v,
                         const GpuRefOutputs& out, cudaStream_t stream = nullptr);

}  // namespace fmha::testing
