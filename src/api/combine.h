// Internal: the split-KV combine, a part shared by the families that cut a row's keys into ranges (decode's
// split-KV now; ring attention's merge of partial results later). Each split s of row r left a partial result
// normalised by its own row sum, O_s (fp32) and LSE_s (natural log of its Σ exp(scale · s)); the combine writes
//   LSE = ln Σ_s exp(LSE_s),  O = Σ_s exp(LSE_s − LSE) · O_s
// (FlashAttention-2 / FlashDecoding's split-KV reduction). A split that saw no key has LSE_s = −inf and its O_s is
// never read (it may hold anything, NaN included); a row all of whose splits are empty gets O = 0, LSE = −inf; a
// NaN LSE_s makes its row NaN. This is reference/attention.h's combine_splits on the GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "fmha/status.h"
#include "fmha/types.h"

namespace fmha::detail {

/// One combine: `rows` rows of `head_dim` values, each row r = (entry b, token t, head h) with
/// r = (b · tokens + t) · heads + h (decode's packed query rows; tokens = heads = 1 makes it a plain list).
struct CombineArgs {
  int splits = 1;     ///< ≥ 1
  int rows = 0;       ///< ≥ 0; rows = batch · tokens · heads
  int tokens = 1;     ///< ≥ 1
  int heads = 1;      ///< ≥ 1
  int head_dim = 0;   ///< 1 … 512 (512: MLA decode's latent, the V of its splits)
  const float* o_parts = nullptr;    ///< [splits][rows][head_dim], contiguous, 4-byte aligned (device)
  const float* lse_parts = nullptr;  ///< [splits][rows] (device)
  void* o = nullptr;                 ///< element (b, t, h, d) at o[b·o_batch_stride + t·o_token_stride + h·o_head_stride + d]
  DType o_dtype = DType::kBF16;      ///< fp16, bf16 or fp32
  int64_t o_batch_stride = 0, o_token_stride = 0, o_head_stride = 0;  ///< elements
  float* lse = nullptr;              ///< optional [rows] (b, t, h order)
};

/// Largest head_dim of a combine (MLA decode's latent of 512).
constexpr int kCombineMaxHeadDim = 512;

/// The host checks of combine_partials, which need no GPU (and no kernel in the build): kInvalidArgument naming the
/// argument with the expected and the actual value for bad sizes, null pointers (when rows > 0) or an o_dtype other
/// than fp16, bf16 and fp32; ok otherwise.
Status check_combine_args(const CombineArgs& a);

/// Checks the arguments (check_combine_args), then launches the combine on `stream` (nothing for rows = 0).
/// kCudaError when the launch fails; kNotBuilt in a build without kernels (kernel set `none`, src/api/combine.cpp).
Status combine_partials(const CombineArgs& a, cudaStream_t stream);

}  // namespace fmha::detail
