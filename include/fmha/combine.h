// fmha: the LSE-weighted merge of partial attention results (the split-KV combine as a public call): for a row whose
// keys were cut into ranges that were attended separately (split-KV, ring attention, a cache in several pieces),
// each range s left O_s (normalised by its own softmax sum) and LSE_s = ln Σ exp(scale · q·k) over its keys; then
//   LSE = ln Σ_s exp(LSE_s),  O = Σ_s exp(LSE_s − LSE) · O_s
// is the attention over all the keys (FlashAttention-2's and FlashDecoding's split-KV reduction, Dao et al. 2023).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "fmha/status.h"
#include "fmha/types.h"

namespace fmha {

/// Arguments of combine(): `rows` rows of `head_dim` values merged over `splits` partial results.
///  * o_parts: fp32 [splits][rows][head_dim], contiguous, 4-byte aligned, on the device; splits · rows < 2^31 − 64.
///  * lse_parts: fp32 [splits][rows] (natural log), 4-byte aligned. A split with LSE_s = −inf saw no key: it
///    contributes exactly 0 and its O_s is never read (it may hold anything, NaN included). A row whose splits are
///    all empty gets O = 0 and LSE = −inf; a NaN LSE_s makes its row NaN.
///  * o: row r at o + r · o_row_stride elements (o_row_stride ≥ head_dim), in o_dtype (fp16, bf16 or fp32), aligned
///    to its element;
///    it must not overlap o_parts or lse_parts.
///  * lse: optional fp32 [rows] (the merged LSE), null = not written.
struct CombineParams {
  int splits = 1;    ///< ≥ 1
  int rows = 0;      ///< ≥ 0
  int head_dim = 0;  ///< 1 … 512
  const float* o_parts = nullptr;
  const float* lse_parts = nullptr;
  void* o = nullptr;
  DType o_dtype = DType::kFP32;
  int64_t o_row_stride = 0;  ///< elements; 0 = head_dim
  float* lse = nullptr;
};

/// Runs the merge on `stream` (one kernel, nothing synchronised). Errors: kInvalidArgument naming the argument
/// (splits, rows, head_dim, o_row_stride, o_dtype, splits × rows, a null or misaligned pointer, a pointer that is
/// not device-accessible); kNotSupported without an sm_90 device; kNotBuilt in a build without kernels; kCudaError for a failed launch.
Status combine(const CombineParams& p, cudaStream_t stream = nullptr);

}  // namespace fmha
