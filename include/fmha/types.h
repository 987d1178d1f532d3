// fmha: element types, masks and other enums shared by the API, the CPU reference and the tools.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fmha {

/// Element type of a tensor in device memory.
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

const char* to_string(MaskType m);
const char* to_string(CausalAlign a);

}  // namespace fmha
