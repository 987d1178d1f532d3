// fmha: element types, masks and other enums shared by the API, the CPU reference and the tools.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fmha {

/// Element type of a tensor in device memory. What each operation accepts today:
///  * fwd (fmha/fwd.h), bwd (fmha/bwd.h), decode (fmha/decode.h): fp16 or bf16 for Q, K, V, O, the caches and the
///    gradients (outputs in the input type); LSE and its gradient are fp32. Other dtypes return kNotSupported
///    naming "dtype" (fwd: an out_dtype other than dtype, naming "out_dtype").
///  * combine (fmha/combine.h): fp32 partial results (o_parts, lse_parts), O in fp16, bf16 or fp32, LSE fp32.
///  * The fp8 types (kFP8E4M3, kFP8E5M2) are in the interface for the planned fp8 kernels; no operation takes them
///    yet (the CPU reference converts them, reference/dtype.h).
enum class DType {
  kFP16,     ///< IEEE binary16 (1-5-10)
  kBF16,     ///< bfloat16 (1-8-7)
  kFP8E4M3,  ///< OCP fp8 e4m3fn (no inf, max 448)
  kFP8E5M2,  ///< OCP fp8 e5m2 (IEEE-like, max 57344)
  kFP32,     ///< IEEE binary32
};

/// Size of one element in bytes.
constexpr std::size_t dtype_size(DType t) {
  return t == DType::kFP32 ? 4 : (t == DType::kFP16 || t == DType::kBF16) ? 2 : 1;
}

/// Short name used in CLIs, kernel names and JSON: "fp16", "bf16", "e4m3", "e5m2", "fp32".
const char* to_string(DType t);

/// Attention mask applied to the scores S = Q·Kᵀ (indices i = query row, j = key, both within one batch entry;
/// Sq, Sk are that entry's lengths). See docs/numerics.md.
enum class MaskType {
  kNone,      ///< no mask: every key j < Sk is seen (keys ≥ Sk are never read, whatever the tile size)
  kResidual,  ///< masks j ≥ Sk; same visible set as kNone, kept for the seed's option set
  kCausal,    ///< masks keys past the diagonal; the diagonal's alignment is CausalAlign
};

/// Alignment of the causal diagonal when Sq ≠ Sk.
enum class CausalAlign {
  kQBegin,  ///< top-left: row i sees keys j ≤ i
  kQEnd,    ///< bottom-right: row i sees keys j ≤ i + Sk − Sq (rows i < Sq − Sk see no key)
};

/// Short name used in kernel names and JSON: "none", "residual", "causal".
const char* to_string(MaskType m);
/// Short name used in kernel names and JSON: "qbegin", "qend" (the tools' --causal-type values).
const char* to_string(CausalAlign a);

/// Alignment in bytes that every workspace pointer must have.
constexpr std::size_t kWorkspaceAlignment = 256;

/// Device memory that the caller lends one call of an operation (the `*_workspace_size(params)` functions say how
/// many bytes it needs; 0 means none, and then `ptr` may be null). The library initialises whatever it uses in it
/// on every call and keeps nothing in it between calls, so the same buffer may serve any later call on the same
/// stream (and a CUDA graph may capture it). `ptr`: device memory, kWorkspaceAlignment-byte aligned; `bytes`: its
/// size, at least what the size function returned for these params. A call whose workspace is too small or
/// misaligned returns kInvalidArgument naming "workspace".
struct Workspace {
  void* ptr = nullptr;
  std::size_t bytes = 0;
};

}  // namespace fmha
