// The online softmax of the attention mainloop (FlashAttention, Dao et al. 2022; the exp2 form with the softmax
// scale folded into the exponent as in FlashAttention-2/3): per query row a running maximum and a running sum of
// exp2(scale·log2(e)·(s − max)) over the key blocks seen so far, with the factor by which earlier partial results
// must be rescaled when the maximum grows. The forward kernel's today; meant for every family that walks key blocks
// (decode/split-KV, MLA next); the backward recomputes P from the LSE instead.
//
// Conditional ("lazy") rescaling (FlashAttention-4, Zadouri et al. 2025): a row keeps its running max until a
// block's max exceeds it by more than 8 in log2 units after scaling (a factor of 2^8 in P), so P may reach 256
// (bf16/fp16 hold it; the fp32 row sums and O accumulators keep the same relative precision), and a factor of 1
// tells the mainloop it may skip the O rescale. The final O / row_sum and LSE = max · scale + ln(row_sum) use the
// kept max: the same softmax, rounded differently (P is no longer exactly 1 at the row max). Measured +5–7 % at
// d 128 causal ≥ 4k, +1–5 % at d 64 ≥ 4k (docs/perf-log.md, v5).
//
// Large logits. The exponent is one FFMA, fma(s, scale_log2, −base) with base = fl(max · scale_log2): at the kept
// max its argument is not 0 but e = max · scale_log2 − base, the product's rounding error (|e| ≤ half an ulp of
// base), the same for every score of the row. So every P of the row carries the factor 2^e, which cancels in O as
// long as the rescale factors and the LSE use the same base: corr = exp2(base_old − base_new), LSE = ln 2 · (base +
// log2 Σ P). (A separate FADD, (s − max) · scale_log2, makes e = 0 but cost 8–12 % at d 64 and 2–4 % at d 128;
// a warp-uniform branch to it per row or per block cost 5–14 %: docs/perf-log.md.) 2^e stays harmless while
// |base| < kFastLimit = 2^26 (e ≤ 2, P ≤ 2^10: within fp16 and the fp32 sums); a row past it sets its bit of `beyond`, and
// the kernel recomputes such rows exactly after its mainloop (fwd_kernel.cuh, exact_rows), where the exponent is
// (s − max) · scale_log2 and so exactly 0 at the max at any magnitude.
#pragma once

#include <cute/tensor.hpp>

namespace fmha::kernel {

/// Maximum over the four threads of a quad (the threads that hold one accumulator row of a wgmma fragment).
template <int N>
CUTLASS_DEVICE float quad_allreduce_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, 1));
  x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, 2));
  return x;
}

/// Sum over the four threads of a quad.
CUTLASS_DEVICE float quad_allreduce_sum(float x) {
  x += __shfl_xor_sync(0xffffffff, x, 1);
  x += __shfl_xor_sync(0xffffffff, x, 2);
  return x;
}

/// The online softmax of the kRows accumulator rows one thread holds (each row spread over the four threads of a
/// quad, kCols of its columns in this thread): static functions over state the caller keeps in registers,
/// row_max[kRows] and row_sum[kRows]. (As a struct holding the arrays, the forward kernels' register allocation
/// changed; as functions over the caller's arrays their SASS stayed identical.)
///
/// kRowMaxFirst: every row's block maximum at once, each from kMaxChains independent partial maxima and a tree, so
/// that the FMNMX chains of all rows interleave before the quad shuffles (the three-warpgroup kernels: perf-log v11,
/// +0.7 to +3.1 % at d 64 non-causal 2k–16k; in the two-warpgroup kernels the same code lost 2–4 % at d 64 short
/// causal and 0–3 % at d 128 non-causal, so they take one row at a time with four partial maxima).
/// kSumOnTensorCores: the row sums are not kept here but come from the P·V wgmma batch (the mainloop's L = P·1;
/// tiles::fwd_mma_row_sum); row_sum is then unused.
template <int kRows, int kCols, bool kRowMaxFirst, int kMaxChains, bool kSumOnTensorCores>
struct OnlineSoftmax {
  static_assert(kCols % 4 == 0, "row reductions use four partial results");
  static_assert(!kRowMaxFirst || (kCols % kMaxChains == 0 && (kMaxChains & (kMaxChains - 1)) == 0),
                "the row-maximum chains must be a power of two that divides the columns");

  /// Before a tile's first key block: row_max[r] = −inf (the kept maximum of each row's raw scores) and
  /// row_sum[r] = 0 (this thread's part of each row's sum of P, relative to row_max; quad-reduced at the end). The
  /// state lives in the caller's registers, passed to every call.
  CUTLASS_DEVICE static void reset(float (&row_max)[kRows], float (&row_sum)[kRows]) {
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.f;
    }
  }

  /// |max · scale_log2| from which a row's exponents need the exact form (file comment).
  static constexpr float kFastLimit = 67108864.f;  // 2^26

  /// After the last key block: the normaliser of a row (1 / sum; 0 for a row that saw no key, whose O is then 0)
  /// and its LSE (natural log of Σ exp(scale · s); −inf for such a row), from its kept max (raw score units), the
  /// whole row's sum of P relative to that max's base (update) and scale_log2: LSE = ln 2 · (base + log2 sum).
  CUTLASS_DEVICE static void finish_row(float row_max, float sum, float scale_log2, float& inv, float& lse) {
    inv = sum > 0.f ? 1.f / sum : 0.f;
    lse = sum > 0.f ? (__fmul_rn(row_max, scale_log2) + log2f(sum)) * 0.6931471805599453f : -INFINITY;
  }

  /// One key block: `s` (kRows × kCols raw scores of this thread, masked keys already −inf) becomes the
  /// unnormalised P = exp2(s · scale_log2 − base) in place, base = fl(max · scale_log2); the running max and
  /// (without kSumOnTensorCores) sum advance; corr[r] is the factor by which row r's earlier O (and sum) must be
  /// rescaled (1 when its max was kept); bit r of `beyond` is set when row r's |base| reaches kFastLimit. Four
  /// independent partial sums (and maxima) per row instead of one serial chain: the softmax of a block is on the
  /// mainloop's critical path (docs/perf-log.md, v3).
  template <class TensorS>
  CUTLASS_DEVICE static void update(float (&row_max)[kRows], float (&row_sum)[kRows], TensorS& s, float scale_log2,
                                    float (&corr)[kRows], unsigned& beyond) {
    float mx[kRows];
    if constexpr (kRowMaxFirst) {
      float chain[kRows][kMaxChains];
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < kRows; ++r)
        CUTLASS_PRAGMA_UNROLL
        for (int k = 0; k < kMaxChains; ++k) chain[r][k] = s(r, k);
      CUTLASS_PRAGMA_UNROLL
      for (int c = kMaxChains; c < kCols; c += kMaxChains)
        CUTLASS_PRAGMA_UNROLL
        for (int r = 0; r < kRows; ++r)
          CUTLASS_PRAGMA_UNROLL
          for (int k = 0; k < kMaxChains; ++k) chain[r][k] = fmaxf(chain[r][k], s(r, c + k));
      CUTLASS_PRAGMA_UNROLL
      for (int half = kMaxChains / 2; half >= 1; half /= 2)
        CUTLASS_PRAGMA_UNROLL
        for (int r = 0; r < kRows; ++r)
          CUTLASS_PRAGMA_UNROLL
          for (int k = 0; k < half; ++k) chain[r][k] = fmaxf(chain[r][k], chain[r][k + half]);
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < kRows; ++r) mx[r] = fmaxf(chain[r][0], __shfl_xor_sync(0xffffffff, chain[r][0], 1));
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < kRows; ++r) mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffff, mx[r], 2));
    }
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float part[4];
      if constexpr (!kRowMaxFirst) {
        part[0] = s(r, 0);
        part[1] = s(r, 1);
        part[2] = s(r, 2);
        part[3] = s(r, 3);
        CUTLASS_PRAGMA_UNROLL
        for (int c = 4; c < kCols; ++c) part[c % 4] = fmaxf(part[c % 4], s(r, c));
        float m = fmaxf(fmaxf(part[0], part[1]), fmaxf(part[2], part[3]));
        mx[r] = quad_allreduce_max<4>(m);
      }
      float new_max = fmaxf(row_max[r], mx[r]);
      // Lazy rescaling: NaN (both -inf) and +inf (first finite max) compare false: those rows update.
      if ((new_max - row_max[r]) * scale_log2 <= 8.f) new_max = row_max[r];
      // The factor between the old and the new base (the file comment's 2^e cancels): −inf − base = −inf gives 0
      // for a row's first keys (its O and sum are 0 anyway).
      // The products are rounded on their own (__fmul_rn: never contracted into an FFMA with the subtraction,
      // which would give exp2(max_old · scale_log2 − base_new) and keep the old blocks' factor 2^e).
      const float base = new_max == -INFINITY ? 0.f : __fmul_rn(new_max, scale_log2);
      corr[r] = new_max == -INFINITY ? 1.f : exp2f(__fmul_rn(row_max[r], scale_log2) - base);
      corr[r] = new_max == row_max[r] ? 1.f : corr[r];
      beyond |= fabsf(base) < kFastLimit ? 0u : 1u << r;
      if constexpr (kSumOnTensorCores) {
        CUTLASS_PRAGMA_UNROLL
        for (int c = 0; c < kCols; ++c) s(r, c) = exp2f(fmaf(s(r, c), scale_log2, -base));
      } else {
        CUTLASS_PRAGMA_UNROLL
        for (int k = 0; k < 4; ++k) part[k] = 0.f;
        CUTLASS_PRAGMA_UNROLL
        for (int c = 0; c < kCols; ++c) {
          s(r, c) = exp2f(fmaf(s(r, c), scale_log2, -base));
          part[c % 4] += s(r, c);
        }
        const float sum = (part[0] + part[1]) + (part[2] + part[3]);
        row_sum[r] = row_sum[r] * corr[r] + sum;
      }
      row_max[r] = new_max;
    }
  }
};

}  // namespace fmha::kernel
