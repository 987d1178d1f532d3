// GPU reference for the tests: the forward attention of the CPU reference (reference/attention.h, ref::fwd) as a
// plain CUDA kernel, so that large test cases compare every row of O and LSE instead of a sample; and its backward
// (ref::bwd, gpu_reference_bwd below, in gpu_reference_bwd.cu).
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

/// The checks both references start with: dtype fp16 or bf16, head dims in [1, max_head_dim], heads_kv dividing
/// heads_q, the per-entry vectors of one size, a finite scale, lengths ≥ 0. kInvalidArgument naming the argument.
Status gpu_ref_validate(const GpuRefProblem& p, int max_head_dim);

/// Computes both reference models of `p` on the current device, on `stream`, and returns when they are done (it
/// synchronises the stream). Returns
/// kInvalidArgument naming the argument for a bad problem (dtype, head dims, lengths, heads, row0 sizes) and
/// kCudaError for a failed launch.
Status gpu_reference_fwd(const GpuRefProblem& p, GpuRefOperand q, GpuRefOperand k, GpuRefOperand v,
                         const GpuRefOutputs& out, cudaStream_t stream = nullptr);

/// The backward references' outputs, fp32 on the device: dQ at ((row0_q[b] + i) · heads_q + h) · head_dim_qk + d;
/// dK at ((row0_k[b] + j) · heads_kv + hk) · head_dim_qk + d, dV likewise with head_dim_v. Any pointer may be null.
struct GpuRefBwdOutputs {
  float* dq_exact = nullptr;
  float* dk_exact = nullptr;
  float* dv_exact = nullptr;
  float* dq_kernel = nullptr;
  float* dk_kernel = nullptr;
  float* dv_kernel = nullptr;
};

/// The backward of the CPU reference (reference/attention.h, ref::bwd) on the current device, on `stream`, both
/// models in one call, given the forward's O and LSE (the kernel's own, as the backward receives them):
///   P_ij = exp(scale · q_i·k_j − LSE_i); D_i = Σ dO_i ∘ O_i; dS_ij = P_ij · (dO_i·v_j − D_i);
///   dQ_i = scale · Σ_j dS_ij k_j;  dK_j = scale · Σ_i dS_ij q_i;  dV_j = Σ_i P_ij dO_i,
/// over the keys each row sees under the mask; dK and dV summed over the query heads of each GQA group. The kernel
/// model (ref::Rounding::kKernel) rounds P and dS to the element type before the second products, the exact one
/// keeps them in fp64; both read the inputs as stored. A row with LSE = −inf contributes nothing (its dQ is 0), a key
/// no row sees gets dK = dV = 0. lse: device fp32 at (row0_q[b] + i) · heads_q + h. p.last_rows must be 0. Returns
/// when done (synchronises the stream); kInvalidArgument naming the argument for a bad problem, kCudaError for a
/// failed launch. tests/gpu/test_gpu_reference.cpp checks it against the CPU reference.
/// Technique: the standard attention backward (FlashAttention-2, Dao 2023, Algorithm 2), recomputing P from LSE.
Status gpu_reference_bwd(const GpuRefProblem& p, GpuRefOperand q, GpuRefOperand k, GpuRefOperand v, GpuRefOperand o,
                         GpuRefOperand d_o, const float* lse, const GpuRefBwdOutputs& out,
                         cudaStream_t stream = nullptr);

}  // namespace fmha::testing
